#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SmarticoProtocol

/// A point on the monotonic clock, or never.
struct Deadline {
    /// Nanoseconds on `CLOCK_MONOTONIC`; `nil` = never.
    let ns: UInt64?
    /// The length it was made with (for messages).
    let seconds: Double

    static let never = Deadline(ns: nil, seconds: .infinity)

    static func after(seconds: Double) -> Deadline {
        let add = seconds >= 1e9 ? UInt64(1e18) : UInt64((seconds * 1e9).rounded())
        return Deadline(ns: monotonicNanoseconds() &+ add, seconds: seconds)
    }

    /// Milliseconds left for `poll` (rounded up, at least 0, at most `Int32.max`), or -1 for never.
    var pollTimeoutMs: Int32 {
        guard let ns else { return -1 }
        let now = monotonicNanoseconds()
        guard ns > now else { return 0 }
        return Int32(clamping: (ns - now + 999_999) / 1_000_000)
    }

    var hasPassed: Bool {
        guard let ns else { return false }
        return monotonicNanoseconds() >= ns
    }
}

func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// One connection to the daemon's Unix socket, with blocking semantics built on `poll`
/// (non-blocking descriptor, every wait bounded by a ``Deadline``). A CLI runs on its main thread,
/// so waiting here blocks nothing else.
final class DaemonConnection {
    let path: String
    private let fd: Int32
    /// Incoming bytes; `buffer[start...]` is not consumed yet.
    private var buffer: [UInt8] = []
    private var start = 0
    /// `buffer[start..<scanned]` holds no `\n`.
    private var scanned = 0
    private var sawEOF = false
    /// The read buffer, reused for every `read`.
    private var chunk = [UInt8](repeating: 0, count: 65536)
    /// The longest line accepted from the daemon (the `\n` not counted).
    let maxLineBytes: Int

    /// Connects to `path`. A full accept queue (`EAGAIN`) is retried every 10 ms until `deadline`.
    init(path: String, maxLineBytes: Int, deadline: Deadline) throws(CtlError) {
        self.path = path
        self.maxLineBytes = maxLineBytes
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else {
            throw .socketPathTooLong(path: path, bytes: pathBytes.count, limit: capacity - 1)
        }
        guard !pathBytes.isEmpty, !pathBytes.contains(0) else { throw .usage("--socket: an empty path or a path with a NUL byte is not a socket path") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
            raw[pathBytes.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw .connectFailed(path: path, errno: errno) }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)! + pathBytes.count + 1)
        while true {
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
            }
            if rc == 0 { break }
            let e = errno
            if e == EINTR { continue }
            if e == EAGAIN && !deadline.hasPassed {
                _ = poll(nil, 0, 10)
                continue
            }
            if e == EINPROGRESS {
                // Not expected for AF_UNIX, handled anyway: wait for writability, then read SO_ERROR.
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                let n = poll(&p, 1, deadline.pollTimeoutMs)
                var soError: Int32 = 0
                var size = socklen_t(MemoryLayout<Int32>.size)
                if n == 1, getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &size) == 0, soError == 0 { break }
                close(fd)
                throw .connectFailed(path: path, errno: n == 1 ? soError : ETIMEDOUT)
            }
            close(fd)
            throw .connectFailed(path: path, errno: e)
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Writes all of `bytes` (`MSG_NOSIGNAL`: a closed peer is an error, not a SIGPIPE).
    func write(_ bytes: [UInt8], deadline: Deadline, what: String) throws(CtlError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                offset += n
                continue
            }
            let e = errno
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK {
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                let r = poll(&p, 1, deadline.pollTimeoutMs)
                if r == 0 { throw .timedOut(path: path, seconds: deadline.seconds, waitingFor: "sending \(what)") }
                if r < 0 && errno != EINTR { throw .ioFailed(path: path, operation: "poll while sending \(what)", errno: errno) }
                continue
            }
            if e == EPIPE || e == ECONNRESET { throw .closed(path: path, waitingFor: "sending \(what)") }
            throw .ioFailed(path: path, operation: "sending \(what)", errno: e)
        }
    }

    /// True when a complete line is already buffered (the next ``readLine(deadline:waitingFor:)``
    /// returns without waiting).
    /// Linear overall: what it scans is not scanned again.
    var hasBufferedLine: Bool {
        if let newline = buffer[scanned...].firstIndex(of: 0x0A) {
            scanned = newline  // buffer[start..<newline] holds no `\n`
            return true
        }
        scanned = buffer.count
        return false
    }

    /// The next line without its `\n` (a trailing `\r` removed too), `nil` when the daemon
    /// closed the connection at a line boundary. Waits until `deadline`: then `.timedOut`.
    func readLine(deadline: Deadline, waitingFor: String) throws(CtlError) -> [UInt8]? {
        while true {
            if let newline = buffer[scanned...].firstIndex(of: 0x0A) {
                if newline - start > maxLineBytes { throw .lineTooLong(path: path, limit: maxLineBytes) }
                var line = Array(buffer[start..<newline])
                if line.last == 0x0D { line.removeLast() }
                start = newline + 1
                scanned = start
                if start == buffer.count {
                    buffer.removeAll(keepingCapacity: true)
                    start = 0
                    scanned = 0
                } else if start > 65536 && start * 2 > buffer.count {
                    buffer.removeSubrange(0..<start)
                    scanned -= start
                    start = 0
                }
                return line
            }
            scanned = buffer.count
            if buffer.count - start > maxLineBytes { throw .lineTooLong(path: path, limit: maxLineBytes) }
            if sawEOF {
                if buffer.count > start {
                    throw .badAnswer(path: path, detail: "the connection ended in the middle of a line (\(buffer.count - start) bytes without a newline)")
                }
                return nil
            }
            try fill(deadline: deadline, waitingFor: waitingFor)
        }
    }

    /// One `read` into the buffer, waiting for readability until `deadline`.
    private func fill(deadline: Deadline, waitingFor: String) throws(CtlError) {
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n > 0 {
                buffer.append(contentsOf: chunk[0..<n])
                return
            }
            if n == 0 {
                sawEOF = true
                return
            }
            let e = errno
            if e == EINTR { continue }
            if e == ECONNRESET {
                sawEOF = true
                return
            }
            guard e == EAGAIN || e == EWOULDBLOCK else {
                throw .ioFailed(path: path, operation: "reading while \(waitingFor)", errno: e)
            }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let r = poll(&p, 1, deadline.pollTimeoutMs)
            if r == 0 { throw .timedOut(path: path, seconds: deadline.seconds, waitingFor: waitingFor) }
            if r < 0 && errno != EINTR { throw .ioFailed(path: path, operation: "poll while \(waitingFor)", errno: errno) }
        }
    }
}
