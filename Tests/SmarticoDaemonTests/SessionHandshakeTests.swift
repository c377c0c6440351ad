import Foundation
import SmarticoProtocol
import Testing
@testable import SmarticoDaemon

/// Rules 1–4: URL, INIT, IDENTIFY, LOGIN.
@Suite struct SessionHandshakeTests {
    @Test func urlFromServerURLOrDerivedFromTheLabelKey() {
        var h = Harness(SessionFixtures.config())
        #expect(h.start().connects == [SessionFixtures.url])
        var d = Harness(SessionFixtures.config(url: nil))
        #expect(d.start().connects == ["wss://api.smartico.ai/websocket/services?master&domain=app.example&version=1.2.3"])
    }

    @Test func initCarriesKeyWithoutSuffixAndAFreshSessionIDPerConnection() throws {
        var h = Harness(SessionFixtures.config(), timeZone: TimeZone(secondsFromGMT: 3 * 3600)!)
        h.start(SessionSnapshot(deviceID: "device-xyz", fingerprint: -77))
        let first = try #require(h.connected().sent(cid: 3).first)
        #expect(first["label_key"] == .string("6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f"))
        #expect(first["brand_key"] == .string("brand-1"))
        #expect(first["device_id"] == .string("device-xyz"))
        #expect(first["page"] == .string("https://app.example/"))
        #expect(first["tracker_version"] == .string("1.2.3"))
        #expect(first["ts"] == .number(SessionFixtures.t0))
        let sid1 = try #require(first["session_id"]?.stringValue)
        #expect(UUIDv4.isValidV4(sid1))
        let ua = try #require(first["ua"]?.objectValue)
        #expect(ua["tzoffset"] == .number(-180))
        #expect(ua["fp"] == .number(-77))
        #expect(ua["device_type"] == .string("DESKTOP"))
        #expect(ua["os"] == .string("Linux"))
        #expect(ua["agent"] == .string("smarticod-test"))
        // The message is a valid INIT for the protocol module too (non-empty session_id etc.).
        _ = try InitSessionRequest(json: first)

        let again = try #require(h.reconnect().sent(cid: 3).first)
        let sid2 = try #require(again["session_id"]?.stringValue)
        #expect(!sid2.isEmpty && sid2 != sid1)
        #expect(again["uuid"] != first["uuid"])
    }

    @Test func tzoffsetIsComputedAtSendTime() throws {
        let berlin = TimeZone(identifier: "Europe/Berlin")!
        var h = Harness(SessionFixtures.config(), timeZone: berlin)
        h.now = 1_704_067_200_000 // 2024-01-01, CET (GMT+1)
        h.start()
        let winter = try #require(h.connected().sent(cid: 3).first?["ua"]?.objectValue)
        #expect(winter["tzoffset"] == .number(-60))
        h.feed(.closed(h.conn!, code: 1006, reason: "", clean: false))
        h.advance(by: h.timers[.backoff]! - h.now)
        h.now = 1_719_792_000_000 // 2024-07-01, CEST (GMT+2)
        let summer = try #require(h.connected().sent(cid: 3).first?["ua"]?.objectValue)
        #expect(summer["tzoffset"] == .number(-120))
    }

