#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization
import Transport

/// What the `metrics` op and `metrics.textfile` show (docs/operations.md, "Metrics"): one
/// snapshot of the daemon, rendered in the Prometheus text exposition format 0.0.4 (no `# EOF`;
/// node_exporter's textfile collector and Prometheus both read it, and so do OpenMetrics parsers
/// of the text format: counters end in `_total`).
///
/// The values are counts the daemon keeps anyway: the session machine's counters, the events
/// the driver handed to subscribers, the store's outbox, the socket server's peers.
struct DaemonMetrics: Sendable {
    /// The content type of ``text``.
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    var version: String
    var startMs: Int64
    var nowMs: Int64
    var state: SessionState
    var stateSinceMs: Int64
    var reconnects: Int
    var messagesIn: Int
    var messagesOut: Int
    /// Answers to requests nobody waited for any more, dropped.
    var answersDropped: Int = 0
    /// Events handed to subscribers, by event name.
    var eventsPublished: [String: Int]
    /// Nil when the store could not say (the series is left out, never shown as 0).
    var outboxDepth: Int?
    var outboxOldestMs: Int64?
    var subscribers: Int
    var connections: Int
    var lastError: (code: String, atMs: Int64)?
    /// Nil when `/proc/self/statm` could not be read.
    var residentBytes: Int?
    /// Calls waiting in the public HTTP API's queue (``HTTPReportQueue``); nil when the store could not say.
    var httpQueueDepth: Int? = nil
    var httpQueueOldestMs: Int64? = nil

