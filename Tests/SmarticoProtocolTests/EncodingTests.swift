import Foundation
import Synchronization
import Testing
import SmarticoProtocol
import SmarticoTestSupport

@Suite struct EncodingTests {
    @Test func tzoffsetFollowsTheBrowserConvention() throws {
        let ms: Int64 = 1_632_832_357_000
        #expect(UserAgent.tzoffset(in: .fixed(secondsEastOfUTC: 3 * 3600), atEpochMilliseconds: ms) == -180)
        #expect(UserAgent.tzoffset(in: .utc, atEpochMilliseconds: ms) == 0)
        #expect(UserAgent.tzoffset(in: .fixed(secondsEastOfUTC: -5 * 3600), atEpochMilliseconds: ms) == 300)
        #expect(UserAgent.tzoffset(in: .fixed(secondsEastOfUTC: 5 * 3600 + 1800), atEpochMilliseconds: ms) == -330)
        // Daylight saving is taken at the given instant (the zone's rule gets the instant in seconds).
        let berlin = try #require(TimeZone(identifier: "Europe/Berlin"))
        let zone = UTCOffset { berlin.secondsFromGMT(for: Date(timeIntervalSince1970: Double($0))) }
        #expect(UserAgent.tzoffset(in: zone, atEpochMilliseconds: 1_719_792_000_000) == -120)  // July
        #expect(UserAgent.tzoffset(in: zone, atEpochMilliseconds: 1_704_067_200_000) == -60)   // January
        // Milliseconds before the epoch round down to the second that contains them.
        let seen = SecondsSeen()
        _ = UserAgent.tzoffset(in: UTCOffset { seen.record($0); return 0 }, atEpochMilliseconds: -1)
        _ = UserAgent.tzoffset(in: UTCOffset { seen.record($0); return 0 }, atEpochMilliseconds: 1_999)
        #expect(seen.values == [-1, 1])
    }

    /// The C library's local zone agrees with Foundation's idea of the current zone, in winter
    /// and in summer (whatever zone this machine is in; the daemon's own TZ handling is run
    /// end to end by DaemonCommandLineTests).
    @Test func theLocalZoneMatchesFoundation() {
        for seconds: Int64 in [1_704_067_200, 1_719_792_000, 0, 2_000_000_000] {
            let expected = TimeZone.current.secondsFromGMT(for: Date(timeIntervalSince1970: Double(seconds)))
            #expect(UTCOffset.local.secondsEastOfUTC(atEpochSeconds: seconds) == expected, "at \(seconds)")
        }
    }

    @Test func systemMillisecondsIsTheWallClock() {
        let before = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
        let now = ClientMessageEncoder.systemMilliseconds()
        let after = Int64((Date().timeIntervalSince1970 * 1000).rounded(.up))
        #expect(before <= now && now <= after)
    }

    @Test func uuidsAreLowercaseV4() {
        var seen = Set<String>()
        for _ in 0..<200 {
            let u = UUIDv4.random().string
            #expect(UUIDv4.isValidV4(u), "\(u)")
            #expect(u == u.lowercased())
            seen.insert(u)
        }
        #expect(seen.count == 200)
        var rng = SplitMix64(seed: 7)
        var rng2 = SplitMix64(seed: 7)
        #expect(UUIDv4.random(using: &rng) == UUIDv4.random(using: &rng2))
        #expect(UUIDv4(randomBytes: [UInt8](repeating: 0xFF, count: 16)).string == "ffffffff-ffff-4fff-bfff-ffffffffffff")
        #expect(UUIDv4(randomBytes: [UInt8](repeating: 0, count: 16)).string == "00000000-0000-4000-8000-000000000000")
        #expect(!UUIDv4.isValidV4("C7067EB9-38E7-4B74-8D5E-E17D52C99465"))
        #expect(!UUIDv4.isValidV4("c7067eb9-38e7-1b74-8d5e-e17d52c99465"))
    }

    @Test func encoderFillsTsAndUUIDOnlyWhenAbsent() throws {
        let enc = ClientMessageEncoder(clock: { 1_700_000_000_123 }, makeUUID: { "0a0b0c0d-0000-4000-8000-000000000001" })
        let pong = try JSONValue(parsing: enc.encode(Pong()))
        #expect(pong == ["cid": 2, "ts": 1_700_000_000_123, "uuid": "0a0b0c0d-0000-4000-8000-000000000001"])
        #expect(enc.encode(Pong()).text == #"{"cid":2,"ts":1700000000123,"uuid":"0a0b0c0d-0000-4000-8000-000000000001"}"#)
        // A message that already has ts/uuid (a resend) keeps them.
        let stored: JSONObject = ["cid": 9, "eventType": "x", "ts": 1, "uuid": "keep"]
        #expect(enc.encode(object: stored).text == #"{"cid":9,"eventType":"x","ts":1,"uuid":"keep"}"#)
        #expect(enc.stamped(stored, overwrite: true)["uuid"] == "0a0b0c0d-0000-4000-8000-000000000001")
        // null ts/uuid count as absent.
        #expect(enc.stamped(["cid": 1, "ts": nil])["ts"] == 1_700_000_000_123)
        // The default encoder uses the system clock and random v4 uuids.
        let now = ClientMessageEncoder.systemMilliseconds()
        let d = try JSONValue(parsing: ClientMessageEncoder().encode(Ping()))
        #expect(abs((d["ts"]?.int64Value ?? 0) - now) < 60_000)
        #expect(UUIDv4.isValidV4(d["uuid"]?.stringValue ?? ""))
        // A PONG answering a PING has its own uuid.
        let ping = try Ping.decode(fixture("001_ping.json"))
        let answer = try JSONValue(parsing: ClientMessageEncoder().encode(Pong()))
        #expect(answer["uuid"]?.stringValue != ping.uuid)
    }