    @Test func initRejectedEmitsErrorAndBacksOffWithGrowingCeiling() throws {
        var h = Harness(SessionFixtures.config())
        h.start()
        var ceilings: [Int64] = []
        for attempt in 1...5 {
            h.connected()
            let a = h.server(InitSessionResponse(errCode: 3, errMsg: "label disabled").json)
            let err = try #require(a.events("error").first?.data.objectValue)
            #expect(err["code"] == .string("init_rejected"))
            #expect(err["errCode"] == .number(3))
            #expect(a.closes == [1000])
            #expect(a.connects.isEmpty) // no immediate retry
            let session = try #require(a.events("session").first?.data.objectValue)
            #expect(session["state"] == .string("backoff"))
            #expect(session["reason"] == .string("init_rejected"))
            #expect(session["attempt"] == .number(Int64(attempt)))
            let retry = try #require(session["retry_in_ms"]?.int64Value)
            let ceiling = Backoff(initialMs: 500, maxMs: 60_000, multiplier: 2).ceilingMs(attempt: attempt - 1)
            #expect(retry >= 0 && retry <= ceiling)
            #expect(h.timers[.backoff] == h.now + retry)
            ceilings.append(ceiling)
            // Nothing happens before the backoff runs out.
            if retry > 0 { #expect(h.advance(by: retry - 1).connects.isEmpty) }
            #expect(h.advance(by: h.timers[.backoff]! - h.now).connects.count == 1)
        }
        #expect(ceilings == [500, 1000, 2000, 4000, 8000])
    }

    @Test func identifyOncePerConnectionAndUserSwitchReconnects() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "hash-1"))
        let up = h.bringUp()
        let identify = try #require(up.sent(cid: 5).first)
        #expect(identify["ext_user_id"] == .string("u1"))
        #expect(identify["hash"] == .string("hash-1"))
        #expect(identify["tracker_version"] == .string("1.2.3"))
        #expect(identify["page"] == .string("https://app.example/"))
        #expect(identify["ua"]?.objectValue?["tzoffset"] == .number(0))
        #expect(up.sent(cid: 5).count == 1)

        // The same user again: answered at once from the current identity, no second IDENTIFY.
        let same = h.feed(.request(SessionRequestID(1), .identify(extUserID: "u1", hash: nil)))
        #expect(same.sent(cid: 5).isEmpty)
        #expect(same.reply(1)?.value?["ext_user_id"] == .string("u1"))

        // Another user: close 1000 (once the outbox load shows nothing more of u1 waits),
        // reconnect, IDENTIFY the new user on the new connection.
        h.feed(.outboxLoaded([]))
        let sw = h.feed(.request(SessionRequestID(2), .identify(extUserID: "u2", hash: "hash-2")))
        #expect(sw.sent(cid: 5).isEmpty)
        #expect(sw.closes == [1000])
        #expect(sw.contains(.persistUser(StoredUser(extUserID: "u2", hash: "hash-2"))))
        #expect(h.timers[.closeWait] == h.now + 2_000)
        let reopened = h.feed(.closed(h.conn!, code: 1000, reason: "", clean: true))
        #expect(reopened.connects == [SessionFixtures.url])
        h.connected()
        let second = h.initOK().sent(cid: 5)
        #expect(second.count == 1)
        #expect(second.first?["ext_user_id"] == .string("u2"))
        #expect(second.first?["hash"] == .string("hash-2"))
        let done = h.identifyOK()
        #expect(done.reply(2)?.value?["ext_user_id"] == .string("u2"))
    }

    @Test func hashCommandRunsBeforeEveryIdentify() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hashCommand: ["/usr/local/bin/make-hash", "--label", "x"]))
        h.start()
        h.connected()
        let afterInit = h.initOK()
        #expect(afterInit.sent(cid: 5).isEmpty)
        let run1 = try #require(afterInit.hashRuns.first)
        #expect(run1.1 == ["/usr/local/bin/make-hash", "--label", "x"])
        #expect(run1.2 == "u1")
        #expect(h.machine.state == .identifying)
        let id1 = h.feed(.hashResult(token: run1.0, .hash(Secret("h-first"))))
        #expect(id1.sent(cid: 5).first?["hash"] == .string("h-first"))
        h.identifyOK()

        h.reconnect()
        let run2 = try #require(h.initOK().hashRuns.first)
        #expect(run2.0 != run1.0)
        // A late result of the old run is ignored.
        #expect(h.feed(.hashResult(token: run1.0, .hash(Secret("stale")))).sent.isEmpty)
        let id2 = h.feed(.hashResult(token: run2.0, .hash(Secret("h-second"))))
        #expect(id2.sent(cid: 5).first?["hash"] == .string("h-second"))
    }

    @Test func hashCommandFailureIsAnErrorAndABackoff() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hashCommand: ["make-hash"]))
        h.start()
        h.connected()
        let run = try #require(h.initOK().hashRuns.first)
        let a = h.feed(.hashResult(token: run.0, .failed(.exited(program: "make-hash", status: 1, stderr: "no salt"))))
        let err = try #require(a.events("error").first?.data.objectValue)
        #expect(err["code"] == .string("hash_command_failed"))
        #expect(err["message"]?.stringValue?.contains("no salt") == false) // stderr goes to the log, not to events
        #expect(a.sent(cid: 5).isEmpty)
        #expect(a.events("session").first?.data["reason"] == .string("hash_command_failed"))
        #expect(h.machine.state == .backoff)
    }

    @Test func aRejectedUserIsNotTheCurrentUser() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "bad-hash"))
        h.bringUp(identify: false)
        let a = h.server(IdentifyUserResponse(publicUsername: nil, avatarID: nil, gamificationURL: nil, popupURL: nil,
                                              errCode: 100_000, errMsg: "not a valid hash").json)
        let err = try #require(a.events("error").first?.data.objectValue)
        #expect(err["code"] == .string("identify_rejected"))
        #expect(err["errCode"] == .number(100_000))
        // No longer the user: forgotten, its queued messages dropped, a fresh connection.
        #expect(a.contains(.clearUser))
        #expect(a.contains(.dropOutbox(user: "u1")))
        #expect(a.closes == [1000])
        let user = try #require(h.machine.status().objectValue?["user"]?.objectValue)
        #expect(user["ext_user_id"] == .null)
        #expect(user["identified"] == .bool(false))
        #expect(user["rejected"]?.objectValue?["ext_user_id"] == .string("u1"))
        #expect(user["rejected"]?.objectValue?["errCode"] == .number(100_000))

        // The next connection is anonymous: INIT only, no IDENTIFY with the rejected hash.
        h.feed(.closed(h.conn!, code: 1000, reason: "", clean: true))
        h.connected()
        #expect(h.initOK().sent(cid: 5).isEmpty)
        #expect(h.machine.state == .ready)
        h.feed(.outboxLoaded([])) // the anonymous gate's load

        // A new hash arrives: IDENTIFY on this connection (it has not sent one) once the anonymous
        // messages at the outbox's head are written.
        let fresh = h.feed(.request(SessionRequestID(2), .identify(extUserID: "u1", hash: "good-hash")))
        #expect(fresh.loads == 1)
        #expect(h.feed(.outboxLoaded([])).sent(cid: 5).first?["hash"] == .string("good-hash"))
        let ok = h.identifyOK()
        #expect(ok.reply(2)?.value?["ext_user_id"] == .string("u1"))
        #expect(h.machine.status().objectValue?["user"]?.objectValue?["rejected"] == .null)
    }

    @Test func aRefusedSwitchGoesBackToThePreviousUser() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "hash-1"))
        h.bringUp()
        h.feed(.outboxLoaded([]))
        let sw = h.feed(.request(SessionRequestID(1), .identify(extUserID: "u2", hash: "bad")))
        #expect(sw.closes == [1000])
        h.feed(.closed(h.conn!, code: 1000, reason: "", clean: true))
        h.connected()
        #expect(h.initOK().sent(cid: 5).first?["ext_user_id"] == .string("u2"))
        let refused = h.server(IdentifyUserResponse(publicUsername: nil, avatarID: nil, gamificationURL: nil, popupURL: nil,
                                                    errCode: 100_000, errMsg: "bad hash").json)
        #expect(refused.reply(1)?.error?.code == .serverError)
        let message = try #require(refused.events("error").first?.data["message"]?.stringValue)
        #expect(message.contains("u2") && message.contains("acting for u1 again"))
        #expect(refused.contains(.persistUser(StoredUser(extUserID: "u1", hash: "hash-1"))))
        #expect(refused.contains(.dropOutbox(user: "u2")))
        var user = try #require(h.machine.status().objectValue?["user"]?.objectValue)
        #expect(user["ext_user_id"] == .string("u1"))
        #expect(user["identified"] == .bool(false))
        #expect(user["rejected"]?.objectValue?["ext_user_id"] == .string("u2"))

        h.feed(.closed(h.conn!, code: 1000, reason: "", clean: true))
        h.connected()
        let again = h.initOK().sent(cid: 5)
        #expect(again.first?["ext_user_id"] == .string("u1"))
        #expect(again.first?["hash"] == .string("hash-1"))
        h.identifyOK()
        user = try #require(h.machine.status().objectValue?["user"]?.objectValue)
        #expect(user["ext_user_id"] == .string("u1"))
        #expect(user["identified"] == .bool(true))
    }

    @Test func identifyResponseTimeoutAndInitResponseTimeout() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.start()
        h.connected()
        let noInit = h.advance(by: 15_000)
        #expect(noInit.events("session").first?.data["reason"] == .string("response_timeout"))
        #expect(noInit.events("session").first?.data["message"]?.stringValue?.contains("cid 4") == true)
        h.advance(by: h.timers[.backoff]! - h.now)
        h.connected()
        #expect(h.initOK().sent(cid: 5).count == 1)
        #expect(h.advance(by: 14_999).events("session").isEmpty)
        let noIdentify = h.advance(by: 1)
        #expect(noIdentify.events("session").first?.data["reason"] == .string("response_timeout"))
        #expect(noIdentify.events("session").first?.data["message"]?.stringValue?.contains("cid 6") == true)
    }

    // MARK: LOGIN

    @Test func loginOnFirstIdentifyNotOnAMereReconnect() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        let first = h.bringUp()
        let login = try #require(first.sent(cid: 7).first)
        let payload = try #require(login["payload"]?.objectValue)
        #expect(payload["ua_os"] == .string("Linux"))
        #expect(payload["ua_tzoffset"] == .number(0))
        #expect(payload["os"] == nil)
        h.advance(by: 5 * 60_000)
        h.reconnect()
        h.initOK()
        #expect(h.identifyOK().sent(cid: 7).isEmpty)
    }

    @Test func loginAfterInactivity() {
        let config = SessionFixtures.config()
        let stale = SessionSnapshot(deviceID: "d", fingerprint: 1,
                                    user: StoredUser(extUserID: "u1", hash: "h", lastActivityMs: SessionFixtures.t0 - 31 * 60_000))
        var a = Harness(config)
        #expect(a.bringUp(stale).sent(cid: 7).count == 1)
        let recent = SessionSnapshot(deviceID: "d", fingerprint: 1,
                                     user: StoredUser(extUserID: "u1", hash: "h", lastActivityMs: SessionFixtures.t0 - 5 * 60_000))
        var b = Harness(config)
        #expect(b.bringUp(recent).sent(cid: 7).isEmpty)
    }

    @Test func loginOnUserChangeAndOnTheLoginOp() throws {
        let recent = SessionSnapshot(deviceID: "d", fingerprint: 1,
                                     user: StoredUser(extUserID: "u1", hash: "h", lastActivityMs: SessionFixtures.t0 - 60_000))
        var h = Harness(SessionFixtures.config())
        #expect(h.bringUp(recent).sent(cid: 7).isEmpty)
        let op = h.feed(.request(SessionRequestID(1), .login))
        #expect(op.sent(cid: 7).count == 1)
        #expect(op.reply(1)?.value?["sent"] == .bool(true))

        h.feed(.outboxLoaded([]))
        h.feed(.request(SessionRequestID(2), .identify(extUserID: "u2", hash: "h2")))
        h.feed(.closed(h.conn!, code: 1000, reason: "", clean: true))
        h.connected()
        h.initOK()
        #expect(h.identifyOK().sent(cid: 7).count == 1)
    }

    @Test func everyIdentifyPolicySendsLoginAfterEachIdentify() {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h", policy: .everyIdentify))
        #expect(h.bringUp().sent(cid: 7).count == 1)
        h.reconnect()
        h.initOK()
        #expect(h.identifyOK().sent(cid: 7).count == 1)
    }
}
