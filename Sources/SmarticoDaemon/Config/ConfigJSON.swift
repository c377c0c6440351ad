/// A JSON value as written in a configuration file: numbers keep their text so that
/// `10` and `10.5` and `1e400` can each be judged by the field that receives them, and
/// objects keep their members in file order.
///
/// The configuration is read once at start and on SIGHUP; this parser favours exact
/// error positions over speed.
indirect enum ConfigJSON: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number exactly as written (RFC 8259 grammar, already checked).
    case number(String)
    case string(String)
    case array([ConfigJSON])
    case object([(key: String, value: ConfigJSON)])

    static func == (lhs: ConfigJSON, rhs: ConfigJSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: return false
        }
    }

    /// What kind of value this is, for messages: "a string", "a number", "an object"…
    var kindDescription: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    /// A short rendering for an error message: strings quoted and JSON-escaped,
    /// arrays and objects compact, everything cut to about `limit` characters.
    func rendered(limit: Int = 60) -> String {
        let full = compactText(limit: limit + 1)
        if full.count <= limit { return full }
        return String(full.prefix(limit)) + "…"
    }

    private func compactText(limit: Int) -> String {
        var out = ""
        write(into: &out, limit: limit)
        return out
    }

    private func write(into out: inout String, limit: Int) {
        if out.count > limit { return }
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n): out += n
        case .string(let s): out += ConfigJSON.quoted(s)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += ", " }
                item.write(into: &out, limit: limit)
                if out.count > limit { return }
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, member) in members.enumerated() {
                if i > 0 { out += ", " }
                out += ConfigJSON.quoted(member.key) + ": "
                member.value.write(into: &out, limit: limit)
                if out.count > limit { return }
            }
            out += "}"
        }
    }

    /// `s` as a JSON string literal.
    static func quoted(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// The member `key` of an object (the last one when the file repeats the key).
    subscript(key: String) -> ConfigJSON? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.key == key })?.value
    }
}

/// A JSON syntax error at a 1-based line and column (columns count Unicode scalars).
struct ConfigSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    var line: Int
    var column: Int
    /// What is wrong, e.g. `expected ',' or '}' after an object member, found 'x'`.
    var reason: String

    var description: String { "line \(line), column \(column): \(reason)" }
}

/// A strict RFC 8259 parser (no comments, no trailing commas, no NaN) that reports the
/// first syntax error with its line and column, and repeated keys as separate problems.
struct ConfigJSONParser {
    /// Files larger than this are refused before parsing: a configuration is a few KiB.
    static let maximumBytes = 4 << 20
    /// Nesting deeper than this is refused (bounded recursion).
    static let maximumDepth = 64

    private let bytes: [UInt8]
    private var index = 0
    private var line = 1
    private var column = 1
    /// The object keys leading to the value being parsed, for duplicate-key messages.
    private var path: [String] = []
    /// Keys that appear twice in the same object, as dotted paths.
    private(set) var duplicateKeys: [String] = []

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Parses a whole document: one value, surrounded only by whitespace.
    mutating func parseDocument() throws(ConfigSyntaxError) -> ConfigJSON {
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { index = 3 }  // UTF-8 BOM
        skipWhitespace()
        if index == bytes.count { throw error("the file is empty; expected a JSON object") }
        let value = try parseValue(depth: 0)
        skipWhitespace()
        if index < bytes.count { throw error("unexpected \(describeCurrent()) after the end of the JSON value") }
        return value
    }

    // MARK: values

    private mutating func parseValue(depth: Int) throws(ConfigSyntaxError) -> ConfigJSON {
        guard depth < Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth) levels") }
        guard index < bytes.count else { throw error("unexpected end of file; expected a value") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectWord("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw error("unexpected \(describeCurrent()); expected a value (object, array, string, number, true, false or null)")
        }
    }

    private mutating func parseObject(depth: Int) throws(ConfigSyntaxError) -> ConfigJSON {
        advance()  // {
        var members: [(key: String, value: ConfigJSON)] = []
        var seen = Set<String>()
        skipWhitespace()
        if peek(UInt8(ascii: "}")) { advance(); return .object(members) }
        while true {
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of file inside an object; expected a key") }
            guard bytes[index] == UInt8(ascii: "\"") else {
                if bytes[index] == UInt8(ascii: "}") { throw error("trailing comma before '}'") }
                throw error("expected a quoted key, found \(describeCurrent())")
            }
            let key = try parseString()
            skipWhitespace()
            guard peek(UInt8(ascii: ":")) else { throw error("expected ':' after the key \(ConfigJSON.quoted(key)), found \(describeCurrent())") }
            advance()
            skipWhitespace()
            path.append(keyComponent(key))
            let value = try parseValue(depth: depth + 1)
            path.removeLast()
            if !seen.insert(key).inserted { duplicateKeys.append(joinedKeyPath(path + [keyComponent(key)])) }
            members.append((key, value))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of file inside an object; expected ',' or '}'") }
            if bytes[index] == UInt8(ascii: ",") { advance(); continue }
            if bytes[index] == UInt8(ascii: "}") { advance(); return .object(members) }
            throw error("expected ',' or '}' after the value of \(ConfigJSON.quoted(key)), found \(describeCurrent())")
        }
    }

