/// Limits applied while parsing untrusted JSON.
public struct JSONParseOptions: Sendable, Equatable {
    /// Deepest nesting of arrays/objects accepted (the top-level container is depth 1). Parsing
    /// itself never recurses, but serializing, comparing and freeing a value recurse once per
    /// level: keep this in the hundreds or low thousands.
    public var maxDepth: Int
    /// Largest input accepted, in bytes; `nil` for no limit.
    public var maxBytes: Int?

    public init(maxDepth: Int = 512, maxBytes: Int? = nil) {
        self.maxDepth = maxDepth
        self.maxBytes = maxBytes
    }
}

/// Why a byte string is not acceptable JSON, and where (0-based byte offset).
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// A byte that cannot start or continue what was expected.
        case unexpectedByte(UInt8, expected: String)
        /// The input ended while something was still expected.
        case unexpectedEnd(expected: String)
        /// Bytes in a string that are not valid UTF-8 (overlong, surrogate, truncated, > U+10FFFF).
        case invalidUTF8
        /// A raw control character (U+0000...U+001F) inside a string: it must be escaped.
        case unescapedControlCharacter(UInt8)
        /// A backslash followed by something other than `" \ / b f n r t u`.
        case invalidEscape(UInt8)
        /// A `\u` escape without four hex digits.
        case invalidUnicodeEscape
        /// A `\uD800-\uDFFF` escape that is not part of a valid surrogate pair.
        case loneSurrogate(UInt16)
        /// A malformed number (leading zero, missing digits after `.` or `e`).
        case invalidNumber(reason: String)
        /// Arrays/objects nested deeper than `maxDepth`.
        case tooDeep(limit: Int)
        /// The input is larger than `maxBytes`.
        case tooLarge(limit: Int, size: Int)
    }

    public var kind: Kind
    /// Offset of the offending byte in the input.
    public var offset: Int

    public init(_ kind: Kind, at offset: Int) {
        self.kind = kind
        self.offset = offset
    }

    public var description: String { reason(at: "at byte \(offset)") }

    /// What is wrong, without where: for a message that says where in its own way (a config file's line and column).
    public var reason: String { reason(at: nil) }

    /// The 1-based line and column of `offset` in `bytes` (columns count Unicode scalars).
    public func lineAndColumn(in bytes: [UInt8]) -> (line: Int, column: Int) {
        var line = 1, column = 1
        for b in bytes.prefix(offset) {
            if b == 0x0A { line += 1; column = 1 } else if b & 0xC0 != 0x80 { column += 1 }
        }
        return (line, column)
    }

    private func reason(at place: String?) -> String {
        let at = place.map { " " + $0 } ?? ""
        switch kind {
        case .unexpectedByte(let b, let expected):
            return "unexpected \(JSONParseError.show(b))\(at), expected \(expected)"
        case .unexpectedEnd(let expected):
            return "unexpected end of input\(at), expected \(expected)"
        case .invalidUTF8:
            return "invalid UTF-8 in string\(at)"
        case .unescapedControlCharacter(let b):
            return "unescaped control character \(JSONParseError.show(b)) in string\(at), expected it escaped (e.g. \\n or \\u00XX)"
        case .invalidEscape(let b):
            return "invalid escape \\\(JSONParseError.show(b))\(at), expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX"
        case .invalidUnicodeEscape:
            return "invalid \\u escape\(at), expected four hex digits"
        case .loneSurrogate(let u):
            return "lone surrogate \\u\(String(u, radix: 16, uppercase: true))\(at), expected a high surrogate followed by a low surrogate"
        case .invalidNumber(let reason):
            return "invalid number\(at): \(reason)"
        case .tooDeep(let limit):
            return "nesting deeper than \(limit) levels\(at)"
        case .tooLarge(let limit, let size):
            return "input of \(size) bytes is larger than the limit of \(limit) bytes"
        }
    }

    static func show(_ b: UInt8) -> String {
        if b >= 0x20, b < 0x7F { return "'\(Character(Unicode.Scalar(b)))'" }
        return "byte 0x" + (b < 16 ? "0" : "") + String(b, radix: 16, uppercase: true)
    }
}


