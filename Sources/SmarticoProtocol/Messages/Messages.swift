// The messages of 002 §1 and the notes. Each type keeps its whole JSON object; the typed
// properties read from it. Builders put fields in the order of 002's examples and append
// `extra` members last.

/// PING (cid 1): sent by the server, and by the client after 29 s of silence. Only its `cid` is
/// checked (it is answered whatever else it carries).
public struct Ping: SmarticoMessage {
    public static let classIDs: [ClassID] = [.ping]
    public let json: JSONObject
    public init(json: JSONObject) throws(ProtocolError) { try checkServerClassID(json, Self.classIDs); self.json = json }
    public init() { json = Self.base(.ping) }
}

/// PONG (cid 2): the answer to a PING, with its own new uuid.
public struct Pong: SmarticoMessage {
    public static let classIDs: [ClassID] = [.pong]
    public let json: JSONObject
    public init(json: JSONObject) throws(ProtocolError) { try checkServerClassID(json, Self.classIDs); self.json = json }
    public init() { json = Self.base(.pong) }
}

/// INIT_SESSION_REQUEST (cid 3), 002 §1.1.
public struct InitSessionRequest: SmarticoMessage {
    public static let classIDs: [ClassID] = [.initSessionRequest]
    public let json: JSONObject

    public init(json: JSONObject) throws(ProtocolError) {
        let r = try Self.reader(json)
        try r.string("label_key", required: true)
        try r.string("brand_key")
        try r.string("device_id", required: true)
        try r.string("page", required: true)
        try r.string("tracker_version", required: true)
        // An empty session_id makes the backend block the client IP (notes).
        try r.string("session_id", required: true, nonEmpty: true)
        if let ua = try r.object("ua") { _ = try UserAgent(json: ua.object, tag: r.tag, pathPrefix: "ua.") }
        self.json = json
    }

    /// - Parameters:
    ///   - sessionID: must not be empty (the backend blocks the IP for an empty one).
    ///   - labelName: `label_name`, which Smartico's own SDK sends (the label key without its
    ///     suffix) and 002 does not list; nil leaves it out.
    ///   - simulationMode: `simulation_mode`, sent `false` by the SDK; nil leaves it out.
    public init(labelKey: String, brandKey: String?, deviceID: String, page: String, trackerVersion: String,
                sessionID: String, ua: UserAgent?, labelName: String? = nil, simulationMode: Bool? = nil,
                extra: JSONObject = [:]) {
        var o = Self.base(.initSessionRequest)
        o.set("label_name", labelName.json)
        o["label_key"] = .string(labelKey)
        o["brand_key"] = brandKey.jsonOrNull
        o.set("simulation_mode", simulationMode.map(JSONValue.bool))
        o["device_id"] = .string(deviceID)
        o.set("ua", ua.map { .object($0.json) })
        o["page"] = .string(page)
        o["tracker_version"] = .string(trackerVersion)
        o["session_id"] = .string(sessionID)
        o.merge(extra)
        json = o
    }

    public var labelKey: String { json.string("label_key") ?? "" }
    public var brandKey: String? { json.string("brand_key") }
    public var deviceID: String { json.string("device_id") ?? "" }
    public var page: String { json.string("page") ?? "" }
    public var trackerVersion: String { json.string("tracker_version") ?? "" }
    public var sessionID: String { json.string("session_id") ?? "" }
    public var ua: UserAgent? { json.object("ua").flatMap { try? UserAgent(json: $0) } }
}

/// Common reading of `errCode` / `errMsg` in server responses, as the SDK reads them
/// (ServerFields.swift): `errCode` an integer or a string holding one.
public protocol ServerResponse: SmarticoMessage {}

extension ServerResponse {
    /// `errCode`; absent (or null) is treated as 0 by `isSuccess`.
    public var errCode: Int64? { json.lenientInt64("errCode") }
    /// `errMsg` (a number is read as its text).
    public var errMsg: String? { json.lenientString("errMsg") }
    /// Why `errCode` cannot be read (present, but neither an integer nor a string holding one):
    /// the answer is neither a success nor a failure. nil when it is readable or absent.
    public var errCodeProblem: String? {
        guard let v = json["errCode"], !v.isNull, v.lenientInt64 == nil else { return nil }
        return "\"errCode\" is \(describeForError(v)), not an integer"
    }
    /// `errCode` is 0 or absent.
    public var isSuccess: Bool { errCodeProblem == nil && (errCode ?? 0) == 0 }
    /// Codes from 100000 up are fatal (notes: invalid hash, wrong customer id, ...).
    public var isFatalError: Bool { (errCode ?? 0) >= 100_000 }
}

