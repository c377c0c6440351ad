import Logging
import SmarticoProtocol
import SmarticoSocketAPI

/// A request line, parsed: the `id` to echo (nil when absent or unusable) and the request or the
/// error to answer with.
public struct ParsedLine: Sendable, Equatable {
    /// The request's `id` exactly as sent (a string or a number, its literal kept), or nil.
    public var id: JSONValue?
    public var request: Result<SocketRequest, SocketAPIError>
}

/// Parses and validates request lines (socket-api.md "Requests"), sans-I/O.
///
/// Rules: the line is a JSON object; `id`, when present and not null, is a string or a number; `op`
/// is a known op; arguments have their documented types (null counts as absent for optional ones);
/// a member the op does not know is refused (`bad_request` naming it), so a typo never goes
/// unnoticed.
public enum SocketRequestParser {
    /// Event names a `subscribe` may filter on: every kind, `gap` included.
    public static let eventNames: Set<String> = Set(EventKind.allCases.map(\.rawValue))

    /// Longest durable subscription name.
    public static let maxDurableNameLength = 128

    /// Parses one line (without its `\n`). `maxDepth` bounds nesting.
    public static func parse(_ line: UnsafeRawBufferPointer, maxDepth: Int = 128) -> ParsedLine {
        let value: JSONValue
        do {
            value = try JSONValue(parsing: line, options: JSONParseOptions(maxDepth: maxDepth))
        } catch {
            return ParsedLine(id: nil, request: .failure(SocketAPIError(.badJSON, "the line is not valid JSON: \(error)")))
        }
        return parse(value)
    }

    /// Parses one line given as text (tests, tools).
    public static func parse(_ line: String) -> ParsedLine {
        var copy = line
        return copy.withUTF8 { parse(UnsafeRawBufferPointer($0)) }
    }

    /// Validates an already parsed request value.
    public static func parse(_ value: JSONValue) -> ParsedLine {
        guard case .object(let object) = value else {
            return ParsedLine(id: nil, request: .failure(.badRequest("a request must be a JSON object, got \(value.type)")))
        }
        var id: JSONValue? = nil
        if let raw = object["id"] {
            switch raw {
            case .string, .number: id = raw
            case .null: id = nil
            default:
                return ParsedLine(id: nil, request: .failure(.badRequest("field \"id\" must be a string or a number, got \(raw.type)")))
            }
        }
        return ParsedLine(id: id, request: Result { () throws(SocketAPIError) in try request(object) })
    }

