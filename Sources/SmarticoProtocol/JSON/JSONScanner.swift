/// One member of a scanned top-level object, as byte ranges into the scanned input.
public struct JSONMemberRange: Sendable, Equatable {
    /// The member name's bytes between its quotes, escapes not decoded.
    public var key: Range<Int>
    /// True when the name contains a backslash escape (its bytes are then not its text).
    public var keyHasEscapes: Bool
    /// The value's bytes, first to last (no surrounding whitespace).
    public var value: Range<Int>

    /// The member's bytes from the name's opening quote to the value's last byte.
    public var whole: Range<Int> { (key.lowerBound - 1)..<value.upperBound }
}

/// What ``JSONScanner`` found in a valid document.
public struct JSONScan: Sendable, Equatable {
    /// Type of the top-level value.
    public var type: JSONType
    /// The top-level value's bytes (the document without leading/trailing whitespace).
    public var value: Range<Int>
    /// The members of a top-level object, in order (duplicates kept); empty for anything else.
    public var members: [JSONMemberRange]
    /// True when the document contains a line feed or carriage return. Valid JSON has them only
    /// as whitespace between tokens (inside strings they must be escaped).
    public var containsLineBreaks: Bool
}

/// A validating scanner: accepts and rejects exactly what `JSONValue(parsing:options:)` does,
/// with the same ``JSONParseError`` (kind and offset), but builds no value. For a top-level
/// object it records where each member's name and value are, so a caller can parse only the
/// members it needs and copy the rest as the bytes that arrived.
///
/// Linear in the input, no recursion, no allocation other than the member list (and a bit
/// stack for nesting deeper than 64 levels).
public enum JSONScanner {
    /// Scans one JSON text.
    public static func scan(_ bytes: UnsafeRawBufferPointer, options: JSONParseOptions = JSONParseOptions()) throws(JSONParseError) -> JSONScan {
        if let limit = options.maxBytes, bytes.count > limit {
            throw JSONParseError(.tooLarge(limit: limit, size: bytes.count), at: limit)
        }
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw JSONParseError(.unexpectedEnd(expected: "a value"), at: 0)
        }
        var s = JSONByteScanner(base: base.assumingMemoryBound(to: UInt8.self), count: bytes.count, maxDepth: options.maxDepth)
        return try s.scanDocument()
    }

    /// Scans one JSON text from a byte array.
    public static func scan(_ bytes: [UInt8], options: JSONParseOptions = JSONParseOptions()) throws(JSONParseError) -> JSONScan {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(JSONParseError) -> JSONScan in try scan(buffer, options: options) }
        }
        return try result.get()
    }
}