    private mutating func parseArray(depth: Int) throws(ConfigSyntaxError) -> ConfigJSON {
        advance()  // [
        var items: [ConfigJSON] = []
        skipWhitespace()
        if peek(UInt8(ascii: "]")) { advance(); return .array(items) }
        while true {
            skipWhitespace()
            if peek(UInt8(ascii: "]")) { throw error("trailing comma before ']'") }
            path.append("[\(items.count)]")
            items.append(try parseValue(depth: depth + 1))
            path.removeLast()
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of file inside an array; expected ',' or ']'") }
            if bytes[index] == UInt8(ascii: ",") { advance(); continue }
            if bytes[index] == UInt8(ascii: "]") { advance(); return .array(items) }
            throw error("expected ',' or ']' in an array, found \(describeCurrent())")
        }
    }

    private mutating func parseString() throws(ConfigSyntaxError) -> String {
        let startLine = line, startColumn = column
        advance()  // opening quote
        var out: [UInt8] = []
        while true {
            guard index < bytes.count else {
                throw ConfigSyntaxError(line: startLine, column: startColumn, reason: "unterminated string")
            }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                advance()
                guard let text = String(validating: out, as: UTF8.self) else {
                    throw ConfigSyntaxError(line: startLine, column: startColumn, reason: "the string is not valid UTF-8")
                }
                return text
            case UInt8(ascii: "\\"):
                advance()
                guard index < bytes.count else { throw error("unterminated escape sequence") }
                let escape = bytes[index]
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    advance()
                    var scalar = try parseHex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard peek(UInt8(ascii: "\\")), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u") else {
                            throw error("a high surrogate \\u escape must be followed by a low surrogate")
                        }
                        advance(); advance()
                        let low = try parseHex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw error("invalid low surrogate in a \\u escape") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(scalar) {
                        throw error("a lone low surrogate in a \\u escape")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw error("invalid \\u escape") }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                    continue  // parseHex4 already advanced past the digits
                default:
                    throw error("invalid escape '\\\(describeByte(escape))' (valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)")
                }
                advance()
            default:
                if byte < 0x20 {
                    throw error(byte == 0x0A ? "unterminated string (a line break inside a string must be written \\n)" : "a control character inside a string must be escaped")
                }
                out.append(byte)
                advance()
            }
        }
    }

    private mutating func parseHex4() throws(ConfigSyntaxError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard index < bytes.count else { throw error("unexpected end of file in a \\u escape") }
            let b = bytes[index]
            let digit: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - UInt8(ascii: "A") + 10)
            default: throw error("expected 4 hexadecimal digits after \\u, found \(describeCurrent())")
            }
            value = value << 4 | digit
            advance()
        }
        return value
    }

    private mutating func parseNumber() throws(ConfigSyntaxError) -> String {
        let start = index
        if peek(UInt8(ascii: "-")) { advance() }
        guard index < bytes.count, isDigit(bytes[index]) else { throw error("expected a digit after '-', found \(describeCurrent())") }
        if bytes[index] == UInt8(ascii: "0") {
            advance()
            if index < bytes.count, isDigit(bytes[index]) { throw error("numbers must not have leading zeros (write \"0660\" as a string)") }
        } else {
            while index < bytes.count, isDigit(bytes[index]) { advance() }
        }
        if peek(UInt8(ascii: ".")) {
            advance()
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("expected a digit after the decimal point, found \(describeCurrent())") }
            while index < bytes.count, isDigit(bytes[index]) { advance() }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            advance()
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { advance() }
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("expected a digit in the exponent, found \(describeCurrent())") }
            while index < bytes.count, isDigit(bytes[index]) { advance() }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func expectWord(_ word: String) throws(ConfigSyntaxError) {
        for b in word.utf8 {
            guard index < bytes.count, bytes[index] == b else {
                throw error("unexpected \(describeCurrent()); did you mean \(word)? (strings must be quoted)")
            }
            advance()
        }
        if index < bytes.count, isWordByte(bytes[index]) {
            throw error("unexpected \(describeCurrent()) after \(word) (strings must be quoted)")
        }
    }

    // MARK: scanning

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: advance()
            default: return
            }
        }
    }

    private func peek(_ byte: UInt8) -> Bool { index < bytes.count && bytes[index] == byte }

    /// Moves one byte on, keeping line and column (columns count scalars, not bytes).
    private mutating func advance() {
        let byte = bytes[index]
        index += 1
        if byte == 0x0A {
            line += 1
            column = 1
        } else if byte & 0xC0 != 0x80 {
            column += 1
        }
    }

    private func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }

    private func isWordByte(_ b: UInt8) -> Bool {
        isDigit(b) || (b | 0x20 >= UInt8(ascii: "a") && b | 0x20 <= UInt8(ascii: "z")) || b == UInt8(ascii: "_")
    }

    private func describeCurrent() -> String {
        guard index < bytes.count else { return "end of file" }
        return "'" + describeByte(bytes[index]) + "'"
    }

    private func describeByte(_ b: UInt8) -> String {
        switch b {
        case 0x0A: return "\\n"
        case 0x0D: return "\\r"
        case 0x09: return "\\t"
        case 0x20...0x7E: return String(UnicodeScalar(b))
        default:
            let hex = String(b, radix: 16, uppercase: true)
            return "0x" + (hex.count == 1 ? "0" : "") + hex
        }
    }

    private func error(_ reason: String) -> ConfigSyntaxError {
        ConfigSyntaxError(line: line, column: column, reason: reason)
    }
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

/// Joins path components with dots, array indices (`[2]`) without.
func joinedKeyPath(_ components: [String]) -> String {
    var out = ""
    for component in components {
        if component.hasPrefix("[") || out.isEmpty { out += component } else { out += "." + component }
    }
    return out
}