    static func request(_ object: JSONObject) throws(SocketAPIError) -> SocketRequest {
        guard let rawOp = object["op"] else { throw .badRequest("field \"op\" is missing: say which operation, e.g. \"op\": \"status\"") }
        guard case .string(let name) = rawOp else { throw .badRequest("field \"op\" must be a string, got \(rawOp.type)") }
        guard let op = SocketOp(rawValue: name) else {
            throw SocketAPIError(.unknownOp, "unknown op \"\(name.prefix(64))\"; known: \(SocketOp.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        var args = Arguments(object: object, op: op)
        let request: SocketRequest
        switch op {
        case .hello: request = .hello
        case .status: request = .status
        case .metrics: request = .metrics
        case .unsubscribe: request = .unsubscribe
        case .logout: request = .session(.logout)
        case .login: request = .session(.login)
        case .subscribe:
            var types: Set<String>? = nil
            if let list = try args.optionalArray("types") {
                var set = Set<String>()
                for (index, item) in list.enumerated() {
                    guard case .string(let type) = item else {
                        throw .badRequest("field \"types[\(index)]\" must be a string (an event name), got \(item.type)")
                    }
                    guard eventNames.contains(type) else {
                        throw .badRequest("field \"types[\(index)]\": unknown event \"\(type.prefix(64))\"; known: \(eventNames.sorted().joined(separator: ", "))")
                    }
                    set.insert(type)
                }
                types = set
            }
            let since = try args.optionalInt("since", range: 0...Int64.max)
            let durable = try args.optionalString("durable")
            if let durable {
                guard !durable.isEmpty, durable.utf8.count <= maxDurableNameLength else {
                    throw .badRequest("field \"durable\" must be a name of 1 to \(maxDurableNameLength) bytes")
                }
            }
            let journal = try args.optionalString("journal")
            if let journal {
                guard !journal.isEmpty, journal.utf8.count <= 64 else {
                    throw .badRequest("field \"journal\" must be the `journal` of an earlier subscribe answer (1 to 64 bytes), got \(journal.utf8.count) bytes")
                }
            }
            request = .subscribe(SubscribeRequest(types: types, since: since, durable: durable, journal: journal))
        case .ack:
            request = .ack(seq: try args.requiredInt("seq", range: 0...Int64.max))
        case .forget:
            let durable = try args.requiredString("durable", nonEmpty: true)
            guard durable.utf8.count <= maxDurableNameLength else {
                throw .badRequest("field \"durable\" must be a name of 1 to \(maxDurableNameLength) bytes")
            }
            request = .forget(durable: durable)
        case .identify:
            let user = try args.requiredString("ext_user_id", nonEmpty: true)
            if let problem = ExtUserID.problem(user) { throw .badRequest("field \"ext_user_id\" \(problem)") }
            let hash = try args.optionalString("hash")
            request = .session(.identify(extUserID: user, hash: hash))
        case .pushToken:
            let token = try args.requiredString("token", nonEmpty: true)
            let platform = try args.optionalInt("platform", range: 0...Int64(Int32.max))
            let status = try args.requiredInt("status", range: 0...4)
            let package = try args.optionalString("app_package_id")
            request = .session(.pushToken(token: token, platform: platform.map { Int($0) }, status: Int(status), appPackageID: package))
        case .language:
            let language = try args.requiredString("language", nonEmpty: true)
            guard language.utf8.count <= 16,
                  language.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x5F })
            else {
                throw .badRequest("field \"language\" must be an ISO 639-1 code (\"en\") or a custom code like \"pt-br\" (letters, digits, - or _, at most 16), got \"\(language.prefix(32))\"")
            }
            request = .session(.language(language))
        case .event:
            let type = try args.requiredString("event_type", nonEmpty: true)
            let payload = try args.optionalObject("payload")
            request = .session(.event(eventType: type, payload: payload))
        case .report:
            let kindName = try args.requiredString("kind")
            guard let kind = EngagementReport.Kind(rawValue: kindName) else {
                throw .badRequest("field \"kind\" must be \"impression\", \"action\" or \"failed\", got \"\(kindName.prefix(32))\"")
            }
            let uid = try args.requiredString("engagement_uid", nonEmpty: true)
            let activity = try args.optionalInt("activity_type", range: Int64.min...Int64.max) ?? 30
            let action = try args.optionalString("action")
            request = .session(.report(kind: kind, engagementUID: uid, activityType: activity, action: action))
        case .minigameAck:
            let template = try args.requiredInt("saw_template_id", range: Int64.min...Int64.max)
            let pending = try args.optionalInt("pending_message_id", range: Int64.min...Int64.max)
            request = .session(.minigameAck(sawTemplateID: template, pendingMessageID: pending))
        case .pushReport:
            let kindName = try args.requiredString("kind")
            guard let kind = PushReportRequest.Kind(rawValue: kindName) else {
                throw .badRequest("field \"kind\" must be \"delivered\", \"impression\", \"action\" or \"failed\", got \"\(kindName.prefix(32))\"")
            }
            let uid = try args.requiredString("engagement_uid", nonEmpty: true)
            // 002 §5 shows message_id as a number, the SDK sends a string: both are accepted, sent as a string.
            let messageID: String?
            if let number = try? args.optionalInt("message_id", range: Int64.min...Int64.max) {
                messageID = String(number)
            } else {
                messageID = try args.optionalString("message_id")
            }
            let action = try args.optionalString("action")
            let user = try args.optionalString("user_ext_id")
            if let user, let problem = ExtUserID.problem(user) { throw .badRequest("field \"user_ext_id\" \(problem)") }
            if kind != .action, action != nil {
                throw .badRequest("field \"action\" is only for kind \"action\", got kind \"\(kind.rawValue)\"")
            }
            request = .pushReport(PushReportRequest(kind: kind, engagementUID: uid, messageID: messageID, action: action, userExtID: user))
        case .send:
            request = .session(.send(try args.message(integerField: "cid")))
        case .request:
            let message = try args.message(integerField: "cid")
            let expect = try args.optionalInt("expect_cid", range: 0...Int64.max)
            let timeout = try args.optionalInt("timeout_ms", range: 1...3_600_000)
            request = .session(.request(message: message, expectCid: expect, timeoutMs: timeout))
        case .bridge:
            request = .session(.bridge(try args.message(integerField: "bcid")))
        case .api:
            let name = try args.requiredString("call", nonEmpty: true)
            guard let spec = DataAPICatalog.call(named: name) else {
                throw .badRequest("unknown call \"\(name.prefix(64))\"; known: \(DataAPICatalog.suggestions(for: name).joined(separator: ", ")) (smarticoctl api list shows them all)")
            }
            let callArgs = try DataAPIArgs.checked(try args.optionalObject("args") ?? [:], for: spec)
            let raw = try args.optionalBool("raw") ?? false
            let timeout = try args.optionalInt("timeout_ms", range: 1...300_000)
            request = .api(DataAPIRequest(call: name, args: callArgs, raw: raw, timeoutMs: timeout))
        case .logLevel:
            let name = try args.requiredString("level")
            guard let level = Logger.Level(rawValue: name) else {
                throw .badRequest("field \"level\" must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(name.prefix(32))\"")
            }
            request = .logLevel(level)
        }
        try args.rejectUnknown()
        return request
    }