/// INIT_SESSION_RESPONSE (cid 4), 002 §1.2.
public struct InitSessionResponse: ServerResponse {
    public static let classIDs: [ClassID] = [.initSessionResponse]
    public let json: JSONObject

    /// Only `cid` is checked: the fields are read loosely (ServerFields.swift).
    public init(json: JSONObject) throws(ProtocolError) {
        try checkServerClassID(json, Self.classIDs)
        self.json = json
    }

    public init(errCode: Int64 = 0, errMsg: String? = nil, products: [Product] = [.gamification],
                payload: JSONObject? = nil, settings: JSONObject? = nil, extra: JSONObject = [:]) {
        var o = Self.base(.initSessionResponse)
        o["errCode"] = .number(errCode)
        o["errMsg"] = errMsg.jsonOrNull
        o["products"] = .array(products.map { .number($0.rawValue) })
        o.set("payload", payload.map(JSONValue.object))
        o.set("settings", settings.map(JSONValue.object))
        o.merge(extra)
        json = o
    }

    /// Products enabled for the label, unknown values kept; elements that are not integers (or
    /// strings holding one) are skipped, and `products` of another type reads as none.
    public var products: [Product] {
        (json["products"]?.arrayValue ?? []).compactMap { $0.lenientInt64.map(Product.init(rawValue:)) }
    }
    public var hasGamification: Bool { products.contains(.gamification) }
    /// `payload` when it is an object (as received).
    public var payload: JSONObject? { json.object("payload") }
    /// `settings` when it is an object (as received).
    public var settings: JSONObject? { json.object("settings") }
    public var country: String? { payload?.lenientString("country") }
    public var city: String? { payload?.lenientString("city") }
    public var ip: String? { payload?.lenientString("ip") }
    /// `settings.FCM_SENDER_ID` (a numeric sender id is read as its text).
    public var fcmSenderID: String? { settings?.lenientString("FCM_SENDER_ID") }
    /// `settings.DYNAMIC_IMAGE_DOMAIN` when it is a string.
    public var dynamicImageDomain: String? { settings?.string("DYNAMIC_IMAGE_DOMAIN") }
}

/// IDENTIFY_USER_REQUEST (cid 5), 002 §1.5.
public struct IdentifyUserRequest: SmarticoMessage {
    public static let classIDs: [ClassID] = [.identifyUserRequest]
    public let json: JSONObject

    public init(json: JSONObject) throws(ProtocolError) {
        let r = try Self.reader(json)
        try r.string("ext_user_id", required: true)
        try r.string("hash")
        if let ua = try r.object("ua") { _ = try UserAgent(json: ua.object, tag: r.tag, pathPrefix: "ua.") }
        try r.string("page")
        try r.integer("pushNotificationUserStatus", range: PushNotificationUserStatus.range, rangeName: "a PushNotificationUserStatus")
        try r.string("token")
        try r.string("tracker_version")
        try r.integer("platform", range: PushClientPlatform.range, rangeName: "a PushClientPlatform")
        try r.object("payload")
        self.json = json
    }

    public init(extUserID: String, hash: String?, ua: UserAgent?, page: String? = nil,
                pushNotificationUserStatus: PushNotificationUserStatus? = nil, token: String? = nil,
                trackerVersion: String? = nil, platform: PushClientPlatform? = nil,
                appPackageID: String? = nil, payload: JSONObject? = [:], extra: JSONObject = [:]) {
        var o = Self.base(.identifyUserRequest)
        o["ext_user_id"] = .string(extUserID)
        o["hash"] = hash.jsonOrNull
        o.set("ua", ua.map { .object($0.json) })
        o.set("page", page.json)
        o.set("pushNotificationUserStatus", pushNotificationUserStatus.map { .number($0.rawValue) })
        o.set("token", token.json)
        o.set("tracker_version", trackerVersion.json)
        o.set("platform", platform.map { .number($0.rawValue) })
        // The app's bundle id / package name: labels with one Firebase project per app need it (002 §4).
        o.set("app_package_id", appPackageID.json)
        o.set("payload", payload.map(JSONValue.object))
        o.merge(extra)
        json = o
    }

