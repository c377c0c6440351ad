/// A value typed from one JSON object: a message, a client message of any cid, a bridge message.
public protocol JSONObjectDecodable {
    /// Types a parsed object; errors name the field that is wrong.
    init(json: JSONObject) throws(ProtocolError)
}

extension JSONObjectDecodable {
    /// Decodes one value from the bytes of a JSON object (parsed within `options`' limits).
    public static func decode(_ bytes: [UInt8], options: JSONParseOptions = JSONParseOptions()) throws(ProtocolError) -> Self {
        try Self(json: try parseObject(bytes, options: options))
    }
}

/// A typed cid-tagged WebSocket message.
///
/// Every message type stores its complete JSON object (`json`): the typed properties read
/// from it, so fields this module does not know, and the member order, survive a
/// decode → encode round trip unchanged (a 110 decoded from bytes keeps the bytes instead and
/// parses `json` from them when it is read). `init(json:)` checks the class id and the type of
/// every field the type knows, and names the first one that is wrong.
public protocol SmarticoMessage: Sendable, Equatable, Codable, JSONObjectDecodable {
    /// The class ids this type represents (several only for `ResponseMessage`).
    static var classIDs: [ClassID] { get }
    /// The whole message, every field as it arrived or was built, in order.
    var json: JSONObject { get }
    /// Validates and wraps a message object.
    init(json: JSONObject) throws(ProtocolError)
}

extension SmarticoMessage {
    /// The message's class id (a server's `"110"` read as 110, ``readServerClassID(_:field:)``).
    public var cid: ClassID { ClassID(json["cid"]?.lenientInt64 ?? 0) }
    /// `ts`: milliseconds since the epoch, when present.
    public var ts: Int64? { json["ts"]?.int64Value }
    /// `uuid` of the message, when present.
    public var uuid: String? { json["uuid"]?.stringValue }

    /// Compact JSON bytes of the message exactly as it stands (no `ts`/`uuid` added:
    /// use `ClientMessageEncoder` for messages to send).
    public func serialized() -> [UInt8] { json.serialized() }

    /// `Decodable` over any decoder: the value is read as a `JSONValue` and checked by `init(json:)`.
    public init(from decoder: any Decoder) throws {
        let value = try JSONValue(from: decoder)
        guard case .object(let o) = value else {
            throw DecodingError.typeMismatch(JSONObject.self, .init(codingPath: decoder.codingPath, debugDescription: "expected a JSON object, found \(value.type)"))
        }
        do { try self.init(json: o) } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.description, underlyingError: error))
        }
    }

    /// `Encodable`: encodes `json`.
    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }

    /// Checks `cid` (one of `classIDs`), `ts` and `uuid`; returns a reader for the other fields.
    static func reader(_ json: JSONObject) throws(ProtocolError) -> FieldReader {
        let c = try readClassID(json, field: "cid")
        guard classIDs.contains(ClassID(c)) else {
            throw .unexpectedClassID(expected: .cid(classIDs[0].rawValue), found: .cid(c))
        }
        let r = FieldReader(json, .cid(c))
        try r.integer("ts")
        try r.string("uuid")
        return r
    }

    static func base(_ cid: ClassID) -> JSONObject { ["cid": .number(cid.rawValue)] }
}

extension JSONObject {
    func string(_ key: String) -> String? { self[key]?.stringValue }
    func int64(_ key: String) -> Int64? { self[key]?.int64Value }
    func object(_ key: String) -> JSONObject? { self[key]?.objectValue }

    /// Sets `key` when `value` is not nil.
    mutating func set(_ key: String, _ value: JSONValue?) {
        if let value { self[key] = value }
    }

    mutating func merge(_ extra: JSONObject) {
        for (k, v) in extra { self[k] = v }
    }
}

extension Optional where Wrapped == String {
    var json: JSONValue? { map(JSONValue.string) }
    /// `null` when nil: for fields the protocol sends as null (`errMsg`, `brand_key`, `hash`).
    var jsonOrNull: JSONValue { map(JSONValue.string) ?? .null }
}

