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

    public var description: String {
        switch kind {
        case .unexpectedByte(let b, let expected):
            return "unexpected \(JSONParseError.show(b)) at byte \(offset), expected \(expected)"
        case .unexpectedEnd(let expected):
            return "unexpected end of input at byte \(offset), expected \(expected)"
        case .invalidUTF8:
            return "invalid UTF-8 in string at byte \(offset)"
        case .unescapedControlCharacter(let b):
            return "unescaped control character \(JSONParseError.show(b)) in string at byte \(offset), expected it escaped (e.g. \\n or \\u00XX)"
        case .invalidEscape(let b):
            return "invalid escape \\\(JSONParseError.show(b)) at byte \(offset), expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX"
        case .invalidUnicodeEscape:
            return "invalid \\u escape at byte \(offset), expected four hex digits"
        case .loneSurrogate(let u):
            return "lone surrogate \\u\(String(u, radix: 16, uppercase: true)) at byte \(offset), expected a high surrogate followed by a low surrogate"
        case .invalidNumber(let reason):
            return "invalid number at byte \(offset): \(reason)"
        case .tooDeep(let limit):
            return "nesting deeper than \(limit) levels at byte \(offset)"
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
    /// Parses one JSON text (RFC 8259, strict) from raw bytes.
    ///
    /// Iterative (an explicit stack, no recursion), linear in the input size, and bounded by
    /// `options.maxDepth` / `options.maxBytes`.
    public init(parsing bytes: UnsafeRawBufferPointer, options: JSONParseOptions = JSONParseOptions()) throws(JSONParseError) {
        if let limit = options.maxBytes, bytes.count > limit {
            throw JSONParseError(.tooLarge(limit: limit, size: bytes.count), at: limit)
        }
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw JSONParseError(.unexpectedEnd(expected: "a value"), at: 0)
        }
        var parser = JSONByteParser(base: base.assumingMemoryBound(to: UInt8.self), count: bytes.count, maxDepth: options.maxDepth)
        self = try parser.parseDocument()
    }

    /// Parses one JSON text from a byte array.
    public init(parsing bytes: [UInt8], options: JSONParseOptions = JSONParseOptions()) throws(JSONParseError) {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(JSONParseError) -> JSONValue in try JSONValue(parsing: buffer, options: options) }
        }
        self = try result.get()
    }

    /// Parses one JSON text from the UTF-8 of a string.
    public init(parsing text: String, options: JSONParseOptions = JSONParseOptions()) throws(JSONParseError) {
        var text = text
        let result = text.withUTF8 { buffer in
            Result { () throws(JSONParseError) -> JSONValue in
                try JSONValue(parsing: UnsafeRawBufferPointer(buffer), options: options)
            }
        }
        self = try result.get()
    }
}

/// The parser proper. Containers under construction live on flat stacks (`values`, `keys`,
/// `frames`) so nesting costs no recursion and no copy-on-write of nested arrays.
struct JSONByteParser {
    private struct Frame {
        var isObject: Bool
        var valueStart: Int
        var keyStart: Int
    }

    private let p: UnsafePointer<UInt8>
    private let n: Int
    private let maxDepth: Int
    private var i = 0
    private var values: [JSONValue] = []
    private var keys: [String] = []
    private var frames: [Frame] = []

    init(base: UnsafePointer<UInt8>, count: Int, maxDepth: Int) {
        self.p = base
        self.n = count
        self.maxDepth = maxDepth
    }

    private static let quote = UInt8(ascii: "\"")
    private static let backslash = UInt8(ascii: "\\")