    public var extUserID: String { json.string("ext_user_id") ?? "" }
    public var hash: String? { json.string("hash") }
    public var ua: UserAgent? { json.object("ua").flatMap { try? UserAgent(json: $0) } }
    public var page: String? { json.string("page") }
    public var token: String? { json.string("token") }
    public var trackerVersion: String? { json.string("tracker_version") }
    public var platform: PushClientPlatform? { json.int64("platform").flatMap(PushClientPlatform.init(rawValue:)) }
    public var pushNotificationUserStatus: PushNotificationUserStatus? {
        json.int64("pushNotificationUserStatus").flatMap(PushNotificationUserStatus.init(rawValue:))
    }
    public var appPackageID: String? { json.string("app_package_id") }
}

/// IDENTIFY_USER_RESPONSE (cid 6), 002 §1.6.
public struct IdentifyUserResponse: ServerResponse {
    public static let classIDs: [ClassID] = [.identifyUserResponse]
    public let json: JSONObject

    /// Only `cid` is checked: the fields are read loosely (ServerFields.swift).
    public init(json: JSONObject) throws(ProtocolError) {
        try checkServerClassID(json, Self.classIDs)
        self.json = json
    }

    public init(props: JSONObject = [:], publicUsername: String?, avatarID: String?, gamificationURL: String?,
                popupURL: String?, errCode: Int64 = 0, errMsg: String? = nil, extra: JSONObject = [:]) {
        var o = JSONObject()
        o["props"] = .object(props)
        o.set("public_username", publicUsername.json)
        o.set("avatar_id", avatarID.json)
        o.set("native_app_gf_url", gamificationURL.json)
        o.set("native_app_popup_url", popupURL.json)
        o["errCode"] = .number(errCode)
        o["errMsg"] = errMsg.jsonOrNull
        o["cid"] = .number(ClassID.identifyUserResponse.rawValue)
        o.merge(extra)
        json = o
    }

    /// Public user properties (`core_is_test_account`, `ach_points_balance`, ...), when an object.
    public var props: JSONObject? { json.object("props") }
    /// `public_username` (a number is read as its text).
    public var publicUsername: String? { json.lenientString("public_username") }
    /// `avatar_id` (a numeric id is read as its decimal text, as the SDK does).
    public var avatarID: String? { json.lenientString("avatar_id") }
    /// `native_app_gf_url`: the gamification wrapper page, when a string.
    public var gamificationURL: String? { json.string("native_app_gf_url") }
    /// `native_app_popup_url`: the engagement (popup) wrapper page, when a string.
    public var popupURL: String? { json.string("native_app_popup_url") }
    /// `core_is_test_account` from `props`.
    public var isTestAccount: Bool? { props?["core_is_test_account"]?.boolValue }

    /// The avatar URL: `<DYNAMIC_IMAGE_DOMAIN>/avatar/<avatar_id>` (002 §1.6), with exactly one
    /// `/` between domain and path; `nil` without an `avatar_id`.
    public func avatarURL(imageDomain: String) -> String? {
        guard let id = avatarID, let segment = WrapperURL.pathSegment(id) else { return nil }
        var domain = Substring(imageDomain)
        while domain.last == "/" { domain = domain.dropLast() }
        return "\(domain)/avatar/\(segment)"
    }
}

/// LOGIN (cid 7), 002 §1.7: the start of a logical session; `payload` holds the `ua_` members.
public struct Login: SmarticoMessage {
    public static let classIDs: [ClassID] = [.login]
    public let json: JSONObject

    public init(json: JSONObject) throws(ProtocolError) {
        let r = try Self.reader(json)
        if let p = try r.object("payload") {
            _ = try UserAgent(json: p.object, tag: r.tag, pathPrefix: "payload.", keyPrefix: "ua_")
        }
        self.json = json
    }

