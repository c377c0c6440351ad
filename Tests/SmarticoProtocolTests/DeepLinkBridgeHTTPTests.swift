import Testing
@testable import SmarticoProtocol  // the push registration and report builders (memberwise)
import SmarticoTestSupport

@Suite struct DeepLinkTests {
    @Test(arguments: [
        ("dp:ok", DeepLink.Kind.dummy), ("dp:cancel", .dummy), ("dp:close", .dummy), ("dp:action", .dummy),
        ("dp:close_me", .dummy), ("dp:gf_close", .dummy), (" dp:OK ", .dummy),
        ("dp:gf", .gamification), ("dp:gf_levels", .gamification), ("dp:gf_store", .gamification),
        ("dp:gf_saw&id=5&standalone=true", .gamification), ("dp:gf_missions&id=77", .gamification),
        ("dp:gf_change_nickname", .gamification), ("dp:gf_something_new", .gamification),
        ("dp:cashier", .custom), ("dp:deposit&amount=10", .custom), ("dp:inbox", .custom),
        ("dp:ask_push_permissions", .custom), ("https://example.com/promo?a=1", .custom),
        ("http://example.com", .custom), ("", .custom), ("garbage", .custom), ("dp:", .custom),
        ("dp:gfx", .custom),
    ])
    func classification(_ link: String, _ kind: DeepLink.Kind) {
        #expect(DeepLink(link).kind == kind, "\(link)")
    }

