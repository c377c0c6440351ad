import Foundation
import Testing
import SmarticoProtocol

/// What each fixture must decode to.
enum Expect: Sendable {
    case server(String)  // ServerMessage case name
    case client(String)  // ClientMessage case name
    case bridge(Int64)
    case http
}

let fixtureTable: [String: Expect] = [
    "001_ping.json": .server("ping"),
    "002_pong.json": .server("pong"),
    "004_init_session_response.json": .server("initSessionResponse"),
    "006_identify_user_response.json": .server("identifyUserResponse"),
    "010_event_response.json": .server("eventResponse"),
    "011_login_response.json": .server("loginResponse"),
    "012_logout_response.json": .server("logoutResponse"),
    "2003_register_push_token_response.json": .server("registerPushTokenResponse"),
    "105_execute_deeplink_event.json": .server("executeDeepLink"),
    "108_public_properties_changed.json": .server("publicPropertiesChanged"),
    "110_client_engagement_event.json": .server("engagement"),
    "707_saw_show_spin_push.json": .server("sawShowSpinPush"),
    "707_saw_show_spin_push_full.json": .server("sawShowSpinPush"),
    "504_reload_achievements.json": .server("other"),
    "003_init_session_request.json": .client("initSession"),
    "005_identify_user_request.json": .client("identifyUser"),
    "007_login.json": .client("login"),
    "008_logout.json": .client("logout"),
    "009_core_language_change.json": .client("event"),
    "103_engagement_impression.json": .client("engagementReport"),
    "104_engagement_action.json": .client("engagementReport"),
    "106_engagement_failed.json": .client("engagementReport"),
    "711_saw_acknowledge_spin_push.json": .client("sawAcknowledgeSpin"),
    "1003_register_push_token_request.json": .client("registerPushToken"),
    "bridge_1_page_ready.json": .bridge(1),
    "bridge_2_close_me.json": .bridge(2),
    "bridge_3_show_engagement.json": .bridge(3),
    "bridge_4_execute_deep_link.json": .bridge(4),
    "bridge_5_ready_to_be_shown.json": .bridge(5),
    "bridge_6_send_to_socket.json": .bridge(6),
    "bridge_7_send_public_props.json": .bridge(7),
    "bridge_8_send_game_opening.json": .bridge(8),
    "http_push_token_post.json": .http,
    "http_push_token_get_event.json": .http,
    "http_engagement_failed.json": .http,
    "http_engagement_delivered.json": .http,
    "http_engagement_impression.json": .http,
    "http_engagement_action.json": .http,
    "http_response.json": .http,
]

func caseName(_ m: ServerMessage) -> String {
    switch m {
    case .ping: "ping"
    case .pong: "pong"
    case .initSessionResponse: "initSessionResponse"
    case .identifyUserResponse: "identifyUserResponse"
    case .eventResponse: "eventResponse"
    case .loginResponse: "loginResponse"
    case .logoutResponse: "logoutResponse"
    case .registerPushTokenResponse: "registerPushTokenResponse"
    case .executeDeepLink: "executeDeepLink"
    case .publicPropertiesChanged: "publicPropertiesChanged"
    case .engagement: "engagement"
    case .sawShowSpinPush: "sawShowSpinPush"
    case .other: "other"
    }
}

func caseName(_ m: ClientMessage) -> String {
    switch m {
    case .ping: "ping"
    case .pong: "pong"
    case .initSession: "initSession"
    case .identifyUser: "identifyUser"
    case .login: "login"
    case .logout: "logout"
    case .event: "event"
    case .engagementReport: "engagementReport"
    case .sawAcknowledgeSpin: "sawAcknowledgeSpin"
    case .registerPushToken: "registerPushToken"
    case .other: "other"
    }
}

