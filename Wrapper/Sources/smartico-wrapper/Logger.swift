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
        // Every line of a multi-line text (a configuration's problems) carries the prefix, so the
        // journal files each at the right priority.
        let prefix = journal ? "<\([7, 6, 4, 3][level.rawValue])>\(level): " : "smartico-wrapper: \(level): "
        writeStderr(text.split(separator: "\n", omittingEmptySubsequences: false).map { prefix + $0 + "\n" }.joined())
    }

    func debug(_ text: String) { write(.debug, text) }
    func info(_ text: String) { write(.info, text) }
    func warning(_ text: String) { write(.warning, text) }
    func error(_ text: String) { write(.error, text) }
}
