/// Any message the server sends, typed by `cid`. The one decoding entry point for the daemon.
public enum ServerMessage: Sendable, Equatable {
    case ping(Ping)
    case pong(Pong)
    case initSessionResponse(InitSessionResponse)
    case identifyUserResponse(IdentifyUserResponse)
    /// 10 EVENT_RESPONSE.
    case eventResponse(ResponseMessage)
    /// 11 LOGIN_RESPONSE.
    case loginResponse(ResponseMessage)
    /// 12 LOGOUT_RESPONSE.
    case logoutResponse(ResponseMessage)
    /// 2003 REGISTER_PUSH_NOTIFICATIONS_TOKEN_RESPONSE.
    case registerPushTokenResponse(ResponseMessage)
    case executeDeepLink(ExecuteDeepLinkEvent)
    case publicPropertiesChanged(PublicPropertiesChangedEvent)
    case engagement(ClientEngagementEvent)
    case sawShowSpinPush(SawShowSpinPush)
    /// Any other class id (504, 706, 708, 808, 107, gamification responses, unknown ones):
    /// not an error, every field kept. `ClassID(cid).name`/`.eventName` give a friendly name.
    case other(cid: ClassID, json: JSONObject)

    /// Decodes the bytes of one server message. A 110 keeps `bytes` (`ClientEngagementEvent.raw`),
    /// to be forwarded as received; every other cid is typed from the parsed object.
    ///
    /// Throws only when the bytes are not a JSON object with an integer `cid` (within the
    /// parser's limits; a string holding an integer, `"110"`, is read as that integer, as the SDK
    /// reads it, and the message is kept as received): the fields of a known cid are read
    /// loosely by the types (ServerFields.swift),
    /// never rejected, so one unexpected field cannot make a message undeliverable. The types'
    /// `problem` properties tell when the daemon cannot act on one.
    public static func decode(_ bytes: [UInt8], options: JSONParseOptions = JSONParseOptions()) throws(ProtocolError) -> ServerMessage {
        let raw = try RawJSONObject(validating: bytes, options: options)
        if raw["cid"]?.lenientInt64 == ClassID.clientEngagementEvent.rawValue {
            return .engagement(try ClientEngagementEvent(raw: raw))
        }
        return try ServerMessage(json: raw.parsed())
    }

    /// Decodes the bytes of one server message from a buffer (copied).
    public static func decode(_ bytes: UnsafeRawBufferPointer, options: JSONParseOptions = JSONParseOptions()) throws(ProtocolError) -> ServerMessage {
        try decode(Array(bytes), options: options)
    }

    /// Types an already parsed message object.
    public init(json o: JSONObject) throws(ProtocolError) {
        let cid = ClassID(try readServerClassID(o, field: "cid"))
        switch cid {
        case .ping: self = .ping(try Ping(json: o))
        case .pong: self = .pong(try Pong(json: o))
        case .initSessionResponse: self = .initSessionResponse(try InitSessionResponse(json: o))
        case .identifyUserResponse: self = .identifyUserResponse(try IdentifyUserResponse(json: o))
        case .eventResponse: self = .eventResponse(try ResponseMessage(json: o))
        case .loginResponse: self = .loginResponse(try ResponseMessage(json: o))
        case .logoutResponse: self = .logoutResponse(try ResponseMessage(json: o))
        case .registerPushTokenResponse: self = .registerPushTokenResponse(try ResponseMessage(json: o))
        case .executeDeepLinkEvent: self = .executeDeepLink(try ExecuteDeepLinkEvent(json: o))
        case .publicPropertiesChangedEvent: self = .publicPropertiesChanged(try PublicPropertiesChangedEvent(json: o))
        case .clientEngagementEvent: self = .engagement(try ClientEngagementEvent(json: o))
        case .sawShowSpinPush: self = .sawShowSpinPush(try SawShowSpinPush(json: o))
        default: self = .other(cid: cid, json: o)
        }
    }

    /// The message's class id.
    public var cid: ClassID {
        switch self {
        case .other(let cid, _): cid
        case .engagement: .clientEngagementEvent
        default: ClassID(json["cid"]?.lenientInt64 ?? 0)
        }
    }

