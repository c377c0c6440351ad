// Time zones and the wall clock through the C library (no Foundation: the daemon must not
// link it). Nothing on the parsing or decoding path depends on this file.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A time zone seen as what `ua.tzoffset` needs: its offset from UTC at a given instant
/// (daylight saving included).
///
/// ``local`` is the system's zone (`TZ`, else `/etc/localtime`, read by the C library's
/// `localtime_r`); ``fixed(secondsEastOfUTC:)`` a zone without daylight saving; tests may build
/// one from any rule with ``init(_:)``.
public struct UTCOffset: Sendable {
    private let rule: @Sendable (_ epochSeconds: Int64) -> Int

    /// A zone whose offset at `epochSeconds` (seconds since 1970-01-01 UTC) is what `rule`
    /// returns, in seconds east of UTC (GMT+3 → 10800).
    public init(_ rule: @escaping @Sendable (_ epochSeconds: Int64) -> Int) {
        self.rule = rule
    }

    /// Seconds east of UTC at `epochSeconds`: GMT+3 → 10800, UTC → 0, GMT−5 → −18000.
    public func secondsEastOfUTC(atEpochSeconds epochSeconds: Int64) -> Int {
        rule(epochSeconds)
    }

    /// A zone that is always `seconds` east of UTC.
    public static func fixed(secondsEastOfUTC seconds: Int) -> UTCOffset {
        UTCOffset { _ in seconds }
    }

    /// UTC.
    public static let utc = UTCOffset.fixed(secondsEastOfUTC: 0)

    /// The system's local time zone: `localtime_r`'s `tm_gmtoff` at the instant, so daylight
    /// saving follows the instant asked about. The C library reads `TZ`/`/etc/localtime` once
    /// per process; an instant it cannot convert counts as UTC.
    public static let local = UTCOffset { epochSeconds in
        var t = time_t(epochSeconds)
        var parts = tm()
        guard localtime_r(&t, &parts) != nil else { return 0 }
        return Int(parts.tm_gmtoff)
    }
}

extension UserAgent {
    /// Browser-convention offset in minutes (UTC − local) of `zone` at `epochMilliseconds`:
    /// GMT+3 → −180, UTC → 0, GMT−5 → 300. Daylight saving is taken at that instant.
    public static func tzoffset(in zone: UTCOffset, atEpochMilliseconds epochMilliseconds: Int64) -> Int64 {
        let seconds = epochMilliseconds >= 0 ? epochMilliseconds / 1000 : (epochMilliseconds - 999) / 1000
        return -Int64(zone.secondsEastOfUTC(atEpochSeconds: seconds)) / 60
    }
}

extension ClientMessageEncoder {
    /// The system clock (`CLOCK_REALTIME`) in milliseconds since the epoch.
    @Sendable public static func systemMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}