    @Test func prepareReportsWhatWasStamped() {
        let enc = ClientMessageEncoder(clock: { 42 }, makeUUID: { "fresh" })
        let p = enc.prepare(Logout())
        #expect(p.bytes.text == #"{"cid":8,"ts":42,"uuid":"fresh"}"#)
        #expect(p.cid == 8 && p.uuid == "fresh" && p.ts == 42)
        let kept = enc.prepare(object: ["cid": 500, "uuid": "mine"])
        #expect(kept.uuid == "mine" && kept.ts == 42 && kept.cid == 500)
    }

    @Test func clientMessagesEncodeThroughTheEnum() throws {
        let enc = ClientMessageEncoder(clock: { 5 }, makeUUID: { "u" })
        let m = ClientMessage.engagementReport(EngagementReport(kind: .failed, engagementUID: "e", activityType: .push))
        #expect(enc.encode(m).text == #"{"cid":106,"engagement_uid":"e","activityType":40,"ts":5,"uuid":"u"}"#)
        let back = try ClientMessage.decode(enc.encode(m))
        guard case .engagementReport(let r) = back else { Issue.record("\(back)"); return }
        #expect(r.kind == .failed && r.engagementUID == "e" && r.activityType == .push && r.ts == 5)
    }

    @Test func userAgentLoginPayloadAndExtras() throws {
        let ua = UserAgent(fp: 1, deviceType: "NATIVE_PHONE", tzoffset: -180, os: "Linux", extra: ["app": "smarticod"])
        #expect(JSONValue.object(ua.json).serialized().text == #"{"fp":1,"device_type":"NATIVE_PHONE","tzoffset":-180,"os":"Linux","app":"smarticod"}"#)
        #expect(JSONValue.object(ua.loginPayload).serialized().text == #"{"ua_fp":1,"ua_device_type":"NATIVE_PHONE","ua_tzoffset":-180,"ua_os":"Linux","app":"smarticod"}"#)
        #expect(try UserAgent(json: ua.json) == ua)
    }

    @Test func classIDTable() {
        #expect(ClassID(504).eventName == "reload_achievements")
        #expect(ClassID(706).eventName == "spins_count" && ClassID(708).eventName == "prize_drop_win")
        #expect(ClassID(808).eventName == "jp_win" && ClassID(107).eventName == "execute_js")
        #expect(ClassID(99999).name == "UNSUPPORTED_COMMAND")
        #expect(ClassID(110).name == "CLIENT_ENGAGEMENT_EVENT" && ClassID(110).eventName == nil)
        #expect(ClassID(4242).name == nil && ClassID(4242).description == "4242")
        #expect(ClassID.known.count == 31)
        #expect(ClassID.initSessionRequest.responseClassID == .initSessionResponse)
        #expect(ClassID.identifyUserRequest.responseClassID == .identifyUserResponse)
        #expect(ClassID.login.responseClassID == .loginResponse && ClassID.logout.responseClassID == .logoutResponse)
        #expect(ClassID.event.responseClassID == .eventResponse)
        #expect(ClassID.registerPushTokenRequest.responseClassID == .registerPushTokenResponse)
        #expect(ClassID(509).responseClassID == ClassID(510))
        #expect(ClassID.ping.responseClassID == nil && ClassID.engagementAction.responseClassID == nil)
        #expect(ClassID(Int64.max).responseClassID == nil)
        #expect(PushClientPlatform.allCases.map(\.rawValue) == Array(0...11))
        #expect(PushNotificationUserStatus.allCases.map(\.rawValue) == Array(0...4))
        #expect(PushClientPlatform.nativeIOS.rawValue == 6 && PushClientPlatform.nativeAndroid.rawValue == 7)
    }

    @Test func largeEngagementDecodesAndBridgesExactly() throws {
        let html = String(repeating: "<div class=\\\"x\\\">é€</div>\\n", count: 2000)  // ~50 KB of escaped JSON text
        let text = #"{"engagement_uid":"u-1","activityType":30,"engagement_id":236356783,"template_html":"\#(html)","params":{"a":[1,2]},"cid":110,"ts":1632913275835,"uuid":"x"}"#
        let raw = bytes(text)
        #expect(raw.count > 50_000)
        guard case .engagement(let e) = try ServerMessage.decode(raw) else { Issue.record("not 110"); return }
        #expect(e.originalBytes == raw)
        #expect(e.engagementUID == "u-1")
        let show = e.showEngagementBytes()
        #expect(show.text == #"{"bcid":3,"# + String(text.dropFirst()))
        let parsed = try BridgeMessage.decode(show)
        guard case .showEngagement(let fields) = parsed else { Issue.record("not bcid 3"); return }
        #expect(fields == e.json)
        // Without original bytes, the serialized form is equivalent.
        let rebuilt = try ClientEngagementEvent(json: e.json)
        #expect(try JSONValue(parsing: rebuilt.showEngagementBytes()) == JSONValue(parsing: show))
        #expect(e.showEngagement.json.keys.first == "bcid")
    }