    public init(ua: UserAgent, extra: JSONObject = [:]) {
        var o = Self.base(.login)
        o["payload"] = .object(ua.loginPayload)
        o.merge(extra)
        json = o
    }

    public var payload: JSONObject { json.object("payload") ?? [:] }
}

/// LOGOUT (cid 8).
public struct Logout: SmarticoMessage {
    public static let classIDs: [ClassID] = [.logout]
    public let json: JSONObject
    public init(json: JSONObject) throws(ProtocolError) { _ = try Self.reader(json); self.json = json }
    public init() { json = Self.base(.logout) }
}

/// EVENT (cid 9): a generic client event `{eventType, payload}`. CORE_LANGUAGE_CHANGE (002 §1.11)
/// is this with `eventType: "core_language_changed"`.
public struct ClientEvent: SmarticoMessage {
    public static let classIDs: [ClassID] = [.event]
    public let json: JSONObject
    public static let languageChangedEventType = "core_language_changed"

    public init(json: JSONObject) throws(ProtocolError) {
        let r = try Self.reader(json)
        let type = try r.string("eventType", required: true)
        let isLanguageChange = type == Self.languageChangedEventType
        if let p = try r.object("payload", required: isLanguageChange), isLanguageChange {
            try p.string("language", required: true, nonEmpty: true)
        }
        self.json = json
    }

    public init(eventType: String, payload: JSONObject? = [:], extra: JSONObject = [:]) {
        var o = Self.base(.event)
        o["eventType"] = .string(eventType)
        o.set("payload", payload.map(JSONValue.object))
        o.merge(extra)
        json = o
    }

    /// CORE_LANGUAGE_CHANGE: `language` is an ISO 639-1 code or a custom code such as `pt-br`.
    public static func languageChanged(_ language: String) -> ClientEvent {
        ClientEvent(eventType: languageChangedEventType, payload: ["language": .string(language)])
    }

    public static let clientActionEventType = "client_action"

    /// The event Smartico's SDK reports for `dp:action&action=<name>` (its deep-link router):
    /// `{eventType: "client_action", payload: {action: <name>}}`.
    public static func clientAction(_ action: String) -> ClientEvent {
        ClientEvent(eventType: clientActionEventType, payload: ["action": .string(action)])
    }

    public var eventType: String { json.string("eventType") ?? "" }
    public var payload: JSONObject? { json.object("payload") }
    /// `payload.language` of a CORE_LANGUAGE_CHANGE.
    public var language: String? { eventType == Self.languageChangedEventType ? payload?.string("language") : nil }
}

/// A plain server response with `errCode`/`errMsg`: EVENT_RESPONSE 10, LOGIN_RESPONSE 11,
/// LOGOUT_RESPONSE 12, REGISTER_PUSH_NOTIFICATIONS_TOKEN_RESPONSE 2003.
public struct ResponseMessage: ServerResponse {
    public static let classIDs: [ClassID] = [.eventResponse, .loginResponse, .logoutResponse, .registerPushTokenResponse]
    public let json: JSONObject

    public init(json: JSONObject) throws(ProtocolError) { try checkServerClassID(json, Self.classIDs); self.json = json }

    /// - Parameter cid: one of 10, 11, 12, 2003.
    public init(cid: ClassID, errCode: Int64 = 0, errMsg: String? = nil, extra: JSONObject = [:]) {
        precondition(Self.classIDs.contains(cid), "ResponseMessage is for cids 10, 11, 12, 2003")
        var o = JSONObject()
        o["errCode"] = .number(errCode)
        o["errMsg"] = errMsg.jsonOrNull
        o["cid"] = .number(cid.rawValue)
        o.merge(extra)
        json = o
    }
}

/// Engagement reports over the socket: 103 impression, 104 action, 106 failed. Fire-and-forget.
public struct EngagementReport: SmarticoMessage {
    public enum Kind: String, Sendable, CaseIterable {
        case impression, action, failed

        public var classID: ClassID {
            switch self {
            case .impression: .engagementImpression
            case .action: .engagementAction
            case .failed: .engagementFailed
            }
        }
    }

