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
/// through ``LogEscaping/escaped(_:limit:)``. A peer's `ext_user_id`, a server's errMsg or a hash
/// command's stderr with a newline in it therefore cannot start a line of its own
/// (docs/operations.md, "Logs"); and no line is longer than ``LogEscaping/maxLineBytes`` (a
/// metadata value no longer than ``LogEscaping/maxFieldBytes``), so journald, which splits lines
/// at 48 KiB, never makes the rest of a long one an entry of its own.
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

    /// The most bytes a label, a source or a metadata key may take in a line (escaped, cut marked).
    static let maxNameBytes = 256
    /// What a line keeps for its message when metadata would take the rest: metadata beyond it is
    /// cut (`…(cut, N more metadata)`).
    static let messageReserveBytes = 1024

    /// One log line, ending in `\n`, with every untrusted part escaped and bounded: a metadata value
    /// takes at most ``LogEscaping/maxFieldBytes``, the whole line (its `\n` included) at most
    /// ``LogEscaping/maxLineBytes``; a part that is cut ends in `…(cut, N bytes)`, N its whole size
    /// (``LogEscaping/escaped(_:limit:)``). `prefix`: a timestamp and a space, or the journal's `<N>`.
    static func line(prefix: String, level: Logger.Level, label: String, metadata: Logger.Metadata,
                     source: String, message: String) -> String {
        var out = prefix + "\(level)"
        if !label.isEmpty { out += " " + LogEscaping.escaped(label, limit: maxNameBytes) }
        out += ":"
        let tail = " [" + LogEscaping.escaped(source, limit: maxNameBytes) + "] "
        // The newline, the source and the message's reserve are kept free of metadata.
        let metadataEnd = LogEscaping.maxLineBytes - 1 - tail.utf8.count - messageReserveBytes
        let sorted = metadata.sorted(by: { $0.key < $1.key })
        for (i, (key, value)) in sorted.enumerated() {
            let item = " " + LogEscaping.escaped(key, limit: maxNameBytes) + "="
                + LogEscaping.escaped("\(value)", limit: LogEscaping.maxFieldBytes)
            if out.utf8.count + item.utf8.count > metadataEnd {
                out += " …(cut, \(sorted.count - i) more metadata)"
                break
            }
            out += item
        }
        out += tail
        out += LogEscaping.escaped(message, limit: LogEscaping.maxLineBytes - 1 - out.utf8.count) + "\n"
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
///
/// Text from the server or a peer is also bounded: ``escaped(_:limit:)`` and ``bounded(_:limit:)``
/// cut it on a Unicode scalar boundary (never inside a UTF-8 sequence or an escape) and mark the
/// cut with `…(cut, N bytes)`, N the UTF-8 size of the whole text. A metadata value, and server
/// text quoted in a message, keep at most ``maxFieldBytes``; a line at most ``maxLineBytes``, far
/// below journald's 48 KiB, where a longer line would be split and its rest start an entry of its
/// own (docs/security.md, "Untrusted text").
public enum LogEscaping {
    /// The most bytes one field of a log line may take: a metadata value, or text from the server
    /// or a peer quoted in a message (``bounded(_:limit:)``).
    public static let maxFieldBytes = 1024
    /// The most bytes one log line may take, its `\n` included.
    public static let maxLineBytes = 8192

    /// The mark that ends a cut text: `…(cut, N bytes)`, N the UTF-8 size of the whole text.
    public static func cutMarker(totalBytes: Int) -> String { "…(cut, \(totalBytes) bytes)" }

    /// `text` itself when it has at most `limit` UTF-8 bytes; else its longest prefix of whole
    /// Unicode scalars that leaves room for the mark, then ``cutMarker(totalBytes:)``: at most
    /// `limit` bytes in all. Not escaped: for untrusted text quoted in a message, which the log
    /// handler escapes with the rest. Reads at most `limit` bytes of `text`, however long it is.
    public static func bounded(_ text: String, limit: Int = maxFieldBytes) -> String {
        let utf8 = text.utf8
        guard utf8.count > limit else { return text }
        let marker = cutMarker(totalBytes: utf8.count)
        let keep = max(0, limit - marker.utf8.count)
        var end = utf8.index(utf8.startIndex, offsetBy: keep)
        // Back to a scalar boundary: never keep half a UTF-8 sequence.
        while end > utf8.startIndex, UTF8.isContinuation(utf8[end]) { utf8.formIndex(before: &end) }
        return String(text[..<end]) + marker
    }

    /// Whether `scalar` may end or break a line, or drive a terminal: C0, DEL, C1, U+2028, U+2029.
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        let v = scalar.value
        return v < 0x20 || (v >= 0x7F && v <= 0x9F) || v == 0x2028 || v == 0x2029
    }

    /// `text` escaped as ``escaped(_:)``, in at most `limit` UTF-8 bytes: when the escaped text is
    /// longer, it is cut after the last whole escaped scalar that leaves room for
    /// ``cutMarker(totalBytes:)`` (N: `text`'s own UTF-8 size), and the mark is appended. Stops
    /// reading `text` once past `limit`, however long it is.
    public static func escaped(_ text: String, limit: Int) -> String {
        let total = text.utf8.count
        if total <= limit, !text.unicodeScalars.contains(where: { $0 == "\\" || isControl($0) }) { return text }
        let keep = max(0, limit - cutMarker(totalBytes: total).utf8.count)
        var out: [UInt8] = []
        out.reserveCapacity(min(limit, total) + 16)
        var kept = 0  // bytes of `out` that fit before the mark
        for scalar in text.unicodeScalars {
            appendEscaped(scalar, to: &out)
            if out.count <= keep { kept = out.count }
            if out.count > limit { break }
        }
        guard out.count > limit else { return String(decoding: out, as: UTF8.self) }
        out.removeSubrange(kept...)
        return String(decoding: out, as: UTF8.self) + cutMarker(totalBytes: total)
    }

    /// Appends `scalar`'s UTF-8, escaped as ``escaped(_:)`` does.
    private static func appendEscaped(_ scalar: Unicode.Scalar, to out: inout [UInt8]) {
        switch scalar {
        case "\\": out.append(contentsOf: #"\\"#.utf8)
        case "\n": out.append(contentsOf: #"\n"#.utf8)
        case "\r": out.append(contentsOf: #"\r"#.utf8)
        case "\t": out.append(contentsOf: #"\t"#.utf8)
        case _ where isControl(scalar): out.append(contentsOf: "\\u{\(String(scalar.value, radix: 16))}".utf8)
        default: out.append(contentsOf: scalar.utf8)
        }
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
