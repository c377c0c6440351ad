import Foundation
import SmarticoProtocol
import Testing
@testable import SmarticoSim

/// The simulator's own reading of client messages (`SimValidator`), quirks mode and PONG withholding.
@Suite struct ValidationAndQuirksTests {
    @Test func initWithTheSuffixedLabelKeyIsRefusedAsAnUnknownLabel() throws {
        var h = Harness()
        let c = h.connect()
        let a = h.send(c, Msg.initSession(label: "6816ba80-2967-4efb-a60c-694c72b03197-2"))
        let m = try #require(a.first?.json)
        #expect(m.int("cid") == 4 && m.int("errCode") == SimErrorCode.wrongCustomer)
        #expect(m.str("errMsg")?.contains("36-character") == true)
        let e = try #require(h.sim.received.entries.last)
        #expect(e.error?.contains("label_key") == true)
        #expect(h.sim.sessions[c]?.state == .awaitingInit)
        // The 36 characters are accepted, and with --label-key the suffixed key names that label.
        var k = Harness(SimConfig(labelKey: "6816ba80-2967-4efb-a60c-694c72b03197-2"))
        let d = k.connect()
        #expect(k.send(d, Msg.initSession()).first?.json?.int("errCode") == 0)
    }

    @Test func mistypedAndMissingFieldsAreRecordedAsErrorsAndAnsweredWithAnErrCode() throws {
        var h = Harness()
        let c = h.ready()
        let cases: [(JSONObject, Int64?, String)] = [
            (Msg.simple(9, ["eventType": 7, "payload": [:]]), 10, #"field "eventType" must be a string, found number 7"#),
            (Msg.simple(9, ["eventType": "x", "payload": "p"]), 10, #"field "payload" must be an object"#),
            (Msg.simple(9, ["eventType": "core_language_changed"]), 10, #"field "payload" is missing"#),
            (Msg.simple(9, ["eventType": "core_language_changed", "payload": ["language": 5]]), 10, #""payload.language" must be a string"#),
            (Msg.simple(1003, ["token": "t", "pushNotificationUserStatus": "0"]), 2003, #""pushNotificationUserStatus" must be an integer"#),
            (Msg.simple(1003, ["token": "t"]), 2003, #""pushNotificationUserStatus" is missing"#),
            (Msg.simple(104, ["engagement_uid": 12]), nil, #""engagement_uid" must be a string"#),
            (Msg.simple(711, ["saw_template_id": 5]), nil, #""pending_message_id" is missing"#),
            (["cid": 9, "eventType": "x", "payload": [:], "ts": "now", "uuid": "u"], 10, #""ts" must be an integer"#),
        ]
        for (message, answerCID, fragment) in cases {
            let a = h.send(c, message)
            let e = try #require(h.sim.received.entries.last)
            #expect(e.error?.contains(fragment) == true, "\(e.error ?? "no error") for \(message)")
            if let answerCID {
                let m = try #require(a.first?.json)
                #expect(m.int("cid") == answerCID && m.int("errCode") == SimErrorCode.invalidMessage, "\(m)")
            } else {
                #expect(a.isEmpty)
            }
        }
        // A ua that is present must carry 002's starred members.
        let d = h.connect()
        var bad = Msg.initSession()
        bad["ua"] = ["device_type": "NATIVE_PHONE", "tzoffset": "-180", "os": "Linux"]
        #expect(h.send(d, bad).first?.json?.int("errCode") == SimErrorCode.invalidMessage)
        #expect(h.sim.received.entries.last?.error?.contains(#""ua.tzoffset" must be an integer"#) == true)
    }

    @Test func deviationsAServerLetsPassAreWarningsAndTheMessageIsServed() throws {
        var h = Harness()
        let c = h.connect()
        var initMessage = Msg.initSession()
        initMessage["page"] = ""
        initMessage["label_name"] = "6816ba80-2967-4efb-a60c-694c72b03197"
        initMessage["simulation_mode"] = false
        initMessage["unknown_field"] = ["anything": true]
        #expect(h.send(c, initMessage).first?.json?.int("errCode") == 0)
        let e = try #require(h.sim.received.entries.last)
        #expect(e.error == nil)
        #expect(e.warnings.count == 1 && e.warnings[0].contains("\"page\" is empty"))
        #expect((e.json["warnings"]?.arrayValue?.count ?? 0) == 1)
        // An event without the SDK's envelope is served, with a warning; with it, none.
        _ = h.send(c, Msg.identify("alice"))
        #expect(h.send(c, Msg.simple(9, ["eventType": "x", "payload": [:]])).first?.json?.int("errCode") == 0)
        #expect(h.sim.received.entries.last?.warnings.first?.contains("api_key") == true)
        let enveloped: JSONObject = ["api_key": "6816ba80-2967-4efb-a60c-694c72b03197-2", "brand_key": "b", "cid": 9,
                                     "uuid": "44444444-4444-4444-8444-444444444444", "ts": 5, "eventType": "x", "payload": [:]]
        #expect(h.send(c, enveloped).first?.json?.int("errCode") == 0)
        #expect(h.sim.received.entries.last?.warnings == [] && h.sim.received.entries.last?.error == nil)
    }

    @Test func withheldPongsLeaveClientPingsUnansweredAndAreCounted() throws {
        var h = Harness(SimConfig(withholdPong: true))
        let c = h.ready()
        #expect(h.send(c, Msg.simple(1)).isEmpty)
        #expect(h.send(c, Msg.simple(1)).isEmpty)
        let summary = try #require(h.sim.sessions[c]?.summary(h.sim.context))
        #expect(summary.int("pings_received") == 2 && summary.int("pongs_withheld") == 2)
        // Server PINGs still go out, and other answers too.
        #expect(h.sim.tick(now: t0 + 30_000).cids == [1])
        #expect(h.send(c, Msg.simple(7)).cids == [11])
        // The fault turns it off for one client.
        try h.sim.setFaults({ $0.withholdPong = false }, client: c)
        #expect(h.send(c, Msg.simple(1)).cids == [2])
    }

    @Test func quirksModeSendsTheShapesTheRealServerMayUse() throws {
        var h = Harness(SimConfig(quirks: true))
        let c = h.connect()
        let u = "55555555-5555-4555-8555-555555555555"
        let initAnswer = try #require(h.send(c, Msg.initSession(uuid: u)).first?.json)
        #expect(initAnswer.int("errCode") == 0 && initAnswer.str("uuid") != u)  // fresh uuids
        #expect(initAnswer["settings"]?["FCM_SENDER_ID"]?.int64Value != nil)
        #expect(initAnswer["payload"]?["city"] == nil && initAnswer.str("server_node") != nil)
        let identify = try #require(h.send(c, Msg.identify("alice")).first?.json)
        #expect(identify["avatar_id"]?.int64Value != nil && identify["user_id"]?.int64Value != nil)
        #expect(identify["props"]?["ach_points_balance"]?.stringValue == "3570")
        #expect(identify["native_app_popup_url"] == nil && identify.str("native_app_gf_url") != nil)
        #expect(h.send(c, Msg.simple(1)).isEmpty)  // PONG withheld
        let login = try #require(h.send(c, Msg.simple(7, ["payload": [:]])).first?.json)
        #expect(login["errCode"] == .string("0") && login["errMsg"] == nil)  // errCode as a string

        func push(_ kind: SimPushKind) throws -> JSONObject {
            try #require(h.sim.emit(kind: kind, to: .client(c), now: t0).deliveries.first?.message)
        }
        let engagement = try push(.engagement)
        #expect(engagement["activityType"] == nil && engagement.int("activity_type") == 30)
        #expect(engagement["engagement_id"]?.stringValue != nil && engagement["root_audience_id"] == nil)
        #expect(engagement.str("engagement_uid") != nil)
        #expect(engagement["cid"] == .string("110"))  // cid as a string: read as 110 by the SDK
        let spin = try push(.showSpin)
        #expect(spin["saw_template_id"] == nil && spin["pending_message_id"]?.stringValue != nil)
        #expect(try push(.props)["props"]?["ach_points_balance"]?.stringValue != nil)
        #expect(try push(.spinsCount)["spin_count"]?.stringValue != nil)
        #expect(try push(.jackpotWin)["winning_amount"]?.stringValue != nil)
        #expect(try push(.deepLink)["payload"]?["target"] != nil)
        // Without quirks, 002's shapes.
        var plain = Harness()
        let d = plain.ready()
        let e = try #require(plain.sim.emit(kind: .engagement, to: .client(d), now: t0).deliveries.first?.message)
        #expect(e.int("activityType") == 30 && e["activity_type"] == nil && e["server_node"] == nil)
    }
}
