import SmarticoProtocol
import SmarticoWrapperCore
import Testing

@Suite("PopupSession: one popup's conversation with wrapper-popup.html")
struct PopupSessionTests {
    static let url = "https://libs.smartico.ai/wrapper-popup.html?label_key=k&force_mobile=true"
    static let timeout: Int64 = 15_000

    func request(seq: Int64 = 7) throws -> PopupRequest {
        PopupRequest(seq: seq, engagementUID: "e-1", activityType: 31, url: Self.url,
                     bridge: try object(#"{"bcid":3,"engagement_uid":"e-1","activityType":31,"body":"<b>Hi</b> \"you\""}"#))
    }

    static let loadTimeout: Int64 = 60_000

    /// A session whose page committed at `now`.
    func begin(now: Int64 = 1_000) throws -> PopupSession {
        var session = try starting(now: now)
        session.committed(now: now)
        return session
    }

    func starting(now: Int64) throws -> PopupSession {
        let (session, effects) = PopupSession.begin(try request(), readyTimeoutMs: Self.timeout, loadTimeoutMs: Self.loadTimeout, now: now)
        #expect(effects == [.load(url: Self.url)])
        #expect(session.phase == .starting(deadline: now + Self.loadTimeout))
        return session
    }

    @Test("before its first byte a page has load_timeout; from it, ready_timeout; only the first commit counts")
    func startingThenLoading() throws {
        var s = try starting(now: 1_000)
        #expect(s.deadline == 61_000)
        #expect(s.tick(now: 60_999) == [], "a slow web process start is not the page's fault")
        s.committed(now: 50_000)
        #expect(s.phase == .loading(deadline: 65_000))
        s.committed(now: 60_000)
        #expect(s.deadline == 65_000, "a page that reloads does not get more time")
        #expect(s.tick(now: 64_999) == [])
        #expect(s.tick(now: 65_000).count == 3)
    }

    @Test("no commit at all: failed at the load deadline, saying so")
    func neverCommits() throws {
        var s = try starting(now: 0)
        let effects = s.tick(now: 60_000)
        guard effects.count == 3, case .reportFailed(_, _, let reason) = effects[1] else {
            Issue.record("unexpected effects \(effects)")
            return
        }
        #expect(reason.contains("did not start loading within 60 s"))
        #expect(s.isDone)
    }

    @Test("a page message before the commit signal counts as the commit; 5 shows it")
    func messageBeforeCommit() throws {
        var s = try starting(now: 1_000)
        _ = s.receive(try message(#"{"bcid":1}"#), now: 2_000)
        #expect(s.phase == .loading(deadline: 17_000))
        var t = try starting(now: 1_000)
        let five = try message(#"{"bcid":5}"#)
        #expect(t.receive(five, now: 2_000) == [.relay(five.json), .show])
        #expect(t.phase == .shown)
    }

    @Test("1 → inject, 5 → show once, 6 relayed only, 2 → close and finished(closed)")
    func conversation() throws {
        var s = try begin(now: 1_000)
        #expect(s.phase == .loading(deadline: 16_000))
        #expect(s.deadline == 16_000)
        #expect(!s.isDone)

        let ready = try message(#"{"bcid":1}"#)
        let inject = PopupEffect.inject(script: BridgeScript.showEngagement(try request().bridge))
        #expect(s.receive(ready, now: 1_100) == [.relay(ready.json), inject])
        #expect(s.phase == .loading(deadline: 16_000), "PAGE_READY does not show the popup")
        // The script hands over the bridge object, unchanged.
        if case .inject(let script) = inject {
            let lit = String(script.dropFirst(BridgeScriptTests.prefix.count).dropLast(BridgeScriptTests.suffix.count))
            #expect(try JSONValue(parsing: try JSStringLiteral.decode(lit)) == .object(try request().bridge))
        }
        // A page that reloads asks again, and gets it again.
        #expect(s.receive(ready, now: 1_200) == [.relay(ready.json), inject])

        let five = try message(#"{"bcid":5}"#)
        #expect(s.receive(five, now: 1_300) == [.relay(five.json), .show])
        #expect(s.phase == .shown)
        #expect(s.deadline == nil)
        #expect(s.receive(five, now: 1_400) == [.relay(five.json)], "shown once")

        let six = try message(#"{"bcid":6,"message":{"cid":103,"engagement_uid":"e-1"}}"#)
        #expect(s.receive(six, now: 1_500) == [.relay(six.json)])
        #expect(s.phase == .shown)

        let close = try message(#"{"bcid":2}"#)
        #expect(s.receive(close, now: 1_600) == [.relay(close.json), .close, .finished(seq: 7, outcome: .closed)])
        #expect(s.isDone)
        #expect(s.phase == .done)
        #expect(s.deadline == nil)

        // After the end: nothing, whatever comes.
        for text in [#"{"bcid":1}"#, #"{"bcid":2}"#, #"{"bcid":4,"dp":"dp:x"}"#, #"{"bcid":5}"#, #"{"bcid":6}"#] {
            #expect(s.receive(try message(text), now: 1_700) == [])
        }
        #expect(s.tick(now: 1_000_000) == [])
        #expect(s.loadFailed("late") == [])
        #expect(s.dismissed("late") == [])
        #expect(s.isDone)
    }

    @Test("4 closes and finishes with the trimmed deep link; without one it is just closed")
    func deepLink() throws {
        var s = try begin()
        _ = s.receive(try message(#"{"bcid":5}"#), now: 2_000)
        let four = try message(#"{"bcid":4,"dp":"  dp:gf_missions\n"}"#)
        #expect(s.receive(four, now: 2_100) == [.relay(four.json), .close, .finished(seq: 7, outcome: .deepLink("dp:gf_missions"))])
        #expect(s.isDone)

        var t = try begin()
        let bare = try message(#"{"bcid":4,"dp":"   "}"#)
        #expect(t.receive(bare, now: 2_000) == [.relay(bare.json), .close, .finished(seq: 7, outcome: .closed)])

        // A link before READY_TO_BE_SHOWN ends it too (never shown: nothing to report).
        var u = try begin()
        let early = try message(#"{"bcid":4,"dp":"dp:cashier"}"#)
        #expect(u.receive(early, now: 1_500) == [.relay(early.json), .close, .finished(seq: 7, outcome: .deepLink("dp:cashier"))])
    }

    @Test("2 before READY_TO_BE_SHOWN closes without a failure report")
    func closeWhileLoading() throws {
        var s = try begin()
        let close = try message(#"{"bcid":2}"#)
        #expect(s.receive(close, now: 1_500) == [.relay(close.json), .close, .finished(seq: 7, outcome: .closed)])
    }

    @Test("relayed: 1, 2, 4, 5, 6, 7, 8", arguments: [1, 2, 4, 5, 6, 7, 8] as [Int64])
    func relayed(_ bcid: Int64) throws {
        var s = try begin()
        let m = try message(#"{"bcid":\#(bcid),"x":"y"}"#)
        let effects = s.receive(m, now: 1_500)
        #expect(effects.first == .relay(m.json))
        #expect(effects.filter { if case .relay = $0 { true } else { false } }.count == 1)
    }

    @Test("not relayed, and nothing done: 3 (SHOW_ENGAGEMENT goes the other way) and unknown ids",
          arguments: [3, 0, 9, 42, -1, Int64.max] as [Int64])
    func notRelayed(_ bcid: Int64) throws {
        var s = try begin()
        #expect(s.receive(try message(#"{"bcid":\#(bcid)}"#), now: 1_500) == [])
        #expect(s.phase == .loading(deadline: 16_000))
    }

    @Test("7 and 8 are relayed only")
    func sevenEight() throws {
        var s = try begin()
        _ = s.receive(try message(#"{"bcid":5}"#), now: 1_100)
        for text in [#"{"bcid":7,"props":{"a":1}}"#, #"{"bcid":8,"game":"x"}"#] {
            let m = try message(text)
            #expect(s.receive(m, now: 1_200) == [.relay(m.json)])
        }
        #expect(s.phase == .shown)
    }

    @Test("the ready deadline: nothing before it; at it, failed, reported and closed")
    func deadline() throws {
        var s = try begin(now: 1_000)
        #expect(s.tick(now: 1_000) == [])
        #expect(s.tick(now: 15_999) == [])
        _ = s.receive(try message(#"{"bcid":1}"#), now: 2_000)
        #expect(s.deadline == 16_000, "PAGE_READY does not move the deadline")
        let effects = s.tick(now: 16_000)
        #expect(effects.count == 3)
        #expect(effects.first == .close)
        guard effects.count == 3,
              case .reportFailed(let uid, let type, let reason) = effects[1],
              case .finished(let seq, .failed(let why)) = effects[2]
        else {
            Issue.record("unexpected effects \(effects)")
            return
        }
        #expect(uid == "e-1")
        #expect(type == 31)
        #expect(seq == 7)
        #expect(why == reason)
        #expect(reason.contains("READY_TO_BE_SHOWN"))
        #expect(reason.contains("15 s"))
        #expect(s.isDone)
        #expect(s.tick(now: 20_000) == [])
    }

    @Test("a late tick still fails it once")
    func lateTick() throws {
        var s = try begin(now: 0)
        #expect(s.tick(now: 1_000_000).count == 3)
        #expect(s.tick(now: 2_000_000) == [])
    }

    @Test("no deadline once shown")
    func tickAfterShown() throws {
        var s = try begin(now: 1_000)
        _ = s.receive(try message(#"{"bcid":5}"#), now: 2_000)
        #expect(s.tick(now: 16_000) == [])
        #expect(s.tick(now: 1_000_000) == [])
        #expect(s.phase == .shown)
    }

    @Test("a load failure before READY_TO_BE_SHOWN fails and reports it")
    func loadFailedBeforeShown() throws {
        var s = try begin()
        #expect(s.loadFailed("HTTP 502") == [
            .close,
            .reportFailed(engagementUID: "e-1", activityType: 31, reason: "HTTP 502"),
            .finished(seq: 7, outcome: .failed("HTTP 502")),
        ])
        #expect(s.isDone)
    }

    @Test("a load failure once shown dismisses it, with no report")
    func loadFailedAfterShown() throws {
        var s = try begin()
        _ = s.receive(try message(#"{"bcid":5}"#), now: 2_000)
        #expect(s.loadFailed("the web process ended") == [.close, .finished(seq: 7, outcome: .dismissed("the web process ended"))])
        #expect(s.isDone)
    }

    @Test("dismissed: failed before shown, dismissed after")
    func dismissed() throws {
        var s = try begin()
        #expect(s.dismissed("window closed") == [
            .close,
            .reportFailed(engagementUID: "e-1", activityType: 31, reason: "window closed"),
            .finished(seq: 7, outcome: .failed("window closed")),
        ])
        var t = try begin()
        _ = t.receive(try message(#"{"bcid":5}"#), now: 2_000)
        #expect(t.dismissed("window closed") == [.close, .finished(seq: 7, outcome: .dismissed("window closed"))])
    }
}

@Suite("WidgetSession: the gamification widget's conversation with wrapper-gf.html")
struct WidgetSessionTests {
    static let url = "https://libs.smartico.ai/wrapper-gf.html?dp=dp%3Agf&force_mobile=true"

    func opened() -> WidgetSession {
        var w = WidgetSession()
        #expect(w.open(url: Self.url) == [.load(url: Self.url)])
        #expect(w.isOpen)
        #expect(!w.isShown)
        #expect(w.url == Self.url)
        return w
    }

    @Test("closed: nothing happens")
    func closed() throws {
        var w = WidgetSession()
        #expect(!w.isOpen)
        #expect(w.url == nil)
        #expect(w.loaded() == [])
        #expect(w.receive(try message(#"{"bcid":5}"#)) == [])
        #expect(w.receive(try message(#"{"bcid":6}"#)) == [], "no relay from a closed widget")
        #expect(w.close() == [])
        #expect(!w.isShown)
    }

    @Test("loaded shows it once; a later 5 is relayed only")
    func loadedThenReady() throws {
        var w = opened()
        #expect(w.loaded() == [.show])
        #expect(w.isShown)
        #expect(w.loaded() == [])
        let five = try message(#"{"bcid":5}"#)
        #expect(w.receive(five) == [.relay(five.json)])
    }

    @Test("5 shows it once; a later load is nothing")
    func readyThenLoaded() throws {
        var w = opened()
        let five = try message(#"{"bcid":5}"#)
        #expect(w.receive(five) == [.relay(five.json), .show])
        #expect(w.receive(five) == [.relay(five.json)])
        #expect(w.loaded() == [])
    }

    @Test("no injection: 1 is relayed only")
    func pageReady() throws {
        var w = opened()
        let one = try message(#"{"bcid":1}"#)
        #expect(w.receive(one) == [.relay(one.json)])
    }

    @Test("2 closes it, and it can be opened again from scratch")
    func closeMe() throws {
        var w = opened()
        _ = w.loaded()
        let two = try message(#"{"bcid":2}"#)
        #expect(w.receive(two) == [.relay(two.json), .close])
        #expect(!w.isOpen)
        #expect(!w.isShown)
        #expect(w.url == nil)
        #expect(w.receive(two) == [])
        #expect(w.open(url: "https://x.example/") == [.load(url: "https://x.example/")])
        #expect(w.loaded() == [.show], "shown again after reopening")
    }

    @Test("deep links that close it: dp:gf_close, other no-op links, the app's own", arguments: [
        "dp:gf_close", "dp:ok", "dp:close", "dp:cancel", "dp:close_me", "dp:cashier", "dp:deposit&amount=10",
        "dp:inbox", "https://example.com/promo", " dp:GF_CLOSE ",
    ])
    func closingLinks(_ dp: String) throws {
        var w = opened()
        _ = w.loaded()
        var o = JSONObject()
        o.append(key: "bcid", value: .number(4))
        o.append(key: "dp", value: .string(dp))
        let four = try PageMessage(json: o)
        #expect(w.receive(four) == [.relay(four.json), .close])
        #expect(!w.isOpen)
    }

    @Test("gamification links stay in the widget (the relay's deeplink event reloads it)", arguments: [
        "dp:gf", "dp:gf_missions", "dp:gf_saw&id=5&standalone=true", "dp:gf_something_new", "DP:GF_BADGES",
    ])
    func gamificationLinks(_ dp: String) throws {
        var w = opened()
        _ = w.loaded()
        var o = JSONObject()
        o.append(key: "bcid", value: .number(4))
        o.append(key: "dp", value: .string(dp))
        let four = try PageMessage(json: o)
        #expect(w.receive(four) == [.relay(four.json)])
        #expect(w.isOpen)
        #expect(w.isShown)
        #expect(w.url == Self.url)
    }

    @Test("4 without a link is relayed and changes nothing")
    func emptyLink() throws {
        var w = opened()
        let four = try message(#"{"bcid":4,"dp":" "}"#)
        #expect(w.receive(four) == [.relay(four.json)])
        #expect(w.isOpen)
    }

    @Test("relay: 1, 2, 4, 5, 6, 7, 8 but not 3 or unknown ids")
    func relay() throws {
        for bcid in [1, 4, 5, 6, 7, 8] as [Int64] {
            var w = opened()
            let m = try message(#"{"bcid":\#(bcid),"payload":{"k":"v"}}"#)
            #expect(w.receive(m).first == .relay(m.json), "bcid \(bcid)")
        }
        for bcid in [3, 0, 9, 100] as [Int64] {
            var w = opened()
            #expect(w.receive(try message(#"{"bcid":\#(bcid)}"#)) == [], "bcid \(bcid)")
            #expect(w.isOpen)
        }
    }

    @Test("close() from outside (window closed by the player)")
    func closeFromOutside() {
        var w = opened()
        #expect(w.close() == [.close])
        #expect(w.close() == [])
    }

    @Test("open again while open: loads the new URL")
    func reopen() {
        var w = opened()
        _ = w.loaded()
        #expect(w.open(url: "https://libs.smartico.ai/wrapper-gf.html?dp=dp%3Agf_missions") == [.load(url: "https://libs.smartico.ai/wrapper-gf.html?dp=dp%3Agf_missions")])
        #expect(w.url == "https://libs.smartico.ai/wrapper-gf.html?dp=dp%3Agf_missions")
    }
}
