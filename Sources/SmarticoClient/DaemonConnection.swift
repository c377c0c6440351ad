#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One connection to the daemon's Unix socket, read and written in lines.
///
/// The descriptor is non-blocking. The blocking calls (``write(_:deadline:what:)``,
/// ``readLine(deadline:waitingFor:)``) wait in `poll`, every wait bounded by a ``Deadline``; the
/// non-blocking ones (``writeSome(_:)``, ``receive()``, ``nextBufferedLine()``) are for a caller
/// that polls ``fileDescriptor`` itself, as ``DaemonLink`` does. Use it from one thread at a time,
/// and never from Swift concurrency's cooperative pool (its waits block the thread).
public final class DaemonConnection {
    public let path: String
    private let fd: Int32
    /// Incoming bytes; `buffer[start...]` is not consumed yet.
    private var buffer: [UInt8] = []
    private var start = 0
    /// `buffer[start..<scanned]` holds no `\n`.
    private var scanned = 0
    /// The daemon closed its side (or reset the connection): nothing more will come.
    public private(set) var sawEOF = false
    /// The read buffer, reused for every `read`.
    private var chunk = [UInt8](repeating: 0, count: 65536)
    /// The longest line accepted from the daemon (the `\n` not counted).
    public let maxLineBytes: Int

    /// What one ``receive()`` got.
    public enum Received: Sendable, Equatable {
        /// Bytes were added to the buffer.
        case data
        /// Nothing to read now.
        case wouldBlock
        /// The daemon closed the connection.
        case endOfStream
    }

    /// Connects to `path`. A full accept queue (`EAGAIN`) is retried every 10 ms until `deadline`.
    public init(path: String, maxLineBytes: Int = 16 << 20, deadline: Deadline) throws(ClientError) {
        self.path = path
        self.maxLineBytes = maxLineBytes
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else {
            throw .socketPathTooLong(path: path, bytes: pathBytes.count, limit: capacity - 1)
        }
        guard !pathBytes.isEmpty, !pathBytes.contains(0) else { throw .connectFailed(path: path, errno: EINVAL) }
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

    /// The socket, for a caller's own `poll` (``DaemonLink``). Closed when this object goes away.
    public var fileDescriptor: Int32 { fd }

    // MARK: Writing

    /// Writes all of `bytes`, waiting for room until `deadline` (`MSG_NOSIGNAL`: a closed peer is
    /// an error, not a SIGPIPE). `what` names the request in errors ("sending status").
    public func write(_ bytes: [UInt8], deadline: Deadline, what: String) throws(ClientError) {
        var offset = 0
        while offset < bytes.count {
            let n = try writeSome(bytes, from: offset, what: what)
            if n > 0 {
                offset += n
                continue
            }
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let r = poll(&p, 1, deadline.pollTimeoutMs)
            if r == 0 { throw .timedOut(path: path, seconds: deadline.seconds, waitingFor: "sending \(what)") }
            if r < 0 && errno != EINTR { throw .ioFailed(path: path, operation: "poll while sending \(what)", errno: errno) }
        }
    }

    /// One non-blocking `send` of as much of `bytes[offset...]` as the socket takes: the count
    /// written, 0 when it has no room now (poll for `POLLOUT`).
    public func writeSome(_ bytes: [UInt8], from offset: Int = 0, what: String) throws(ClientError) -> Int {
        guard offset < bytes.count else { return 0 }
        while true {
            let n = bytes.withUnsafeBytes { raw in
                send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n >= 0 { return n }
            let e = errno
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK { return 0 }
            if e == EPIPE || e == ECONNRESET { throw .closed(path: path, waitingFor: "sending \(what)") }
            throw .ioFailed(path: path, operation: "sending \(what)", errno: e)
        }
    }

    // MARK: Reading

    /// True when a complete line is already buffered (the next ``readLine(deadline:waitingFor:)``
    /// or ``nextBufferedLine()`` returns it without reading). Linear overall: what it scans is
    /// not scanned again.
    public var hasBufferedLine: Bool {
        if let newline = buffer[scanned...].firstIndex(of: 0x0A) {
            scanned = newline  // buffer[start..<newline] holds no `\n`
            return true
        }
        scanned = buffer.count
        return false
    }

    /// The next complete line in the buffer without its `\n` (a trailing `\r` removed too), nil
    /// when none is complete yet. Throws `.lineTooLong` for a line over ``maxLineBytes``, and
    /// `.badAnswer` for a connection that ended in the middle of a line.
    public func nextBufferedLine() throws(ClientError) -> [UInt8]? {
        if let newline = buffer[scanned...].firstIndex(of: 0x0A) {
            if newline - start > maxLineBytes { throw .lineTooLong(path: path, limit: maxLineBytes) }
            var line = Array(buffer[start..<newline])
            if line.last == 0x0D { line.removeLast() }
            start = newline + 1
            scanned = start
            if start == buffer.count {
                buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 20)
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
        if sawEOF && buffer.count > start {
            throw .badAnswer(path: path, detail: "the connection ended in the middle of a line (\(buffer.count - start) bytes without a newline)")
        }
        return nil
    }

    /// The next line without its `\n` (a trailing `\r` removed too), `nil` when the daemon
    /// closed the connection at a line boundary. Waits until `deadline`: then `.timedOut`.
    public func readLine(deadline: Deadline, waitingFor: String) throws(ClientError) -> [UInt8]? {
        while true {
            if let line = try nextBufferedLine() { return line }
            if sawEOF { return nil }
            switch try receive(waitingFor: waitingFor) {
            case .data, .endOfStream:
                continue
            case .wouldBlock:
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let r = poll(&p, 1, deadline.pollTimeoutMs)
                if r == 0 { throw .timedOut(path: path, seconds: deadline.seconds, waitingFor: waitingFor) }
                if r < 0 && errno != EINTR { throw .ioFailed(path: path, operation: "poll while \(waitingFor)", errno: errno) }
            }
        }
    }

    /// One non-blocking `read` into the buffer. A reset connection counts as its end.
    public func receive(waitingFor: String = "reading") throws(ClientError) -> Received {
        if sawEOF { return .endOfStream }
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n > 0 {
                buffer.append(contentsOf: chunk[0..<n])
                return .data
            }
            if n == 0 {
                sawEOF = true
                return .endOfStream
            }
            let e = errno
            if e == EINTR { continue }
            if e == ECONNRESET {
                sawEOF = true
                return .endOfStream
            }
            if e == EAGAIN || e == EWOULDBLOCK { return .wouldBlock }
            throw .ioFailed(path: path, operation: "reading while \(waitingFor)", errno: e)
        }
    }
}

@available(*, unavailable, message: "a DaemonConnection belongs to one thread; DaemonLink is the thread-safe client")
extension DaemonConnection: Sendable {}
