import Foundation
import SmarticoProtocol
import Testing
@testable import SmarticoDaemon

/// Rules 5–7: the identify gate and the outbox, keepalive, inbound messages and requests.
@Suite struct SessionTrafficTests {
    // MARK: rule 6, keepalive

    @Test func pingIsAnsweredAtOnceWithANewUUID() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.start()
        h.connected()
        // Even before INIT is answered: keepalive never waits.
        let a = h.server(["cid": 1, "ts": 1, "uuid": "11111111-2222-4333-8444-555555555555"])
        let pong = try #require(a.sent(cid: 2).first)
        let uuid = try #require(pong["uuid"]?.stringValue)
        #expect(uuid != "11111111-2222-4333-8444-555555555555")
        #expect(UUIDv4.isValidV4(uuid))
        #expect(pong["ts"] == .number(h.now))
        #expect(h.machine.counters.pings == 1)
    }

    @Test func ownPingAfter29sOfSilenceAndReconnect15sLater() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        let readyAt = h.now
        #expect(h.advance(by: 28_999).sent.isEmpty)
        let ping = h.advance(by: 1)
        #expect(ping.sent(cid: 1).count == 1)
        #expect(h.now == readyAt + 29_000)
        #expect(h.advance(by: 14_999).aborts == 0)
        let dead = h.advance(by: 1)
        #expect(dead.aborts == 1)
        let s = try #require(dead.events("session").first?.data.objectValue)
        #expect(s["reason"] == .string("heartbeat_timeout"))
        #expect(s["state"] == .string("backoff"))
        #expect(h.now == readyAt + 44_000)
        #expect(h.advance(by: h.timers[.backoff]! - h.now).connects.count == 1)
    }

    @Test func anyServerMessageButPongRestartsTheSilenceTimer() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        let t0 = h.now
        h.advance(by: 20_000)
        h.server(["cid": 504])
        #expect(h.advance(by: 28_999).sent(cid: 1).isEmpty)
        #expect(h.advance(by: 1).sent(cid: 1).count == 1) // t0 + 49 s
        #expect(h.now == t0 + 49_000)

        var p = Harness(SessionFixtures.config())
        p.bringUp()
        let s0 = p.now
        p.advance(by: 10_000)
        p.server(["cid": 2]) // a PONG does not restart the silence timer
        let ping = p.advance(by: 19_000)
        #expect(ping.sent(cid: 1).count == 1)
        #expect(p.now == s0 + 29_000)
        // The answer to our PING keeps the connection alive; the next PING follows 29 s after ours.
        p.advance(by: 1_000)
        p.server(["cid": 2])
        #expect(p.advance(by: 20_000).aborts == 0)
        let second = p.advance(by: 8_000)
        #expect(second.sent(cid: 1).count == 1)
        #expect(p.now == s0 + 58_000)
    }

    /// A server that PINGs every 30 s: once its cadence is seen, our PING (due at 29 s) waits for
    /// the server's, so an idle connection exchanges one PING and one PONG per 30 s, not four messages.
    @Test func ownPingWaitsForTheServersOwnPingCadence() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        h.advance(by: 5_000)
        h.server(["cid": 1])
        // The first gap is not known yet: our PING goes out at 29 s, as the spec says.
        let first = h.advance(by: 29_000)
        #expect(first.sent(cid: 1).count == 1)
        h.advance(by: 1_000)
        h.server(["cid": 1]) // 30 s after the first: the cadence is known from here on
        var ours = 0
        var pongs = 0
        for _ in 0..<10 {
            let a = h.advance(by: 30_000)
            ours += a.sent(cid: 1).count
            pongs += h.server(["cid": 1]).sent(cid: 2).count
        }
        #expect(ours == 0)
        #expect(pongs == 10)
        #expect(h.all.aborts == 0)
        // A server PING 2.9 s late (within the grace) still finds ours not sent.
        #expect(h.advance(by: 32_900).sent(cid: 1).isEmpty)
        h.server(["cid": 1])
        #expect(h.advance(by: 30_000).sent(cid: 1).isEmpty)
    }

    /// The cadence is seen, then the server falls silent: our PING goes out 3 s after the PING
    /// that did not come, and the connection is declared dead after keepalive_s + dead_after_s
    /// (44 s) of silence, as without the deferral.
    @Test func aMissingServerPingGetsOursAndTheDeadDeadlineHolds() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        h.server(["cid": 1])
        h.advance(by: 30_000)
        h.server(["cid": 1])
        let silentFrom = h.now
        #expect(h.advance(by: 32_999).sent(cid: 1).isEmpty)
        let ping = h.advance(by: 1)
        #expect(ping.sent(cid: 1).count == 1)
        #expect(h.now == silentFrom + 33_000)
        #expect(h.advance(by: 10_999).aborts == 0)
        let dead = h.advance(by: 1)
        #expect(dead.aborts == 1)
        #expect(h.now == silentFrom + 44_000)
        let s = try #require(dead.events("session").first?.data.objectValue)
        #expect(s["reason"] == .string("heartbeat_timeout"))
        #expect(s["message"]?.stringValue?.hasPrefix("nothing from the server for 44 s") == true)
    }

    /// Our PING is deferred only while it would leave 5 s before the dead deadline: with a 40 s
    /// server cadence (the server's next PING due at 40 s, ours would wait until 43 s, past 44 − 5)
    /// it goes out at 29 s, and a PONG keeps the connection.
    @Test func aSlowServerCadenceDoesNotDeferOurPing() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        h.server(["cid": 1])
        h.advance(by: 40_000)
        h.server(["cid": 1])
        let t = h.now
        let ping = h.advance(by: 29_000)
        #expect(ping.sent(cid: 1).count == 1)
        #expect(h.now == t + 29_000)
        h.server(["cid": 2])
        #expect(h.advance(by: 11_000).aborts == 0)
        h.server(["cid": 1])
        #expect(h.all.aborts == 0)
    }

    // MARK: rule 5, gate and outbox

    @Test func userMessagesWaitForTheIdentifyGateAndFlushInOrder() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.start()
        // Offline: stored first, answered queued.
        h.feed(.request(SessionRequestID(1), .event(eventType: "deposit", payload: ["amount": 5])))
        h.feed(.request(SessionRequestID(2), .report(kind: .impression, engagementUID: "e-1", activityType: 30, action: nil)))
        let entries = h.all.stored
        #expect(entries.map(\.cid) == [9, 103])
        for e in entries {
            let a = h.feed(.outboxStored(uuid: e.uuid, failure: nil))
            #expect(a.sent.isEmpty)
        }
        #expect(h.all.reply(1)?.value?["queued"] == .bool(true))
        #expect(entries.allSatisfy { $0.user == "u1" }) // made for the user, whoever is identified later
        h.connected()
        // INIT answered: the outbox's head is the user's, so IDENTIFY the user; nothing for the
        // user before its answer.
        h.waitingAtInit = entries
        let init4 = h.initOK()
        #expect(init4.sent.map(\.cid) == [5])
        #expect(init4.loads == 1)
        let ok = h.identifyOK()
        #expect(ok.loads == 1)
        let flushed = h.feed(.outboxLoaded(entries))
        // In order, then the barrier PING whose PONG proves they were read.
        #expect(flushed.sent.map(\.cid) == [9, 103, 1])
        #expect(flushed.sent.prefix(2).map { $0["uuid"]?.stringValue ?? "" } == entries.map(\.uuid))
        #expect(flushed.markedSent.isEmpty)
        #expect(h.server(["cid": 2]).markedSent == entries.map(\.uuid))

        // Ready: a new message is stored, then sent at once, then removed once the server read it.
        h.feed(.request(SessionRequestID(3), .minigameAck(sawTemplateID: 5, pendingMessageID: 77)))
        let e3 = try #require(h.all.stored.last)
        let now3 = h.feed(.outboxStored(uuid: e3.uuid, failure: nil))
        #expect(now3.sent(cid: 711).first?["pending_message_id"] == .number(77))
        #expect(now3.sent.map(\.cid) == [711, 1])
        #expect(now3.markedSent.isEmpty)
        #expect(now3.reply(3)?.value?["queued"] == .bool(false))
        #expect(h.server(["cid": 2]).markedSent == [e3.uuid])
    }

    @Test func sendIsValidatedAndQueueFullIsReported() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        let bad = h.feed(.request(SessionRequestID(1), .send(["cid": "x"])))
        #expect(bad.reply(1)?.error?.code == .badRequest)
        let lifecycle = h.feed(.request(SessionRequestID(2), .send(["cid": 5, "ext_user_id": "x"])))
        #expect(lifecycle.reply(2)?.error?.code == .badRequest)
        let wrongField = h.feed(.request(SessionRequestID(3), .send(["cid": 9, "eventType": 7])))
        #expect(wrongField.reply(3)?.error?.message.contains("eventType") == true)
        h.feed(.request(SessionRequestID(4), .send(["cid": 500, "uuid": "my-uuid"])))
        let full = h.feed(.outboxStored(uuid: "my-uuid", failure: .queueFull(max: 10)))
        #expect(full.reply(4)?.error?.code == .queueFull)
        #expect(full.events("error").first?.data["code"] == .string("outbox_full"))
        #expect(full.sent.isEmpty)
    }

    @Test func pushTokenWhileAnonymousGoesIntoTheNextIdentify() throws {
        var h = Harness(SessionFixtures.config())
        #expect(h.bringUp().loads == 2) // the sorting after INIT, then anonymous: the gate is open
        h.feed(.outboxLoaded([]))
        let a = h.feed(.request(SessionRequestID(1), .pushToken(token: "tok-1", platform: 7, status: 0, appPackageID: nil)))
        #expect(a.sent.isEmpty)
        #expect(a.contains(.persistPush(StoredPush(token: "tok-1", platform: 7, status: 0))))
        #expect(a.reply(1)?.value?["with_identify"] == .bool(true))
        #expect(h.feed(.request(SessionRequestID(2), .identify(extUserID: "u9", hash: "h9"))).loads == 1)
        let identify = try #require(h.feed(.outboxLoaded([])).sent(cid: 5).first)
        #expect(identify["token"] == .string("tok-1"))
        #expect(identify["platform"] == .number(7))
        #expect(identify["pushNotificationUserStatus"] == .number(0))
        #expect(h.identifyOK().loads == 1)
        h.feed(.outboxLoaded([])) // the outbox is empty
        // Identified: a 1003, durably queued.
        h.feed(.request(SessionRequestID(3), .pushToken(token: "tok-2", platform: nil, status: 1, appPackageID: nil)))
        let e = try #require(h.all.stored.last)
        #expect(e.cid == 1003)
        #expect(h.feed(.outboxStored(uuid: e.uuid, failure: nil)).sent(cid: 1003).first?["platform"] == .number(5))
    }

    @Test func languageKeepsOnlyTheLatestSlot() throws {
        var h = Harness(SessionFixtures.config(language: "en"))
        h.start()
        h.feed(.request(SessionRequestID(1), .language("de")))
        let a = h.feed(.request(SessionRequestID(2), .language("pt-br")))
        guard case .storeLatest(let slot, let entry)? = a.first else { Issue.record("no storeLatest"); return }
        #expect(slot == "language")
        #expect(entry.cid == 9)
        let json = try JSONValue(parsing: entry.bytes)
        #expect(json["payload"]?["language"] == .string("pt-br"))
        #expect(json["eventType"] == .string("core_language_changed"))
        // client.language is separate from the op: queued durably once the session is ready
        // (once per change, daemon.md), not written ahead of the outbox.
        h.connected()
        let ready = h.initOK()
        #expect(ready.sent(cid: 9).isEmpty)
        #expect(ready.stored.map { (try? JSONValue(parsing: $0.bytes))?["payload"]?["language"] } == [.string("en")])

        var c = Harness(SessionFixtures.config(language: "en"))
        let up = c.bringUp()
        #expect(up.stored.map { (try? JSONValue(parsing: $0.bytes))?["payload"]?["language"] } == [.string("en")])
    }

    // MARK: rule 7, inbound

    @Test func engagementsGoThroughTheSeenSet() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.bringUp()
        let raw = #"{"cid":110,"engagement_uid":"e-42","activityType":30,"engagement_id":9007199254740993,"template_html":"<b>hi</b>","custom":{"x":[1,2]}}"#
        let a = h.serverBytes(raw)
        guard case .journalOnce(let user, let uid, let event)? = a.last else { Issue.record("no journalOnce: \(a)"); return }
        #expect(user == "u1")
        #expect(uid == "e-42")
        #expect(event.name == "engagement" && event.journaled)
        let data = try #require(event.data.objectValue)
        #expect(data["message"] == (try JSONValue(parsing: raw)))
        #expect(data["message"]?["engagement_id"]?.numberValue?.literal == "9007199254740993")
        #expect(data["popup_url"] == .string("https://wrap.example/popup?x=1&force_mobile=true"))
        let bridge = try #require(data["bridge"]?.objectValue)
        #expect(bridge.keys.first == "bcid")
        #expect(bridge["bcid"] == .number(3))
        #expect(bridge["template_html"] == .string("<b>hi</b>"))
        #expect(data.keys.sorted() == ["bridge", "message", "popup_url"])

        // 105 shares the seen-set key.
        let d = h.server(ExecuteDeepLinkEvent(engagementUID: "e-43", dp: "dp:gf_missions&id=3").json)
        guard case .journalOnce(_, let uid2, let dl)? = d.last else { Issue.record("no journalOnce for 105"); return }
        #expect(uid2 == "e-43")
        #expect(dl.name == "deeplink")
        #expect(dl.data["source"] == .string("server"))
        #expect(dl.data["kind"] == .string("gamification"))
        #expect(dl.data["engagement_uid"] == .string("e-43"))
        #expect(dl.data["url"] == .string("https://wrap.example/gf?label=1&user_ext_id=u1&force_mobile=true&dp=dp%3Agf_missions%26id%3D3"))
    }

    /// An engagement is journaled without its `bridge` (the payload once, not twice); replay puts it
    /// back: the replayed line's data is byte for byte the live one, through the real store.
    @Test func engagementRowsAreJournaledWithoutTheBridgeAndReplayedWithIt() async throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.bringUp()
        // Escapes, non-ASCII and exact numbers must survive the round trip.
        let raw = ClientEngagementEvent(
            engagementUID: "e-7", engagementID: 7, templateHTML: "<p class=\"x\">Grüße \u{1F600}\n</p>",
            extra: ["amount": .number(JSONNumber(literal: "1.50e3")!), "nested": ["a": [1, "b", .null]]]).json
        guard case .journalOnce(_, _, let event)? = h.server(raw).last else { Issue.record("no journalOnce for 110"); return }
        let (row, line) = SessionDriver.journalRow(event, tsMs: h.now)
        #expect(line == event.data.serialized(), "the live line's data is the event's data")
        #expect(row.data.count < line.count * 2 / 3, "journaled \(row.data.count) of \(line.count) bytes")
        #expect(!String(decoding: row.data, as: UTF8.self).contains("\"bridge\""))

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("smarticod-session-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try await SmarticoStore.open(directory: dir)
        _ = try await store.journal([JournalWrite(row, once: "e-7", user: "u1")])
        let stored = try #require(try await store.events(after: 0, limit: 1).first)
        #expect(EngagementJournal.lineData(name: stored.name, journaled: stored.data) == line)
        // Rows that kept their bridge (journaled before this change), and other events, pass as they are.
        #expect(EngagementJournal.lineData(name: "engagement", journaled: line) == line)
        let other = Array(#"{"message":{"a":1},"popup_url":null}"#.utf8)
        #expect(EngagementJournal.lineData(name: "deeplink", journaled: other) == other)
        #expect(EngagementJournal.lineData(name: "engagement", journaled: Array("not json".utf8)) == Array("not json".utf8))
        await store.close()
    }

    @Test func engagementDeduplicationThroughTheRealStore() async throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.bringUp()
        let raw = ClientEngagementEvent(engagementUID: "e-1", engagementID: 1).json
        var journaled: [JournalSeq?] = []
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("smarticod-session-\(UUID().uuidString)").path
        let store = try await SmarticoStore.open(directory: dir)
        // The server re-sends the pending engagement after every IDENTIFY.
        for _ in 0..<2 {
            for action in h.server(raw) {
                if case .journalOnce(let user, let uid, let event) = action {
                    journaled.append(try await store.appendEngagement(user: user, uid: uid, event: event.journalEvent(tsMs: h.now)))
                }
            }
            h.reconnect()
            h.initOK()
            h.identifyOK()
        }
        #expect(journaled.count == 2)
        #expect(journaled[0] != nil)
        #expect(journaled[1] == nil)
        let events = try await store.events(after: 0, limit: 10)
        #expect(events.map(\.name) == ["engagement"])
        await store.close()
        try? FileManager.default.removeItem(atPath: dir)
    }

    @Test func propsMergeFromIdentifyServerAndBridge() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.start()
        h.connected()
        h.initOK()
        let id = h.identifyOK(props: ["a": 1, "b": 2])
        // The answer's identity fields are mirrored into the props, as Smartico's SDK does.
        let identity: JSONObject = ["avatar_id": "av-1", "public_username": "Player One",
                                    "native_app_gf_url": "https://wrap.example/gf?label=1&user_ext_id=u1"]
        let ab: JSONObject = ["a": 1, "b": 2], ab3: JSONObject = ["a": 1, "b": 3]
        #expect(id.events("identified").first?.data["props"] == .object(ab.merging(identity)))
        let p = h.server(PublicPropertiesChangedEvent(props: ["b": 3, "c": 4]).json)
        #expect(p.events("props").first?.data == .object(ab3.merging(identity).merging(["c": 4])))
        #expect(p.events("props").first?.journaled == false)
        let b = h.feed(.request(SessionRequestID(1), .bridge(["bcid": 7, "d": 5])))
        let all = ab3.merging(identity).merging(["c": 4, "d": 5])
        #expect(b.events("props").first?.data == .object(all))
        #expect(b.reply(1)?.value != nil)
        #expect(h.machine.status()["user"]?["props"] == .object(all))
    }

    @Test func identifiedMinigameAndMessageEvents() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.start()
        h.connected()
        h.initOK(settings: ["DYNAMIC_IMAGE_DOMAIN": "https://img3.example"])
        let id = try #require(h.identifyOK().events("identified").first?.data.objectValue)
        #expect(id["ext_user_id"] == .string("u1"))
        #expect(id["public_username"] == .string("Player One"))
        #expect(id["avatar_id"] == .string("av-1"))
        #expect(id["avatar_url"] == .string("https://img3.example/avatar/av-1"))
        #expect(id["gf_url"] == .string("https://wrap.example/gf?label=1&user_ext_id=u1&force_mobile=true"))
        #expect(id["popup_url"] == .string("https://wrap.example/popup?x=1&force_mobile=true"))

        let mg = try #require(h.server(SawShowSpinPush(sawTemplateID: 5, pendingMessageID: 8).json).events("minigame").first)
        #expect(mg.journaled)
        #expect(mg.data["saw_template_id"] == .number(5))
        #expect(mg.data["url"] == .string("https://wrap.example/gf?label=1&user_ext_id=u1&force_mobile=true&dp=dp%3Agf_saw%26id%3D5%26standalone%3Dtrue"))
        #expect(mg.data["message"]?["pending_message_id"] == .number(8))

        let msg = try #require(h.server(["cid": 706, "spins": 3]).events("message").first)
        #expect(msg.data == .object(["message": ["cid": 706, "spins": 3], "name": "spins_count", "problem": nil]))
        let unknown = try #require(h.server(["cid": 4242]).events("message").first)
        #expect(unknown.data["name"] == .null)

        let dl = try #require(h.feed(.request(SessionRequestID(1), .bridge(["bcid": 4, "dp": "dp:cashier"]))).events("deeplink").first)
        #expect(dl.data == .object(["source": "bridge", "engagement_uid": nil, "dp": "dp:cashier", "kind": "custom", "url": nil,
                                    "client_action": nil, "problem": nil]))
        let game = h.feed(.request(SessionRequestID(2), .bridge(["bcid": 8, "ach_game_id": 3])))
        #expect(game.events("game_opening").first?.data == .object(["bcid": 8, "ach_game_id": 3]))
        let page = h.feed(.request(SessionRequestID(3), .bridge(["bcid": 1])))
        #expect(page.events("bridge").first?.data == .object(["bcid": 1]))
        h.feed(.request(SessionRequestID(4), .bridge(["bcid": 6, "cid": 513, "page": 1])))
        let forwarded = try #require(h.all.stored.last)
        let fw = try JSONValue(parsing: forwarded.bytes)
        #expect(fw["bcid"] == nil)
        #expect(fw["cid"] == .number(513))
    }

    @Test func requestsMatchByUUIDThenOldestPending() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.start()
        // Offline: waits for the session.
        let waiting = h.feed(.request(SessionRequestID(1), .request(message: ["cid": 500], expectCid: nil, timeoutMs: 60_000)))
        #expect(waiting.sent.isEmpty && waiting.stored.isEmpty)
        h.connected()
        h.initOK()
        let up = h.identifyOK()
        let r1 = try #require(up.sent(cid: 500).first)
        let a2 = h.feed(.request(SessionRequestID(2), .request(message: ["cid": 500], expectCid: nil, timeoutMs: nil)))
        let r2 = try #require(a2.sent(cid: 500).first)
        // The answer echoes r2's uuid: it goes to request 2 although request 1 is older.
        let byUUID = h.server(["cid": 501, "uuid": r2["uuid"]!, "errCode": 0, "levels": [1, 2]])
        #expect(byUUID.reply(2)?.value?["message"]?["levels"] == .array([1, 2]))
        #expect(byUUID.reply(1) == nil)
        #expect(byUUID.events.isEmpty)
        // No uuid: the oldest pending request waiting for 501.
        h.feed(.request(SessionRequestID(3), .request(message: ["cid": 500], expectCid: nil, timeoutMs: nil)))
        let oldest = h.server(["cid": 501, "errCode": 0])
        #expect(oldest.reply(1)?.value != nil)
        #expect(oldest.reply(3) == nil)
        let failed = h.server(["cid": 501, "errCode": 100_002, "errMsg": "template not found"])
        let err = try #require(failed.reply(3)?.error)
        #expect(err.code == .serverError)
        #expect(err.errCode == 100_002)
        #expect(err.errMsg == "template not found")
        _ = r1
        // An unmatched response is just a message event.
        #expect(h.server(["cid": 501]).events("message").count == 1)
    }

    @Test func requestTimesOut() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        h.feed(.request(SessionRequestID(1), .request(message: ["cid": 513], expectCid: 514, timeoutMs: 1_000)))
        #expect(h.advance(by: 999).reply(1) == nil)
        let t = h.advance(by: 1)
        #expect(t.reply(1)?.error?.code == .timeout)
        #expect(t.reply(1)?.error?.message.contains("514") == true)
        // Its late answer is nobody's: dropped (SessionAbandonedAnswerTests).
        #expect(h.server(["cid": 514]).events("message").isEmpty)
    }

    @Test func malformedServerJSONReconnectsWithAReason() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        let a = h.serverBytes(#"{"cid":110,"engagement_uid":"#)
        #expect(a.closes == [1002])
        let s = try #require(a.events("session").first?.data.objectValue)
        #expect(s["reason"] == .string("bad_server_message"))
        #expect(s["message"]?.stringValue?.contains("byte") == true)
        #expect(h.machine.state == .backoff)
        h.advance(by: h.timers[.backoff]! - h.now)
        h.connected()
        // A known cid with one bad field is delivered, the field read as absent; the session stays
        // (session rule 7; SessionToleranceTests has the cases).
        h.initOK()
        let field = h.server(["cid": 110, "engagement_id": "not a number"])
        #expect(field.closes.isEmpty && field.aborts == 0)
        #expect(field.events("engagement").count == 1 && field.events("error").isEmpty)
        #expect(h.machine.state == .ready)
    }
    @Test func inFlightRequestIsResentWithItsUUIDAfterAReconnect() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        let first = try #require(h.feed(.request(SessionRequestID(1), .request(message: ["cid": 500], expectCid: nil, timeoutMs: 120_000))).sent(cid: 500).first)
        h.reconnect()
        let again = try #require(h.initOK().sent(cid: 500).first)
        #expect(again["uuid"] == first["uuid"])
        #expect(h.server(["cid": 501, "uuid": first["uuid"]!]).reply(1)?.value != nil)
    }

    @Test func aLoadAnsweredAfterItsConnectionDiedIsNotUsed() throws {
        var h = Harness(SessionFixtures.config())
        #expect(h.bringUp().loads == 2) // the sorting (answered), the gate's (not yet)
        h.reconnect()
        #expect(h.server(InitSessionResponse(products: [.gamification]).json).loads == 1)
        let old = OutboxEntry(uuid: "old", cid: 9, bytes: Array(#"{"cid":9,"eventType":"a","uuid":"old"}"#.utf8), createdMs: 1)
        #expect(h.feed(.outboxLoaded([old])).sent.isEmpty) // the first connection's load
        let fresh = h.feed(.outboxLoaded([old]))
        #expect(fresh.sent.map(\.cid) == [9, 1])
        #expect(fresh.sent.first?["uuid"] == .string("old"))
    }

    @Test func aNewerIdentifySupersedesAPendingOne() throws {
        var h = Harness(SessionFixtures.config())
        h.start()
        h.feed(.request(SessionRequestID(1), .identify(extUserID: "u1", hash: "h1")))
        let second = h.feed(.request(SessionRequestID(2), .identify(extUserID: "u2", hash: "h2")))
        #expect(second.reply(1)?.error?.code == .notReady)
        h.connected()
        #expect(h.initOK().sent(cid: 5).first?["ext_user_id"] == .string("u2"))
        #expect(h.identifyOK().reply(2)?.value?["ext_user_id"] == .string("u2"))
    }

    @Test func keepaliveIsNotActivityForTheLoginRule() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        #expect(h.bringUp().sent(cid: 7).count == 1)
        h.keepAlive(for: 31 * 60_000) // only PING/PONG for 31 minutes
        h.reconnect()
        h.initOK()
        #expect(h.identifyOK().sent(cid: 7).count == 1)
        h.keepAlive(for: 29 * 60_000)
        h.server(["cid": 504]) // a real message: activity
        h.keepAlive(for: 5 * 60_000)
        h.reconnect()
        h.initOK()
        #expect(h.identifyOK().sent(cid: 7).isEmpty)
    }
}