/// The scanner proper: `JSONByteParser`'s control flow, step for step (so errors and their
/// offsets are the same), with nothing built.
struct JSONByteScanner {
    private let p: UnsafePointer<UInt8>
    private let n: Int
    private let maxDepth: Int
    private var i = 0
    /// Open containers: bit k of `inline` (k < 64) or of `overflow[(k - 64) / 64]` is 1 for an object.
    private var depth = 0
    private var inline: UInt64 = 0
    private var overflow: [UInt64] = []
    private var lineBreaks = false
    /// Top-level object bookkeeping.
    private var members: [JSONMemberRange] = []
    private var pendingKey: Range<Int> = 0..<0
    private var pendingKeyEscaped = false
    private var pendingValueStart = 0

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
            if b == 0x20 || b == 0x09 {
                i += 1
            } else if b == 0x0A || b == 0x0D {
                lineBreaks = true
                i += 1
            } else {
                return
            }
        }
    }

    private func fail(expected: String) -> JSONParseError {
        i < n ? JSONParseError(.unexpectedByte(p[i], expected: expected), at: i)
            : JSONParseError(.unexpectedEnd(expected: expected), at: i)
    }

    // MARK: container stack

    @inline(__always)
    private var topIsObject: Bool {
        let k = depth - 1
        if k < 64 { return inline >> UInt64(k) & 1 == 1 }
        return overflow[(k - 64) >> 6] >> UInt64((k - 64) & 63) & 1 == 1
    }

    private mutating func openContainer(isObject: Bool) throws(JSONParseError) {
        if depth >= maxDepth { throw JSONParseError(.tooDeep(limit: maxDepth), at: i) }
        let k = depth
        if k < 64 {
            let bit = UInt64(1) << UInt64(k)
            inline = isObject ? inline | bit : inline & ~bit
        } else {
            let w = (k - 64) >> 6
            if w == overflow.count { overflow.append(0) }
            let bit = UInt64(1) << UInt64((k - 64) & 63)
            overflow[w] = isObject ? overflow[w] | bit : overflow[w] & ~bit
        }
        depth += 1
        i += 1
        skipWhitespace()
    }

    @inline(__always)
    private mutating func closeContainer() {
        depth -= 1
        i += 1
    }

    /// At a member name: `"name"` then `:`.
    private mutating func scanKeyAndColon() throws(JSONParseError) {
        guard i < n, p[i] == Self.quote else { throw fail(expected: "a member name in double quotes") }
        let start = i + 1
        let escaped = try scanString()
        if depth == 1 {
            pendingKey = start..<(i - 1)
            pendingKeyEscaped = escaped
        }
        skipWhitespace()
        guard i < n, p[i] == UInt8(ascii: ":") else { throw fail(expected: "':' after the member name") }
        i += 1
        skipWhitespace()
        if depth == 1 { pendingValueStart = i }
    }

    mutating func scanDocument() throws(JSONParseError) -> JSONScan {
        skipWhitespace()
        let start = i
        guard i < n else { throw fail(expected: "a value") }
        let type: JSONType
        switch p[i] {
        case UInt8(ascii: "{"): type = .object
        case UInt8(ascii: "["): type = .array
        case Self.quote: type = .string
        case UInt8(ascii: "t"), UInt8(ascii: "f"): type = .bool
        case UInt8(ascii: "n"): type = .null
        default: type = .number
        }
        nextValue: while true {
            guard i < n else { throw fail(expected: "a value") }
            switch p[i] {
            case UInt8(ascii: "{"):
                try openContainer(isObject: true)
                if i < n, p[i] == UInt8(ascii: "}") {
                    closeContainer()
                } else {
                    try scanKeyAndColon()
                    continue nextValue
                }
            case UInt8(ascii: "["):
                try openContainer(isObject: false)
                if i < n, p[i] == UInt8(ascii: "]") {
                    closeContainer()
                } else {
                    continue nextValue
                }
            case Self.quote:
                _ = try scanString()
            case UInt8(ascii: "t"):
                try expectWord("true")
            case UInt8(ascii: "f"):
                try expectWord("false")
            case UInt8(ascii: "n"):
                try expectWord("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                try scanNumber()
            default:
                throw fail(expected: "a value")
            }
            // A complete value ends at `i`: attach it to the open container(s), closing as many as end here.
            while true {
                guard depth > 0 else {
                    let end = i
                    skipWhitespace()
                    if i < n { throw fail(expected: "end of input") }
                    return JSONScan(type: type, value: start..<end, members: members, containsLineBreaks: lineBreaks)
                }
                let isObject = topIsObject
                if depth == 1, isObject {
                    if members.isEmpty { members.reserveCapacity(16) }
                    members.append(JSONMemberRange(key: pendingKey, keyHasEscapes: pendingKeyEscaped, value: pendingValueStart..<i))
                }
                skipWhitespace()
                guard i < n else { throw fail(expected: isObject ? "',' or '}'" : "',' or ']'") }
                let b = p[i]
                if b == UInt8(ascii: ",") {
                    i += 1
                    skipWhitespace()
                    if isObject { try scanKeyAndColon() }
                    continue nextValue
                }
                if isObject ? b == UInt8(ascii: "}") : b == UInt8(ascii: "]") {
                    closeContainer()
                    continue
                }
                throw fail(expected: isObject ? "',' or '}'" : "',' or ']'")
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

    @inline(__always)
    private mutating func scanNumber() throws(JSONParseError) {
        try JSONGrammar.skipNumber(p, count: n, at: &i)
    }

    /// At the opening quote; leaves `i` after the closing quote; returns whether there were escapes.
    ///
    /// One pass. The parser finds the closing quote first (UTF-8, control characters, escape
    /// characters) and only then decodes `\u` escapes, so an error in a `\u` escape is held
    /// back here until the end of the string is found: an error of the first kind anywhere in
    /// the string is reported before it, as the parser does.
    private mutating func scanString() throws(JSONParseError) -> Bool {
        i += 1
        var hasEscape = false
        var unicodeError: JSONParseError?
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
                hasEscape = true
                guard i + 1 < n else { throw JSONParseError(.unexpectedEnd(expected: "an escape character after '\\'"), at: n) }
                switch p[i + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    i += 2
                case UInt8(ascii: "u"):
                    if unicodeError == nil {
                        switch checkUnicodeEscape(at: i) {
                        case .success(let next): i = next
                        case .failure(let e): unicodeError = e; i += 2
                        }
                    } else {
                        i += 2
                    }
                default:
                    throw JSONParseError(.invalidEscape(p[i + 1]), at: i + 1)
                }
            }
        }
        i += 1
        if let unicodeError { throw unicodeError }
        return hasEscape
    }

    /// The parser's `\u` decoding without the output: at the backslash of `\u`; the index after
    /// the escape (after the low half of a surrogate pair), or the error the parser reports.
    /// Reads never go past the input; a string cut short is reported by the caller instead.
    private func checkUnicodeEscape(at escapeAt: Int) -> Result<Int, JSONParseError> {
        var k = escapeAt + 2
        guard let unit = readHex4(at: &k) else { return .failure(JSONParseError(.invalidUnicodeEscape, at: k)) }
        if unit >= 0xD800, unit <= 0xDBFF {
            guard k + 1 < n, p[k] == Self.backslash, p[k + 1] == UInt8(ascii: "u") else {
                return .failure(JSONParseError(.loneSurrogate(unit), at: escapeAt))
            }
            k += 2
            guard let low = readHex4(at: &k) else { return .failure(JSONParseError(.invalidUnicodeEscape, at: k)) }
            guard low >= 0xDC00, low <= 0xDFFF else { return .failure(JSONParseError(.loneSurrogate(unit), at: escapeAt)) }
        } else if unit >= 0xDC00, unit <= 0xDFFF {
            return .failure(JSONParseError(.loneSurrogate(unit), at: escapeAt))
        }
        return .success(k)
    }

    /// Four hex digits at `k` (advanced past them); nil with `k` at the offending byte.
    @inline(__always)
    private func readHex4(at k: inout Int) -> UInt16? {
        JSONGrammar.hex4(p, at: &k, end: n)
    }

    /// At a byte >= 0x80 inside a string: one well-formed UTF-8 sequence (the parser's check).
    @inline(__always)
    private mutating func validateUTF8Sequence() throws(JSONParseError) {
        try JSONGrammar.skipUTF8Sequence(p, count: n, at: &i)
    }
}
