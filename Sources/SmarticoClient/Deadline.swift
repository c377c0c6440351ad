#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A point on the monotonic clock, or never: what every wait of this library is bounded by.
public struct Deadline: Sendable, Equatable {
    /// Nanoseconds on `CLOCK_MONOTONIC`; `nil` = never.
    public let ns: UInt64?
    /// The length it was made with (for messages: "within 30 s").
    public let seconds: Double

    public init(ns: UInt64?, seconds: Double) {
        self.ns = ns
        self.seconds = seconds
    }

    public static let never = Deadline(ns: nil, seconds: .infinity)

    /// `seconds` from now (at most about 30 years; a negative or NaN length is now).
    public static func after(seconds: Double) -> Deadline {
        let add: UInt64 = seconds >= 1e9 ? UInt64(1e18) : seconds > 0 ? UInt64((seconds * 1e9).rounded()) : 0
        return Deadline(ns: Deadline.monotonicNanoseconds() &+ add, seconds: seconds)
    }

    /// Milliseconds left for `poll` (rounded up, at least 0, at most `Int32.max`), or -1 for never.
    public var pollTimeoutMs: Int32 {
        guard let ns else { return -1 }
        let now = Deadline.monotonicNanoseconds()
        guard ns > now else { return 0 }
        return Int32(clamping: (ns - now + 999_999) / 1_000_000)
    }

    public var hasPassed: Bool {
        guard let ns else { return false }
        return Deadline.monotonicNanoseconds() >= ns
    }

    /// Whichever of the two comes first.
    public func earlier(_ other: Deadline) -> Deadline {
        guard let mine = ns else { return other }
        guard let theirs = other.ns else { return self }
        return theirs < mine ? other : self
    }

    /// Now on `CLOCK_MONOTONIC`, in nanoseconds.
    public static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

func monotonicNanoseconds() -> UInt64 { Deadline.monotonicNanoseconds() }