extension JSONValue {
    /// Parses one JSON text (RFC 8259, strict) from raw bytes (copied first).
    public init(parsing bytes: UnsafeRawBufferPointer, options: JSONParseOptions = JSONParseOptions()) throws(JSONParseError) {
        try self.init(parsing: Array(bytes), options: options)
    }

    /// Parses one JSON text from a byte array.
    ///
    /// Iterative (an explicit stack, no recursion), linear in the input size, and bounded by
    /// `options.maxDepth` / `options.maxBytes`.
    public init(parsing bytes: [UInt8], options: JSONParseOptions = JSONParseOptions()) throws(JSONParseError) {
        var parser = try JSONByteParser(bytes, options: options)
        self = try parser.parseDocument()
    }

    /// Parses one JSON text from the UTF-8 of a string.
    public init(parsing text: String, options: JSONParseOptions = JSONParseOptions()) throws(JSONParseError) {
        try self.init(parsing: Array(text.utf8), options: options)
    }
}

/// One member of a parsed top-level object, as byte ranges into the parsed input.
public struct JSONMemberRange: Sendable, Equatable {
    /// The member's (decoded) name.
    public var name: String
    /// The member name's bytes between its quotes, escapes not decoded.
    public var key: Range<Int>
    /// True when the name contains a backslash escape (its bytes are then not its text).
    public var keyHasEscapes: Bool
    /// The value's bytes, first to last (no surrounding whitespace).
    public var value: Range<Int>

    /// The member's bytes from the name's opening quote to the value's last byte.
    public var whole: Range<Int> { (key.lowerBound - 1)..<value.upperBound }
}

/// The parser. Containers under construction live on flat stacks (`values`, `keys`, `frames`)
/// so nesting costs no recursion. For a top-level object it also records where each member's
/// name and value are (``members``), so that a message can be forwarded as the bytes that arrived.
///
/// Without `buildsValues` it only validates: the same grammar, limits and errors, the same
/// ``members`` (their names decoded), but no value is built — no string, number, array or object
/// of the document (``RawJSONObject``, which reads the few members it needs afterwards).
struct JSONByteParser {
    private struct Frame {
        var isObject: Bool
        var valueStart: Int
        var keyStart: Int
    }

    private let p: [UInt8]
    private let n: Int
    private let maxDepth: Int
    private let buildsValues: Bool
    private var i = 0
    private var values: [JSONValue] = []
    private var keys: [String] = []
    private var frames: [Frame] = []
    /// The top-level value's bytes (set once parsed).
    private(set) var valueRange: Range<Int> = 0..<0
    /// The top-level value's type (set once parsed).
    private(set) var valueType: JSONType = .null
    /// The members of a top-level object, in order (duplicates kept).
    private(set) var members: [JSONMemberRange] = []
    /// The members of the top-level object's first member's value, when that is an object.
    private(set) var firstValueMembers: [JSONMemberRange] = []
    /// True when the input has a line feed or carriage return (only possible as whitespace).
    private(set) var containsLineBreaks = false
    private var pendingKey: (range: Range<Int>, escaped: Bool, name: String) = (0..<0, false, "")
    private var pendingValueStart = 0
    private var pendingInnerKey: (range: Range<Int>, escaped: Bool, name: String) = (0..<0, false, "")
    private var pendingInnerValueStart = 0

    /// True inside an object that is the value of a top-level object's first member.
    private var inFirstValueObject: Bool {
        frames.count == 2 && members.isEmpty && frames[0].isObject && frames[1].isObject
    }

    init(_ bytes: [UInt8], options: JSONParseOptions, buildsValues: Bool = true) throws(JSONParseError) {
        if let limit = options.maxBytes, bytes.count > limit {
            throw JSONParseError(.tooLarge(limit: limit, size: bytes.count), at: limit)
        }
        p = bytes
        n = bytes.count
        maxDepth = options.maxDepth
        self.buildsValues = buildsValues
    }

    private static let quote = UInt8(ascii: "\"")
    private static let backslash = UInt8(ascii: "\\")