    /// The complete message object, as received (a 110's is parsed from its bytes when read).
    public var json: JSONObject {
        switch self {
        case .ping(let m): m.json
        case .pong(let m): m.json
        case .initSessionResponse(let m): m.json
        case .identifyUserResponse(let m): m.json
        case .eventResponse(let m), .loginResponse(let m), .logoutResponse(let m), .registerPushTokenResponse(let m): m.json
        case .executeDeepLink(let m): m.json
        case .publicPropertiesChanged(let m): m.json
        case .engagement(let m): m.json
        case .sawShowSpinPush(let m): m.json
        case .other(_, let o): o
        }
    }

    /// The value of the member `name` (the last of that name) of ``json``; a 110 kept as bytes
    /// parses only that member.
    public func member(_ name: String) -> JSONValue? {
        if case .engagement(let e) = self { return e.member(name) }
        return json[name]
    }

    /// `uuid` of the message, if any (for request/response matching; a number is read as its text).
    public var uuid: String? {
        if case .engagement(let e) = self { return e.uuid }
        return json.lenientString("uuid")
    }

    /// `engagement_uid` of a 110 or a 105: the key of the de-duplication set those two share
    /// (the server re-delivers pending engagements after every IDENTIFY).
    public var engagementUID: String? {
        switch self {
        case .engagement(let e): e.engagementUID
        case .executeDeepLink(let d): d.engagementUID
        default: nil
        }
    }

    /// Compact JSON of the message.
    public func serialized() -> [UInt8] { json.serialized() }
}

/// Any message a client sends, typed by `cid`: the simulator's decoding entry point.
public enum ClientMessage: Sendable, Equatable, JSONObjectDecodable {
    case ping(Ping)
    case pong(Pong)
    case initSession(InitSessionRequest)
    case identifyUser(IdentifyUserRequest)
    case login(Login)
    case logout(Logout)
    case event(ClientEvent)
    case engagementReport(EngagementReport)
    case sawAcknowledgeSpin(SawAcknowledgeSpinPush)
    case registerPushToken(RegisterPushTokenRequest)
    /// Any other class id (gamification requests, bridge SEND_TO_SOCKET payloads, ...).
    case other(cid: ClassID, json: JSONObject)

    /// Decodes the bytes of one client message from a buffer.
    public static func decode(_ bytes: UnsafeRawBufferPointer, options: JSONParseOptions = JSONParseOptions()) throws(ProtocolError) -> ClientMessage {
        try ClientMessage(json: try parseObject(bytes, options: options))
    }

    /// Types an already parsed message object.
    public init(json o: JSONObject) throws(ProtocolError) {
        let cid = ClassID(try readClassID(o, field: "cid"))
        switch cid {
        case .ping: self = .ping(try Ping(json: o))
        case .pong: self = .pong(try Pong(json: o))
        case .initSessionRequest: self = .initSession(try InitSessionRequest(json: o))
        case .identifyUserRequest: self = .identifyUser(try IdentifyUserRequest(json: o))
        case .login: self = .login(try Login(json: o))
        case .logout: self = .logout(try Logout(json: o))
        case .event: self = .event(try ClientEvent(json: o))
        case .engagementImpression, .engagementAction, .engagementFailed:
            self = .engagementReport(try EngagementReport(json: o))
        case .sawAcknowledgeSpinPush: self = .sawAcknowledgeSpin(try SawAcknowledgeSpinPush(json: o))
        case .registerPushTokenRequest: self = .registerPushToken(try RegisterPushTokenRequest(json: o))
        default: self = .other(cid: cid, json: o)
        }
    }

    public var cid: ClassID {
        switch self {
        case .other(let cid, _): cid
        default: ClassID(json["cid"]?.int64Value ?? 0)
        }
    }

    /// The complete message object.
    public var json: JSONObject {
        switch self {
        case .ping(let m): m.json
        case .pong(let m): m.json
        case .initSession(let m): m.json
        case .identifyUser(let m): m.json
        case .login(let m): m.json
        case .logout(let m): m.json
        case .event(let m): m.json
        case .engagementReport(let m): m.json
        case .sawAcknowledgeSpin(let m): m.json
        case .registerPushToken(let m): m.json
        case .other(_, let o): o
        }
    }

    public var uuid: String? { json["uuid"]?.stringValue }

    /// Compact JSON of the message as it stands (see `ClientMessageEncoder` to stamp it).
    public func serialized() -> [UInt8] { json.serialized() }
}