@Suite struct FixtureTests {
    @Test func everyFixtureIsInTheTable() throws {
        let names = try allFixtureNames()
        #expect(names.count == fixtureTable.count)
        for n in names { #expect(fixtureTable[n] != nil, "fixture \(n) has no expectation") }
    }

    @Test(arguments: fixtureTable.keys.sorted())
    func decodesToTheRightTypeAndRoundTrips(_ name: String) throws {
        let raw = try fixture(name)
        let original = try JSONValue(parsing: raw)
        let reencoded: [UInt8]
        switch fixtureTable[name]! {
        case .server(let expected):
            let m = try ServerMessage.decode(raw)
            #expect(caseName(m) == expected)
            #expect(m.cid.rawValue == original["cid"]?.int64Value)
            reencoded = m.serialized()
            // The same message, decoded through a buffer, is the same.
            let viaBuffer = try raw.withUnsafeBytes { try ServerMessage.decode($0) }
            #expect(viaBuffer == m)
        case .client(let expected):
            let m = try ClientMessage.decode(raw)
            #expect(caseName(m) == expected)
            reencoded = m.serialized()
        case .bridge(let bcid):
            let m = try BridgeMessage.decode(raw)
            #expect(m.bcid == bcid)
            reencoded = m.serialized()
        case .http:
            let o = try #require(original.objectValue)
            if name == "http_push_token_post.json" {
                reencoded = try PushTokenRegistration(postJSON: o).postBody()
            } else if name == "http_push_token_get_event.json" {
                let (reg, uuid, ts) = try PushTokenRegistration.fromGetEvent(o)
                reencoded = JSONValue.object(reg.getEvent(uuid: uuid, ts: ts)).serialized()
            } else if name.hasPrefix("http_engagement_") {
                let (rep, uuid, ts) = try PushEngagementReport.fromEvent(o)
                reencoded = JSONValue.object(rep.event(uuid: uuid, ts: ts)).serialized()
            } else {
                reencoded = original.serialized()
            }
        }
        #expect(try JSONValue(parsing: reencoded) == original, "\(name) re-encodes to \(reencoded.text)")
    }

    @Test func serverMessagesKeepOrderAndUnknownFields() throws {
        // Compact fixtures re-serialize byte for byte: nothing reordered, nothing dropped.
        for name in ["105_execute_deeplink_event.json", "108_public_properties_changed.json",
                     "504_reload_achievements.json", "707_saw_show_spin_push_full.json", "010_event_response.json"] {
            let raw = try fixture(name)
            let trimmed = Array(raw.prefix { $0 != 0x0A })
            #expect(try ServerMessage.decode(raw).serialized() == trimmed, "\(name)")
        }
    }

    @Test func typedAccessorsOfTheExamples() throws {
        guard case .initSessionResponse(let r4) = try ServerMessage.decode(try fixture("004_init_session_response.json")) else {
            Issue.record("not a 4"); return
        }
        #expect(r4.isSuccess && r4.errMsg == nil && r4.errCode == 0)
        #expect(r4.products == [.gamification, Product(rawValue: 0), Product(rawValue: 5)])
        #expect(r4.hasGamification)
        #expect(r4.country == "BG" && r4.city == "Sofia" && r4.ip == "84.252.11.15")
        #expect(r4.fcmSenderID == "123" && r4.dynamicImageDomain == "https://img.smr.vc/")
        #expect(r4.payload?["sessionId"] == "172f")

        guard case .identifyUserResponse(let r6) = try ServerMessage.decode(try fixture("006_identify_user_response.json")) else {
            Issue.record("not a 6"); return
        }
        #expect(r6.publicUsername == "test6209240" && r6.avatarID == "3902924573654987")
        #expect(r6.gamificationURL?.hasPrefix("https://libs.smartico.ai/wrapper-gf.html?") == true)
        #expect(r6.popupURL?.hasPrefix("https://libs.smartico.ai/wrapper-popup.html?") == true)
        #expect(r6.isTestAccount == false)
        #expect(r6.props?["ach_points_balance"]?.int64Value == 3570)
        #expect(r6.avatarURL(imageDomain: "https://img.smr.vc/") == "https://img.smr.vc/avatar/3902924573654987")
        #expect(r6.avatarURL(imageDomain: "https://img.smr.vc") == "https://img.smr.vc/avatar/3902924573654987")
        let merged = (r6.props ?? [:]).merging(["ach_points_balance": 55, "new_prop": "x"])
        #expect(JSONValue.object(merged).serialized().text
                == #"{"ach_points_ever":3605,"ach_points_balance":55,"ach_level_current":"Level E","core_is_test_account":false,"new_prop":"x"}"#)

        guard case .engagement(let e) = try ServerMessage.decode(try fixture("110_client_engagement_event.json")) else {
            Issue.record("not a 110"); return
        }
        #expect(e.engagementUID == "06f0cd67-ec24-4eeb-bbe9-c3529e8743fa")
        #expect(e.activityType == .popup && e.engagementID == 236_356_783)
        #expect(e.ts == 1_632_913_275_835 && e.uuid == "df4a39fb-0536-4c68-9c32-0c1db7e75588")
        #expect(e.json.keys.count == 14)

        guard case .sawShowSpinPush(let s) = try ServerMessage.decode(try fixture("707_saw_show_spin_push_full.json")) else {
            Issue.record("not a 707"); return
        }
        #expect(s.sawTemplateID == 1234 && s.pendingMessageID == 9_007_199_254_740_993 && s.sawGameTypeID == 3)
        #expect(s.acknowledgement?.json == ["cid": 711, "saw_template_id": 1234, "pending_message_id": 9_007_199_254_740_993])

        guard case .executeDeepLink(let d) = try ServerMessage.decode(try fixture("105_execute_deeplink_event.json")) else {
            Issue.record("not a 105"); return
        }
        #expect(d.dp == "dp:gf_missions&id=77" && d.deepLink.kind == .gamification && d.deepLink[parameter: "id"] == "77")

        guard case .other(let cid, let json) = try ServerMessage.decode(try fixture("504_reload_achievements.json")) else {
            Issue.record("not other"); return
        }
        #expect(cid == .reloadAchievementsEvent && cid.eventName == "reload_achievements" && cid.name == "RELOAD_ACHIEVEMENTS_EVENT")
        #expect(json["ach_ids"]?[1]?.uint64Value == UInt64.max)

        guard case .event(let ev) = try ClientMessage.decode(try fixture("009_core_language_change.json")) else {
            Issue.record("not a 9"); return
        }
        #expect(ev.eventType == "core_language_changed" && ev.language == "EN")

        guard case .login(let login) = try ClientMessage.decode(try fixture("007_login.json")) else {
            Issue.record("not a 7"); return
        }
        #expect(login.payload["ua_tzoffset"]?.int64Value == -120)
    }

    /// The builders produce exactly 002's examples (given the same ts/uuid).
    @Test func buildersReproduceTheExamples() throws {
        func stamp(_ o: JSONObject, _ name: String) throws -> JSONValue {
            let f = try fixtureObject(name)
            let enc = ClientMessageEncoder(clock: { f["ts"]!.int64Value! }, makeUUID: { f["uuid"]!.stringValue! })
            return try JSONValue(parsing: enc.encode(object: o))
        }
        let ua3 = UserAgent(fp: 95_408_084, agent: "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7)", host: "demo.smartico.ai",
                            deviceType: "DESKTOP", tzoffset: -180, os: "Mac OS")
        let m3 = InitSessionRequest(labelKey: "6816ba80-2967-4efb-a60c-694c72b03197", brandKey: nil,
                                    deviceID: "2632f21a-cb84-4ce0-95ca-bf71debfc9c9", page: "https://demo.smartico.ai/",
                                    trackerVersion: "1.1.277", sessionID: "a5719258-f6fc-4335-a4aa-a1e102e035ed", ua: ua3)
        #expect(try stamp(m3.json, "003_init_session_request.json") == JSONValue(parsing: fixture("003_init_session_request.json")))

        let ua5 = UserAgent(fp: -1_461_686_277,
                            agent: "Mozilla/5.0 (iPhone; CPU iPhone OS 13_2_3 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.0.3 Mobile/15E148 Safari/604.1",
                            host: "mysite.com", deviceType: "MOBILE", tzoffset: -180, browser: "Safari", os: "Mac OS")
        let m5 = IdentifyUserRequest(extUserID: "test6209240", hash: nil, ua: ua5, page: "https://mysite.com",
                                     pushNotificationUserStatus: .allowed, token: "fwU4rhKj3Ww:AP...iQ",
                                     trackerVersion: "1.23.546", platform: .safariMobile)
        #expect(try stamp(m5.json, "005_identify_user_request.json") == JSONValue(parsing: fixture("005_identify_user_request.json")))

        let ua7 = UserAgent(fp: -287_665_022,
                            agent: "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/107.0.0.0 Safari/537.36",
                            host: "demo.smartico.ai", deviceType: "DESKTOP", tzoffset: -120, browser: "Chrome", os: "Mac OS")
        #expect(try stamp(Login(ua: ua7).json, "007_login.json") == JSONValue(parsing: fixture("007_login.json")))
        #expect(try stamp(ClientEvent.languageChanged("EN").json, "009_core_language_change.json")
                == JSONValue(parsing: fixture("009_core_language_change.json")))
        let m1003 = RegisterPushTokenRequest(token: "fwU4rhKj3Ww:AP...iQ", platform: .safariMobile, status: .allowed)
        #expect(try stamp(m1003.json, "1003_register_push_token_request.json")
                == JSONValue(parsing: fixture("1003_register_push_token_request.json")))
        let m104 = EngagementReport(kind: .action, engagementUID: "06f0cd67-ec24-4eeb-bbe9-c3529e8743fa", activityType: .popup, action: "dp:cashier")
        #expect(try stamp(m104.json, "104_engagement_action.json") == JSONValue(parsing: fixture("104_engagement_action.json")))
        #expect(try stamp(SawAcknowledgeSpinPush(sawTemplateID: 5, pendingMessageID: 4_411_223_344).json, "711_saw_acknowledge_spin_push.json")
                == JSONValue(parsing: fixture("711_saw_acknowledge_spin_push.json")))
        #expect(try stamp(Ping().json, "001_ping.json") == JSONValue(parsing: fixture("001_ping.json")))

        // Server-side builders (for the simulator).
        let s4 = InitSessionResponse(products: [100, 0, 5],
                                     payload: ["country": "BG", "s": "main03", "city": "Sofia", "ip": "84.252.11.15", "sessionId": "172f"],
                                     settings: ["FCM_SENDER_ID": "123", "DYNAMIC_IMAGE_DOMAIN": "https://img.smr.vc/"])
        #expect(try stamp(s4.json, "004_init_session_response.json") == JSONValue(parsing: fixture("004_init_session_response.json")))
        let f6 = try fixtureObject("006_identify_user_response.json")
        let s6 = IdentifyUserResponse(props: f6["props"]!.objectValue!, publicUsername: "test6209240", avatarID: "3902924573654987",
                                      gamificationURL: f6["native_app_gf_url"]?.stringValue, popupURL: f6["native_app_popup_url"]?.stringValue)
        #expect(try stamp(s6.json, "006_identify_user_response.json") == .object(f6))
        #expect(try stamp(ResponseMessage(cid: .registerPushTokenResponse).json, "2003_register_push_token_response.json")
                == JSONValue(parsing: fixture("2003_register_push_token_response.json")))
        #expect(try stamp(SawShowSpinPush(sawTemplateID: 5).json, "707_saw_show_spin_push.json")
                == JSONValue(parsing: fixture("707_saw_show_spin_push.json")))
    }

    @Test func codableConformanceGoesThroughJSONValue() throws {
        let m = try InitSessionRequest.decode(try fixture("003_init_session_request.json"))
        let data = try JSONEncoder().encode(m)
        let back = try JSONDecoder().decode(InitSessionRequest.self, from: data)
        #expect(back == m)
        // A wrong field type surfaces through Codable with the same explanation.
        let bad = Data(#"{"cid":3,"label_key":5}"#.utf8)
        do {
            _ = try JSONDecoder().decode(InitSessionRequest.self, from: bad)
            Issue.record("accepted a bad 3")
        } catch let DecodingError.dataCorrupted(ctx) {
            #expect(ctx.debugDescription.contains("label_key"))
        }
    }
}