    public static let classIDs: [ClassID] = [.engagementImpression, .engagementAction, .engagementFailed]
    public let json: JSONObject

    public init(json: JSONObject) throws(ProtocolError) {
        let r = try Self.reader(json)
        try r.string("engagement_uid", required: true)
        try r.integer("activityType", required: true)
        try r.string("action")
        self.json = json
    }

    public init(kind: Kind, engagementUID: String, activityType: ActivityType, action: String? = nil, extra: JSONObject = [:]) {
        var o = Self.base(kind.classID)
        o["engagement_uid"] = .string(engagementUID)
        o["activityType"] = .number(activityType.rawValue)
        o.set("action", action.json)
        o.merge(extra)
        json = o
    }

    public var kind: Kind {
        switch cid {
        case .engagementImpression: .impression
        case .engagementAction: .action
        default: .failed
        }
    }
    public var engagementUID: String { json.string("engagement_uid") ?? "" }
    public var activityType: ActivityType { ActivityType(rawValue: json.int64("activityType") ?? 0) }
    public var action: String? { json.string("action") }
}

/// CLIENT_EXECUTE_DEEPLINK_EVENT (cid 105): the server asks the client to run `payload.dp`.
public struct ExecuteDeepLinkEvent: SmarticoMessage {
    public static let classIDs: [ClassID] = [.executeDeepLinkEvent]
    public let json: JSONObject

    /// Only `cid` is checked: the fields are read loosely, and ``problem`` says when the daemon
    /// cannot act on the message.
    public init(json: JSONObject) throws(ProtocolError) {
        try checkServerClassID(json, Self.classIDs)
        self.json = json
    }

    public init(engagementUID: String?, dp: String, extra: JSONObject = [:]) {
        var o = JSONObject()
        o.set("engagement_uid", engagementUID.json)
        o["payload"] = ["dp": .string(dp)]
        o["cid"] = .number(ClassID.executeDeepLinkEvent.rawValue)
        o.merge(extra)
        json = o
    }

    /// `engagement_uid` (a number is read as its decimal text, as the SDK does).
    public var engagementUID: String? { json.lenientString("engagement_uid") }
    /// The deep link: `payload.dp`, else a top-level `dp` (the SDK's sample app reads both), when
    /// a string; "" when there is none (see ``problem``).
    public var dp: String { json.object("payload")?.string("dp") ?? json.string("dp") ?? "" }
    public var deepLink: DeepLink { DeepLink(dp) }
    /// Why the daemon cannot act on this 105 (no deep link to classify), or nil.
    public var problem: String? {
        if !dp.isEmpty { return nil }
        if let p = json["payload"], !p.isNull, p.objectValue == nil {
            return "\"payload\" is \(describeForError(p)), not an object with a deep link \"dp\""
        }
        if let v = json.object("payload")?["dp"], !v.isNull { return "\"payload.dp\" is \(describeForError(v)), not a deep link" }
        if let v = json["dp"], !v.isNull { return "\"dp\" is \(describeForError(v)), not a deep link" }
        return "\"payload.dp\" is missing"
    }
}

/// CLIENT_PUBLIC_PROPERTIES_CHANGED_EVENT (cid 108): new public user properties.
public struct PublicPropertiesChangedEvent: SmarticoMessage {
    public static let classIDs: [ClassID] = [.publicPropertiesChangedEvent]
    public let json: JSONObject

    /// Only `cid` is checked; ``problem`` says when `props` is unusable.
    public init(json: JSONObject) throws(ProtocolError) {
        try checkServerClassID(json, Self.classIDs)
        self.json = json
    }

    public init(props: JSONObject, extra: JSONObject = [:]) {
        var o = JSONObject()
        o["props"] = .object(props)
        o["cid"] = .number(ClassID.publicPropertiesChangedEvent.rawValue)
        o.merge(extra)
        json = o
    }

    /// `props` when it is an object; else empty (see ``problem``).
    public var props: JSONObject { json.object("props") ?? [:] }
    /// Why the daemon cannot act on this 108 (`props` missing or not an object), or nil.
    public var problem: String? { json.fieldProblem("props", expected: "an object") { $0.objectValue != nil } }
}

