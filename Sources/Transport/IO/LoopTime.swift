#if canImport(Glibc)
import Glibc
#endif

/// A point on the monotonic clock (`CLOCK_MONOTONIC`), in nanoseconds. Timers of an ``EventLoop`` use it.
public struct LoopInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// Nanoseconds since an arbitrary, fixed point (boot, on Linux).
    public var nanoseconds: UInt64

    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    /// The current monotonic time.
    public static var now: LoopInstant {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return LoopInstant(nanoseconds: UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec))
    }

    public static func < (lhs: LoopInstant, rhs: LoopInstant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    /// `lhs` moved by `rhs`; negative durations move it back (never below zero).
    public static func + (lhs: LoopInstant, rhs: Duration) -> LoopInstant {
        let ns = rhs.ioNanoseconds
        if ns >= 0 {
            let (sum, overflow) = lhs.nanoseconds.addingReportingOverflow(UInt64(ns))
            return LoopInstant(nanoseconds: overflow ? .max : sum)
        }
        let back = UInt64(-ns)
        return LoopInstant(nanoseconds: lhs.nanoseconds > back ? lhs.nanoseconds - back : 0)
    }

    /// Time from `self` to `later` (negative when `later` is earlier).
    public func duration(to later: LoopInstant) -> Duration {
        if later.nanoseconds >= nanoseconds {
            return .nanoseconds(Int64(clamping: later.nanoseconds - nanoseconds))
        }
        return .nanoseconds(-Int64(clamping: nanoseconds - later.nanoseconds))
    }

    public var description: String { "LoopInstant(\(nanoseconds)ns)" }
}

extension Duration {
    /// Whole nanoseconds, saturating at `Int64` bounds.
    var ioNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (ns, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (total, overflow2) = ns.addingReportingOverflow(attoseconds / 1_000_000_000)
        if overflow2 { return seconds < 0 ? .min : .max }
        return total
    }

    /// Human text for error messages, e.g. "1.5s" or "250ms".
    var ioText: String {
        let ns = ioNanoseconds
        if ns % 1_000_000_000 == 0 { return "\(ns / 1_000_000_000)s" }
        if ns % 1_000_000 == 0 { return "\(ns / 1_000_000)ms" }
        return "\(Double(ns) / 1e9)s"
    }
}
