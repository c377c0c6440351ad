#if canImport(Glibc)
import Glibc
#endif
import SmarticoWrapperCore

/// Log lines on stderr: `smartico-wrapper: warning: …`, or with the syslog priority prefix
/// (`<4>`) under systemd, whose journal adds the time.
final class Logger: Sendable {
    let minimum: LogLevel
    let journal: Bool

    init(minimum: LogLevel) {
        self.minimum = minimum
        self.journal = getenv("JOURNAL_STREAM") != nil
    }

    func write(_ level: LogLevel, _ text: String) {
        guard level >= minimum else { return }
        let line: String
        if journal {
            let priority = [7, 6, 4, 3][level.rawValue]
            line = "<\(priority)>\(level): \(text)\n"
        } else {
            line = "smartico-wrapper: \(level): \(text)\n"
        }
        writeStderr(line)
    }

    func debug(_ text: String) { write(.debug, text) }
    func info(_ text: String) { write(.info, text) }
    func warning(_ text: String) { write(.warning, text) }
    func error(_ text: String) { write(.error, text) }
}
