import SmarticoProtocol

/// One thing wrong with a configuration: which key, and what is wrong with it.
///
/// `key` is the dotted path of the JSON key (`session.keepalive_s`, `socket.control_uids`),
/// the name of an environment variable (`https_proxy`), or, for a file that cannot be read
/// or parsed, a position (`line 3, column 7`) or `file`. `message` never contains the value
/// of a secret.
public struct ConfigProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// An error fails `--check-config` and the start (exit 78); a warning is printed and
    /// fails neither.
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

/// Every problem found in one configuration, with where it came from (a file path).
/// Its ``lines`` are what `smarticod --check-config` prints, one per problem.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file path, or a label such as `<memory>` for a configuration decoded from bytes.
    public var source: String
    /// At least one problem, in file order (decoding problems, then validation problems,
    /// then problems of the environment).
    public var problems: [ConfigProblem]

    public init(source: String, problems: [ConfigProblem]) {
        self.source = source
        self.problems = problems
    }

    /// One line per problem: `<source>: <key>: <message>` (`<source>: <message>` for a
    /// problem of the whole file, whose key is empty).
    public var lines: [String] {
        problems.map { $0.key.isEmpty ? "\(source): \($0.message)" : "\(source): \($0.key): \($0.message)" }
    }

    public var description: String { lines.joined(separator: "\n") }
}

/// A value a configuration key can hold, read from its JSON value (nil when it does not fit).
protocol ConfigValue {
    init?(configJSON: JSONValue)
    /// The JSON type, as docs/configuration.md names it.
    static var configType: String { get }
}

extension Bool: ConfigValue {
    init?(configJSON j: JSONValue) { guard case .bool(let b) = j else { return nil }; self = b }
    static var configType: String { "boolean" }
}

extension String: ConfigValue {
    init?(configJSON j: JSONValue) { guard case .string(let s) = j else { return nil }; self = s }
    static var configType: String { "string" }
}

/// Integers are written as integers: `10`, not `10.0` or `1e1`.
extension Int: ConfigValue {
    init?(configJSON j: JSONValue) {
        guard case .number(let n) = j, n.isIntegerLiteral, let v = n.intValue else { return nil }
        self = v
    }
    static var configType: String { "integer" }
}

/// Narrower integers: an integer that fits.
extension ConfigValue where Self: FixedWidthInteger {
    init?(configJSON j: JSONValue) { guard let v = Int(configJSON: j).flatMap(Self.init(exactly:)) else { return nil }; self = v }
    static var configType: String { "integer" }
}

extension Int32: ConfigValue {}
extension UInt32: ConfigValue {}

/// Any finite number (`1e400` is not).
extension Double: ConfigValue {
    init?(configJSON j: JSONValue) {
        guard case .number(let n) = j, n.double.isFinite else { return nil }
        self = n.double
    }
    static var configType: String { "number" }
}

extension Array: ConfigValue where Element: ConfigValue {
    init?(configJSON j: JSONValue) {
        guard case .array(let items) = j else { return nil }
        var out: [Element] = []
        for item in items {
            guard let e = Element(configJSON: item) else { return nil }
            out.append(e)
        }
        self = out
    }
    static var configType: String { "array of \(Element.configType)s" }
}

extension Dictionary: ConfigValue where Key == String, Value: ConfigValue {
    init?(configJSON j: JSONValue) {
        guard case .object(let o) = j else { return nil }
        var out: [String: Value] = [:]
        for (k, v) in o {
            guard let e = Value(configJSON: v) else { return nil }
            out[k] = e
        }
        self = out
    }
    static var configType: String { "object of \(Value.configType)s" }
}

extension Secret: ConfigValue {
    init?(configJSON j: JSONValue) { guard let s = String(configJSON: j) else { return nil }; self.init(s) }
    static var configType: String { "string" }
}

extension ConfigValue where Self: RawRepresentable, RawValue == String {
    init?(configJSON j: JSONValue) { guard let v = String(configJSON: j).flatMap(Self.init(rawValue:)) else { return nil }; self = v }
    static var configType: String { "string" }
}

/// What was found, for a message; secrets only say what kind of value it was.
func described(_ json: JSONValue, secret: Bool) -> String {
    if secret, case .string(let s) = json { return "a string of \(s.count) characters" }
    return secret ? kindDescription(json) : rendered(json)
}

/// What kind of value this is, for messages: "a string", "a number", "an object"…
func kindDescription(_ json: JSONValue) -> String {
    switch json {
    case .null: "null"
    case .bool: "a boolean"
    case .number: "a number"
    case .string: "a string"
    case .array: "an array"
    case .object: "an object"
    }
}

/// A short rendering of a value for a message: strings quoted and JSON-escaped, arrays and
/// objects compact (`[1000, -1]`), everything cut to about `limit` characters.
func rendered(_ json: JSONValue, limit: Int = 60) -> String {
    func write(_ j: JSONValue, into out: inout String) {
        if out.count > limit { return }
        switch j {
        case .null, .bool, .number: out += j.serializedString()
        case .string(let s): out += ConfigJSON.quoted(s)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += ", " }
                write(item, into: &out)
                if out.count > limit { return }
            }
            out += "]"
        case .object(let o):
            out += "{"
            for (i, member) in o.enumerated() {
                if i > 0 { out += ", " }
                out += ConfigJSON.quoted(member.key) + ": "
                write(member.value, into: &out)
                if out.count > limit { return }
            }
            out += "}"
        }
    }
    var full = ""
    write(json, into: &full)
    return full.count <= limit ? full : String(full.prefix(limit)) + "…"
}

/// Text helpers of configuration messages.
enum ConfigJSON {
    /// `s` as a JSON string literal.
    static func quoted(_ s: String) -> String { JSONValue.string(s).serializedString() }
}

/// A key as it appears in a dotted path: as is when it is a plain name, JSON-quoted when it
/// is empty or holds control characters, spaces, dots, brackets or quotes (so that a problem
/// line stays one line and unambiguous).
func keyComponent(_ name: String) -> String {
    let plain = !name.isEmpty && name.unicodeScalars.allSatisfy {
        $0.value > 0x20 && $0.value != 0x7F && !$0.properties.isWhitespace && !".[]\"\\".unicodeScalars.contains($0)
            && $0.properties.generalCategory != .control && $0.properties.generalCategory != .format
    }
    return plain ? name : ConfigJSON.quoted(name)
}

/// "did you mean …?" for unknown keys.
enum ConfigKeySuggestion {
    static func unknownKeyMessage(_ name: String, siblings: [String], path: String) -> String {
        if let near = closest(to: name, in: siblings) {
            return "unknown key (did you mean \"\(near)\"?)"
        }
        // The right key in the wrong object: `keepalive_s` at the top level.
        if let elsewhere = DaemonConfig.allKeyPaths.first(where: { $0.split(separator: ".").last.map(String.init) == name && $0 != (path.isEmpty ? name : path + "." + name) }) {
            return "unknown key here (did you mean \"\(elsewhere)\"?)"
        }
        let list = siblings.map { "\"\($0)\"" }.joined(separator: ", ")
        return "unknown key (known keys here: \(list))"
    }

    /// The sibling at the smallest edit distance, if it is close enough to be a typo.
    static func closest(to name: String, in candidates: [String]) -> String? {
        let lowered = String(name.lowercased().map { $0 == "-" ? "_" : $0 })
        var best: (String, Int)?
        for candidate in candidates {
            let d = editDistance(lowered, candidate)
            if d <= max(1, min(3, candidate.count / 3)), best == nil || d < best!.1 { best = (candidate, d) }
        }
        return best?.0
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
