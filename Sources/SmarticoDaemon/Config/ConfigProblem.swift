import SmarticoProtocol

/// One thing wrong with a configuration: which key, and what is wrong with it.
///
/// `key` is the dotted path of the JSON key (`session.keepalive_s`, `socket.control_uids[1]`),
/// an environment variable (`https_proxy`), a position (`line 3, column 7`) or empty for the
/// whole file. `message` never contains the value of a secret.
public struct ConfigProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// An error fails `--check-config` and the start (exit 78); a warning is printed and fails neither.
    public enum Severity: Sendable, Hashable { case error, warning }

    public var key: String
    public var message: String
    public var severity: Severity

    public init(key: String, message: String, severity: Severity = .error) {
        self.key = key
        self.message = message
        self.severity = severity
    }

    /// `<key>: <message>`, or the message alone for a problem of the whole file.
    public var description: String { key.isEmpty ? message : "\(key): \(message)" }
}

/// Every problem found in one configuration, with where it came from (a file path or `<memory>`).
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    public var source: String
    /// At least one, in the order of the keys in the file's schema.
    public var problems: [ConfigProblem]

    public init(source: String, problems: [ConfigProblem]) {
        self.source = source
        self.problems = problems
    }

    /// What `smarticod --check-config` prints: `<source>: <key>: <message>` per problem.
    public var lines: [String] { problems.map { "\(source): \($0)" } }

    public var description: String { lines.joined(separator: "\n") }
}

/// A value a configuration key can hold, read from its JSON value (nil when it does not fit).
protocol ConfigValue {
    init?(configJSON: JSONValue)
    /// The JSON type, as docs/configuration.md names it.
    static var configType: String { get }
}

extension Bool: ConfigValue {
    init?(configJSON j: JSONValue) { guard let b = j.boolValue else { return nil }; self = b }
    static var configType: String { "boolean" }
}

extension String: ConfigValue {
    init?(configJSON j: JSONValue) { guard let s = j.stringValue else { return nil }; self = s }
    static var configType: String { "string" }
}

extension Secret: ConfigValue {
    init?(configJSON j: JSONValue) { guard let s = j.stringValue else { return nil }; self.init(s) }
    static var configType: String { "string" }
}

extension ConfigValue where Self: RawRepresentable, RawValue == String {
    init?(configJSON j: JSONValue) { guard let v = j.stringValue.flatMap(Self.init(rawValue:)) else { return nil }; self = v }
    static var configType: String { "string" }
}

/// Integers are written as integers (`10`, not `10.0` or `1e1`) and must fit.
extension ConfigValue where Self: FixedWidthInteger {
    init?(configJSON j: JSONValue) {
        guard let n = j.numberValue, n.isIntegerLiteral, let v = n.intValue.flatMap(Self.init(exactly:)) else { return nil }
        self = v
    }
    static var configType: String { "integer" }
}

extension Int: ConfigValue {}
extension Int32: ConfigValue {}
extension UInt32: ConfigValue {}

/// Any finite number (`1e400` is not).
extension Double: ConfigValue {
    init?(configJSON j: JSONValue) { guard let d = j.doubleValue, d.isFinite else { return nil }; self = d }
    static var configType: String { "number" }
}

extension Array: ConfigValue where Element: ConfigValue {
    init?(configJSON j: JSONValue) {
        guard let items = j.arrayValue else { return nil }
        let read = items.compactMap(Element.init(configJSON:))
        guard read.count == items.count else { return nil }
        self = read
    }
    static var configType: String { "array of \(Element.configType)s" }
}

extension Dictionary: ConfigValue where Key == String, Value: ConfigValue {
    init?(configJSON j: JSONValue) {
        guard let members = j.objectValue else { return nil }
        self = [:]
        for (k, v) in members {
            guard let value = Value(configJSON: v) else { return nil }
            self[k] = value
        }
    }
    static var configType: String { "object of \(Value.configType)s" }
}