/// CLIENT_ENGAGEMENT_EVENT (cid 110), 002 §1.10: a popup to show. The client must be
/// transparent to its fields: `json` is the complete message and `originalBytes` (when decoded
/// from bytes) the exact bytes received. Only the fields a daemon needs are typed.
///
/// Decoded from bytes, `raw` keeps the bytes and their members' ranges, to be forwarded as received.
public struct ClientEngagementEvent: SmarticoMessage {
    public static let classIDs: [ClassID] = [.clientEngagementEvent]

    private enum Storage: Sendable {
        case tree(JSONObject)
        case raw(RawJSONObject)
    }

    private let storage: Storage
    /// `uuid`, when present (a string).
    public let uuid: String?
    /// `ts`, when present (an integer).
    public let ts: Int64?
    /// The key for de-duplication (shared with 105).
    public let engagementUID: String?
    private let activityTypeValue: Int64?
    public let engagementID: Int64?

    /// The complete message, every field in order.
    public var json: JSONObject {
        switch storage {
        case .tree(let o): o
        case .raw(let r): r.parsed()
        }
    }

    /// The message as the bytes it was decoded from, validated, with its members' ranges; nil
    /// for a message built or typed from a `JSONObject`.
    public var raw: RawJSONObject? {
        if case .raw(let r) = storage { return r }
        return nil
    }

    /// The bytes this message was decoded from, if it was decoded from bytes (shared, not copied).
    public var originalBytes: [UInt8]? { raw?.bytes }

    public init(json: JSONObject) throws(ProtocolError) {
        let f = try Self.check(json)
        storage = .tree(json)
        (uuid, ts, engagementUID, activityTypeValue, engagementID) = f
    }

    /// Decodes a 110 from bytes: same errors as `init(json:)` on the parsed bytes, and the bytes
    /// are kept as `originalBytes`/`raw`.
    public static func decode(_ bytes: [UInt8], options: JSONParseOptions = JSONParseOptions()) throws(ProtocolError) -> ClientEngagementEvent {
        try ClientEngagementEvent(raw: try RawJSONObject(validating: bytes, options: options))
    }

    /// Types a validated raw object (its bytes kept): only the members `check` reads are parsed,
    /// in the order they came (so a repeated name reads as its last, as in `json`).
    public init(raw: RawJSONObject) throws(ProtocolError) {
        var read = [JSONValue?](repeating: nil, count: Self.readMembers.count)
        for m in raw.members {
            if let k = Self.readMembers.firstIndex(where: { raw.member(m, isNamed: $0) }) { read[k] = raw.value(of: m) }
        }
        let f = try Self.check { name in Self.readMembers.firstIndex(of: name).flatMap { read[$0] } }
        storage = .raw(raw)
        (uuid, ts, engagementUID, activityTypeValue, engagementID) = f
    }

    /// The members ``check(_:)`` reads.
    private static let readMembers = ["cid", "engagement_uid", "activityType", "activity_type", "uuid", "ts", "engagement_id"]

    /// The value of the member `name` (the last of that name), as ``json`` has it; for a message
    /// decoded from bytes only that member is parsed.
    public func member(_ name: String) -> JSONValue? {
        switch storage {
        case .tree(let o): o[name]
        case .raw(let r): r[name]
        }
    }

    /// Checks `cid` only; the typed fields are read as the SDK reads them (ServerFields.swift):
    /// ids given as numbers are read as their text, `activityType` also under the name
    /// `activity_type`, a field of any other type is absent. An empty `engagement_uid` is absent
    /// too (it cannot tell one engagement from another).
    private static func check(_ json: JSONObject) throws(ProtocolError)
        -> (uuid: String?, ts: Int64?, uid: String?, activityType: Int64?, engagementID: Int64?) {
        try check { json[$0] }
    }

    /// ``check(_:)`` with each member read by `field` (nil: absent).
    private static func check(_ field: (String) -> JSONValue?) throws(ProtocolError)
        -> (uuid: String?, ts: Int64?, uid: String?, activityType: Int64?, engagementID: Int64?) {
        try checkServerClassID(field("cid").map { JSONObject(keys: ["cid"], values: [$0]) } ?? JSONObject(), classIDs)
        let uid = field("engagement_uid")?.lenientString.flatMap { $0.isEmpty ? nil : $0 }
        let activityType = field("activityType")?.lenientInt64 ?? field("activity_type")?.lenientInt64
        return (field("uuid")?.lenientString, field("ts")?.lenientInt64, uid, activityType, field("engagement_id")?.lenientInt64)
    }

