import Testing
import SmarticoProtocol
@testable import SmarticoSim

@Suite struct SessionLifecycleTests {
    @Test func initAnswersWithProductsPayloadAndSettingsPointingAtTheSimulator() throws {
        var h = Harness()
        let c = h.connect()
        let a = h.send(c, Msg.initSession())
        #expect(a.count == 1)
        let m = try #require(a.first?.json)
        let r = try InitSessionResponse(json: m)
        #expect(r.cid == 4 && r.errCode == 0 && m["errMsg"] == .null)
        #expect(r.hasGamification)
        #expect(r.country == "ZZ" && r.city == "Localhost" && r.ip == "127.0.0.1" && r.payload?.str("s") == "sim01")
        #expect(r.fcmSenderID == "000000000000")
        #expect(r.dynamicImageDomain == "http://127.0.0.1:8081/")
        #expect(r.uuid == "c7067eb9-38e7-4b74-8d5e-e17d52c99465")  // echoed
        #expect(r.ts == t0)
        #expect(a[0].at == t0)
        #expect(h.sim.sessions[c]?.state == .ready)
        #expect(h.sim.sessions[c]?.sessionID == "a5719258-f6fc-4335-a4aa-a1e102e035ed")
    }

    @Test func identifyAnswersWithUserURLsAndProps() throws {
        var h = Harness(SimConfig(labelKey: "d78934f3-1d8b-461b-9e8f-287aae43c860-2", brandKey: "c24a284e", httpBaseURL: "http://127.0.0.1:9"))
        let c = h.connect()
        _ = h.send(c, Msg.initSession(label: "d78934f3-1d8b-461b-9e8f-287aae43c860"))
        let a = h.send(c, Msg.identify("test6209240"))
        let r = try IdentifyUserResponse(json: try #require(a.first?.json))
        #expect(r.isSuccess && r.cid == 6)
        #expect(r.publicUsername == "test6209240")
        #expect(r.avatarID == SimServerSession.avatarID(for: "test6209240"))
        #expect(r.avatarID?.allSatisfy(\.isNumber) == true)
        #expect(r.gamificationURL == "http://127.0.0.1:9/wrapper-gf.html?label_key=d78934f3-1d8b-461b-9e8f-287aae43c860-2&brand_key=c24a284e&user_ext_id=test6209240")
        #expect(r.popupURL == "http://127.0.0.1:9/wrapper-popup.html?label_key=d78934f3-1d8b-461b-9e8f-287aae43c860-2&brand_key=c24a284e&user_ext_id=test6209240")
        #expect(r.props?["ach_points_balance"]?.int64Value == 3570)
        #expect(r.isTestAccount == true)
        #expect(r.uuid == "e172c925-272a-4004-81fe-b8177a240af5")
        #expect(h.sim.sessions[c]?.user == "test6209240")
    }

    @Test func urlsUseTheLabelFromInitWhenNoneIsConfiguredAndEncodeTheUser() throws {
        var h = Harness()
        let c = h.connect()
        _ = h.send(c, Msg.initSession())
        let r = try IdentifyUserResponse(json: try #require(h.send(c, Msg.identify("a b&c")).first?.json))
        #expect(r.gamificationURL == "http://127.0.0.1:8081/wrapper-gf.html?label_key=6816ba80-2967-4efb-a60c-694c72b03197&brand_key=c24a284e&user_ext_id=a%20b%26c")
    }

    @Test func wrongLabelKeyIsRefusedWhenOneIsConfigured() throws {
        var h = Harness(SimConfig(labelKey: "d78934f3-1d8b-461b-9e8f-287aae43c860-2"))
        let c = h.connect()
        let m = try #require(h.send(c, Msg.initSession()).first?.json)
        #expect(m.int("cid") == 4 && m.int("errCode") == 100_001)
        #expect(h.sim.sessions[c]?.state == .awaitingInit)
    }

    @Test func everyRequestGetsItsAnswerCid() throws {
        var h = Harness()
        let c = h.ready()
        #expect(h.send(c, Msg.simple(7, ["payload": ["ua_os": "Linux"]])).cids == [11])
        #expect(h.send(c, Msg.simple(9, ["eventType": "core_language_changed", "payload": ["language": "EN"]])).cids == [10])
        #expect(h.send(c, Msg.simple(1003, ["token": "tok", "platform": 7, "pushNotificationUserStatus": 0])).cids == [2003])
        #expect(h.sim.sessions[c]?.pushToken == "tok")
        let levels = try #require(h.send(c, Msg.simple(500)).first?.json)
        #expect(levels.int("cid") == 501 && levels.int("errCode") == 0 && levels["levels"]?.arrayValue?.count == 5)
        let inbox = try #require(h.send(c, Msg.simple(513)).first?.json)
        #expect(inbox.int("cid") == 514 && inbox["log"]?.arrayValue?.count == 5 && inbox.int("unread_count") == 3)
        let tr = try #require(h.send(c, Msg.simple(13)).first?.json)
        #expect(tr.int("cid") == 14 && tr["translations"]?.objectValue?.str("gf_levels") == "Levels")
        let unsupported = try #require(h.send(c, Msg.simple(4242)).first?.json)
        #expect(unsupported.int("cid") == 99999 && unsupported.int("errCode") == SimErrorCode.unsupportedCommand)
        #expect(unsupported.int("request_cid") == 4242)
        #expect(unsupported.str("errMsg")?.contains("4242") == true)
        // Logout answers 12 and makes the connection anonymous.
        #expect(h.send(c, Msg.simple(8)).cids == [12])
        #expect(h.sim.sessions[c]?.user == nil)
    }

    @Test func fireAndForgetMessagesAreRecordedAndNotAnswered() throws {
        var h = Harness()
        let c = h.ready()
        let before = h.sim.received.count
        #expect(h.send(c, Msg.simple(103, ["engagement_uid": "e1", "activityType": 30])).isEmpty)
        #expect(h.send(c, Msg.simple(104, ["engagement_uid": "e1", "activityType": 30, "action": "dp:ok"])).isEmpty)
        #expect(h.send(c, Msg.simple(106, ["engagement_uid": "e1", "activityType": 30])).isEmpty)
        #expect(h.send(c, Msg.simple(711, ["saw_template_id": 5, "pending_message_id": 9])).isEmpty)
        #expect(h.send(c, Msg.simple(77777, ["debug": "x"])).isEmpty)
        let got = h.sim.received.entries.dropFirst(before)
        #expect(got.map { $0.cid } == [103, 104, 106, 711, 77777])
        #expect(got.allSatisfy { $0.client == c && $0.user == "alice" && $0.error == nil })
    }

    @Test func responsesEchoTheUUIDOrNotBySwitch() throws {
        var h = Harness(SimConfig(uuidEcho: .never))
        let c = h.ready()
        let u = "22222222-2222-4222-8222-222222222222"
        let m = try #require(h.send(c, Msg.simple(7, uuid: u)).first?.json)
        #expect(m.str("uuid") != u && UUIDv4.isValidV4(m.str("uuid") ?? ""))
        // The uuid_echo fault turns it back on for this client.
        try h.sim.setFaults({ $0.echoUUID = true }, client: c)
        #expect(h.send(c, Msg.simple(7, uuid: u)).first?.json?.str("uuid") == u)
        // And off again globally with the default config.
        var e = Harness()
        let d = e.ready()
        #expect(e.send(d, Msg.simple(7, uuid: u)).first?.json?.str("uuid") == u)
        try e.sim.setFaults({ $0.echoUUID = false }, client: nil)
        #expect(e.send(d, Msg.simple(7, uuid: u)).first?.json?.str("uuid") != u)
    }

    @Test func saw701GetsAFreshUUIDAsTheRealServerUnlessEchoIsForced() throws {
        // The SDK: SAW_GET_SPINS_RESPONSE arrives with a fresh uuid; others echo the request's.
        let u = "33333333-3333-4333-8333-333333333333"
        var h = Harness()
        let c = h.ready()
        let spins = try #require(h.send(c, Msg.simple(700, uuid: u)).first?.json)
        #expect(spins.int("cid") == 701 && spins.int("errCode") == 0 && spins["templates"]?.arrayValue?.isEmpty == false)
        #expect(spins.str("uuid") != u && UUIDv4.isValidV4(spins.str("uuid") ?? ""))
        #expect(h.send(c, Msg.simple(500, uuid: u)).first?.json?.str("uuid") == u)
        // --echo-uuids: every answer echoes, 701 too.
        var e = Harness(SimConfig(uuidEcho: .always))
        let d = e.ready()
        #expect(e.send(d, Msg.simple(700, uuid: u)).first?.json?.str("uuid") == u)
    }

    @Test func clientPingIsAnsweredWithAPongWithANewUUID() throws {
        var h = Harness()
        let c = h.connect()
        let a = h.send(c, Msg.simple(1, uuid: "33333333-3333-4333-8333-333333333333"))  // even before INIT
        let pong = try #require(a.first?.json)
        #expect(pong.int("cid") == 2 && pong.int("ts") == t0)
        #expect(pong.str("uuid") != "33333333-3333-4333-8333-333333333333")
    }
}

@Suite struct HashTests {
    @Test func md5MatchesKnownValues() {
        #expect(SimHash.md5Hex("") == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(SimHash.md5Hex("abc") == "900150983cd24fb0d6963f7d28e17f72")
        // md5 of lower("test6209240:S3cret:1893456000000"), computed with md5sum.
        #expect(SimHash.make(extUserID: "test6209240", salt: "S3cret", validityMs: 1_893_456_000_000)
            == "05df86990b12009540e9a250f2a55c39:1893456000000")
    }

    @Test func validWrongExpiredAndMissingHashes() throws {
        let salt = "S3cret"
        var h = Harness(SimConfig(hashSalt: salt))
        let valid = SimHash.make(extUserID: "User1", salt: salt, validityMs: t0 + 60_000)
        var c = h.connect()
        _ = h.send(c, Msg.initSession())
        let ok = try #require(h.send(c, Msg.identify("User1", hash: valid)).first?.json)
        #expect(ok.int("errCode") == 0 && h.sim.sessions[c]?.user == "User1")

        func refused(_ hash: String?, now: Int64 = t0) throws -> String {
            c = h.connect()
            _ = h.send(c, Msg.initSession())
            let m = try #require(h.send(c, Msg.identify("User1", hash: hash), now: now).first?.json)
            #expect(m.int("cid") == 6 && m.int("errCode") == 100_000)
            #expect(h.sim.sessions[c]?.user == nil)
            return m.str("errMsg") ?? ""
        }
        // Another user's hash, another salt, a tampered validity.
        #expect(try refused(SimHash.make(extUserID: "User2", salt: salt, validityMs: t0 + 60_000)).contains("does not match"))
        #expect(try refused(SimHash.make(extUserID: "User1", salt: "other", validityMs: t0 + 60_000)).contains("does not match"))
        #expect(try refused(String(valid.dropLast()) + "9").contains("does not match"))
        // Expired: validity_ms < now.
        #expect(try refused(valid, now: t0 + 60_001).contains("expired"))
        #expect(try refused(nil).contains("no hash"))
        #expect(try refused("nonsense").contains("malformed"))
        #expect(try refused("abc:notanumber").contains("malformed"))
        // Exactly at validity it is still valid.
        c = h.connect()
        _ = h.send(c, Msg.initSession())
        #expect(h.send(c, Msg.identify("User1", hash: valid), now: t0 + 60_000).first?.json?.int("errCode") == 0)
    }

    @Test func withoutSaltAnyHashIsAccepted() {
        var h = Harness()
        let c = h.connect()
        _ = h.send(c, Msg.initSession())
        #expect(h.send(c, Msg.identify("u", hash: "whatever")).first?.json?.int("errCode") == 0)
    }
}
