// Session rule 5, "Identity boundary", on the virtual clock: a stored message goes only on a session
// identified as the user it was made for (or an anonymous one for anonymous messages), earlier users'
// messages go first, and what cannot go under its own user is dropped with an `error` event.
import SmarticoProtocol
import Testing
@testable import SmarticoDaemon

@Suite("Session: identity boundary") struct SessionIdentityTests {
    /// A stored event as the driver would load it back.
    static func entry(_ uuid: String, _ eventType: String, user: String?) -> OutboxEntry {
        OutboxEntry(uuid: uuid, cid: 9, bytes: Array(#"{"cid":9,"eventType":"\#(eventType)","uuid":"\#(uuid)"}"#.utf8),
                    createdMs: SessionFixtures.t0, user: user)
    }

    static let alice = SessionSnapshot(deviceID: "d", fingerprint: 1, user: StoredUser(extUserID: "alice", hash: nil))

    @Test func messagesAreStoredWithTheUserTheyWereMadeFor() throws {
        var h = Harness(SessionFixtures.config(hashCommand: ["make-hash"]))
        h.start(Self.alice)
        h.feed(.request(SessionRequestID(1), .event(eventType: "for_alice", payload: nil)))
        h.feed(.request(SessionRequestID(2), .identify(extUserID: "bob", hash: nil)))
        h.feed(.request(SessionRequestID(3), .event(eventType: "for_bob", payload: nil)))
        h.feed(.request(SessionRequestID(4), .logout))
        h.feed(.request(SessionRequestID(5), .language("pt")))
        h.feed(.request(SessionRequestID(6), .event(eventType: "anonymous", payload: nil)))
        #expect(h.all.stored.map(\.user) == ["alice", "bob", nil, nil])
    }

    @Test func anOfflineSwitchSendsTheEarlierUsersMessagesUnderThatUserFirst() throws {
        var h = Harness(SessionFixtures.config(hashCommand: ["make-hash"], push: .init(token: Secret("tok"))))
        h.start(Self.alice)
        h.feed(.request(SessionRequestID(1), .identify(extUserID: "bob", hash: nil)))
        let a = Self.entry("a-1", "alice_only_event", user: "alice")
        let b = Self.entry("b-1", "bob_event", user: "bob")
        h.connected()
        h.waitingAtInit = [a, b]

        // The oldest message is alice's: the hash command runs for alice, and alice is identified
        // (without the device's push token, which is bob's now).
        let sorted = h.initOK()
        let run = try #require(sorted.hashRuns.first)
        #expect(run.2 == "alice")
        let identify = try #require(h.feed(.hashResult(token: run.0, .hash(Secret("ha")))).sent(cid: 5).first)
        #expect(identify["ext_user_id"] == .string("alice"))
        #expect(identify["token"] == nil)
        #expect(h.machine.state == .identifying)

        // Alice accepted: no `identified` event (she is not the user), no LOGIN; only her messages.
        let drained = h.identifyOK()
        #expect(drained.events("identified").isEmpty)
        #expect(drained.sent(cid: 7).isEmpty)
        #expect(drained.reply(1) == nil)
        #expect(drained.loads == 1)
        let written = h.feed(.outboxLoaded([a, b]))
        #expect(written.sent.compactMap { $0["eventType"]?.stringValue } == ["alice_only_event"])
        #expect(written.closes == [1000]) // then the connection is left for bob
        // Pushes meanwhile are alice's: not delivered to the apps.
        #expect(h.server(["cid": 110, "engagement_uid": "alice-e"]).events.isEmpty)
        // The clean close proves the server read alice's message.
        #expect(h.feed(.closed(h.conn!, code: 1000, reason: "", clean: true)).markedSent == ["a-1"])

        h.connected()
        h.waitingAtInit = [b]
        let run2 = try #require(h.initOK().hashRuns.first)
        #expect(run2.2 == "bob")
        let bobIdentify = try #require(h.feed(.hashResult(token: run2.0, .hash(Secret("hb")))).sent(cid: 5).first)
        #expect(bobIdentify["ext_user_id"] == .string("bob"))
        #expect(bobIdentify["token"] == .string("tok"))
        let ready = h.identifyOK()
        #expect(ready.reply(1)?.value?["ext_user_id"] == .string("bob"))
        #expect(ready.events("identified").count == 1)
        #expect(h.feed(.outboxLoaded([b])).sent.compactMap { $0["eventType"]?.stringValue } == ["bob_event"])
        #expect(h.machine.status()["user"]?["ext_user_id"] == .string("bob"))
        #expect(h.machine.status()["user"]?["identified"] == .bool(true))
    }

    @Test func withoutAHashForTheEarlierUserItsMessagesAreDroppedAndSaidSo() throws {
        var h = Harness(SessionFixtures.config())
        h.start(Self.alice) // alice's hash came from the hash command of another configuration
        h.feed(.request(SessionRequestID(1), .identify(extUserID: "bob", hash: "hb")))
        let a = Self.entry("a-1", "alice_only_event", user: "alice")
        let b = Self.entry("b-1", "bob_event", user: "bob")
        h.connected()
        h.waitingAtInit = [a, b]
        let sorted = h.initOK()
        #expect(sorted.contains(.dropOutbox(user: "alice")))
        #expect(sorted.sent(cid: 5).isEmpty)
        let dropped = h.feed(.outboxDropped(user: "alice", count: 1))
        let error = try #require(dropped.events("error").first?.data.objectValue)
        #expect(error["code"] == .string("outbox_dropped"))
        #expect(error["user"] == .string("alice"))
        #expect(error["count"] == .number(1))
        #expect(error["message"]?.stringValue?.contains("alice") == true)
        #expect(dropped.loads == 1) // sorting goes on from the next oldest
        let identify = try #require(h.feed(.outboxLoaded([b])).sent(cid: 5).first)
        #expect(identify["ext_user_id"] == .string("bob"))
    }

    @Test func theEarlierUsersHashGivenWithIdentifyIsUsedForItsMessages() throws {
        var h = Harness(SessionFixtures.config())
        h.start()
        h.feed(.request(SessionRequestID(1), .identify(extUserID: "alice", hash: "ha")))
        h.feed(.request(SessionRequestID(2), .identify(extUserID: "bob", hash: "hb")))
        h.connected()
        h.waitingAtInit = [Self.entry("a-1", "alice_only_event", user: "alice")]
        let identify = try #require(h.initOK().sent(cid: 5).first)
        #expect(identify["ext_user_id"] == .string("alice"))
        #expect(identify["hash"] == .string("ha"))
    }

    @Test func aRefusedEarlierUserLosesItsMessagesNotTheCurrentUser() throws {
        var h = Harness(SessionFixtures.config(hashCommand: ["make-hash"]))
        h.start(Self.alice)
        h.feed(.request(SessionRequestID(1), .identify(extUserID: "bob", hash: nil)))
        h.connected()
        h.waitingAtInit = [Self.entry("a-1", "alice_only_event", user: "alice")]
        let run = try #require(h.initOK().hashRuns.first)
        h.feed(.hashResult(token: run.0, .hash(Secret("expired"))))
        let refused = h.server(IdentifyUserResponse(publicUsername: nil, avatarID: nil, gamificationURL: nil, popupURL: nil,
                                                    errCode: 100_000).json)
        #expect(refused.contains(.dropOutbox(user: "alice")))
        #expect(refused.closes == [1000])
        #expect(refused.reply(1) == nil) // bob's identify still waits for bob's answer
        #expect(h.machine.status()["user"]?["ext_user_id"] == .string("bob"))
        #expect(h.machine.status()["user"]?["rejected"] == .null)
    }

    @Test func logoutSendsTheUsersQueuedMessagesBeforeLogout() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.bringUp() // the gate's outbox load is under way
        let out = h.feed(.request(SessionRequestID(1), .logout))
        #expect(out.sent(cid: 8).isEmpty)
        #expect(out.contains(.clearUser))
        let e = Self.entry("u1-1", "last_words", user: "u1")
        let flushed = h.feed(.outboxLoaded([e]))
        #expect(flushed.sent.compactMap(\.cid) == [9, 8, 1]) // the message, LOGOUT, the barrier PING
        // An event made now is anonymous and waits for the anonymous session.
        h.feed(.request(SessionRequestID(2), .event(eventType: "after", payload: nil)))
        let anon = try #require(h.all.stored.last)
        #expect(anon.user == nil)
        #expect(h.feed(.outboxStored(uuid: anon.uuid, failure: nil)).sent.isEmpty)
    }

