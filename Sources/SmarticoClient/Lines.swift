import SmarticoProtocol

/// The request line `{"id":ID,"op":OP,…arguments}\n` (id and op first, the arguments in order).
public func requestLine(id: Int64, op: String, _ arguments: JSONObject) -> [UInt8] {
    var object = JSONObject()
    object.append(key: "id", value: .number(id))
    object.append(key: "op", value: .string(op))
    for (key, value) in arguments { object.append(key: key, value: value) }
    var bytes = JSONValue.object(object).serialized()
    bytes.append(0x0A)
    return bytes
}

/// The daemon's answer to one request: `{"id":…,"ok":true,"result":…}` or
/// `{"id":…,"ok":false,"error":{"code","message"[,"errCode","errMsg"]}}`.
public struct Answer: Sendable {
    /// The line as received (without its newline).
    public let line: [UInt8]
    /// The line parsed.
    public let value: JSONValue

    public init(line: [UInt8], value: JSONValue) {
        self.line = line
        self.value = value
    }

    public var ok: Bool { value["ok"]?.boolValue == true }
    /// The request's id as the daemon echoed it; `null` for an answer to no request of ours (a
    /// connection refused at accept, a line too long).
    public var id: JSONValue { value["id"] ?? .null }
    /// `result` (an empty object when absent).
    public var result: JSONValue { value["result"] ?? .object(JSONObject()) }

    /// `.refused` with the daemon's error (`op` names the request).
    public func refusal(op: String) -> ClientError {
        let error = value["error"]
        let code = error?["code"]?.stringValue ?? "unknown"
        let message: String = switch error?["message"] {
        case .string(let s)?: s
        case nil, .null?: ""
        case let other?: other.serializedString()
        }
        let errCode = error?["errCode"].flatMap { $0.isNull ? nil : $0.int64Value }
        let errMsg: String? = switch error?["errMsg"] {
        case .string(let s)?: s
        case nil, .null?: nil
        case let other?: other.serializedString()
        }
        return .refused(op: op, code: code, message: message, errCode: errCode, errMsg: errMsg)
    }

    /// `result` when `ok`, else ``refusal(op:)`` thrown.
    public func result(op: String) throws(ClientError) -> JSONValue {
        guard ok else { throw refusal(op: op) }
        return result
    }
}

/// An event the daemon sent to a subscribed connection:
/// `{"event":NAME,"seq":N,"ts":MS,"data":{…}}` (docs/socket-api.md, "Events").
public struct SmarticoEvent: Sendable {
    /// `engagement`, `minigame`, `deeplink`, `message` (journaled), `session`, `identified`,
    /// `props`, `game_opening`, `bridge`, `error`, `gap` (live only), or a name this version does
    /// not know.
    public let name: String
    /// The journal seq: a journaled event's own, a live one's the last journaled seq before it.
    public let seq: Int64?
    /// Milliseconds since the epoch when the daemon received it.
    public let ts: Int64?
    /// The payload.
    public let data: JSONValue
    /// The line as received (without its newline), e.g. to hand on unchanged.
    public let line: [UInt8]

    public init(name: String, seq: Int64?, ts: Int64?, data: JSONValue, line: [UInt8]) {
        self.name = name
        self.seq = seq
        self.ts = ts
        self.data = data
        self.line = line
    }

    /// The event names the daemon journals (replayable with `since` and `durable`).
    public static let journaledNames: Set<String> = ["engagement", "minigame", "deeplink", "message"]

    /// Whether this event is in the journal (it comes again after a replay): the journaled
    /// names, and the `error` of code `store_damaged`.
    public var isJournaled: Bool {
        Self.journaledNames.contains(name) || (name == "error" && data["code"]?.stringValue == "store_damaged")
    }
}

/// One line from the daemon, sorted.
public enum DaemonLine: Sendable {
    case answer(Answer)
    case event(SmarticoEvent)

    /// Sorts `line`: an answer (it has `ok`), an event (it has `event`), or nil for an empty
    /// line or one that is neither (ignored). A line that is not a JSON object is `.badAnswer`.
    public static func parse(_ line: [UInt8], path: String) throws(ClientError) -> DaemonLine? {
        if line.isEmpty { return nil }
        let value: JSONValue
        do {
            value = try JSONValue(parsing: line)
        } catch {
            throw .badAnswer(path: path, detail: "a line that is not JSON (\(error)): \(ClientError.oneLine(String(decoding: line.prefix(200), as: UTF8.self)))")
        }
        if value["ok"] != nil { return .answer(Answer(line: line, value: value)) }
        if let name = value["event"] {
            return .event(SmarticoEvent(
                name: name.stringValue ?? name.serializedString(), seq: value["seq"]?.int64Value, ts: value["ts"]?.int64Value,
                data: value["data"] ?? .null, line: line))
        }
        return nil
    }
}
