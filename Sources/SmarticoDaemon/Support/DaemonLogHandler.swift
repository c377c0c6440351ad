#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Logging
import Synchronization

/// The daemon's log handler: one line on stderr per log call, always.
///
/// The line has swift-log's `StreamLogHandler` shape,
/// `2026-11-27T23:15:02+0000 info smarticod: conn=3 [SmarticoDaemon] message`, but every part that
/// can carry untrusted text (the message, metadata keys and values, the label and source) goes
/// through ``LogEscaping/escaped(_:)``. A peer's `ext_user_id`, a server's errMsg or a hash
/// command's stderr with a newline in it therefore cannot start a line of its own
/// (docs/operations.md, "Logs").
///
/// Under systemd (`journal`: `JOURNAL_STREAM` set) the line starts with its syslog priority
/// (`<6>info smarticod: …`, sd-daemon(3)) instead of a timestamp: journald stamps it and files it
/// under that priority, so `journalctl -p warning` shows the failures.
///
/// The level lives in a shared ``DaemonLogLevel`` when one is given: every logger of the daemon
/// then reads (and a `logger.logLevel = …` writes) the one level, which the `log_level` op and a
/// reload change at run time.
public struct DaemonLogHandler: LogHandler {
    public var logLevel: Logger.Level {
        get { sharedLevel?.level ?? ownLevel }
        set {
            if let sharedLevel { sharedLevel.level = newValue } else { ownLevel = newValue }
        }
    }
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    private var ownLevel: Logger.Level = .info
    private let sharedLevel: DaemonLogLevel?
    private let label: String
    private let journal: Bool
    private let output: @Sendable (String) -> Void

    /// A handler writing to stderr; `journal`: priority prefixes, no timestamps (systemd).
    public init(label: String, journal: Bool = false, level: DaemonLogLevel? = nil,
                metadataProvider: Logger.MetadataProvider? = nil) {
        self.init(label: label, journal: journal, level: level, metadataProvider: metadataProvider,
                  output: DaemonLogHandler.writeToStandardError)
    }

    /// A handler handing each finished line (with its `\n`) to `output` (tests).
    init(label: String, journal: Bool = false, level: DaemonLogLevel? = nil,
         metadataProvider: Logger.MetadataProvider? = nil, output: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.journal = journal
        self.sharedLevel = level
        self.metadataProvider = metadataProvider
        self.output = output
    }

    /// The syslog priority of `level` (sd-daemon(3)): trace and debug 7, info 6, notice 5,
    /// warning 4, error 3, critical 2.
    static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
        if let explicit = event.metadata { all.merge(explicit) { $1 } }
        if let error = event.error {
            all["error.message"] = "\(error)"
            all["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        output(Self.line(prefix: journal ? "<\(Self.syslogPriority(event.level))>" : Self.timestamp() + " ",
                        level: event.level, label: label, metadata: all,
                        source: event.source, message: "\(event.message)"))
    }

    /// One log line, ending in `\n`, with every untrusted part escaped. `prefix`: a timestamp
    /// and a space, or the journal's `<N>`.
    static func line(prefix: String, level: Logger.Level, label: String, metadata: Logger.Metadata,
                     source: String, message: String) -> String {
        var out = prefix + "\(level)"
        if !label.isEmpty { out += " " + LogEscaping.escaped(label) }
        out += ":"
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            out += " " + LogEscaping.escaped(key) + "=" + LogEscaping.escaped("\(value)")
        }
        out += " [" + LogEscaping.escaped(source) + "] " + LogEscaping.escaped(message) + "\n"
        return out
    }

    /// Local time as `StreamLogHandler` prints it: `2026-11-27T23:15:02+0000`.
    static func timestamp() -> String {
        var now = time(nil)
        var local = tm()
        guard localtime_r(&now, &local) != nil else { return "<unknown>" }
        var buffer = [CChar](repeating: 0, count: 64)
        let n = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &local)
        return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Serializes whole lines: a line is written by one thread at a time, to its end, so lines
    /// of different threads never interleave.
    private static let stderrLock = Mutex<Void>(())

    /// Writes `line` to fd 2, retrying partial writes and EINTR. A write error (stderr closed)
    /// drops the line: logging never stops the daemon.
    @Sendable static func writeToStandardError(_ line: String) {
        var bytes = Array(line.utf8)
        stderrLock.withLock { _ in
            bytes.withUnsafeMutableBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = write(2, raw.baseAddress! + offset, raw.count - offset)
                    if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { return }
                }
            }
        }
    }
}

/// The daemon's one log level, shared by all its loggers and changeable at run time (the
/// `log_level` op, a reload). Loggers on any thread read it on every log call.
public final class DaemonLogLevel: Sendable {
    private let raw: Atomic<UInt8>

    public init(_ level: Logger.Level) { raw = Atomic(Self.code(level)) }

    public var level: Logger.Level {
        get { Self.levels[Int(raw.load(ordering: .relaxed))] }
        set { raw.store(Self.code(newValue), ordering: .relaxed) }
    }

    private static let levels = Logger.Level.allCases
    private static func code(_ level: Logger.Level) -> UInt8 { UInt8(levels.firstIndex(of: level)!) }
}

/// How untrusted text is made safe for a one-line log record.
///
/// - `\` becomes `\\`, so every backslash in a log line starts an escape and the original text
///   can be read back unambiguously;
/// - line feed, carriage return and tab become `\n`, `\r`, `\t`;
/// - every other control character (C0 U+0000–U+001F, DEL U+007F, C1 U+0080–U+009F, which
///   includes NEL U+0085) and the line and paragraph separators U+2028, U+2029 become
///   `\u{XX}` with the scalar's hex value (`\u{1b}` for ESC, `\u{2028}`).
///
/// Everything else, including any other non-ASCII text, is kept as it is.
public enum LogEscaping {
    /// Whether `scalar` may end or break a line, or drive a terminal: C0, DEL, C1, U+2028, U+2029.
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        let v = scalar.value
        return v < 0x20 || (v >= 0x7F && v <= 0x9F) || v == 0x2028 || v == 0x2029
    }

    /// `text` with backslashes and control characters escaped (see the type's documentation).
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0 == "\\" || isControl($0) }) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out.append(contentsOf: #"\\"#.unicodeScalars)
            case "\n": out.append(contentsOf: #"\n"#.unicodeScalars)
            case "\r": out.append(contentsOf: #"\r"#.unicodeScalars)
            case "\t": out.append(contentsOf: #"\t"#.unicodeScalars)
            case _ where isControl(scalar):
                out.append(contentsOf: "\\u{\(String(scalar.value, radix: 16))}".unicodeScalars)
            default: out.append(scalar)
            }
        }
        return String(out)
    }
}