    /// Builds an engagement (the simulator's side).
    public init(engagementUID: String, activityType: ActivityType = .popup, engagementID: Int64,
                templateHTML: String? = nil, extra: JSONObject = [:]) {
        var o = JSONObject()
        o["engagement_uid"] = .string(engagementUID)
        o["activityType"] = .number(activityType.rawValue)
        o["engagement_id"] = .number(engagementID)
        o.set("template_html", templateHTML.json)
        o.merge(extra)
        o["cid"] = .number(ClassID.clientEngagementEvent.rawValue)
        storage = .tree(o)
        (uuid, ts, self.engagementUID, activityTypeValue, self.engagementID) = (try? Self.check(o)) ?? (nil, nil, nil, nil, nil)
    }

    /// Same JSON value (as `JSONObject`'s `==`, whatever the spelling of the bytes).
    public static func == (lhs: Self, rhs: Self) -> Bool {
        if case .raw(let a) = lhs.storage, case .raw(let b) = rhs.storage, a == b { return true }
        return lhs.json == rhs.json
    }

    /// The message's class id (always 110).
    public var cid: ClassID { .clientEngagementEvent }
    public var activityType: ActivityType? { activityTypeValue.map(ActivityType.init(rawValue:)) }

    /// The SHOW_ENGAGEMENT bridge message for this event (`bcid: 3` + every field).
    public var showEngagement: BridgeMessage { .showEngagement(json) }

    /// Bytes of the SHOW_ENGAGEMENT bridge message: for a message decoded from bytes,
    /// `{"bcid":3` and its members copied as received (``BridgeMessage/showEngagementBytes(_:)``);
    /// else serialized.
    public func showEngagementBytes() -> [UInt8] {
        if let raw { return BridgeMessage.showEngagementBytes(raw) }
        return BridgeMessage.showEngagement(json).serialized()
    }
}

/// SAW_SHOW_SPIN_PUSH (cid 707), 002 §1.12: a mini-game to show.
public struct SawShowSpinPush: SmarticoMessage {
    public static let classIDs: [ClassID] = [.sawShowSpinPush]
    public let json: JSONObject

    /// Only `cid` is checked: the fields are read loosely, and ``problem`` says when the daemon
    /// cannot act on the message.
    public init(json: JSONObject) throws(ProtocolError) {
        try checkServerClassID(json, Self.classIDs)
        self.json = json
    }

    public init(sawTemplateID: Int64, pendingMessageID: Int64? = nil, sawGameTypeID: Int64? = nil, extra: JSONObject = [:]) {
        var o = JSONObject()
        o["saw_template_id"] = .number(sawTemplateID)
        o.set("pending_message_id", pendingMessageID.json)
        o.set("saw_game_type_id", sawGameTypeID.json)
        o["cid"] = .number(ClassID.sawShowSpinPush.rawValue)
        o.merge(extra)
        json = o
    }

    /// `saw_template_id` (an integer, or a string holding one); nil when there is none (see ``problem``).
    public var sawTemplateID: Int64? { json.lenientInt64("saw_template_id") }
    public var pendingMessageID: Int64? { json.lenientInt64("pending_message_id") }
    public var sawGameTypeID: Int64? { json.lenientInt64("saw_game_type_id") }
    /// `dp:gf_saw&id=<saw_template_id>&standalone=true`; nil without a template id.
    public var deepLink: String? { sawTemplateID.map { "dp:gf_saw&id=\($0)&standalone=true" } }
    /// The acknowledgement (cid 711) to send once the mini-game was handled; nil without a template id.
    public var acknowledgement: SawAcknowledgeSpinPush? {
        sawTemplateID.map { SawAcknowledgeSpinPush(sawTemplateID: $0, pendingMessageID: pendingMessageID) }
    }
    /// Why the daemon cannot act on this 707 (no mini-game to open), or nil.
    public var problem: String? {
        json.fieldProblem("saw_template_id", expected: "an integer") { $0.lenientInt64 != nil }
    }
}