    private mutating func skipWhitespace() {
        while i < n {
            switch p[i] {
            case 0x20, 0x09: i += 1
            case 0x0A, 0x0D: i += 1; containsLineBreaks = true
            default: return
            }
        }
    }

    private func fail(expected: String) -> JSONParseError {
        i < n ? JSONParseError(.unexpectedByte(p[i], expected: expected), at: i)
            : JSONParseError(.unexpectedEnd(expected: expected), at: i)
    }

    private mutating func openContainer(isObject: Bool) throws(JSONParseError) {
        if frames.count >= maxDepth { throw JSONParseError(.tooDeep(limit: maxDepth), at: i) }
        frames.append(Frame(isObject: isObject, valueStart: values.count, keyStart: keys.count))
        i += 1
        skipWhitespace()
    }

    private mutating func closeContainer() -> JSONValue {
        let top = frames.removeLast()
        i += 1
        guard buildsValues else { return .null }
        let elements = Array(values[top.valueStart...])
        values.removeSubrange(top.valueStart...)
        if !top.isObject { return .array(elements) }
        let names = Array(keys[top.keyStart...])
        keys.removeSubrange(top.keyStart...)
        return .object(JSONObject(keys: names, values: elements))
    }

    /// At a member name: `"name"` then `:`.
    private mutating func parseKeyAndColon() throws(JSONParseError) {
        guard i < n, p[i] == Self.quote else { throw fail(expected: "a member name in double quotes") }
        let start = i + 1
        let topLevel = frames.count == 1
        let inner = !topLevel && inFirstValueObject
        let (name, escaped) = try parseString(decoding: buildsValues || topLevel || inner)
        if buildsValues { keys.append(name) }
        if topLevel { pendingKey = (start..<(i - 1), escaped, name) }
        if inner { pendingInnerKey = (start..<(i - 1), escaped, name) }
        skipWhitespace()
        guard i < n, p[i] == UInt8(ascii: ":") else { throw fail(expected: "':' after the member name") }
        i += 1
        skipWhitespace()
        if topLevel { pendingValueStart = i }
        if inner { pendingInnerValueStart = i }
    }

