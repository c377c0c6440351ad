/// The public HTTP API (`https://papiN.smartico.ai/services/public`), 002 §4 and §5.
public enum PublicAPI {
    /// The `version` query parameter Smartico's clients send.
    public static let version = "1.2.25"
    /// Path of the endpoint on the `papi…` host.
    public static let path = "/services/public"

    /// `api_key=…&brand_key=…&version=1.2.25&event=<url-encoded compact JSON>` (no `brand_key` when nil,
    /// as Smartico's SDK sends it for a label without brands).
    public static func query(apiKey: String, brandKey: String?, event: JSONObject, version: String = PublicAPI.version) -> String {
        "api_key=\(WrapperURL.percentEncode(apiKey))" + (brandKey.map { "&brand_key=\(WrapperURL.percentEncode($0))" } ?? "")
            + "&version=\(WrapperURL.percentEncode(version))&event="
            + WrapperURL.percentEncode(String(decoding: event.serialized(), as: UTF8.self))
    }

    /// `endpoint` (e.g. `https://papi3.smartico.ai/services/public`) + `?` + `query(…)`.
    public static func url(endpoint: String, apiKey: String, brandKey: String?, event: JSONObject) -> String {
        endpoint + "?" + query(apiKey: apiKey, brandKey: brandKey, event: event)
    }

    /// A parsed GET request of the public API (the simulator's side).
    public struct Request: Sendable, Equatable {
        public var apiKey: String?
        public var brandKey: String?
        public var version: String?
        public var event: JSONObject

        /// Parses a query string; the `event` parameter must be a JSON object.
        public init(query: String) throws(ProtocolError) {
            var event: String?
            for (name, value) in WrapperURL.queryItems(query) {
                switch name {
                case "api_key": apiKey = value
                case "brand_key": brandKey = value
                case "version": version = value
                case "event": event = value
                default: break
                }
            }
            guard let event else { throw .missingField(.http("public API query"), path: "event") }
            let bytes = Array(event.utf8)
            self.event = try parseObject(bytes, options: JSONParseOptions())
        }
    }
}

/// Push token registration over HTTP (002 §4): the POST body and the GET `event`. Made with the
/// memberwise initializer (the module and its tests) or read back (the simulator's side, below).
public struct PushTokenRegistration: Sendable, Equatable {
    /// The label key (`api_key`).
    public var apiKey: String
    public var brandKey: String
    /// The user's id in the operator's platform (a string or an integer).
    public var extUserID: JSONValue
    public var token: String
    public var platform: PushClientPlatform
    /// Bundle id (iOS) or package name (Android); needed when projects differ per platform.
    public var appPackageID: String?
    /// Always `allowed` (0) in 002's examples.
    public var status = PushNotificationUserStatus.allowed

    /// The POST body object.
    public var postJSON: JSONObject {
        var o = JSONObject()
        o.set("app_package_id", appPackageID.json)
        o["brand_key"] = .string(brandKey)
        o["api_key"] = .string(apiKey)
        o["ext_user_id"] = extUserID
        o["pushNotificationUserStatus"] = .number(status.rawValue)
        o["platform"] = .number(platform.rawValue)
        o["cid"] = .number(ClassID.registerPushTokenRequest.rawValue)
        o["token"] = .string(token)
        return o
    }

    /// The POST body bytes (`Content-Type: application/json`).
    public func postBody() -> [UInt8] { postJSON.serialized() }

    /// The GET `event` object.
    public func getEvent(uuid: String, ts: Int64) -> JSONObject {
        var payload = JSONObject()
        payload.set("app_package_id", appPackageID.json)
        payload["token"] = .string(token)
        payload["platform"] = .number(platform.rawValue)
        payload["pushNotificationUserStatus"] = .number(status.rawValue)
        return ["uuid": .string(uuid), "ts": .number(ts), "event_type": "register_push_token",
                "user_ext_id": extUserID, "payload": .object(payload)]
    }

    /// The GET query string (without `?`).
    public func getQuery(uuid: String, ts: Int64) -> String {
        PublicAPI.query(apiKey: apiKey, brandKey: brandKey, event: getEvent(uuid: uuid, ts: ts))
    }
}

// An extension, so that the memberwise initializer stays.
extension PushTokenRegistration {
    /// Reads a POST body (the simulator's side).
    public init(postJSON o: JSONObject) throws(ProtocolError) {
        let r = FieldReader(o, .http("push token POST body"))
        apiKey = try r.string("api_key", required: true) ?? ""
        brandKey = try r.string("brand_key", required: true) ?? ""
        guard let user = o["ext_user_id"], user.stringValue != nil || user.numberValue != nil else {
            if let v = o["ext_user_id"] { throw .wrongFieldType(r.tag, path: "ext_user_id", expected: "a string or a number", found: describeForError(v)) }
            throw .missingField(r.tag, path: "ext_user_id")
        }
        extUserID = user
        token = try r.string("token", required: true) ?? ""
        let p = try r.integer("platform", required: true, range: PushClientPlatform.range, rangeName: "a PushClientPlatform") ?? 0
        platform = PushClientPlatform(rawValue: p) ?? .other
        let s = try r.integer("pushNotificationUserStatus", range: PushNotificationUserStatus.range, rangeName: "a PushNotificationUserStatus") ?? 0
        status = PushNotificationUserStatus(rawValue: s) ?? .allowed
        appPackageID = try r.string("app_package_id")
        if let cid = try r.integer("cid"), cid != ClassID.registerPushTokenRequest.rawValue {
            throw .invalidFieldValue(r.tag, path: "cid", reason: "is \(cid), expected 1003")
        }
    }

