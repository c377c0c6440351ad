import SmarticoProtocol

/// The simulator's own reading of a client message, written from 002 and Smartico's SDK and
/// independent of the daemon's message types (so a daemon guess that 002 does not back shows up
/// here instead of being agreed with). It is looser than a schema, as a server is: unknown fields
/// are allowed and only the fields the server needs are checked.
///
/// - A *refusal* (a required field missing, a field of the wrong JSON type, a label key that is
///   not 36 characters) is recorded as the entry's `error`, and answered with an `errCode` where
///   the cid has an answer.
/// - A *warning* (a field 002 or the SDK has that the message lacks, e.g. `page` empty, an event
///   without the SDK's `api_key`) is recorded in the entry's `warnings`; the message is served.
public struct SimReading: Sendable, Equatable {
    /// Why the server refuses the message (nil: accepted).
    public var refusal: String?
    /// The `errCode` of the refusal's answer.
    public var errCode: Int64 = SimErrorCode.invalidMessage
    /// Deviations a server lets pass.
    public var warnings: [String] = []

    public var isAccepted: Bool { refusal == nil }
}

public enum SimValidator {
    /// The length of a label key as INIT carries it (the `-N` environment suffix is not sent).
    public static let labelKeyLength = 36

    /// Cids the SDK sends with its request envelope (`api_key`, `brand_key`, `cid`, `uuid`, `ts`
    /// and the payload): events and data requests. Lifecycle messages, 1003 and the bridge's
    /// reports (103/104/106, 711) are sent without it.
    static func takesEnvelope(_ cid: Int64) -> Bool {
        switch cid {
        case 1, 2, 3, 5, 7, 8, 103, 104, 106, 711, 1003, 77777: false
        default: true
        }
    }

    /// Reads `o` (a JSON object with an integer `cid`).
    public static func read(_ o: JSONObject, cid: Int64) -> SimReading {
        var r = Reader(o: o, cid: cid)
        r.common()
        switch cid {
        case 1, 2, 8: break
        case 3: r.initSession()
        case 5: r.identify()
        case 7:
            r.optional("payload", .object)
        case 9: r.event()
        case 1003:
            r.required("token", .string)
            r.optional("platform", .integer)
            r.required("pushNotificationUserStatus", .integer)
            r.optional("app_package_id", .string)
        case 103, 104, 106:
            r.required("engagement_uid", .string)
            r.optional("activityType", .integer)
        case 711:
            r.required("saw_template_id", .integer)
            r.required("pending_message_id", .integer)
        default: break
        }
        if takesEnvelope(cid) { r.envelope() }
        return r.reading
    }

    /// The POST body of the public API's push token registration (002 §4): `api_key`,
    /// `brand_key`, `token` strings, `ext_user_id` a string or a number, `platform` integer;
    /// `pushNotificationUserStatus` integer and `app_package_id` string optional.
    public static func readPushTokenPost(_ o: JSONObject) -> SimReading {
        var r = Reader(o: o, cid: 1003, tagOverride: "push token POST body")
        r.required("api_key", .string)
        r.required("brand_key", .string)
        if let user = o["ext_user_id"], !user.isNull {
            if user.stringValue == nil, user.numberValue == nil {
                r.refuse("field \"ext_user_id\" must be a string or a number, found \(describe(user))")
            }
        } else {
            r.refuse("field \"ext_user_id\" is missing (a string or a number is required)")
        }
        r.required("token", .string)
        r.required("platform", .integer)
        r.optional("pushNotificationUserStatus", .integer)
        r.optional("app_package_id", .string)
        if let cid = o["cid"], !cid.isNull, cid.int64Value != 1003 {
            r.refuse("field \"cid\" must be 1003, found \(describe(cid))")
        }
        return r.reading
    }

    enum Kind: String {
        case string, integer, number, boolean, object, array

        func matches(_ v: JSONValue) -> Bool {
            switch self {
            case .string: v.stringValue != nil
            case .integer: v.int64Value != nil
            case .number: v.numberValue != nil
            case .boolean: v.boolValue != nil
            case .object: v.objectValue != nil
            case .array: v.arrayValue != nil
            }
        }

        var article: String { self == .integer || self == .object || self == .array ? "an \(rawValue)" : "a \(rawValue)" }
    }

    static func describe(_ v: JSONValue) -> String {
        switch v {
        case .null: "null"
        case .bool(let b): "boolean \(b)"
        case .number(let n): "number \(n.description.truncatedUTF8(40))"
        case .string(let s): "string \"\(s.truncatedUTF8(40))\""
        case .array(let a): "array of \(a.count)"
        case .object: "object"
        }
    }

    struct Reader {
        let o: JSONObject
        let cid: Int64
        var tagOverride: String? = nil
        var reading = SimReading()

        var tag: String {
            if let tagOverride { return tagOverride }
            let name = ClassID(cid).name.map { " (\($0))" } ?? ""
            return "cid \(cid)\(name)"
        }

        mutating func refuse(_ text: String, code: Int64 = SimErrorCode.invalidMessage) {
            guard reading.refusal == nil else { return }
            reading.refusal = "\(tag): \(text)"
            reading.errCode = code
        }