extension Optional where Wrapped == Int64 {
    var json: JSONValue? { map { .number($0) } }
}

/// The `ua` object (002 §1.1): device and time zone of the client.
public struct UserAgent: Sendable, Equatable, Codable {
    /// Device fingerprint.
    public var fp: Int64?
    public var agent: String?
    public var host: String?
    /// `NATIVE_PHONE`, `NATIVE_TABLET` (or a web value such as `DESKTOP`).
    public var deviceType: String?
    /// Minutes, UTC − local (browser convention): GMT+3 → −180. See `UserAgent.tzoffset(for:at:)`.
    public var tzoffset: Int64?
    public var browser: String?
    public var os: String?
    /// Any other members, kept in order.
    public var extra: JSONObject

    public init(fp: Int64? = nil, agent: String? = nil, host: String? = nil, deviceType: String?, tzoffset: Int64?,
                browser: String? = nil, os: String?, extra: JSONObject = [:]) {
        self.fp = fp
        self.agent = agent
        self.host = host
        self.deviceType = deviceType
        self.tzoffset = tzoffset
        self.browser = browser
        self.os = os
        self.extra = extra
    }

    private static let known = ["fp", "agent", "host", "device_type", "tzoffset", "browser", "os"]

    /// Reads a `ua` object; `prefix` is its path for errors (`ua.`) and `keyPrefix` the member
    /// name prefix (`ua_` inside LOGIN's payload).
    init(json: JSONObject, tag: MessageTag, pathPrefix: String, keyPrefix: String = "") throws(ProtocolError) {
        let r = FieldReader(json, tag, prefix: pathPrefix)
        fp = try r.integer(keyPrefix + "fp")
        agent = try r.string(keyPrefix + "agent")
        host = try r.string(keyPrefix + "host")
        deviceType = try r.string(keyPrefix + "device_type")
        tzoffset = try r.integer(keyPrefix + "tzoffset")
        browser = try r.string(keyPrefix + "browser")
        os = try r.string(keyPrefix + "os")
        var rest = JSONObject()
        for (k, v) in json where !UserAgent.known.contains(where: { keyPrefix + $0 == k }) { rest.append(key: k, value: v) }
        extra = rest
    }

    /// Reads a `ua` object (errors name the field as `ua.<name>`).
    public init(json: JSONObject) throws(ProtocolError) {
        try self.init(json: json, tag: .http("ua object"), pathPrefix: "ua.")
    }

    func members(prefix: String) -> JSONObject {
        var o = JSONObject()
        o.set(prefix + "fp", fp.json)
        o.set(prefix + "agent", agent.json)
        o.set(prefix + "host", host.json)
        o.set(prefix + "device_type", deviceType.json)
        o.set(prefix + "tzoffset", tzoffset.json)
        o.set(prefix + "browser", browser.json)
        o.set(prefix + "os", os.json)
        for (k, v) in extra { o[k] = v }
        return o
    }

    /// The `ua` object.
    public var json: JSONObject { members(prefix: "") }

    /// LOGIN's payload: the same members prefixed with `ua_` (002 §1.7).
    public var loginPayload: JSONObject { members(prefix: "ua_") }

    public init(from decoder: any Decoder) throws {
        let o = try JSONObject(from: decoder)
        do { try self.init(json: o) } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.description, underlyingError: error))
        }
    }

    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }
}