/// `null`, or what the wrapped type reads.
extension Optional: ConfigValue where Wrapped: ConfigValue {
    init?(configJSON j: JSONValue) {
        if j.isNull { self = .none } else if let v = Wrapped(configJSON: j) { self = v } else { return nil }
    }
    static var configType: String { Wrapped.configType + " or null" }
}

/// What was found, for a message; secrets only say what kind of value they were.
func described(_ json: JSONValue, secret: Bool) -> String {
    if secret, case .string(let s) = json { return "a string of \(s.count) characters" }
    return secret ? kindDescription(json) : rendered(json)
}

/// "null", "a boolean", "a number", "a string", "an array", "an object".
func kindDescription(_ json: JSONValue) -> String {
    switch json {
    case .null: "null"
    case .array, .object: "an \(json.type)"
    default: "a \(json.type)"
    }
}

/// A short rendering of a value for a message: strings quoted and JSON-escaped, arrays and
/// objects compact (`[1000, -1]`), everything cut to about `limit` characters.
func rendered(_ json: JSONValue, limit: Int = 60) -> String {
    var out = ""
    func write(_ j: JSONValue) {
        switch j {
        case .string(let s): out += quoted(s)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() where out.count <= limit {
                out += i > 0 ? ", " : ""
                write(item)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, member) in members.enumerated() where out.count <= limit {
                out += (i > 0 ? ", " : "") + quoted(member.key) + ": "
                write(member.value)
            }
            out += "}"
        default: out += j.serializedString()
        }
    }
    write(json)
    return out.count <= limit ? out : String(out.prefix(limit)) + "…"
}

/// `s` as a JSON string literal.
func quoted(_ s: String) -> String { JSONValue.string(s).serializedString() }

/// A key as it appears in a dotted path: JSON-quoted when it is empty or holds control
/// characters, spaces, dots, brackets or quotes, so that a problem line stays one unambiguous line.
func keyComponent(_ name: String) -> String {
    let plain = !name.isEmpty && name.unicodeScalars.allSatisfy {
        $0.value > 0x20 && $0.value != 0x7F && !$0.properties.isWhitespace && !".[]\"\\".unicodeScalars.contains($0)
            && $0.properties.generalCategory != .control && $0.properties.generalCategory != .format
    }
    return plain ? name : quoted(name)
}

/// "did you mean …?" for unknown keys.
enum ConfigKeySuggestion {
    static func unknownKeyMessage(_ name: String, siblings: [String], path: String) -> String {
        if let near = closest(to: name, in: siblings) { return "unknown key (did you mean \"\(near)\"?)" }
        // The right key in the wrong object: `keepalive_s` at the top level.
        let here = path.isEmpty ? name : path + "." + name
        if let elsewhere = DaemonConfig.allKeyPaths.first(where: { $0.split(separator: ".").last.map(String.init) == name && $0 != here }) {
            return "unknown key here (did you mean \"\(elsewhere)\"?)"
        }
        return "unknown key (known keys here: \(siblings.map { "\"\($0)\"" }.joined(separator: ", ")))"
    }

    /// The sibling at the smallest edit distance, if it is close enough to be a typo.
    static func closest(to name: String, in candidates: [String]) -> String? {
        let lowered = String(name.lowercased().map { $0 == "-" ? "_" : $0 })
        let scored = candidates.map { ($0, editDistance(lowered, $0)) }.filter { $0.1 <= max(1, min(3, $0.0.count / 3)) }
        return scored.min { $0.1 < $1.1 }?.0
    }

    /// Levenshtein distance, one row at a time.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let b = Array(b)
        var row = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var next = [i + 1]
            for (j, y) in b.enumerated() { next.append(min(row[j + 1] + 1, next[j] + 1, row[j] + (x == y ? 0 : 1))) }
            row = next
        }
        return row[b.count]
    }
}