    @Test func anOnlineSwitchWritesTheUsersMessagesThenLeaves() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.bringUp()
        let sw = h.feed(.request(SessionRequestID(1), .identify(extUserID: "u2", hash: "h2")))
        #expect(sw.closes.isEmpty) // u1's load is under way
        let flushed = h.feed(.outboxLoaded([Self.entry("u1-1", "mine", user: "u1"), Self.entry("u2-1", "theirs", user: "u2")]))
        #expect(flushed.sent.compactMap { $0["eventType"]?.stringValue } == ["mine"])
        #expect(flushed.closes == [1000])
    }

    @Test func requestsForTheUserAreNotSentForTheNextOne() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.start()
        h.feed(.request(SessionRequestID(1), .request(message: ["cid": 513], expectCid: nil, timeoutMs: 60_000)))
        let sw = h.feed(.request(SessionRequestID(2), .identify(extUserID: "u2", hash: "h2")))
        #expect(sw.reply(1)?.error?.code == .notReady)
        h.connected()
        h.initOK()
        #expect(h.identifyOK().sent(cid: 513).isEmpty)
    }

    @Test func anEngagementBeforeTheIdentifyAnswerIsSeenOnceWithItsRedelivery() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.start()
        h.connected()
        h.initOK()
        let early = h.server(["cid": 110, "engagement_uid": "e-1"])
        h.identifyOK()
        let again = h.server(["cid": 110, "engagement_uid": "e-1"])
        let keys = (early + again).compactMap { a -> String? in
            if case .journalOnce(let user, let uid, _) = a { return "\(user)/\(uid)" }
            return nil
        }
        // The same seen-set key both times: the store journals the first and drops the second.
        #expect(keys == ["u1/e-1", "u1/e-1"])
    }
}

