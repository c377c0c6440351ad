import SmarticoProtocol
import Testing
@testable import SmarticoDaemon

/// What the daemon sends follows the shapes of Smartico's own SDK where 002 is silent (issue 26,
/// docs/protocol.md "Where the daemon follows the SDK"): the envelope of events and requests, INIT's
/// extra members, `app_package_id`, the configured language once per change, the IDENTIFY
/// answer's identity fields in the props, and `dp:action` reported as `client_action`.
@Suite struct SessionWireShapeTests {
    static let fullKey = SessionFixtures.labelKey
    static let shortKey = String(SessionFixtures.labelKey.prefix(36))

    /// Answers the machine's pending outbox loads with `entries` (as the store would).
    static func answerLoads(_ h: inout Harness, with entries: [OutboxEntry] = []) -> [SessionAction] {
        var a: [SessionAction] = []
        while h.unansweredLoads > 0 { a += h.feed(.outboxLoaded(entries)) }
        return a
    }

    static func languageEvents(_ entries: [OutboxEntry]) throws -> [String] {
        try entries.compactMap { e in
            let o = try JSONValue(parsing: e.bytes)
            guard o["eventType"] == .string("core_language_changed") else { return nil }
            return o["payload"]?["language"]?.stringValue
        }
    }

    static func languagePersisted(_ actions: [SessionAction]) -> [(String?, String)] {
        actions.compactMap { if case .persistLanguageSent(let u, let l) = $0 { (u, l) } else { nil } }
    }

    // MARK: envelope, INIT, page

    @Test func initCarriesLabelNameSimulationModeAndANonEmptyPage() throws {
        var h = Harness(SessionFixtures.config())
        h.start()
        let initMessage = try #require(h.connected().sent(cid: 3).first)
        #expect(initMessage["label_key"] == .string(Self.shortKey))
        #expect(initMessage["label_name"] == .string(Self.shortKey))
        #expect(initMessage["simulation_mode"] == .bool(false))
        #expect(initMessage["page"] == .string("https://app.example/"))
        #expect(Array(initMessage.keys.prefix(5)) == ["cid", "label_name", "label_key", "brand_key", "simulation_mode"])

        // Without client.domain (and with an empty client.page) the page is https://app/, never "".
        var cfg = SessionFixtures.config().config
        cfg.client.domain = nil
        cfg.client.page = ""
        var n = Harness(try ResolvedConfig(cfg, environment: [:]))
        n.start()
        let bare = try #require(n.connected().sent(cid: 3).first)
        #expect(bare["page"] == .string("https://app/"))
    }

    @Test func eventsAndRequestsCarryTheSDKEnvelope() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.bringUp()
        _ = Self.answerLoads(&h)
        // `event` op: stored in the envelope.
        h.feed(.request(SessionRequestID(1), .event(eventType: "deposit", payload: ["amount": 5])))
        let event = try #require(h.all.stored.last)
        let e = try JSONValue(parsing: event.bytes).objectValue!
        #expect(Array(e.keys) == ["api_key", "brand_key", "cid", "uuid", "ts", "eventType", "payload"])
        #expect(e["api_key"] == .string(Self.fullKey))
        #expect(e["brand_key"] == .string("brand-1"))
        #expect(e["uuid"] == .string(event.uuid))
        #expect(e["ts"] == .number(h.now))