    /// Reads arguments and remembers which members were used (the rest are refused).
    struct Arguments {
        let object: JSONObject
        let op: SocketOp
        var used: Set<String> = ["id", "op"]

        init(object: JSONObject, op: SocketOp) {
            self.object = object
            self.op = op
        }

        private mutating func value(_ name: String) -> JSONValue? {
            used.insert(name)
            guard let v = object[name], !v.isNull else { return nil }
            return v
        }

        private func wrongType(_ name: String, _ expected: String, _ got: JSONValue) -> SocketAPIError {
            .badRequest("field \"\(name)\" of op \"\(op.rawValue)\" must be \(expected), got \(got.type)")
        }

        private func missing(_ name: String, _ expected: String) -> SocketAPIError {
            .badRequest("field \"\(name)\" is required by op \"\(op.rawValue)\" (\(expected))")
        }

        mutating func optionalString(_ name: String) throws(SocketAPIError) -> String? {
            guard let v = value(name) else { return nil }
            guard case .string(let s) = v else { throw wrongType(name, "a string", v) }
            return s
        }

        mutating func requiredString(_ name: String, nonEmpty: Bool = false) throws(SocketAPIError) -> String {
            guard let s = try optionalString(name) else { throw missing(name, "a string") }
            if nonEmpty && s.isEmpty { throw .badRequest("field \"\(name)\" of op \"\(op.rawValue)\" must not be empty") }
            return s
        }

        mutating func optionalInt(_ name: String, range: ClosedRange<Int64>) throws(SocketAPIError) -> Int64? {
            guard let v = value(name) else { return nil }
            guard case .number(let n) = v else { throw wrongType(name, "an integer", v) }
            guard let i = n.int64 else { throw .badRequest("field \"\(name)\" of op \"\(op.rawValue)\" must be an integer, got \(n.literal.prefix(40))") }
            guard range.contains(i) else {
                throw .badRequest("field \"\(name)\" of op \"\(op.rawValue)\" must be in \(range.lowerBound)...\(range.upperBound), got \(i)")
            }
            return i
        }

        mutating func requiredInt(_ name: String, range: ClosedRange<Int64>) throws(SocketAPIError) -> Int64 {
            guard let i = try optionalInt(name, range: range) else { throw missing(name, "an integer") }
            return i
        }

        mutating func optionalBool(_ name: String) throws(SocketAPIError) -> Bool? {
            guard let v = value(name) else { return nil }
            guard case .bool(let b) = v else { throw wrongType(name, "true or false", v) }
            return b
        }

        mutating func optionalArray(_ name: String) throws(SocketAPIError) -> [JSONValue]? {
            guard let v = value(name) else { return nil }
            guard case .array(let a) = v else { throw wrongType(name, "an array", v) }
            return a
        }

        mutating func optionalObject(_ name: String) throws(SocketAPIError) -> JSONObject? {
            guard let v = value(name) else { return nil }
            guard case .object(let o) = v else { throw wrongType(name, "an object", v) }
            return o
        }

        /// `message`: an object whose `field` is an integer.
        mutating func message(integerField field: String) throws(SocketAPIError) -> JSONObject {
            guard let message = try optionalObject("message") else {
                throw missing("message", "a JSON object with an integer \"\(field)\"")
            }
            guard let raw = message[field], !raw.isNull else {
                throw .badRequest("field \"message.\(field)\" is required by op \"\(op.rawValue)\" (an integer)")
            }
            guard case .number(let n) = raw, n.int64 != nil else {
                throw .badRequest("field \"message.\(field)\" of op \"\(op.rawValue)\" must be an integer, got \(raw.type == .number ? raw.numberValue!.literal : raw.type.description)")
            }
            return message
        }

        func rejectUnknown() throws(SocketAPIError) {
            for key in object.keys where !used.contains(key) {
                throw .badRequest("field \"\(key.prefix(64))\" is not an argument of op \"\(op.rawValue)\"")
            }
        }
    }
}