    /// The exposition text, one family after another, ending in a newline.
    var text: String {
        var out = ""
        func family(_ name: String, _ type: String, _ help: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        func sample(_ name: String, labels: [(String, String)] = [], _ value: String) {
            out += name
            if !labels.isEmpty {
                out += "{" + labels.map { "\($0.0)=\"\(Self.escaped($0.1))\"" }.joined(separator: ",") + "}"
            }
            out += " \(value)\n"
        }

        family("smarticod_build_info", "gauge", "The daemon's version, as a label; always 1.")
        sample("smarticod_build_info", labels: [("version", version)], "1")
        family("smarticod_start_time_seconds", "gauge", "When the daemon started, in seconds since the Unix epoch.")
        sample("smarticod_start_time_seconds", Self.seconds(startMs))
        family("smarticod_uptime_seconds", "gauge", "Seconds since the daemon started.")
        sample("smarticod_uptime_seconds", Self.seconds(max(0, nowMs - startMs)))

        family("smarticod_session_state", "gauge", "The session's state: 1 for the current one, 0 for the others.")
        for s in SessionState.allCases {
            sample("smarticod_session_state", labels: [("state", s.rawValue)], s == state ? "1" : "0")
        }
        family("smarticod_session_state_since_timestamp_seconds", "gauge", "When the session entered its current state, in seconds since the Unix epoch.")
        sample("smarticod_session_state_since_timestamp_seconds", Self.seconds(stateSinceMs))
        family("smarticod_reconnects_total", "counter", "Connection attempts to the server after the first.")
        sample("smarticod_reconnects_total", "\(reconnects)")
        family("smarticod_upstream_messages_received_total", "counter", "Messages received from the server.")
        sample("smarticod_upstream_messages_received_total", "\(messagesIn)")
        family("smarticod_upstream_messages_sent_total", "counter", "Messages sent to the server.")
        sample("smarticod_upstream_messages_sent_total", "\(messagesOut)")
        family("smarticod_answers_dropped_total", "counter", "Answers of the server to requests nobody waited for any more (the peer left, or the request timed out), dropped.")
        sample("smarticod_answers_dropped_total", "\(answersDropped)")

        family("smarticod_events_published_total", "counter", "Events handed to the local subscribers, by event type; each event counts once, whatever the number of subscribers.")
        for (name, count) in eventsPublished.sorted(by: { $0.key < $1.key }) {
            sample("smarticod_events_published_total", labels: [("event", name)], "\(count)")
        }

        if let outboxDepth {
            family("smarticod_outbox_messages", "gauge", "Messages waiting in the outbox for the server.")
            sample("smarticod_outbox_messages", "\(outboxDepth)")
        }
        if let outboxOldestMs {
            family("smarticod_outbox_oldest_timestamp_seconds", "gauge", "When the oldest message waiting in the outbox was accepted, in seconds since the Unix epoch (absent when the outbox is empty).")
            sample("smarticod_outbox_oldest_timestamp_seconds", Self.seconds(outboxOldestMs))
        }
        if let httpQueueDepth {
            family("smarticod_http_queue_calls", "gauge", "Calls to Smartico's public HTTP API (push reports, push tokens) waiting in their queue.")
            sample("smarticod_http_queue_calls", "\(httpQueueDepth)")
        }
        if let httpQueueOldestMs {
            family("smarticod_http_queue_oldest_timestamp_seconds", "gauge", "When the oldest call waiting in the HTTP queue was accepted, in seconds since the Unix epoch (absent when the queue is empty).")
            sample("smarticod_http_queue_oldest_timestamp_seconds", Self.seconds(httpQueueOldestMs))
        }
        family("smarticod_subscribers", "gauge", "Local peers with an active subscription.")
        sample("smarticod_subscribers", "\(subscribers)")
        family("smarticod_socket_connections", "gauge", "Open connections to the local socket.")
        sample("smarticod_socket_connections", "\(connections)")

        if let lastError {
            family("smarticod_last_error_timestamp_seconds", "gauge", "When the latest failure happened, in seconds since the Unix epoch (absent until one; kept after recovery).")
            sample("smarticod_last_error_timestamp_seconds", Self.seconds(lastError.atMs))
            family("smarticod_last_error_info", "gauge", "The latest failure's code (status.last_error.code), as a label; always 1.")
            sample("smarticod_last_error_info", labels: [("code", lastError.code)], "1")
        }
        if let residentBytes {
            family("smarticod_resident_memory_bytes", "gauge", "The daemon's resident set size (RSS) in bytes.")
            sample("smarticod_resident_memory_bytes", "\(residentBytes)")
        }
        return out
    }

    /// Milliseconds as seconds with three decimals (no floating-point noise).
    static func seconds(_ ms: Int64) -> String {
        let sign = ms < 0 ? "-" : ""
        let m = ms.magnitude
        let frac = String(m % 1000)
        return "\(sign)\(m / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac)"
    }

    /// A label value as the text format wants it: `\`, `"` and newline escaped.
    static func escaped(_ value: String) -> String {
        var out = ""
        for c in value.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// The process's resident set size from `/proc/self/statm` (its second field, in pages), or
    /// nil. Blocking (a file read): call it on the blocking pool.
    static func residentBytes(statm path: String = "/proc/self/statm") -> Int? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        let fields = buffer[..<n].split(separator: UInt8(ascii: " "))
        guard fields.count >= 2, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// Writes `metrics.textfile` for node_exporter's textfile collector: the whole text to a
/// temporary file in the same directory (mode 0644), then `rename` over the file, so the
/// collector never reads half a file. The temporary name does not end in `.prom`, which the
/// collector ignores.
///
/// Writes run on the blocking pool, never the loop or the cooperative pool; a write still under
/// way when the next is due makes the next one skipped, so a stuck file system holds one pool
/// thread at most. A failure is logged at `warning` once per change of error (not at every
/// interval), its recovery at `info`; the daemon keeps running either way.
final class MetricsTextfileWriter: Sendable {
    private struct State {
        var busy = false
        /// The error of the last write, as logged; nil after a success.
        var lastError: String?
        /// Paths no longer configured: a write to one that was under way when it was removed
        /// removes its file again.
        var retired: Set<String> = []
    }

    private let state = Mutex(State())
    private let pool: BlockingPool
    private let logger: Logger

    init(pool: BlockingPool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    /// Writes `text` to `path` on the pool, unless a write is still under way.
    func write(_ text: String, to path: String) {
        let started = state.withLock { s -> Bool in
            if s.busy { return false }
            s.busy = true
            s.retired.remove(path)
            return true
        }
        guard started else {
            logger.debug("metrics.textfile: the previous write is still under way, this one is skipped")
            return
        }
        pool.submit { [self] in
            let error = Self.writeAtomically(Array(text.utf8), to: path)
            let (retired, previous) = state.withLock { s -> (Bool, String??) in
                s.busy = false
                guard s.lastError != error else { return (s.retired.contains(path), .none) }
                defer { s.lastError = error }
                return (s.retired.contains(path), .some(s.lastError))
            }
            // Removed while this write was under way (``remove(_:)``'s own unlink may have run
            // before the rename).
            if retired { _ = unlink(path) }
            guard case .some(let before) = previous else { return }
            if let error {
                logger.warning("metrics.textfile: \(error); the daemon goes on without it and retries every interval (logged again only if the error changes)")
            } else if before != nil {
                logger.info("metrics.textfile: \(path) written again")
            }
        }
    }

    /// Removes `path` (a textfile no longer configured), on the pool.
    func remove(_ path: String) {
        state.withLock { _ = $0.retired.insert(path) }
        pool.submit { _ = unlink(path) }
    }

    /// Writes `bytes` to `path` through a temporary file and `rename`; nil, or what failed (naming
    /// the path). Creates missing directories (mode 0755). Blocking.
    static func writeAtomically(_ bytes: [UInt8], to path: String) -> String? {
        let directory = DaemonConfig.directoryOf(path)
        let temporary = "\(path).\(getpid()).tmp"
        var fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        if fd < 0 && errno == ENOENT {
            if let failure = Daemon.makeSocketDirectory(directory) { return "cannot create the directory \(directory): \(failure)" }
            fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        }
        guard fd >= 0 else { return "cannot create \(temporary): \(String(cString: strerror(errno)))" }
        func fail(_ what: String) -> String {
            let reason = String(cString: strerror(errno))
            close(fd)
            unlink(temporary)
            return "cannot write \(temporary): \(what)\(reason)"
        }
        // The umask may have taken bits away: the collector (another user) must read it.
        if fchmod(fd, 0o644) != 0 { return fail("chmod: ") }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return fail("") }
            offset += n
        }
        if close(fd) != 0 {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            return "cannot write \(temporary): \(reason)"
        }
        if rename(temporary, path) != 0 {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            return "cannot rename \(temporary) to \(path): \(reason)"
        }
        return nil
    }
}
