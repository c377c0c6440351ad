import SmarticoProtocol
import Testing
@testable import SmarticoDaemon

/// Session rule 7 ("Be transparent"): what the real server may send differently from 002 never
/// costs the connection, and nothing it sends disappears. And the long retry after a fatal INIT
/// errCode, with `status.last_error`.
@Suite struct SessionToleranceTests {
    /// Nothing closed or aborted, still ready.
    func expectKept(_ a: [SessionAction], _ h: Harness, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(a.closes.isEmpty && a.aborts == 0, "\(what): the connection was ended", sourceLocation: sourceLocation)
        #expect(a.connects.isEmpty, "\(what): reconnected", sourceLocation: sourceLocation)
        #expect(h.machine.state == .ready, "\(what): \(h.machine.state)", sourceLocation: sourceLocation)
    }

    @Test func numericAvatarIDInIdentifyAnswerIsItsText() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.start()
        h.connected()
        h.initOK(settings: ["DYNAMIC_IMAGE_DOMAIN": "https://img3.example"])
        let a = h.server(["cid": 6, "errCode": "0", "avatar_id": 17, "public_username": "P", "props": ["x": 1],
                          "native_app_gf_url": 5, "unknown": [1, 2]])
        expectKept(a, h, "6 with a numeric avatar_id")
        let id = try #require(a.events("identified").first?.data)
        #expect(id["avatar_id"] == .string("17"))
        #expect(id["avatar_url"] == .string("https://img3.example/avatar/17"))
        #expect(id["gf_url"] == .null) // a number is no URL: absent
        #expect(a.events("error").isEmpty)
        #expect(a.sent(cid: 7).count == 1) // LOGIN: the session went on
    }

    @Test func mistypedOptionalFieldsOfTheInitAnswerAreAbsent() throws {
        var h = Harness(SessionFixtures.config())
        h.start()
        h.connected()
        let settings: JSONObject = ["FCM_SENDER_ID": 123_456, "DYNAMIC_IMAGE_DOMAIN": ["x"], "OTHER": true]
        var a = h.server(["cid": 4, "errCode": "0", "errMsg": 0, "products": [100, "5", nil], "payload": "not an object",
                          "settings": .object(settings)])
        for _ in stride(from: h.unansweredLoads, to: 0, by: -1) { a += h.feed(.outboxLoaded([])) }
        expectKept(a, h, "4 with mistyped optional fields")
        let status = h.machine.status()
        #expect(status["session"]?["products"] == .array([100, 5]))
        #expect(status["session"]?["settings"] == .object(settings)) // as received
        #expect(status["session"]?["payload"] == .object([:]))
    }

    @Test func engagementWithActivityTypeSpelledSnakeCaseAndNumericIDs() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        let text = #"{"cid":110,"engagement_uid":236356782,"activity_type":"30","engagement_id":"17","template_html":"<p>x</p>"}"#
        let a = h.serverBytes(text)
        expectKept(a, h, "110 with activity_type and numeric ids")
        let once = a.compactMap { action -> (String, String, DaemonEvent)? in
            if case .journalOnce(let user, let uid, let e) = action { return (user, uid, e) }
            return nil
        }
        #expect(once.count == 1)
        #expect(once.first?.1 == "236356782") // de-duplicated by the id's text
        let event = try #require(once.first?.2)
        #expect(event.name == "engagement" && event.warning == nil)
        #expect(event.data["message"] == (try JSONValue(parsing: Array(text.utf8))))
        #expect(event.data["bridge"]?["activity_type"] == .string("30"))
    }

    @Test func engagementWithoutUIDIsDeliveredWithAWarning() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        for text in [#"{"cid":110,"activityType":30}"#, #"{"cid":110,"engagement_uid":"","activityType":30}"#,
                     #"{"cid":110,"engagement_uid":{"x":1}}"#] {
            let a = h.serverBytes(text)
            expectKept(a, h, text)
            let emitted = a.compactMap { if case .emit(let e) = $0, e.name == "engagement" { return e } else { return nil } }
            #expect(emitted.count == 1, "\(text)")
            #expect(emitted.first?.warning?.contains("cannot be de-duplicated") == true, "\(text)")
        }
    }

    @Test func minigameWithoutTemplateIDIsDeliveredWithItsProblem() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.bringUp()
        let a = h.server(["cid": 707, "pending_message_id": 9, "extra": "kept"])
        expectKept(a, h, "707 without saw_template_id")
        let mg = try #require(a.events("minigame").first)
        #expect(mg.journaled)
        #expect(mg.data["saw_template_id"] == .null && mg.data["url"] == .null)
        #expect(mg.data["problem"] == .string(#""saw_template_id" is missing"#))
        #expect(mg.data["message"] == .object(["cid": 707, "pending_message_id": 9, "extra": "kept"]))
        #expect(mg.warning?.contains("saw_template_id") == true)
        // A template id given as a string is read as the integer (as the SDK does).
        let s = try #require(h.server(["cid": 707, "saw_template_id": "5"]).events("minigame").first)
        #expect(s.data["saw_template_id"] == .number(5) && s.data["problem"] == .null && s.warning == nil)
        #expect(s.data["url"]?.stringValue?.hasSuffix("dp=dp%3Agf_saw%26id%3D5%26standalone%3Dtrue") == true)
    }

    @Test func deepLinkWithNumericEngagementUID() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        let a = h.server(["cid": 105, "engagement_uid": 77, "payload": ["dp": "dp:gf_missions&id=3"]])
        expectKept(a, h, "105 with a numeric engagement_uid")
        #expect(a.events("deeplink").first?.data["engagement_uid"] == .string("77"))
        #expect(a.events("deeplink").first?.data["kind"] == .string("gamification"))
        let uids = a.compactMap { if case .journalOnce(_, let uid, _) = $0 { return uid } else { return nil } }
        #expect(uids == ["77"])
    }

    @Test func unusableMessagesBecomeMessageEventsWithAProblem() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        let cases: [(JSONObject, String)] = [
            (["cid": 105, "engagement_uid": "e-1", "payload": ["dp": 7]], #""payload.dp" is number 7, not a deep link"#),
            (["cid": 105], #""payload.dp" is missing"#),
            (["cid": 108, "props": "x"], #""props" is string "x", not an object"#),
            (["cid": 4, "errCode": 0], "an INIT_SESSION_RESPONSE (cid 4) that answers no INIT_SESSION_REQUEST of this connection"),
        ]
        for (json, problem) in cases {
            let a = h.server(json)
            expectKept(a, h, "\(json)")
            let m = try #require(a.events("message").first, "\(json)")
            #expect(m.journaled)
            #expect(m.data["message"] == .object(json))
            #expect(m.data["problem"] == .string(problem))
            #expect(m.warning?.contains(problem) == true)
            #expect(a.events("deeplink").isEmpty && a.events("props").isEmpty)
        }
        // An unknown cid is an ordinary message: no problem, no warning.
        let u = h.server(["cid": 4242, "x": [1]])
        expectKept(u, h, "unknown cid")
        let m = try #require(u.events("message").first)
        #expect(m.data == .object(["message": ["cid": 4242, "x": [1]], "name": nil, "problem": nil]))
        #expect(m.warning == nil)
    }

    /// Issue 41: `cid` as a decimal string is read as the SDK reads it; a `cid` that is no number
    /// is a `message` with the problem. Neither ends the connection.
    @Test func cidAsDecimalStringIsReadAsTheNumber() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        let a = h.serverBytes(#"{"cid":"110","engagement_uid":"u-str","activityType":30}"#)
        expectKept(a, h, "110 with a string cid")
        #expect(a.events("engagement").count == 1)
        #expect(a.events("engagement").first?.data["message"]?["cid"] == .string("110")) // forwarded as received
        let p = h.serverBytes(#"{"cid":" 108 ","props":{"level":"gold"}}"#)
        expectKept(p, h, "108 with a padded string cid")
        #expect(p.events("props").first?.data["level"] == .string("gold"))
        for text in [#"{"cid":"abc","x":1}"#, #"{"cid":1.5}"#, #"{"x":1}"#] {
            let b = h.serverBytes(text)
            expectKept(b, h, text)
            let m = try #require(b.events("message").first, "\(text)")
            #expect(m.data["message"] == (try JSONValue(parsing: Array(text.utf8))))
            #expect(m.data["problem"]?.stringValue?.contains(#""cid""#) == true, "\(text)")
            #expect(m.warning != nil)
        }
    }

    /// Issue 41: props are merged from any server message that carries a `props` object.
    @Test func propsAreMergedFromAnyServerMessage() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        let a = h.server(["cid": 504, "props": ["ach_points_balance": 12, "marker": "504"]])
        #expect(a.events("props").first?.data["marker"] == .string("504"))
        #expect(a.events("message").count == 1) // still delivered as what it is
        let b = h.server(["cid": 706, "props": ["marker": "706"], "spin_count": 1])
        #expect(b.events("props").first?.data["ach_points_balance"] == .number(12)) // merged, not replaced
        #expect(h.machine.status()["user"]?["props"]?["marker"] == .string("706"))
        // A `props` that is not an object is no change.
        #expect(h.server(["cid": 504, "props": "x"]).events("props").isEmpty)
    }

    /// Issue 41: the server refusing the push token (2003 with errCode ≠ 0) is an `error` and
    /// `status.last_error`; other answers stay consumed.
    @Test func refusedPushTokenIsAnError() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        let a = h.server(["cid": 2003, "errCode": "4711", "errMsg": "bad token"])
        expectKept(a, h, "refused 2003")
        let e = try #require(a.events("error").first)
        #expect(e.data["code"] == .string("push_token_refused"))
        #expect(e.data["errCode"] == .number(4711) && e.data["errMsg"] == .string("bad token"))
        #expect(h.machine.status()["last_error"]?["code"] == .string("push_token_refused"))
        #expect(h.server(["cid": 2003, "errCode": 0]).events("error").isEmpty)
        // A 10 while no 1003 waits for its answer refuses an event, not the token.
        #expect(h.server(["cid": 10, "errCode": 5]).events("error").isEmpty)
        #expect(SessionDriver.logLevel(of: e).map { "\($0)" } == "warning")
    }

    /// A 10 refusing a 1003 written on this connection is the token's refusal too; once that
    /// 1003 is answered, a 10 is an event's answer again.
    @Test func aTenRefusingAWrittenPushTokenIsItsRefusal() throws {
        var h = Harness(SessionFixtures.config())
        #expect(h.bringUp().loads == 2)
        h.feed(.outboxLoaded([]))
        #expect(h.feed(.request(SessionRequestID(1), .identify(extUserID: "u9", hash: "h9"))).loads == 1)
        h.feed(.outboxLoaded([]))
        #expect(h.identifyOK().loads == 1)
        h.feed(.outboxLoaded([]))
        h.feed(.request(SessionRequestID(2), .pushToken(token: "tok-2", platform: 7, status: 0, appPackageID: nil)))
        let stored = try #require(h.all.stored.last)
        #expect(h.feed(.outboxStored(uuid: stored.uuid, failure: nil)).sent(cid: 1003).count == 1)
        let a = h.server(["cid": 10, "errCode": 12, "errMsg": "no such app"])
        expectKept(a, h, "refusing 10")
        let e = try #require(a.events("error").first)
        #expect(e.data["code"] == .string("push_token_refused") && e.data["errCode"] == .number(12))
        #expect(e.data["message"]?.stringValue?.contains("tok-2") == false) // the token stays out
        #expect(h.server(["cid": 10, "errCode": 12]).events("error").isEmpty)
    }

    @Test func onlyAnUnreadableAnswerEndsTheConnection() throws {
        var h = Harness(SessionFixtures.config())
        h.start()
        h.connected()
        let a = h.server(["cid": 4, "errCode": ["x"]])
        #expect(a.closes == [1002])
        #expect(a.events("session").first?.data["reason"] == .string("bad_server_message"))
        #expect(h.machine.status()["last_error"]?["code"] == .string("bad_server_message"))
        // Bytes that are not an object.
        h.advance(by: h.timers[.backoff]! - h.now)
        h.connected()
        h.initOK()
        #expect(h.serverBytes(#"[{"cid":110}]"#).closes == [1002])
    }

    // MARK: fatal INIT errCode

    @Test func fatalInitCodeRetriesAfterTenMinutesDoublingToAnHour() throws {
        var h = Harness(SessionFixtures.config())
        h.start()
        var delays: [Int64] = []
        for _ in 1...5 {
            h.connected()
            let a = h.server(InitSessionResponse(errCode: 100_001, errMsg: "wrong label").json)
            let err = try #require(a.events("error").first?.data)
            #expect(err["code"] == .string("init_rejected") && err["errCode"] == .number(100_001))
            let text = err["message"]?.stringValue ?? ""
            #expect(text.contains("errCode 100001") && text.contains("server.label_key") && text.contains("server.brand_key"))
            #expect(a.closes == [1000] && a.connects.isEmpty)
            let retryAt = try #require(h.timers[.backoff])
            #expect(h.machine.status()["backoff"]?["retry_at_ms"] == .number(retryAt))
            #expect(a.events("session").first?.data["retry_in_ms"] == .number(retryAt - h.now))
            delays.append(retryAt - h.now)
            #expect(h.advance(by: retryAt - h.now - 1).connects.isEmpty)
            #expect(h.advance(by: 1).connects.count == 1)
        }
        #expect(delays == [600_000, 1_200_000, 2_400_000, 3_600_000, 3_600_000])
        let failedAt = h.now - 3_600_000
        // Fixed: the next INIT succeeds; last_error stays, and the next fatal code starts at 10 min again.
        h.connected()
        h.initOK()
        #expect(h.machine.state == .ready)
        let last = try #require(h.machine.status()["last_error"]?.objectValue)
        #expect(last["code"] == .string("init_rejected") && last["at_ms"] == .number(failedAt))
        #expect(last["message"]?.stringValue?.contains("100001") == true)
        h.feed(.closed(h.conn!, code: 1006, reason: "gone", clean: false))
        #expect(h.machine.status()["last_error"]?["code"] == .string("server_closed")) // the latest failure
        h.advance(by: h.timers[.backoff]! - h.now)
        h.connected()
        h.server(InitSessionResponse(errCode: 100_001).json)
        #expect(h.timers[.backoff] == h.now + 600_000)
    }

    @Test func nonFatalInitErrorKeepsTheOrdinaryBackoff() throws {
        var h = Harness(SessionFixtures.config())
        h.start()
        h.connected()
        let a = h.server(InitSessionResponse(errCode: 5, errMsg: "busy").json)
        #expect(a.events("error").first?.data["code"] == .string("init_rejected"))
        #expect(a.events("error").first?.data["message"]?.stringValue?.contains("server.label_key") == false)
        let delay = try #require(h.timers[.backoff]) - h.now
        #expect(delay >= 0 && delay <= 500)
        #expect(h.machine.status()["last_error"]?["code"] == .string("init_rejected"))
    }

    @Test func reloadWithChangedServerSettingsRetriesAtOnce() throws {
        var h = Harness(SessionFixtures.config())
        h.start()
        h.connected()
        h.server(InitSessionResponse(errCode: 100_001).json)
        #expect(h.machine.state == .backoff)
        // Unchanged server settings: the long retry stands.
        #expect(h.feed(.reload(SessionFixtures.config())).connects.isEmpty)
        let fixed = SessionFixtures.config(url: "ws://127.0.0.1:8081/websocket/services?master&domain=app.example&version=1.2.3")
        let a = h.feed(.reload(fixed))
        #expect(a.connects.count == 1)
        #expect(h.timers[.backoff] == nil)
        h.connected()
        h.server(InitSessionResponse(errCode: 100_001).json)
        #expect(h.timers[.backoff] == h.now + 600_000) // counted afresh after the change
    }

    @Test func lastErrorIsNullUntilAFailureAndNamesConnectFailures() throws {
        var h = Harness(SessionFixtures.config())
        h.start()
        #expect(h.machine.status()["last_error"] == .null)
        h.feed(.connectFailed(h.conn!, reason: "tls_error", message: "certificate verify failed for api.example"))
        let last = try #require(h.machine.status()["last_error"]?.objectValue)
        #expect(last == ["code": "tls_error", "message": "certificate verify failed for api.example", "at_ms": .number(h.now)])
    }

    @Test func failuresThatStopDeliveryAreLoggedAtWarning() {
        func level(_ name: String, _ data: JSONObject) -> String? {
            SessionDriver.logLevel(of: DaemonEvent(kind: EventKind(rawValue: name)!, data: .object(data), journaled: false)).map { "\($0)" }
        }
        for code in ["init_rejected", "identify_rejected", "hash_command_failed", "outbox_dropped"] {
            #expect(level("error", ["code": .string(code), "message": "m"]) == "warning", "\(code)")
        }
        #expect(level("error", ["code": "identify_failed", "message": "m"]) == "info")
        #expect(level("session", ["state": "backoff", "reason": "tls_error"]) == "warning")
        #expect(level("session", ["state": "ready", "reason": "identified"]) == "info")
        #expect(level("message", ["message": ["cid": 504]]) == nil)
    }
}