        mutating func warn(_ text: String) { reading.warnings.append("\(tag): \(text)") }

        /// A field that must be present (not null) and of `kind`.
        @discardableResult
        mutating func required(_ path: String, _ kind: Kind, in object: JSONObject? = nil, prefix: String = "") -> JSONValue? {
            let v = (object ?? o)[path]
            guard let v, !v.isNull else {
                refuse("field \"\(prefix)\(path)\" is missing (\(kind.article) is required)")
                return nil
            }
            guard kind.matches(v) else {
                refuse("field \"\(prefix)\(path)\" must be \(kind.article), found \(SimValidator.describe(v))")
                return nil
            }
            return v
        }

        /// A field that may be absent or null, else of `kind`.
        @discardableResult
        mutating func optional(_ path: String, _ kind: Kind, in object: JSONObject? = nil, prefix: String = "") -> JSONValue? {
            guard let v = (object ?? o)[path], !v.isNull else { return nil }
            guard kind.matches(v) else {
                refuse("field \"\(prefix)\(path)\" must be \(kind.article) or null, found \(SimValidator.describe(v))")
                return nil
            }
            return v
        }

        /// 002: every request carries `ts` (ms) and `uuid`.
        mutating func common() {
            if optional("uuid", .string) == nil, o["uuid"] == nil || o["uuid"]?.isNull == true {
                warn("no \"uuid\" (002: every request carries ts and uuid)")
            }
            if optional("ts", .integer) == nil, o["ts"] == nil || o["ts"]?.isNull == true {
                warn("no \"ts\" (002: every request carries ts and uuid)")
            }
        }

        /// 002 §1.1, the notes and the SDK's INIT.
        mutating func initSession() {
            if let key = required("label_key", .string)?.stringValue, key.count != SimValidator.labelKeyLength {
                refuse("label_key must be the 36-character key (without the environment suffix such as \"-2\"); got \(key.count) characters",
                       code: SimErrorCode.wrongCustomer)
            }
            let sid = o["session_id"]
            if sid?.stringValue?.isEmpty != false {
                let found = sid.map { $0.stringValue == "" ? "an empty string" : SimValidator.describe($0) } ?? "nothing"
                refuse("field \"session_id\" must be a non-empty string, found \(found)", code: SimErrorCode.emptySessionID)
            }
            optional("brand_key", .string)
            required("device_id", .string)
            if let page = required("page", .string)?.stringValue, page.isEmpty {
                warn("\"page\" is empty (002 marks it required; the SDK sends https://<domain or \"app\">/)")
            }
            required("tracker_version", .string)
            optional("label_name", .string)
            optional("simulation_mode", .boolean)
            userAgent()
        }

        /// `ua` (002 §1.1): optional, but when present its starred members are required.
        mutating func userAgent() {
            guard let ua = optional("ua", .object)?.objectValue else { return }
            required("device_type", .string, in: ua, prefix: "ua.")
            required("tzoffset", .integer, in: ua, prefix: "ua.")
            required("os", .string, in: ua, prefix: "ua.")
            if let fp = ua["fp"], !fp.isNull, fp.int64Value == nil, fp.stringValue == nil {
                refuse("field \"ua.fp\" must be an integer (or a string), found \(SimValidator.describe(fp))")
            }
            optional("agent", .string, in: ua, prefix: "ua.")
            optional("host", .string, in: ua, prefix: "ua.")
        }

        /// 002 §1.5.
        mutating func identify() {
            if let user = required("ext_user_id", .string)?.stringValue, user.isEmpty {
                refuse("field \"ext_user_id\" is an empty string")
            }
            optional("hash", .string)
            optional("token", .string)
            optional("platform", .integer)
            optional("pushNotificationUserStatus", .integer)
            optional("page", .string)
            optional("tracker_version", .string)
            optional("payload", .object)
            optional("app_package_id", .string)
            userAgent()
        }

        /// EVENT (cid 9), 002 §1.11 and the SDK's `{eventType, payload}`.
        mutating func event() {
            let type = required("eventType", .string)?.stringValue
            if type?.isEmpty == true { refuse("field \"eventType\" is an empty string") }
            // 002 does not mark `payload` required (the SDK always sends one); the language event's
            // `payload.language` is.
            let payload = type == "core_language_changed"
                ? required("payload", .object)?.objectValue : optional("payload", .object)?.objectValue
            if type == "core_language_changed", let payload,
               let language = required("language", .string, in: payload, prefix: "payload."), language.stringValue?.isEmpty == true {
                refuse("field \"payload.language\" is an empty string")
            }
        }

        /// The SDK's envelope of events and requests: `api_key` (the full label key) and
        /// `brand_key`. Missing is a warning (002's examples do without); mistyped is refused.
        mutating func envelope() {
            if optional("api_key", .string) == nil, o["api_key"] == nil || o["api_key"]?.isNull == true {
                warn("no \"api_key\" (the SDK sends events and requests with api_key, the full label key)")
            }
            optional("brand_key", .string)
        }
    }
}
