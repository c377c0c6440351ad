#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SmarticoClient
import SmarticoProtocol

/// Unbuffered writes to stdout and stderr: every line is out when the call returns (`tail` in a
/// pipe shows events as they come). A closed stdout (`smarticoctl tail | head`) ends the
/// program quietly with 0.
enum Output {
    static func line(_ text: String) { write(1, Array(text.utf8) + [0x0A]) }

    static func lineBytes(_ bytes: [UInt8]) { write(1, bytes + [0x0A]) }

    /// Text to stdout as is, with a final newline only when it has none.
    static func text(_ text: String) { write(1, Array(text.utf8) + (text.isEmpty || text.hasSuffix("\n") ? [] : [0x0A])) }

    static func error(_ text: String) { write(2, Array(("smarticoctl: " + text).utf8) + [0x0A]) }

    /// Text to stderr as is, with a final newline.
    static func raw(error text: String) { write(2, Array(text.utf8) + (text.hasSuffix("\n") ? [] : [0x0A])) }

    private static func write(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 {
                offset += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                if fd == 1 { exit(0) }  // EPIPE (SIGPIPE is ignored): the reader is gone
                return
            }
        }
    }
}

/// Text for people: one line, control characters escaped (a server string cannot break the
/// one-line-per-event layout), at most `limit` characters with `…`.
func oneLine(_ text: String, limit: Int = 300) -> String { ClientError.oneLine(text, limit: limit) }

/// A JSON value for a human: strings bare, everything else compact JSON; one line, bounded.
func describe(_ value: JSONValue?, limit: Int = 300) -> String {
    guard let value else { return "—" }
    if case .string(let s) = value { return oneLine(s, limit: limit) }
    return oneLine(value.serializedString(), limit: limit)
}

/// `"2026-11-22 22:31:05.123"` in the local time zone (`TZ`).
func localTime(ms: Int64) -> String {
    let (seconds, millis) = ms.quotientAndRemainder(dividingBy: 1000)
    var t = time_t(millis < 0 ? seconds - 1 : seconds)
    let m = millis < 0 ? millis + 1000 : millis
    var parts = tm()
    guard localtime_r(&t, &parts) != nil else { return "\(ms) ms" }
    var buffer = [CChar](repeating: 0, count: 64)
    let n = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S", &parts)
    let text = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return text + "." + pad3(m)
}

private func pad3(_ v: Int64) -> String {
    let s = String(v)
    return String(repeating: "0", count: max(0, 3 - s.count)) + s
}

/// `"850ms"`, `"12s"`, `"3m12s"`, `"2h05m"`, `"4d03h"`.
func formatDuration(ms: Int64) -> String {
    let ms = max(0, ms)
    if ms < 1000 { return "\(ms)ms" }
    let s = ms / 1000
    if s < 60 { return "\(s)s" }
    if s < 3600 { return "\(s / 60)m\(two(s % 60))s" }
    if s < 86400 { return "\(s / 3600)h\(two(s / 60 % 60))m" }
    return "\(s / 86400)d\(two(s / 3600 % 24))h"
}

private func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }

/// Milliseconds since the epoch, now.
func nowMs() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}

/// Rows `name  value` with the values aligned after the longest name.
func aligned(_ rows: [(String, String)]) -> [String] {
    let width = rows.map(\.0.count).max() ?? 0
    return rows.map { name, value in
        name + ":" + String(repeating: " ", count: width - name.count + 2) + value
    }
}
