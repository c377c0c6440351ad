// The byte-level rules the parser (`JSONByteParser`) and the scanner (`JSONByteScanner`) share, so
// that the two accept and reject exactly the same documents with the same errors at the same offsets.

enum JSONGrammar {
    /// Inside a string: advances `i` to the first byte that a string's scan must look at — `"`,
    /// `\\`, a control character or a non-ASCII byte — or to `n` when there is none. Sixteen bytes
    /// at a time with SSE2 compares (what `SIMD16` lowers to on x86-64; NEON on arm64), the compare
    /// masks read as two words whose lowest set byte is the one found (`any(_:)` on the mask
    /// compiled to a byte-wise reduction here, Swift 6.3); the last 15 bytes of the input one at a
    /// time. On ASCII text ~1 instruction a byte, and a short string (a member name) costs one
    /// block, where an 8-byte SWAR test then a byte loop cost ~3 times as many.
    @inline(__always)
    static func skipPlain(_ p: UnsafePointer<UInt8>, count n: Int, at i: inout Int) {
        let quote = SIMD16<UInt8>(repeating: 0x22)
        let backslash = SIMD16<UInt8>(repeating: 0x5C)
        let space = SIMD16<UInt8>(repeating: 0x20)
        let high = SIMD16<UInt8>(repeating: 0x80)
        let raw = UnsafeRawPointer(p)
        while n &- i >= 16 {
            let v = raw.loadUnaligned(fromByteOffset: i, as: SIMD16<UInt8>.self)
            let special = (v .== quote) .| (v .== backslash) .| (v .< space) .| (v .>= high)
            let words = unsafeBitCast(special, to: SIMD2<UInt64>.self)
            if words[0] != 0 {
                i &+= words[0].trailingZeroBitCount &>> 3
                return
            }
            if words[1] != 0 {
                i &+= 8 &+ words[1].trailingZeroBitCount &>> 3
                return
            }
            i &+= 16
        }
        while i < n {
            let b = p[i]
            if b == 0x22 || b == 0x5C || b < 0x20 || b >= 0x80 { return }
            i &+= 1
        }
    }

    /// At the first byte of a number (`-` or a digit): checks RFC 8259's number grammar and leaves `i`
    /// after the number.
    @inline(__always)
    static func skipNumber(_ p: UnsafePointer<UInt8>, count n: Int, at i: inout Int) throws(JSONParseError) {
        @inline(__always) func isDigit(_ k: Int) -> Bool { k < n && p[k] >= 0x30 && p[k] <= 0x39 }
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

    /// Four hex digits at `k`, before `end` (`k` advanced past them); nil with `k` at the offending byte.
    @inline(__always)
    static func hex4(_ p: UnsafePointer<UInt8>, at k: inout Int, end: Int) -> UInt16? {
        var v: UInt16 = 0
        for _ in 0..<4 {
            guard k < end else { return nil }
            let c = p[k]
            let d: UInt8
            switch c {
            case 0x30...0x39: d = c - 0x30
            case 0x41...0x46: d = c - 0x41 + 10
            case 0x61...0x66: d = c - 0x61 + 10
            default: return nil
            }
            v = v << 4 | UInt16(d)
            k += 1
        }
        return v
    }

    /// At a byte >= 0x80 inside a string: checks one well-formed UTF-8 sequence (RFC 3629 table) and
    /// leaves `i` after it.
    @inline(__always)
    static func skipUTF8Sequence(_ p: UnsafePointer<UInt8>, count n: Int, at i: inout Int) throws(JSONParseError) {
        let lead = p[i]
        let start = i
        var lo: UInt8 = 0x80, hi: UInt8 = 0xBF
        let extra: Int
        switch lead {
        case 0xC2...0xDF: extra = 1
        case 0xE0: extra = 2; lo = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: extra = 2
        case 0xED: extra = 2; hi = 0x9F
        case 0xF0: extra = 3; lo = 0x90
        case 0xF1...0xF3: extra = 3
        case 0xF4: extra = 3; hi = 0x8F
        default: throw JSONParseError(.invalidUTF8, at: start)
        }
        guard i + extra < n else { throw JSONParseError(.invalidUTF8, at: start) }
        let second = p[i + 1]
        guard second >= lo, second <= hi else { throw JSONParseError(.invalidUTF8, at: start) }
        if extra >= 2 { guard p[i + 2] & 0xC0 == 0x80 else { throw JSONParseError(.invalidUTF8, at: start) } }
        if extra == 3 { guard p[i + 3] & 0xC0 == 0x80 else { throw JSONParseError(.invalidUTF8, at: start) } }
        i += extra + 1
    }
}