    /// Reads a GET `event` object (the simulator's side); returns the registration and its `uuid`/`ts`.
    public static func fromGetEvent(_ o: JSONObject) throws(ProtocolError) -> (registration: PushTokenRegistration, uuid: String, ts: Int64) {
        let tag = MessageTag.http("push token GET event")
        let r = FieldReader(o, tag)
        let uuid = try r.string("uuid", required: true) ?? ""
        let ts = try r.integer("ts", required: true) ?? 0
        try r.string("event_type", required: true)
        guard let user = o["ext_user_id"] ?? o["user_ext_id"] else { throw .missingField(tag, path: "user_ext_id") }
        guard let p = try r.object("payload", required: true) else { throw .missingField(tag, path: "payload") }
        let token = try p.string("token", required: true) ?? ""
        let platform = try p.integer("platform", required: true, range: PushClientPlatform.range, rangeName: "a PushClientPlatform") ?? 0
        let status = try p.integer("pushNotificationUserStatus", range: PushNotificationUserStatus.range, rangeName: "a PushNotificationUserStatus") ?? 0
        let reg = PushTokenRegistration(apiKey: "", brandKey: "", extUserID: user, token: token,
                                        platform: PushClientPlatform(rawValue: platform) ?? .other,
                                        appPackageID: try p.string("app_package_id"),
                                        status: PushNotificationUserStatus(rawValue: status) ?? .allowed)
        return (reg, uuid, ts)
    }
}

/// Push engagement reports over HTTP GET (002 §5): failed, delivered, impression, action. Made with
/// the memberwise initializer (the module and its tests) or read back (``fromEvent(_:)``).
public struct PushEngagementReport: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case failed = "engagement_failed"
        case delivered = "engagement_delivered"
        case impression = "engagement_impression"
        case action = "engagement_action"
    }

    /// `activity_type` of push notifications.
    public static let pushActivityType: Int64 = 40

    public var kind: Kind
    /// `user_ext_id` from the push message data.
    public var userExtID: JSONValue
    public var engagementUID: String
    /// `message_id` from the push data, as an integer (see `parseMessageID`).
    public var messageID: Int64
    /// The action of an `engagement_action` report.
    public var action: String?

    /// JavaScript `parseInt` of a push's `message_id` string: optional whitespace and sign,
    /// then leading decimal digits; `nil` when there are none or the value overflows.
    public static func parseMessageID(_ s: String) -> Int64? {
        var u = Substring(s).utf8.drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        var negative = false
        if let f = u.first, f == UInt8(ascii: "-") || f == UInt8(ascii: "+") { negative = f == UInt8(ascii: "-"); u = u.dropFirst() }
        var v: Int64 = 0
        var any = false
        for b in u {
            guard b >= 0x30, b <= 0x39 else { break }
            let (m, o1) = v.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(Int64(b - 0x30))
            if o1 || o2 { return nil }
            v = a
            any = true
        }
        return any ? (negative ? -v : v) : nil
    }

    /// The `event` object.
    public func event(uuid: String, ts: Int64) -> JSONObject {
        var payload: JSONObject = ["engagement_uid": .string(engagementUID), "message_id": .number(messageID),
                                   "activity_type": .number(Self.pushActivityType)]
        if kind == .action { payload["action"] = action.jsonOrNull }
        return ["uuid": .string(uuid), "ts": .number(ts), "event_type": .string(kind.rawValue),
                "user_ext_id": userExtID, "payload": .object(payload)]
    }

    /// The GET query string (without `?`).
    public func query(apiKey: String, brandKey: String, uuid: String, ts: Int64) -> String {
        PublicAPI.query(apiKey: apiKey, brandKey: brandKey, event: event(uuid: uuid, ts: ts))
    }

    /// Reads an `event` object (the simulator's side); returns the report and its `uuid`/`ts`.
    public static func fromEvent(_ o: JSONObject) throws(ProtocolError) -> (report: PushEngagementReport, uuid: String, ts: Int64) {
        let tag = MessageTag.http("push engagement report")
        let r = FieldReader(o, tag)
        let uuid = try r.string("uuid", required: true) ?? ""
        let ts = try r.integer("ts", required: true) ?? 0
        let type = try r.string("event_type", required: true) ?? ""
        guard let kind = Kind(rawValue: type) else {
            throw .invalidFieldValue(tag, path: "event_type", reason: "is \"\(type)\", expected one of engagement_failed, engagement_delivered, engagement_impression, engagement_action")
        }
        guard let user = o["user_ext_id"] else { throw .missingField(tag, path: "user_ext_id") }
        guard let p = try r.object("payload", required: true) else { throw .missingField(tag, path: "payload") }
        let uid = try p.string("engagement_uid", required: true) ?? ""
        let mid = try p.integer("message_id", required: true) ?? 0
        try p.integer("activity_type")
        let action = try p.string("action")
        return (PushEngagementReport(kind: kind, userExtID: user, engagementUID: uid, messageID: mid, action: action), uuid, ts)
    }
}