/// SAW_AKNOWLEDGE_SPIN_PUSH (cid 711): acknowledges a handled 707. Fire-and-forget.
public struct SawAcknowledgeSpinPush: SmarticoMessage {
    public static let classIDs: [ClassID] = [.sawAcknowledgeSpinPush]
    public let json: JSONObject

    public init(json: JSONObject) throws(ProtocolError) {
        let r = try Self.reader(json)
        try r.integer("saw_template_id", required: true)
        try r.integer("pending_message_id")
        self.json = json
    }

    public init(sawTemplateID: Int64, pendingMessageID: Int64?, extra: JSONObject = [:]) {
        var o = Self.base(.sawAcknowledgeSpinPush)
        o["saw_template_id"] = .number(sawTemplateID)
        o.set("pending_message_id", pendingMessageID.json)
        o.merge(extra)
        json = o
    }

    public var sawTemplateID: Int64 { json.int64("saw_template_id") ?? 0 }
    public var pendingMessageID: Int64? { json.int64("pending_message_id") }
}

/// REGISTER_PUSH_NOTIFICATIONS_TOKEN_REQUEST (cid 1003), 002 §1.8.
public struct RegisterPushTokenRequest: SmarticoMessage {
    public static let classIDs: [ClassID] = [.registerPushTokenRequest]
    public let json: JSONObject

    public init(json: JSONObject) throws(ProtocolError) {
        let r = try Self.reader(json)
        try r.string("token", required: true)
        try r.integer("platform", range: PushClientPlatform.range, rangeName: "a PushClientPlatform")
        try r.integer("pushNotificationUserStatus", required: true, range: PushNotificationUserStatus.range,
                      rangeName: "a PushNotificationUserStatus")
        self.json = json
    }

    /// - Parameter appPackageID: `app_package_id` (bundle id on iOS, package name on Android), as
    ///   002 §4 and Smartico's SDK send it; nil leaves it out.
    public init(token: String, platform: PushClientPlatform?, status: PushNotificationUserStatus,
                appPackageID: String? = nil, extra: JSONObject = [:]) {
        var o = Self.base(.registerPushTokenRequest)
        o["pushNotificationUserStatus"] = .number(status.rawValue)
        o["token"] = .string(token)
        o.set("platform", platform.map { .number($0.rawValue) })
        o.set("app_package_id", appPackageID.json)
        o.merge(extra)
        json = o
    }

    public var token: String { json.string("token") ?? "" }
    public var platform: PushClientPlatform? { json.int64("platform").flatMap(PushClientPlatform.init(rawValue:)) }
    public var status: PushNotificationUserStatus {
        json.int64("pushNotificationUserStatus").flatMap(PushNotificationUserStatus.init(rawValue:)) ?? .allowed
    }
    public var appPackageID: String? { json.string("app_package_id") }
}

/// The envelope Smartico's SDK puts around events (cid 9) and data requests: `api_key` (the full
/// label key, with its `-N` suffix), `brand_key` when there is one, `cid`, `uuid`, `ts`, then the
/// message's other members in their order. 002 shows none of it; the SDK sends it on every such
/// message (docs/protocol.md, "Where the daemon follows the SDK").
public enum RequestEnvelope {
    /// `message` wrapped: members the message already has win (its own `uuid`/`ts` are kept, so a
    /// resend is recognisably the same message); `uuid`/`ts` are filled in when absent or null.
    public static func wrap(_ message: JSONObject, apiKey: String, brandKey: String?, uuid: @autoclosure () -> String,
                            ts: Int64) -> JSONObject {
        var o = JSONObject()
        o["api_key"] = .string(apiKey)
        if let brandKey { o["brand_key"] = .string(brandKey) }
        o["cid"] = message["cid"] ?? .null
        if let u = message["uuid"], !u.isNull { o["uuid"] = u } else { o["uuid"] = .string(uuid()) }
        if let t = message["ts"], !t.isNull { o["ts"] = t } else { o["ts"] = .number(ts) }
        for (k, v) in message where k != "cid" && k != "uuid" && k != "ts" { o[k] = v }
        return o
    }
}
