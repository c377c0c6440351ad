// The only Foundation use of the module: time zones and the wall clock. Nothing on the
// parsing or decoding path depends on it.
import Foundation

extension UserAgent {
    /// Browser-convention offset in minutes (UTC − local) of `timeZone` at `date`:
    /// GMT+3 → −180, UTC → 0, GMT−5 → 300. Daylight saving is taken at `date`.
    public static func tzoffset(for timeZone: TimeZone, at date: Date) -> Int64 {
        -Int64(timeZone.secondsFromGMT(for: date)) / 60
    }
}

extension ClientMessageEncoder {
    /// The system clock in milliseconds since the epoch.
    @Sendable public static func systemMilliseconds() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
    }
}