    /// Parses the whole input as one JSON text. Without `buildsValues` the value returned is
    /// `null`: read ``valueType``, ``valueRange`` and ``members``.
    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let start = i
        if i < n {
            switch p[i] {
            case UInt8(ascii: "{"): valueType = .object
            case UInt8(ascii: "["): valueType = .array
            case Self.quote: valueType = .string
            case UInt8(ascii: "t"), UInt8(ascii: "f"): valueType = .bool
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): valueType = .number
            default: valueType = .null
            }
        }
        nextValue: while true {
            guard i < n else { throw fail(expected: "a value") }
            var value: JSONValue
            switch p[i] {
            case UInt8(ascii: "{"):
                try openContainer(isObject: true)
                if i < n, p[i] == UInt8(ascii: "}") {
                    value = closeContainer()
                } else {
                    try parseKeyAndColon()
                    continue nextValue
                }
            case UInt8(ascii: "["):
                try openContainer(isObject: false)
                if i < n, p[i] == UInt8(ascii: "]") {
                    value = closeContainer()
                } else {
                    continue nextValue
                }
            case Self.quote:
                let text = try parseString(decoding: buildsValues).text
                value = buildsValues ? .string(text) : .null
            case UInt8(ascii: "t"):
                try expectWord("true"); value = .bool(true)
            case UInt8(ascii: "f"):
                try expectWord("false"); value = .bool(false)
            case UInt8(ascii: "n"):
                try expectWord("null"); value = .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                let numberStart = i
                try scanNumber()
                value = buildsValues ? .number(JSONNumber(uncheckedLiteral: String(decoding: p[numberStart..<i], as: UTF8.self))) : .null
            default:
                throw fail(expected: "a value")
            }
            // A complete value: attach it to the open container(s), closing as many as end here.
            while true {
                guard let top = frames.last else {
                    valueRange = start..<i
                    skipWhitespace()
                    if i < n { throw fail(expected: "end of input") }
                    return value
                }
                if frames.count == 1, top.isObject {
                    members.append(JSONMemberRange(
                        name: pendingKey.name, key: pendingKey.range, keyHasEscapes: pendingKey.escaped,
                        value: pendingValueStart..<i))
                } else if inFirstValueObject {
                    firstValueMembers.append(JSONMemberRange(
                        name: pendingInnerKey.name, key: pendingInnerKey.range, keyHasEscapes: pendingInnerKey.escaped,
                        value: pendingInnerValueStart..<i))
                }
                if buildsValues { values.append(value) }
                skipWhitespace()
                guard i < n else { throw fail(expected: top.isObject ? "',' or '}'" : "',' or ']'") }
                let b = p[i]
                if b == UInt8(ascii: ",") {
                    i += 1
                    skipWhitespace()
                    if top.isObject { try parseKeyAndColon() }
                    continue nextValue
                }
                if top.isObject ? b == UInt8(ascii: "}") : b == UInt8(ascii: "]") {
                    value = closeContainer()
                    continue
                }
                throw fail(expected: top.isObject ? "',' or '}'" : "',' or ']'")
            }
        }
    }

    private mutating func expectWord(_ word: String) throws(JSONParseError) {
        for (k, b) in word.utf8.enumerated() {
            guard i < n, p[i] == b else { throw fail(expected: k == 0 ? "a value" : "'\(word)'") }
            i += 1
        }
    }

    private func isDigit(_ k: Int) -> Bool { k < n && p[k] >= 0x30 && p[k] <= 0x39 }

    /// At `-` or a digit: RFC 8259's number grammar; leaves `i` after the number.
    private mutating func scanNumber() throws(JSONParseError) {
        if p[i] == UInt8(ascii: "-") { i += 1 }
        guard isDigit(i) else { throw JSONParseError(.invalidNumber(reason: "expected a digit after '-'"), at: i) }
        if p[i] == 0x30 {
            i += 1
            if isDigit(i) { throw JSONParseError(.invalidNumber(reason: "leading zeros are not allowed"), at: i) }
        } else {
            while isDigit(i) { i += 1 }
        }
        if i < n, p[i] == UInt8(ascii: ".") {
            i += 1
            guard isDigit(i) else { throw JSONParseError(.invalidNumber(reason: "expected a digit after '.'"), at: i) }
            while isDigit(i) { i += 1 }
        }
        if i < n, p[i] == UInt8(ascii: "e") || p[i] == UInt8(ascii: "E") {
            i += 1
            if i < n, p[i] == UInt8(ascii: "+") || p[i] == UInt8(ascii: "-") { i += 1 }
            guard isDigit(i) else { throw JSONParseError(.invalidNumber(reason: "expected a digit in the exponent"), at: i) }
            while isDigit(i) { i += 1 }
        }
    }

    /// At the opening quote; leaves `i` after the closing quote. Checks UTF-8, refuses raw control
    /// characters and checks escapes; says whether there were escapes. With `decoding`, also
    /// returns the string's text (escapes decoded); without, an empty text.
    private mutating func parseString(decoding: Bool) throws(JSONParseError) -> (text: String, escaped: Bool) {
        i += 1
        var runStart = i
        var escaped = false
        var decoded: [UInt8] = []  // used once an escape is seen
        while true {
            skipPlainRun()
            guard i < n else { throw JSONParseError(.unexpectedEnd(expected: "'\"' to end the string"), at: i) }
            let b = p[i]
            if b == Self.quote { break }
            if b >= 0x80 {
                try skipUTF8Sequence()
            } else if b < 0x20 {
                throw JSONParseError(.unescapedControlCharacter(b), at: i)
            } else if b == Self.backslash {
                escaped = true
                if decoding { decoded.append(contentsOf: p[runStart..<i]) }
                try decodeEscape(into: &decoded, keeping: decoding)
                runStart = i
            } else {
                i += 1
            }
        }
        let end = i
        i += 1
        guard decoding else { return ("", escaped) }
        guard escaped else { return (String(decoding: p[runStart..<end], as: UTF8.self), false) }
        decoded.append(contentsOf: p[runStart..<end])
        return (String(decoding: decoded, as: UTF8.self), true)
    }

    /// The bytes a string may hold that need no check of their own: printable ASCII but `"` and
    /// the backslash.
    private static let plainInString: [Bool] = (0..<256).map { b in
        b >= 0x20 && b < 0x80 && b != Int(quote) && b != Int(backslash)
    }

    /// Inside a string: moves `i` past the bytes that need no check of their own, the most of any
    /// string, one table look-up a byte in a loop over locals.
    private mutating func skipPlainRun() {
        var j = i
        Self.plainInString.withUnsafeBufferPointer { plain in
            p.withUnsafeBufferPointer { buffer in
                while j < buffer.count, plain[Int(buffer[j])] { j += 1 }
            }
        }
        i = j
    }

    /// At a backslash: checks the escape, appends the escaped character's UTF-8 when `keeping`,
    /// and leaves `i` after the escape.
    private mutating func decodeEscape(into out: inout [UInt8], keeping: Bool) throws(JSONParseError) {
        let escapeAt = i
        guard i + 1 < n else { throw JSONParseError(.unexpectedEnd(expected: "an escape character after '\\'"), at: n) }
        let e = p[i + 1]
        i += 2
        let byte: UInt8
        switch e {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): byte = e
        case UInt8(ascii: "b"): byte = 0x08
        case UInt8(ascii: "f"): byte = 0x0C
        case UInt8(ascii: "n"): byte = 0x0A
        case UInt8(ascii: "r"): byte = 0x0D
        case UInt8(ascii: "t"): byte = 0x09
        case UInt8(ascii: "u"):
            let unit = try readHex4()
            var scalar = UInt32(unit)
            if unit >= 0xD800, unit <= 0xDBFF {
                guard i + 1 < n, p[i] == Self.backslash, p[i + 1] == UInt8(ascii: "u") else {
                    throw JSONParseError(.loneSurrogate(unit), at: escapeAt)
                }
                i += 2
                let low = try readHex4()
                guard low >= 0xDC00, low <= 0xDFFF else { throw JSONParseError(.loneSurrogate(unit), at: escapeAt) }
                scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            } else if unit >= 0xDC00, unit <= 0xDFFF {
                throw JSONParseError(.loneSurrogate(unit), at: escapeAt)
            }
            // Not a surrogate here, so always a valid scalar.
            if keeping { out.append(contentsOf: Unicode.Scalar(scalar)!.utf8) }
            return
        default:
            throw JSONParseError(.invalidEscape(e), at: escapeAt + 1)
        }
        if keeping { out.append(byte) }
    }

    /// Four hex digits at `i` (advanced past them).
    private mutating func readHex4() throws(JSONParseError) -> UInt16 {
        var v: UInt16 = 0
        for _ in 0..<4 {
            guard i < n, let d = hexDigit(p[i]) else { throw JSONParseError(.invalidUnicodeEscape, at: i) }
            v = v << 4 | UInt16(d)
            i += 1
        }
        return v
    }

    private func hexDigit(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x41...0x46: c - 0x41 + 10
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }

    /// At a byte >= 0x80 inside a string: one well-formed UTF-8 sequence (RFC 3629 table); leaves
    /// `i` after it.
    private mutating func skipUTF8Sequence() throws(JSONParseError) {
        let start = i
        var lo: UInt8 = 0x80, hi: UInt8 = 0xBF
        let extra: Int
        switch p[i] {
        case 0xC2...0xDF: extra = 1
        case 0xE0: extra = 2; lo = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: extra = 2
        case 0xED: extra = 2; hi = 0x9F
        case 0xF0: extra = 3; lo = 0x90
        case 0xF1...0xF3: extra = 3
        case 0xF4: extra = 3; hi = 0x8F
        default: throw JSONParseError(.invalidUTF8, at: start)
        }
        guard i + extra < n, p[i + 1] >= lo, p[i + 1] <= hi else { throw JSONParseError(.invalidUTF8, at: start) }
        var k = 2
        while k <= extra {
            guard p[i + k] & 0xC0 == 0x80 else { throw JSONParseError(.invalidUTF8, at: start) }
            k += 1
        }
        i += extra + 1
    }
}