/// A random (version 4) UUID, written in lowercase.
public struct UUIDv4: Sendable, Hashable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// From 16 random bytes; the version and variant bits are set here.
    public init(randomBytes: [UInt8]) {
        precondition(randomBytes.count == 16, "UUIDv4 needs 16 bytes")
        var b = randomBytes
        b[6] = b[6] & 0x0F | 0x40
        b[8] = b[8] & 0x3F | 0x80
        bytes = b
    }

    /// A new random UUID from `generator` (seeded generators make tests reproducible).
    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> UUIDv4 {
        var b = [UInt8](repeating: 0, count: 16)
        for k in stride(from: 0, to: 16, by: 8) {
            var v = generator.next()
            for j in 0..<8 { b[k + j] = UInt8(truncatingIfNeeded: v); v >>= 8 }
        }
        return UUIDv4(randomBytes: b)
    }

    /// A new random UUID from the system's secure generator.
    public static func random() -> UUIDv4 {
        var g = SystemRandomNumberGenerator()
        return random(using: &g)
    }

    /// `xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx`, lowercase.
    public var string: String {
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(36)
        for (k, b) in bytes.enumerated() {
            if k == 4 || k == 6 || k == 8 || k == 10 { out.append(UInt8(ascii: "-")) }
            out.append(hex[Int(b >> 4)])
            out.append(hex[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public var description: String { string }

    /// True for a lowercase version-4 UUID string.
    public static func isValidV4(_ s: String) -> Bool {
        let u = Array(s.utf8)
        guard u.count == 36 else { return false }
        for (k, c) in u.enumerated() {
            switch k {
            case 8, 13, 18, 23: if c != UInt8(ascii: "-") { return false }
            case 14: if c != UInt8(ascii: "4") { return false }
            case 19: if !"89ab".utf8.contains(c) { return false }
            default: if !"0123456789abcdef".utf8.contains(c) { return false }
            }
        }
        return true
    }
}

/// Fills in `ts` and `uuid` of client messages and serializes them.
///
/// The clock and the uuid source are injectable so tests are deterministic.
public struct ClientMessageEncoder: Sendable {
    /// Milliseconds since the Unix epoch.
    public var clock: @Sendable () -> Int64
    /// A fresh lowercase v4 uuid per call.
    public var makeUUID: @Sendable () -> String

    public init(
        clock: @escaping @Sendable () -> Int64 = ClientMessageEncoder.systemMilliseconds,
        makeUUID: @escaping @Sendable () -> String = { UUIDv4.random().string }
    ) {
        self.clock = clock
        self.makeUUID = makeUUID
    }

    /// `object` with `ts` and `uuid` appended when absent (or replaced when `overwrite`).
    /// A message that already carries them keeps them: a resend is recognisably the same message.
    public func stamped(_ object: JSONObject, overwrite: Bool = false) -> JSONObject {
        var o = object
        if overwrite || o["ts"] == nil || o["ts"]?.isNull == true { o["ts"] = .number(clock()) }
        if overwrite || o["uuid"] == nil || o["uuid"]?.isNull == true { o["uuid"] = .string(makeUUID()) }
        return o
    }

    /// Bytes to send: the message's JSON with `ts`/`uuid` filled in when absent.
    public func encode(_ message: some SmarticoMessage) -> [UInt8] { stamped(message.json).serialized() }

    /// Bytes to send for any client message.
    public func encode(_ message: ClientMessage) -> [UInt8] { stamped(message.json).serialized() }

    /// Bytes to send for a raw message object (e.g. a bridge SEND_TO_SOCKET).
    public func encode(object: JSONObject) -> [UInt8] { stamped(object).serialized() }

    /// Stamps and serializes, and tells what was stamped: the `uuid` and `cid` a request/response
    /// matcher needs, and the `ts`.
    public func prepare(object: JSONObject) -> PreparedMessage {
        let o = stamped(object)
        return PreparedMessage(bytes: o.serialized(), cid: o["cid"]?.int64Value, uuid: o["uuid"]?.stringValue,
                               ts: o["ts"]?.int64Value)
    }

    /// `prepare(object:)` for a typed message.
    public func prepare(_ message: some SmarticoMessage) -> PreparedMessage { prepare(object: message.json) }
}

/// A stamped, serialized client message.
public struct PreparedMessage: Sendable, Equatable {
    /// The compact JSON to send.
    public let bytes: [UInt8]
    /// `cid` when it is an integer.
    public let cid: Int64?
    /// `uuid` when it is a string (a caller-provided non-string uuid is kept as is and reported as nil).
    public let uuid: String?
    /// `ts` when it is an integer.
    public let ts: Int64?
}