extension SessionIdentityTests {
    @Test func anEarlierUserTheServerKeepsFailingIsDroppedAfterThreeTries() throws {
        var h = Harness(SessionFixtures.config(hashCommand: ["make-hash"]))
        h.start(Self.alice)
        h.feed(.request(SessionRequestID(1), .identify(extUserID: "bob", hash: nil)))
        let a = Self.entry("a-1", "alice_only_event", user: "alice")
        for attempt in 1...3 {
            if attempt > 1 { h.reconnect() } else { h.connected() }
            h.waitingAtInit = [a]
            let run = try #require(h.initOK().hashRuns.first)
            #expect(run.2 == "alice")
            h.feed(.hashResult(token: run.0, .hash(Secret("ha"))))
            let failed = h.server(IdentifyUserResponse(publicUsername: nil, avatarID: nil, gamificationURL: nil, popupURL: nil,
                                                       errCode: 5, errMsg: "try later").json)
            #expect(failed.contains(.dropOutbox(user: "alice")) == (attempt == 3), "attempt \(attempt)")
            #expect(h.machine.state == (attempt == 3 ? .connecting : .backoff), "attempt \(attempt)")
        }
    }
}

extension SessionIdentityTests {
    @Test func whatIsRememberedPerEarlierUserIsBounded() {
        var users = RecentUsers<String>()
        for i in 0..<1_000 { users["user-\(i)"] = "hash-\(i)" }
        #expect(users["user-999"] == "hash-999")
        #expect(users["user-\(1_000 - RecentUsers<String>.capacity)"] != nil)
        #expect(users["user-\(999 - RecentUsers<String>.capacity)"] == nil)
        users["user-999"] = nil
        #expect(users["user-999"] == nil)
    }
}