    @Test func parsing() {
        let d = DeepLink("dp:gf_saw&id=5&standalone=true&flag&empty=")
        #expect(d.action == "gf_saw")
        #expect(d.parameters == [.init(name: "id", value: "5"), .init(name: "standalone", value: "true"),
                                 .init(name: "flag", value: nil), .init(name: "empty", value: "")])
        #expect(d[parameter: "id"] == "5" && d[parameter: "flag"] == "" && d[parameter: "nope"] == nil)
        #expect(!d.isWebURL)
        let w = DeepLink("https://example.com/x?a=1&b=2")
        #expect(w.isWebURL && w.action == "" && w.parameters.isEmpty)
        #expect(DeepLink("dp:cashier").gamificationURL(wrapper: "https://w/x") == nil)
    }

    static let gf = "https://libs.smartico.ai/wrapper-gf.html?label_key=d78934f3-1d8b-461b-9e8f-287aae43c860-2&brand_key=c24a284e&user_ext_id=test6209240"

    @Test func wrapperURLs() throws {
        // Existing query: dp is appended, URL-encoded.
        #expect(WrapperURL.withDeepLink(Self.gf, deepLink: "dp:gf_store") == Self.gf + "&dp=dp%3Agf_store")
        #expect(DeepLink("dp:gf_store").gamificationURL(wrapper: Self.gf) == Self.gf + "&dp=dp%3Agf_store")
        // Existing dp parameter is replaced, other parameters kept in order.
        #expect(WrapperURL.withDeepLink("https://w.example/gf.html?dp=dp%3Agf_old&a=1&dp=x#top", deepLink: "dp:gf_levels")
                == "https://w.example/gf.html?a=1&dp=dp%3Agf_levels#top")
        // No query at all.
        #expect(WrapperURL.withDeepLink("https://w.example/gf.html", deepLink: "dp:gf") == "https://w.example/gf.html?dp=dp%3Agf")
        #expect(WrapperURL.withDeepLink("https://w.example/gf.html?", deepLink: "dp:gf") == "https://w.example/gf.html?dp=dp%3Agf")
        // Characters that need encoding.
        #expect(WrapperURL.withDeepLink("https://w/x", deepLink: "dp:gf_section&name=a b/ü?&x=1+2")
                == "https://w/x?dp=dp%3Agf_section%26name%3Da%20b%2F%C3%BC%3F%26x%3D1%2B2")
        // A 707: dp:gf_saw&id=<saw_template_id>&standalone=true.
        let push = SawShowSpinPush(sawTemplateID: 5)
        #expect(push.deepLink == "dp:gf_saw&id=5&standalone=true")
        #expect(WrapperURL.miniGame(Self.gf, push: push) == Self.gf + "&dp=dp%3Agf_saw%26id%3D5%26standalone%3Dtrue")
        // The encoded value decodes back to the deep link.
        let items = WrapperURL.queryItems(String(try #require(WrapperURL.miniGame(Self.gf, push: push)).split(separator: "?")[1]))
        #expect(items.last?.name == "dp" && items.last?.value == "dp:gf_saw&id=5&standalone=true")
        #expect(items.first?.value == "d78934f3-1d8b-461b-9e8f-287aae43c860-2")
    }

    /// Seeded random strings: parsing and URL building never fail, and percent-encoding
    /// round-trips through the query parser.
    @Test func randomDeepLinksAndURLs() throws {
        var rng = SplitMix64(seed: 0xD11)
        let pool = ["dp:", "gf", "_", "&", "=", "?", "#", "%", "%2", "%zz", "+", " ", "a", "Z", "9", "é", "😀", "\u{0}", "/", ":", "http://"]
        for _ in 0..<2000 {
            let s = (0..<Int(rng.next() % 10)).map { _ in pool[Int(rng.next() % UInt64(pool.count))] }.joined()
            let d = DeepLink(s)
            #expect(DeepLink.Kind.allCases.contains(d.kind))
            let base = (0..<Int(rng.next() % 6)).map { _ in pool[Int(rng.next() % UInt64(pool.count))] }.joined()
            let url = WrapperURL.withDeepLink("https://w.example/p" + base, deepLink: s)
            #expect(WrapperURL.percentDecode(WrapperURL.percentEncode(s)) == s)
            let query = String(url.split(separator: "?", maxSplits: 1).last ?? "")
            let noFragment = String(query.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
            #expect(WrapperURL.queryItems(noFragment).last?.value == s, "\(url)")
            _ = try? PublicAPI.Request(query: s)
        }
    }

    @Test func percentCoding() {
        #expect(WrapperURL.percentEncode("AZaz09-._~") == "AZaz09-._~")
        #expect(WrapperURL.percentEncode("{\"a\":1}") == "%7B%22a%22%3A1%7D")
        #expect(WrapperURL.percentDecode("%7b%22a%22%3A1%7D%") == "{\"a\":1}%")
        #expect(WrapperURL.percentDecode("a+b", plusAsSpace: true) == "a b")
        #expect(WrapperURL.percentDecode("a+b") == "a+b")
    }
}

@Suite struct BridgeTests {
    @Test func decodesEveryBridgeMessage() throws {
        #expect(try BridgeMessage.decode(fixture("bridge_1_page_ready.json")) == .pageReady)
        #expect(try BridgeMessage.decode(fixture("bridge_2_close_me.json")) == .closeMe)
        #expect(try BridgeMessage.decode(fixture("bridge_5_ready_to_be_shown.json")) == .readyToBeShown)
        #expect(try BridgeMessage.decode(fixture("bridge_4_execute_deep_link.json")) == .executeDeepLink(DeepLink("dp:gf_levels")))
        guard case .sendToSocket(let s) = try BridgeMessage.decode(fixture("bridge_6_send_to_socket.json")) else {
            Issue.record("not 6"); return
        }
        // Forwarded without bcid, order kept.
        #expect(s.serialized().text == #"{"cid":123,"more":"properties could be here"}"#)
        guard case .sendPublicProps(let p) = try BridgeMessage.decode(fixture("bridge_7_send_public_props.json")) else {
            Issue.record("not 7"); return
        }
        #expect(p == ["ach_points_balance": 55])
        guard case .sendGameOpening(let g) = try BridgeMessage.decode(fixture("bridge_8_send_game_opening.json")) else {
            Issue.record("not 8"); return
        }
        #expect(g.achGameID == 32 && g.extGameID == "56" && g.context == "mission")
        #expect(g.gamePublicMeta?["name"] == "Instant Football")
        #expect(try BridgeMessage.decode(bytes(#"{"bcid":42,"x":1}"#)) == .other(bcid: 42, json: ["x": 1]))
        #expect(BridgeMessage.other(bcid: 42, json: ["x": 1]).serialized().text == #"{"bcid":42,"x":1}"#)
        #expect(BridgeMessage.pageReady.serialized().text == #"{"bcid":1}"#)
        #expect(BridgeMessage.executeDeepLink(DeepLink("dp:cashier")).serialized().text == #"{"bcid":4,"dp":"dp:cashier"}"#)
    }

    @Test func showEngagementIsTheFull110() throws {
        let raw = try fixture("110_client_engagement_event.json")
        let event = try ClientEngagementEvent.decode(raw)
        #expect(event.originalBytes == raw)
        #expect(try ServerMessage.decode(raw).engagementUID == "06f0cd67-ec24-4eeb-bbe9-c3529e8743fa")
        #expect(try ServerMessage.decode(fixture("105_execute_deeplink_event.json")).engagementUID == "9b1c2d3e-4f50-4a61-8b72-93a4b5c6d7e8")
        #expect(try ServerMessage.decode(fixture("001_ping.json")).engagementUID == nil)
        let expected = try JSONValue(parsing: fixture("bridge_3_show_engagement.json"))
        #expect(try JSONValue(parsing: event.showEngagementBytes()) == expected)
        #expect(JSONValue.object(BridgeMessage(showing: event).json) == expected)
        #expect(BridgeMessage(showing: event).json.keys == ["bcid"] + event.json.keys)
        // Decoding bcid 3 gives back the 110's fields.
        guard case .showEngagement(let f) = try BridgeMessage.decode(fixture("bridge_3_show_engagement.json")) else {
            Issue.record("not 3"); return
        }
        #expect(try ClientEngagementEvent(json: f) == event)
    }
}

@Suite struct PublicAPITests {
    @Test func pushTokenPostBody() throws {
        let reg = PushTokenRegistration(apiKey: "xxxxx", brandKey: "xxxxx", extUserID: "xxxxx",
                                        token: "cDWUiFOgR6ygfj6qUExJXv:APA91bGYKl93Qa6bfn_hNNUKnjc0QXhDJV8ESxMD66RMpw_5Phbc0An0JfbH3SJnl-zQIzU90motnpbwV9fYgF02hqEaM80Y5rT30gPR3c4wew3Ex8TPI9A",
                                        platform: .nativeAndroid, appPackageID: "xxx.yyy.zzz")
        #expect(try JSONValue(parsing: reg.postBody()) == JSONValue(parsing: fixture("http_push_token_post.json")))
        #expect(reg.postBody().text.hasPrefix(#"{"app_package_id":"xxx.yyy.zzz","brand_key":"xxxxx","api_key":"xxxxx","ext_user_id":"xxxxx","pushNotificationUserStatus":0,"platform":7,"cid":1003,"#))
    }

    @Test func pushTokenGetQuery() throws {
        let reg = PushTokenRegistration(apiKey: "label-1", brandKey: "b&2", extUserID: 12345, token: "push token should be here",
                                        platform: .nativeIOS, appPackageID: "xxx.yyy.zzz")
        let q = reg.getQuery(uuid: "acb841b7-d6d0-44c9-8a40-682219eaebf6", ts: 1_711_695_978_141)
        #expect(q.hasPrefix("api_key=label-1&brand_key=b%262&version=1.2.25&event=%7B%22uuid%22%3A%22acb841b7-"))
        let parsed = try PublicAPI.Request(query: q)
        #expect(parsed.apiKey == "label-1" && parsed.brandKey == "b&2" && parsed.version == "1.2.25")
        #expect(JSONValue.object(parsed.event) == (try JSONValue(parsing: fixture("http_push_token_get_event.json"))))
        let url = PublicAPI.url(endpoint: "https://papi3.smartico.ai/services/public", apiKey: "k", brandKey: "b", event: ["a": 1])
        #expect(url == "https://papi3.smartico.ai/services/public?api_key=k&brand_key=b&version=1.2.25&event=%7B%22a%22%3A1%7D")
        #expect(throws: ProtocolError.missingField(.http("public API query"), path: "event")) { try PublicAPI.Request(query: "api_key=k") }
    }

    @Test(arguments: PushEngagementReport.Kind.allCases)
    func engagementReports(_ kind: PushEngagementReport.Kind) throws {
        let mid = try #require(PushEngagementReport.parseMessageID("987654321"))
        let r = PushEngagementReport(kind: kind, userExtID: "test6209240", engagementUID: "06f0cd67-ec24-4eeb-bbe9-c3529e8743fa",
                                     messageID: mid, action: kind == .action ? "dp:gf_store" : nil)
        let event = r.event(uuid: "5f0c8a1e-2b7d-4c9a-9e61-3d2f7a8b1c40", ts: 1_711_695_978_141)
        let name = "http_\(kind.rawValue).json"
        #expect(JSONValue.object(event) == (try JSONValue(parsing: fixture(name))))
        #expect(event["payload"]?["activity_type"] == 40)
        #expect(event["payload"]?["message_id"]?.numberValue?.literal == "987654321")
        let q = r.query(apiKey: "k", brandKey: "b", uuid: "u", ts: 1)
        let back = try PublicAPI.Request(query: q)
        let (decoded, uuid, ts) = try PushEngagementReport.fromEvent(back.event)
        #expect(decoded == r && uuid == "u" && ts == 1)
    }

    @Test func messageIDParsing() {
        #expect(PushEngagementReport.parseMessageID("123") == 123)
        #expect(PushEngagementReport.parseMessageID("  42abc") == 42)
        #expect(PushEngagementReport.parseMessageID("-7") == -7)
        #expect(PushEngagementReport.parseMessageID("abc") == nil)
        #expect(PushEngagementReport.parseMessageID("") == nil)
        #expect(PushEngagementReport.parseMessageID("99999999999999999999") == nil)
    }

    @Test func bodyErrors() {
        #expect(throws: ProtocolError.missingField(.http("push token POST body"), path: "token")) {
            try PushTokenRegistration(postJSON: ["api_key": "k", "brand_key": "b", "ext_user_id": "u", "platform": 7])
        }
        #expect(throws: ProtocolError.invalidFieldValue(.http("push engagement report"), path: "event_type",
                                                        reason: "is \"x\", expected one of engagement_failed, engagement_delivered, engagement_impression, engagement_action")) {
            try PushEngagementReport.fromEvent(["uuid": "u", "ts": 1, "event_type": "x"])
        }
    }
}
