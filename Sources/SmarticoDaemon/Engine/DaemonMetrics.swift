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

    var version = SmarticoVersion.string
    var startMs: Int64 = 0
    var nowMs: Int64 = 0
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
    var subscribers = 0
    var connections = 0
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
        /// A family of one sample; left out when `value` is nil.
        func metric(_ name: String, _ type: String, _ help: String, labels: [(String, String)] = [], _ value: String?) {
            guard let value else { return }
            family(name, type, help)
            sample(name, labels: labels, value)
        }

        metric("smarticod_build_info", "gauge", "The daemon's version, as a label; always 1.", labels: [("version", version)], "1")
        metric("smarticod_start_time_seconds", "gauge", "When the daemon started, in seconds since the Unix epoch.", Self.seconds(startMs))
        metric("smarticod_uptime_seconds", "gauge", "Seconds since the daemon started.", Self.seconds(max(0, nowMs - startMs)))

        family("smarticod_session_state", "gauge", "The session's state: 1 for the current one, 0 for the others.")
        for s in SessionState.allCases {
            sample("smarticod_session_state", labels: [("state", s.rawValue)], s == state ? "1" : "0")
        }
        metric("smarticod_session_state_since_timestamp_seconds", "gauge", "When the session entered its current state, in seconds since the Unix epoch.", Self.seconds(stateSinceMs))
        metric("smarticod_reconnects_total", "counter", "Connection attempts to the server after the first.", "\(reconnects)")
        metric("smarticod_upstream_messages_received_total", "counter", "Messages received from the server.", "\(messagesIn)")
        metric("smarticod_upstream_messages_sent_total", "counter", "Messages sent to the server.", "\(messagesOut)")
        metric("smarticod_answers_dropped_total", "counter", "Answers of the server to requests nobody waited for any more (the peer left, or the request timed out), dropped.", "\(answersDropped)")

        family("smarticod_events_published_total", "counter", "Events handed to the local subscribers, by event type; each event counts once, whatever the number of subscribers.")
        for (name, count) in eventsPublished.sorted(by: { $0.key < $1.key }) {
            sample("smarticod_events_published_total", labels: [("event", name)], "\(count)")
        }

        metric("smarticod_outbox_messages", "gauge", "Messages waiting in the outbox for the server.", outboxDepth.map { "\($0)" })
        metric("smarticod_outbox_oldest_timestamp_seconds", "gauge", "When the oldest message waiting in the outbox was accepted, in seconds since the Unix epoch (absent when the outbox is empty).", outboxOldestMs.map { Self.seconds($0) })
        metric("smarticod_http_queue_calls", "gauge", "Calls to Smartico's public HTTP API (push reports, push tokens) waiting in their queue.", httpQueueDepth.map { "\($0)" })
        metric("smarticod_http_queue_oldest_timestamp_seconds", "gauge", "When the oldest call waiting in the HTTP queue was accepted, in seconds since the Unix epoch (absent when the queue is empty).", httpQueueOldestMs.map { Self.seconds($0) })
        metric("smarticod_subscribers", "gauge", "Local peers with an active subscription.", "\(subscribers)")
        metric("smarticod_socket_connections", "gauge", "Open connections to the local socket.", "\(connections)")

        if let lastError {
            metric("smarticod_last_error_timestamp_seconds", "gauge", "When the latest failure happened, in seconds since the Unix epoch (absent until one; kept after recovery).", Self.seconds(lastError.atMs))
            metric("smarticod_last_error_info", "gauge", "The latest failure's code (status.last_error.code), as a label; always 1.", labels: [("code", lastError.code)], "1")
        }
        metric("smarticod_resident_memory_bytes", "gauge", "The daemon's resident set size (RSS) in bytes.", residentBytes.map { "\($0)" })
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
/// temporary file in the same directory, then `rename` over the file, so the collector never reads
/// half a file. The temporary name does not end in `.prom`, which the collector ignores.
///
/// The collector's directory is often writable by others (docs/operations.md: group-writable, so
/// the daemon's user can write there), so nothing in it is trusted (docs/security.md, "Files the
/// daemon writes"): the temporary file gets a random name and is created with
/// `O_CREAT | O_EXCL | O_NOFOLLOW` (a name planted by someone else, a symlink above all, is never
/// opened: another random name is tried), its mode is set through its own descriptor, and the
/// rename replaces whatever entry has the textfile's name without following it. A directory that
/// belongs to a user other than root or the daemon's, or that every user may write without the
/// sticky bit, is refused: nothing is written there, a warning names it, the daemon goes on.
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

    /// `O_PATH` (Linux; Glibc's module does not export it without `_GNU_SOURCE`): a descriptor
    /// that names the directory for `fstat`, `openat` and `renameat` without opening it for reading.
    static let pathOnly: Int32 = 0o10000000

    /// How many random temporary names are tried when each is taken (`EEXIST`) before giving up.
    static let temporaryNameAttempts = 8

    /// A fresh temporary name for the textfile `base`: `<base>.<16 random hex digits>.tmp`.
    static func randomTemporaryName(_ base: String) -> String {
        let hex = String(UInt64.random(in: .min ... .max), radix: 16)
        return "\(base).\(String(repeating: "0", count: 16 - hex.count))\(hex).tmp"
    }

    /// Why the textfile must not be written in `directory`, whose `stat` is `info`, by a daemon
    /// running as `uid`; nil when it may. The directory must belong to root or to `uid` (another
    /// user could swap it, or what is in it, at will), and must not be writable by every user
    /// unless its sticky bit is set. A directory group-writable for the daemon's group (the setup
    /// docs/operations.md shows) is accepted: the temporary file and the rename are safe there.
    /// `uid` nil: the daemon's user is not known (`--check-config` run by root), the owner is not
    /// checked.
    static func directoryRefusal(_ directory: String, _ info: stat, uid: uid_t?) -> String? {
        let mode = info.st_mode & 0o7777
        let shown = "owner uid \(info.st_uid), mode \(octalMode(mode))"
        if let uid, info.st_uid != 0 && info.st_uid != uid {
            return "its directory \(directory) (\(shown)) belongs to neither root nor the daemon's uid \(uid), so its owner could replace what the daemon writes there; use a directory owned by root or by uid \(uid)"
        }
        if mode & S_IWOTH != 0 && mode & S_ISVTX == 0 {
            return "its directory \(directory) (\(shown)) is writable by every user and has no sticky bit, so anyone could replace the file; remove the write bit for others (chmod o-w) or set the sticky bit (chmod +t)"
        }
        return nil
    }

    /// `mode` as `chmod` takes it: four octal digits (`0775`, `1777`).
    static func octalMode(_ mode: mode_t) -> String {
        let digits = String(mode & 0o7777, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// Writes `bytes` to `path` through a temporary file and `rename`; nil, or what failed (naming
    /// the path). Creates missing directories (mode 0755). Refuses a directory
    /// ``directoryRefusal(_:_:uid:)`` refuses. `temporaryName` makes each temporary name (tests
    /// give their own). Blocking.
    static func writeAtomically(_ bytes: [UInt8], to path: String,
                                temporaryName: (String) -> String = randomTemporaryName) -> String? {
        let directory = DaemonConfig.directoryOf(path)
        let base = path.lastIndex(of: "/").map { String(path[path.index(after: $0)...]) } ?? path
        guard !base.isEmpty else { return "\(path) names no file" }
        // O_PATH: the directory needs write and search permission only, as before, not read.
        var dirfd = open(directory, pathOnly | O_DIRECTORY | O_CLOEXEC)
        if dirfd < 0 && errno == ENOENT {
            if let failure = Daemon.makeSocketDirectory(directory) { return "cannot create the directory \(directory): \(failure)" }
            dirfd = open(directory, pathOnly | O_DIRECTORY | O_CLOEXEC)
        }
        guard dirfd >= 0 else { return "cannot open the directory \(directory): \(String(cString: strerror(errno)))" }
        defer { close(dirfd) }
        // The descriptor is the directory checked and written: swapping the path afterwards changes nothing.
        var info = stat()
        guard fstat(dirfd, &info) == 0 else { return "cannot stat the directory \(directory): \(String(cString: strerror(errno)))" }
        if let refusal = directoryRefusal(directory, info, uid: geteuid()) { return "\(path) not written: \(refusal)" }

        var fd: Int32 = -1
        var temporary = ""
        for _ in 0..<temporaryNameAttempts {
            temporary = temporaryName(base)
            // Mode 0644 at creation (the umask may take bits away: fchmod below gives them back).
            fd = openat(dirfd, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
            if fd >= 0 || errno != EEXIST { break }
        }
        let shownTemporary = directory == "/" ? "/\(temporary)" : "\(directory)/\(temporary)"
        guard fd >= 0 else {
            if errno == EEXIST {
                return "cannot create a temporary file in \(directory): \(temporaryNameAttempts) random names were all taken (last \(shownTemporary)); is someone planting files there?"
            }
            return "cannot create \(shownTemporary): \(String(cString: strerror(errno)))"
        }
        func fail(_ what: String) -> String {
            let reason = String(cString: strerror(errno))
            close(fd)
            unlinkat(dirfd, temporary, 0)
            return "cannot write \(shownTemporary): \(what)\(reason)"
        }
        // The collector (another user) must read it. The descriptor is the file just created,
        // never a file a link points at.
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
            unlinkat(dirfd, temporary, 0)
            return "cannot write \(shownTemporary): \(reason)"
        }
        // Replaces the entry named `base` (a file, or a link planted there) without following it.
        if renameat(dirfd, temporary, dirfd, base) != 0 {
            let reason = String(cString: strerror(errno))
            unlinkat(dirfd, temporary, 0)
            return "cannot rename \(shownTemporary) to \(path): \(reason)"
        }
        return nil
    }
}