        // `send`: the caller's uuid and members are kept, the envelope goes in front.
        h.feed(.request(SessionRequestID(2), .send(["cid": 155, "x": 1, "uuid": "caller-uuid"])))
        let sent = try JSONValue(parsing: try #require(h.all.stored.last).bytes).objectValue!
        #expect(Array(sent.keys) == ["api_key", "brand_key", "cid", "uuid", "ts", "x"])
        #expect(sent["uuid"] == .string("caller-uuid"))

        // `request`: written at once, in the envelope.
        let r = h.feed(.request(SessionRequestID(3), .request(message: ["cid": 500], expectCid: nil, timeoutMs: nil)))
        let written = try #require(r.sent(cid: 500).first)
        #expect(Array(written.keys) == ["api_key", "brand_key", "cid", "uuid", "ts"])
        #expect(written["api_key"] == .string(Self.fullKey))

        // Lifecycle, reports and bridge messages are not wrapped (the SDK sends them raw).
        h.feed(.request(SessionRequestID(4), .report(kind: .impression, engagementUID: "e1", activityType: 30, action: nil)))
        let report = try JSONValue(parsing: try #require(h.all.stored.last).bytes)
        #expect(report["api_key"] == nil)
        #expect(h.all.sent(cid: 5).first?["api_key"] == nil)
    }

    @Test func theEnvelopeHasNoBrandKeyWhenNoneIsConfigured() throws {
        var cfg = SessionFixtures.config(user: "u1", hash: "h").config
        cfg.server.brandKey = nil
        var h = Harness(try ResolvedConfig(cfg, environment: [:]))
        h.bringUp()
        _ = Self.answerLoads(&h)
        let r = h.feed(.request(SessionRequestID(1), .request(message: ["cid": 500], expectCid: nil, timeoutMs: nil)))
        let written = try #require(r.sent(cid: 500).first)
        #expect(Array(written.keys) == ["api_key", "cid", "uuid", "ts"])
    }

    // MARK: app_package_id

    @Test func identifyAnd1003CarryTheAppPackageID() throws {
        let push = DaemonConfig.User.Push(token: Secret("tok-1"), platform: 7, status: 0, appPackageID: "com.example.app")
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h", push: push))
        let up = h.bringUp()
        let identify = try #require(up.sent(cid: 5).first)
        #expect(identify["token"] == .string("tok-1"))
        #expect(identify["app_package_id"] == .string("com.example.app"))
        _ = Self.answerLoads(&h)

        h.feed(.request(SessionRequestID(1), .pushToken(token: "tok-2", platform: 6, status: 0, appPackageID: "com.example.ios")))
        let e = try #require(h.all.stored.last)
        #expect(e.cid == 1003)
        let written = try #require(h.feed(.outboxStored(uuid: e.uuid, failure: nil)).sent(cid: 1003).first)
        #expect(written["token"] == .string("tok-2"))
        #expect(written["app_package_id"] == .string("com.example.ios"))

        // Without one given, the configured user.push.app_package_id is used.
        h.feed(.request(SessionRequestID(2), .pushToken(token: "tok-3", platform: nil, status: 0, appPackageID: nil)))
        let third = try JSONValue(parsing: try #require(h.all.stored.last).bytes)
        #expect(third["app_package_id"] == .string("com.example.app"))
    }

    // MARK: client.language once per change

    @Test func theConfiguredLanguageGoesOncePerChangeNotOnReconnect() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h", language: "en"))
        let up = h.bringUp()
        #expect(try Self.languageEvents(up.stored) == ["en"])
        #expect(Self.languagePersisted(up).map(\.0) == ["u1"])
        let entry = try #require(up.stored.last)
        #expect(entry.user == "u1")
        let stored = try JSONValue(parsing: entry.bytes)
        #expect(stored["api_key"] == .string(Self.fullKey))
        // The store takes it, the flush writes it.
        var a = h.feed(.outboxStored(uuid: entry.uuid, failure: nil))
        a += Self.answerLoads(&h, with: [entry])
        #expect(a.sent(cid: 9).map { $0["payload"]?["language"] } == [.string("en")])

        // A reconnect is not a language change.
        var again = h.reconnect()
        again += h.initOK()
        again += h.identifyOK()
        again += Self.answerLoads(&h)
        #expect(try Self.languageEvents(again.stored).isEmpty)
        #expect(Self.languagePersisted(again).isEmpty)
        #expect(again.sent(cid: 9).isEmpty)

        // The language op always goes (latest slot, with its user).
        let op = h.feed(.request(SessionRequestID(1), .language("de")))
        guard case .storeLatest(let slot, let opEntry)? = op.first(where: { if case .storeLatest = $0 { true } else { false } }) else {
            Issue.record("no storeLatest"); return
        }
        #expect(slot == "language")
        #expect(opEntry.user == "u1")
        #expect(h.feed(.outboxStored(uuid: opEntry.uuid, failure: nil)).sent(cid: 9).first?["payload"]?["language"] == .string("de"))

        // SIGHUP with another client.language: sent once; the same one again: nothing.
        let reload = h.feed(.reload(SessionFixtures.config(user: "u1", hash: "h", language: "fr")))
        #expect(try Self.languageEvents(reload.stored) == ["fr"])
        #expect(Self.languagePersisted(reload).map(\.1) == ["fr"])
        let same = h.feed(.reload(SessionFixtures.config(user: "u1", hash: "h", language: "fr", keepalive: 30)))
        #expect(try Self.languageEvents(same.stored).isEmpty)
    }

    @Test func aRestartWithTheLanguageRememberedSendsNothingAndAnotherUserGetsItOnce() throws {
        let remembered = SessionSnapshot(deviceID: "d", fingerprint: 1, languagesSent: ["u1": "en"])
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h", language: "en"))
        let up = h.bringUp(remembered)
        #expect(try Self.languageEvents(up.stored).isEmpty)
        _ = Self.answerLoads(&h)

        // Another user has not had it: once for them.
        h.feed(.request(SessionRequestID(1), .identify(extUserID: "u2", hash: "h2")))
        _ = Self.answerLoads(&h)
        var a = h.feed(.closed(h.conn!, code: 1000, reason: "", clean: true))
        a += h.connected()
        a += h.initOK()
        a += h.identifyOK()
        #expect(try Self.languageEvents(a.stored) == ["en"])
        #expect(Self.languagePersisted(a).map(\.0) == ["u2"])
    }

    // MARK: IDENTIFY answer

    @Test func theIdentifyAnswerIsMirroredIntoThePropsAndMerged() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        let stored = StoredUser(extUserID: "u1", hash: "h", props: Array(#"{"kept":1,"ach_points_balance":3}"#.utf8))
        h.start(SessionSnapshot(deviceID: "d", fingerprint: 1, user: stored))
        h.connected()
        h.initOK()
        var answer = IdentifyUserResponse(props: ["ach_points_balance": 10], publicUsername: "Player One", avatarID: "av-1",
                                          gamificationURL: "https://wrap.example/gf", popupURL: nil).json
        answer["user_id"] = 123_456
        answer["avatar_real_id"] = "real-9"
        let a = h.server(answer)
        let props = h.machine.props
        #expect(props["kept"] == .number(1))
        #expect(props["ach_points_balance"] == .number(10))
        #expect(props["user_id"] == .number(123_456))
        #expect(props["avatar_id"] == .string("av-1"))
        #expect(props["avatar_real_id"] == .string("real-9"))
        #expect(props["public_username"] == .string("Player One"))
        #expect(props["native_app_gf_url"] == .string("https://wrap.example/gf"))
        let identified = try #require(a.events("identified").first)
        #expect(identified.data["user_id"] == .number(123_456))
        #expect(identified.data["props"]?["kept"] == .number(1))
        #expect(h.machine.status()["user"]?["user_id"] == .number(123_456))
    }

    // MARK: deep links

    @Test func dpActionIsReportedAsClientActionOncePerEngagement() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.bringUp()
        _ = Self.answerLoads(&h)
        let push = ExecuteDeepLinkEvent(engagementUID: "eng-1", dp: "dp:action&action=opened%20shop").json
        let a = h.server(push)
        let link = try #require(a.events("deeplink").first)
        #expect(link.data["kind"] == .string("dummy"))
        #expect(link.data["client_action"] == .string("opened shop"))
        let report = try #require(a.stored.first)
        #expect(report.cid == 9)
        #expect(report.user == "u1")
        let o = try JSONValue(parsing: report.bytes).objectValue!
        #expect(Array(o.keys) == ["api_key", "brand_key", "cid", "uuid", "ts", "eventType", "payload"])
        #expect(o["eventType"] == .string("client_action"))
        #expect(o["payload"] == .object(["action": .string("opened shop")]))

        // The server sends it again after the next IDENTIFY: reported once.
        #expect(h.server(push).stored.isEmpty)

        // From the bridge (bcid 4) too; other dummy links report nothing.
        let bridge = h.feed(.request(SessionRequestID(1), .bridge(["bcid": 4, "dp": "dp:action&action=spin"])))
        #expect(try JSONValue(parsing: try #require(bridge.stored.first).bytes)["payload"]?["action"] == .string("spin"))
        let ok = h.feed(.request(SessionRequestID(2), .bridge(["bcid": 4, "dp": "dp:ok"])))
        #expect(ok.stored.isEmpty)
        #expect(ok.events("deeplink").first?.data["client_action"] == .null)
    }
}
