/// A JSON number kept as its exact literal text.
///
/// Parsing never rounds: `18446744073709551615`, `1e400` or `0.1` are stored as the
/// bytes that arrived and are serialized back byte for byte. Conversions happen only
/// when asked (`int64`, `uint64`, `double`, ...). Equality is numeric and exact
/// (`1`, `1.0` and `10e-1` are equal; `-0` equals `0`), computed on the decimal digits,
/// never through `Double`.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    /// The number's literal text, valid per RFC 8259 (e.g. `-12.5e3`).
    public let literal: String

    /// Wraps a literal that the caller guarantees is a valid RFC 8259 number.
    @usableFromInline
    init(uncheckedLiteral: String) { self.literal = uncheckedLiteral }

    /// Creates a number from literal text; `nil` if it is not an RFC 8259 number.
    public init?(literal: String) {
        guard case .number(let n)? = try? JSONValue(parsing: literal), n.literal == literal else { return nil }
        self = n
    }

    public init(_ value: Int64) { literal = String(value) }
    public init(_ value: Int) { literal = String(value) }
    public init(_ value: UInt64) { literal = String(value) }

    /// A number from a `Double`, written in Swift's shortest round-trip form; `nil` for NaN or infinity.
    public init?(_ value: Double) {
        guard value.isFinite else { return nil }
        if value == value.rounded(.towardZero), abs(value) < 1e15 {
            // Integral values print without ".0" so that 3.0 is written as 3.
            literal = value == 0 && value.sign == .minus ? "-0" : String(Int64(value))
        } else {
            literal = value.description
        }
    }

    public var description: String { literal }

    /// True when the literal has neither a fraction nor an exponent.
    public var isIntegerLiteral: Bool {
        for b in literal.utf8 where b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E") {
            return false
        }
        return true
    }

    /// The exact value as `Int64`, or `nil` when the number is not an integer or is out of range.
    /// `1e3` gives 1000, `1.5` gives `nil`.
    public var int64: Int64? {
        let negative: Bool
        let magnitude: UInt64
        if let fast = fastInteger() {
            (negative, magnitude) = fast
        } else {
            guard let d = decimal() else { return nil }
            if d.isZero { return 0 }
            guard d.exponent >= 0, let m = d.magnitude() else { return nil }
            (negative, magnitude) = (d.negative, m)
        }
        if negative { return magnitude <= UInt64(Int64.max) + 1 ? Int64(truncatingIfNeeded: 0 &- magnitude) : nil }
        return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
    }

    /// The exact value as `UInt64`, or `nil` when negative (other than zero), fractional or out of range.
    public var uint64: UInt64? {
        if let fast = fastInteger() { return fast.negative ? (fast.magnitude == 0 ? 0 : nil) : fast.magnitude }
        guard let d = decimal() else { return nil }
        if d.isZero { return 0 }
        guard d.exponent >= 0, !d.negative else { return nil }
        return d.magnitude()
    }

    /// The exact value as `Int`, or `nil`.
    public var intValue: Int? { int64.flatMap { Int(exactly: $0) } }

    /// The nearest `Double` (may be infinite for literals such as `1e400`).
    public var double: Double { Double(literal) ?? .nan }

    // MARK: - Exact decimal form

    /// Integer literal without fraction/exponent that fits in 64 bits.
    private func fastInteger() -> (negative: Bool, magnitude: UInt64)? {
        var negative = false
        var value: UInt64 = 0
        var first = true
        for b in literal.utf8 {
            if first, b == UInt8(ascii: "-") { negative = true; first = false; continue }
            first = false
            guard b >= 0x30, b <= 0x39 else { return nil }
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(UInt64(b - 0x30))
            if o1 || o2 { return nil }
            value = s
        }
        return (negative, value)
    }

    /// Sign, significant digits (no leading/trailing zeros) and base-10 exponent.
    struct Decimal: Hashable {
        var negative: Bool
        var digits: [UInt8]  // ASCII digits, empty for zero
        var exponent: Int
        var isZero: Bool { digits.isEmpty }

        func magnitude() -> UInt64? {
            guard digits.count + exponent <= 20 else { return nil }
            var v: UInt64 = 0
            for d in digits {
                let (m, o1) = v.multipliedReportingOverflow(by: 10)
                let (s, o2) = m.addingReportingOverflow(UInt64(d - 0x30))
                if o1 || o2 { return nil }
                v = s
            }
            for _ in 0..<exponent {
                let (m, o) = v.multipliedReportingOverflow(by: 10)
                if o { return nil }
                v = m
            }
            return v
        }
    }

    /// `nil` only when the exponent does not fit in an `Int`.
    func decimal() -> Decimal? {
        let bytes = Array(literal.utf8)
        var i = 0
        var negative = false
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") { negative = true; i += 1 }
        var digits: [UInt8] = []
        var fractionCount = 0
        var seenDot = false
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: ".") { seenDot = true; i += 1; continue }
            if b == UInt8(ascii: "e") || b == UInt8(ascii: "E") { break }
            if !(digits.isEmpty && b == 0x30) { digits.append(b) }
            if seenDot { fractionCount += 1 }
            i += 1
        }
        var exponent = 0
        if i < bytes.count {
            i += 1
            var expNegative = false
            if i < bytes.count, bytes[i] == UInt8(ascii: "-") || bytes[i] == UInt8(ascii: "+") {
                expNegative = bytes[i] == UInt8(ascii: "-"); i += 1
            }
            while i < bytes.count {
                let (m, o1) = exponent.multipliedReportingOverflow(by: 10)
                let (s, o2) = m.addingReportingOverflow(Int(bytes[i] - 0x30))
                if o1 || o2 || s > Int.max / 4 { return nil }
                exponent = s
                i += 1
            }
            if expNegative { exponent = -exponent }
        }
        exponent -= fractionCount
        while let last = digits.last, last == 0x30 { digits.removeLast(); exponent += 1 }
        if digits.isEmpty { return Decimal(negative: false, digits: [], exponent: 0) }
        return Decimal(negative: negative, digits: digits, exponent: exponent)
    }

    public static func == (lhs: JSONNumber, rhs: JSONNumber) -> Bool {
        if lhs.literal == rhs.literal { return true }
        guard let a = lhs.decimal(), let b = rhs.decimal() else { return false }
        return a == b
    }

    public func hash(into hasher: inout Hasher) {
        if let d = decimal() { hasher.combine(d) } else { hasher.combine(literal) }
    }
}