    // MARK: the shapes of Smartico's SDK (docs/protocol.md, "Where the daemon follows the SDK")

    @Test func theRequestEnvelopeComesFirstAndKeepsTheMessagesOwnUUIDAndTs() throws {
        let event = ClientEvent(eventType: "deposit", payload: ["amount": 5]).json
        let wrapped = RequestEnvelope.wrap(event, apiKey: "key-2", brandKey: "b1", uuid: "fresh", ts: 7)
        #expect(String(decoding: wrapped.serialized(), as: UTF8.self)
                == #"{"api_key":"key-2","brand_key":"b1","cid":9,"uuid":"fresh","ts":7,"eventType":"deposit","payload":{"amount":5}}"#)
        // A message with its own uuid and ts keeps them (a resend is the same message); no brand: no brand_key.
        let own = RequestEnvelope.wrap(["cid": 500, "uuid": "mine", "ts": 3, "x": true], apiKey: "key-2", brandKey: nil,
                                       uuid: "unused", ts: 9)
        #expect(String(decoding: own.serialized(), as: UTF8.self) == #"{"api_key":"key-2","cid":500,"uuid":"mine","ts":3,"x":true}"#)
        // Still a valid cid 9 for a reader of 002.
        #expect(try ClientEvent(json: wrapped).eventType == "deposit")
    }

    @Test func initIdentifyAndPushTokenCarryTheSDKsExtraMembers() throws {
        let m3 = InitSessionRequest(labelKey: "k", brandKey: nil, deviceID: "d", page: "https://app/", trackerVersion: "1.0.0",
                                    sessionID: "s", ua: nil, labelName: "k", simulationMode: false)
        #expect(String(decoding: m3.serialized(), as: UTF8.self)
                == #"{"cid":3,"label_name":"k","label_key":"k","brand_key":null,"simulation_mode":false,"device_id":"d","page":"https://app/","tracker_version":"1.0.0","session_id":"s"}"#)
        _ = try InitSessionRequest(json: m3.json)

        let m5 = IdentifyUserRequest(extUserID: "u", hash: "h", ua: nil, pushNotificationUserStatus: .allowed, token: "t",
                                     platform: .nativeAndroid, appPackageID: "com.example.app", payload: nil)
        #expect(m5.appPackageID == "com.example.app")
        #expect(String(decoding: m5.serialized(), as: UTF8.self)
                == #"{"cid":5,"ext_user_id":"u","hash":"h","pushNotificationUserStatus":0,"token":"t","platform":7,"app_package_id":"com.example.app"}"#)

        let m1003 = RegisterPushTokenRequest(token: "t", platform: .nativeIOS, status: .allowed, appPackageID: "com.example.ios")
        #expect(m1003.appPackageID == "com.example.ios")
        #expect(String(decoding: m1003.serialized(), as: UTF8.self)
                == #"{"cid":1003,"pushNotificationUserStatus":0,"token":"t","platform":6,"app_package_id":"com.example.ios"}"#)
        // Without one, the member is absent.
        #expect(RegisterPushTokenRequest(token: "t", platform: nil, status: .allowed).json["app_package_id"] == nil)
    }

    @Test func dpActionNamesTheClientActionTheSDKReports() {
        #expect(DeepLink("dp:action&action=opened_shop").clientAction == "opened_shop")
        #expect(DeepLink("dp:ACTION&Action=opened+the%20shop").clientAction == "opened the shop")
        #expect(DeepLink("dp:action&action").clientAction == "true")
        #expect(DeepLink("dp:action").clientAction == nil)
        // As the SDK's parseDp: the last duplicate wins, an empty value is "", the name is decoded.
        #expect(DeepLink("dp:action&action=first&action=last").clientAction == "last")
        #expect(DeepLink("dp:action&action=").clientAction == "")
        #expect(DeepLink("dp:action&%61ction=decoded").clientAction == "decoded")
        #expect(DeepLink("dp:action").kind == .dummy)
        #expect(DeepLink("dp:gf_store&action=x").clientAction == nil)
        #expect(ClientEvent.clientAction("x").json == ["cid": 9, "eventType": "client_action", "payload": ["action": "x"]])
    }
}

/// Collects the seconds a `UTCOffset` rule was asked about (the rule is `@Sendable`).
private final class SecondsSeen: Sendable {
    private let seen = Mutex<[Int64]>([])
    func record(_ s: Int64) { seen.withLock { $0.append(s) } }
    var values: [Int64] { seen.withLock { $0 } }
}