    @inline(__always)
    private mutating func skipWhitespace() {
        while i < n {
            let b = p[i]
            if b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 { i += 1 } else { return }
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
        keys.append(try parseString())
        skipWhitespace()
        guard i < n, p[i] == UInt8(ascii: ":") else { throw fail(expected: "':' after the member name") }
        i += 1
        skipWhitespace()
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
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
                value = .string(try parseString())
            case UInt8(ascii: "t"):
                try expectWord("true"); value = .bool(true)
            case UInt8(ascii: "f"):
                try expectWord("false"); value = .bool(false)
            case UInt8(ascii: "n"):
                try expectWord("null"); value = .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                value = .number(try parseNumber())
            default:
                throw fail(expected: "a value")
            }
            // A complete value: attach it to the open container(s), closing as many as end here.
            while true {
                guard let top = frames.last else {
                    skipWhitespace()
                    if i < n { throw fail(expected: "end of input") }
                    return value
                }
                values.append(value)
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

    private mutating func expectWord(_ word: StaticString) throws(JSONParseError) {
        let w = word.utf8Start
        for k in 0..<word.utf8CodeUnitCount {
            guard i < n, p[i] == w[k] else { throw fail(expected: k == 0 ? "a value" : "'\(word)'") }
            i += 1
        }
    }

    private mutating func parseNumber() throws(JSONParseError) -> JSONNumber {
        let start = i
        try JSONGrammar.skipNumber(p, count: n, at: &i)
        return JSONNumber(uncheckedLiteral: String(decoding: UnsafeBufferPointer(start: p + start, count: i - start), as: UTF8.self))
    }

    /// At the opening quote. Two passes over the string's bytes:
    /// 1. find the closing quote (eight bytes at a time), validating UTF-8 and refusing raw
    ///    control characters, and note whether there are escapes;
    /// 2. without escapes, build the `String` straight from the input; with escapes, decode
    ///    them directly into the new string's storage (the result is never longer than the input).
    /// Both passes are linear; nothing is copied twice.
    private mutating func parseString() throws(JSONParseError) -> String {
        i += 1
        let start = i
        var hasEscape = false
        while true {
            JSONGrammar.skipPlain(p, count: n, at: &i)
            guard i < n else { throw JSONParseError(.unexpectedEnd(expected: "'\"' to end the string"), at: i) }
            let b = p[i]
            if b == Self.quote { break }
            if b >= 0x80 {
                try validateUTF8Sequence()
            } else if b < 0x20 {
                throw JSONParseError(.unescapedControlCharacter(b), at: i)
            } else {
                // Backslash: check the escape character now; `\u` digits are checked in pass 2.
                hasEscape = true
                guard i + 1 < n else { throw JSONParseError(.unexpectedEnd(expected: "an escape character after '\\'"), at: n) }
                switch p[i + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"), UInt8(ascii: "u"):
                    i += 2
                default:
                    throw JSONParseError(.invalidEscape(p[i + 1]), at: i + 1)
                }
            }
        }
        let end = i
        i += 1
        if !hasEscape {
            return String(decoding: UnsafeBufferPointer(start: p + start, count: end - start), as: UTF8.self)
        }
        var failure: JSONParseError?
        let result = String(unsafeUninitializedCapacity: end - start) { out in
            do throws(JSONParseError) {
                return try decodeEscapes(from: start, to: end, into: out)
            } catch {
                failure = error
                return 0
            }
        }
        if let failure { throw failure }
        return result
    }

    /// Pass 2 of `parseString`: copies `p[start..<end]` into `out`, decoding escapes.
    private func decodeEscapes(from start: Int, to end: Int, into out: UnsafeMutableBufferPointer<UInt8>) throws(JSONParseError) -> Int {
        guard let dst = out.baseAddress else { return 0 }
        var k = start
        var o = 0
        while k < end {
            // Copy the run up to the next backslash.
            var r = k
            while r < end, p[r] != Self.backslash { r += 1 }
            if r > k {
                (dst + o).update(from: p + k, count: r - k)
                o += r - k
            }
            k = r
            guard k < end else { break }
            let escapeAt = k
            let e = p[k + 1]
            k += 2
            switch e {
            case UInt8(ascii: "\""): dst[o] = 0x22; o += 1
            case UInt8(ascii: "\\"): dst[o] = 0x5C; o += 1
            case UInt8(ascii: "/"): dst[o] = 0x2F; o += 1
            case UInt8(ascii: "b"): dst[o] = 0x08; o += 1
            case UInt8(ascii: "f"): dst[o] = 0x0C; o += 1
            case UInt8(ascii: "n"): dst[o] = 0x0A; o += 1
            case UInt8(ascii: "r"): dst[o] = 0x0D; o += 1
            case UInt8(ascii: "t"): dst[o] = 0x09; o += 1
            case UInt8(ascii: "u"):
                let unit = try readHex4(at: &k, end: end)
                var scalar = UInt32(unit)
                if unit >= 0xD800, unit <= 0xDBFF {
                    guard k + 1 < end, p[k] == Self.backslash, p[k + 1] == UInt8(ascii: "u") else {
                        throw JSONParseError(.loneSurrogate(unit), at: escapeAt)
                    }
                    k += 2
                    let low = try readHex4(at: &k, end: end)
                    guard low >= 0xDC00, low <= 0xDFFF else { throw JSONParseError(.loneSurrogate(unit), at: escapeAt) }
                    scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                } else if unit >= 0xDC00, unit <= 0xDFFF {
                    throw JSONParseError(.loneSurrogate(unit), at: escapeAt)
                }
                o += JSONByteParser.writeUTF8(scalar, to: dst + o)
            default:
                throw JSONParseError(.invalidEscape(e), at: escapeAt + 1)
            }
        }
        return o
    }

    /// True when any of the eight bytes is `"`, `\\`, a control character or non-ASCII
    /// (classic SWAR zero-byte tests; exact, no false negatives).
    @inline(__always)
    static func needsAttention(_ w: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let quote = w ^ (ones &* 0x22)
        let slash = w ^ (ones &* 0x5C)
        let hasQuote = (quote &- ones) & ~quote
        let hasSlash = (slash &- ones) & ~slash
        let hasControl = (w &- ones &* 0x20) & ~w
        return (hasQuote | hasSlash | hasControl | w) & highs != 0
    }

    private func readHex4(at k: inout Int, end: Int) throws(JSONParseError) -> UInt16 {
        guard let v = JSONGrammar.hex4(p, at: &k, end: end) else { throw JSONParseError(.invalidUnicodeEscape, at: k) }
        return v
    }

    /// Writes one scalar as UTF-8; returns the number of bytes.
    private static func writeUTF8(_ s: UInt32, to d: UnsafeMutablePointer<UInt8>) -> Int {
        switch s {
        case ..<0x80:
            d[0] = UInt8(s)
            return 1
        case ..<0x800:
            d[0] = UInt8(0xC0 | s >> 6); d[1] = UInt8(0x80 | s & 0x3F)
            return 2
        case ..<0x10000:
            d[0] = UInt8(0xE0 | s >> 12); d[1] = UInt8(0x80 | s >> 6 & 0x3F); d[2] = UInt8(0x80 | s & 0x3F)
            return 3
        default:
            d[0] = UInt8(0xF0 | s >> 18); d[1] = UInt8(0x80 | s >> 12 & 0x3F)
            d[2] = UInt8(0x80 | s >> 6 & 0x3F); d[3] = UInt8(0x80 | s & 0x3F)
            return 4
        }
    }

    /// At a byte >= 0x80 inside a string: checks one well-formed UTF-8 sequence (RFC 3629 table).
    @inline(__always)
    private mutating func validateUTF8Sequence() throws(JSONParseError) {
        try JSONGrammar.skipUTF8Sequence(p, count: n, at: &i)
    }
}
