/// Incremental UTF-8 validator (Unicode Table 3-7 "well-formed byte sequences").
///
/// State is carried across calls, so a text message can be checked fragment by fragment as it
/// arrives. It fails fast: a byte is rejected as soon as the bytes seen so far cannot be the
/// prefix of valid UTF-8 (RFC 6455 §8.1), e.g. `ED A0` (a surrogate) is rejected at `A0`,
/// `F4 90` (> U+10FFFF) at `90`, `E0 80` (overlong) at `80`, `C0`/`C1`/`F5`–`FF` at once.
public struct UTF8Validator: Sendable, Hashable {
    /// Continuation bytes still expected for the current sequence (0 = between characters).
    private var needed: UInt8 = 0
    /// Allowed range of the next continuation byte.
    private var lower: UInt8 = 0x80
    private var upper: UInt8 = 0xBF
    /// Bytes validated so far (across calls).
    public private(set) var count: Int = 0

    public init() {}

    /// Whether the bytes so far end on a character boundary (a complete message must).
    public var isComplete: Bool { needed == 0 }

    /// Resets for a new message.
    public mutating func reset() { self = UTF8Validator() }

    /// Validates the next bytes. Returns `nil` if they are a valid continuation so far, or the
    /// offset (counted from the first byte ever given to this validator) of the first byte that
    /// makes the input invalid. After a failure the validator's state is unspecified.
    public mutating func validate(_ bytes: UnsafeRawBufferPointer) -> Int? {
        // The state in locals while the bytes are read, stored back once at the end.
        var needed = self.needed, lower = self.lower, upper = self.upper
        let n = bytes.count
        var i = 0
        while i < n {
            let b = bytes[i]
            i += 1
            if needed == 0 {
                if b < 0x80 { continue }
                switch b {
                case 0xC2 ... 0xDF: needed = 1; lower = 0x80; upper = 0xBF
                case 0xE0: needed = 2; lower = 0xA0; upper = 0xBF
                case 0xE1 ... 0xEC, 0xEE ... 0xEF: needed = 2; lower = 0x80; upper = 0xBF
                case 0xED: needed = 2; lower = 0x80; upper = 0x9F
                case 0xF0: needed = 3; lower = 0x90; upper = 0xBF
                case 0xF1 ... 0xF3: needed = 3; lower = 0x80; upper = 0xBF
                case 0xF4: needed = 3; lower = 0x80; upper = 0x8F
                default:
                    count += i - 1
                    return count
                }
            } else {
                guard b >= lower && b <= upper else {
                    count += i - 1
                    return count
                }
                needed -= 1
                lower = 0x80
                upper = 0xBF
            }
        }
        self.needed = needed
        self.lower = lower
        self.upper = upper
        count += n
        return nil
    }

    /// Convenience: validates a complete buffer.
    public static func isValid(_ bytes: some Collection<UInt8>) -> Bool {
        var v = UTF8Validator()
        return Array(bytes).withUnsafeBytes { v.validate($0) } == nil && v.isComplete
    }
}
