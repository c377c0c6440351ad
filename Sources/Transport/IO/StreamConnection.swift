#if canImport(Glibc)
import Glibc
#endif

/// A byte stream over a connected socket (TCP or Unix), plain or TLS, driven by an ``EventLoop``.
///
/// Life cycle: you get one from ``StreamConnection/connect(host:port:options:tls:on:)``,
/// ``StreamConnection/connect(unixPath:on:)`` or a ``StreamListener``; set the handlers, then call
/// ``start()`` to begin reading. `onClose` is called exactly once, whatever the cause; after it the
/// descriptor is closed and every handler is released (no retain cycle survives a close).
///
/// Reading: each readiness event reads into the loop's shared 64 KiB buffer until `EAGAIN`, a short read,
/// or 16 reads (fairness; the loop is level-triggered and comes back). `onRead` gets a buffer that is valid
/// only during the call: copy what you keep. With TLS, plaintext is delivered, decrypted into a shared
/// buffer the same way.
///
/// Writing: ``write(_:)-(UnsafeRawBufferPointer)`` sends at once what the socket takes and queues the rest
/// (copied), flushed with `sendmsg`/iovecs when the socket becomes writable. ``queuedByteCount`` tells a
/// caller how far behind the peer is (to pause producing or drop a slow peer); `onWritable` is called
/// when the queue has drained. Writes never raise `SIGPIPE` (`MSG_NOSIGNAL`). A write that fails closes the
/// connection on the next loop iteration (onClose is not called from inside `write`).
///
/// Every method must be called on the loop thread.
public final class StreamConnection: EventLoopHandler, CustomStringConvertible,
    // All mutable state is confined to `loop`'s thread; every public method starts with
    // `loop.preconditionInEventLoop()`. Sendable only so it can be handed across tasks and closures.
    @unchecked Sendable
{
    /// The loop that owns this connection.
    public let loop: EventLoop
    /// How errors name the peer: "host:port" as asked by the caller, the peer address, or the Unix path.
    public let peerName: String
    /// Called with received bytes (plaintext for TLS). The buffer is only valid during the call.
    public var onRead: ((UnsafeRawBufferPointer) -> Void)?
    /// Called exactly once when the connection ends.
    public var onClose: ((StreamCloseReason) -> Void)?
    /// Called when the write queue has drained to zero after ``queuedByteCount`` was non-zero.
    public var onWritable: (() -> Void)?
    /// When set, a write that would leave more than this many bytes queued closes the connection with
    /// ``SocketError/writeQueueOverflow(peer:queued:limit:)`` (a safety net against slow peers; nil: no
    /// limit, watch ``queuedByteCount`` yourself).
    public var writeQueueLimit: Int?
    /// When set, a peer's EOF (or TLS close_notify) calls this and keeps the connection open for writing
    /// (half-close); when nil, EOF closes the connection with ``StreamCloseReason/peerClosed``.
    public var onInputEnded: (() -> Void)?

    private var fd: Int32
    private var tls: TLSEngine?
    private let queue = WriteQueue()
    private var pendingPlaintext: [UInt8] = []
    private var isOpen = true
    private var started = false
    private var readPaused = false
    private var inputEnded = false
    private var registered = false
    private var interest: IOInterest = []
    private var closeAfterFlushRequested = false
    private var shutdownOutputRequested = false
    private var outputShut = false
    private var writeFailed = false
    private var drainScheduled = false
    private var hadQueuedBytes = false
    var handshakeWaiter: ((SocketError?) -> Void)?
    private var handshakeTimer: LoopTimer?

    /// Wraps a connected, non-blocking socket and registers it with `loop` (loop thread). Takes ownership
    /// of `fd`: it is closed with the connection (also when this initializer throws).
    init(fd: Int32, loop: EventLoop, peerName: String, tls: TLSEngine?) throws(SocketError) {
        loop.preconditionInEventLoop()
        self.fd = fd
        self.loop = loop
        self.peerName = peerName
        self.tls = tls
        do {
            interest = desiredInterest()
            try loop.register(fd: fd, interest: interest, handler: self)
            registered = true
        } catch {
            isOpen = false
            Glibc.close(fd)
            self.fd = -1
            throw .eventLoop(error)
        }
        if let tls, tls.context.role == .client {
            processTLS()  // sends the ClientHello
        }
    }

    deinit {
        // Only reachable when the loop no longer references it (not registered): a connection dropped
        // without close() after leaving epoll. Close the descriptor so nothing leaks; no callbacks.
        if fd >= 0 { Glibc.close(fd) }
    }

    public var description: String { "StreamConnection(\(peerName), fd \(fd))" }

    // MARK: Public API

    /// Starts delivering received bytes to `onRead`. Call once, after setting the handlers.
    public func start() {
        loop.preconditionInEventLoop()
        guard isOpen, !started else { return }
        started = true
        updateInterest()
        if tls != nil { scheduleDrain() }
    }

    /// True until the connection is closed.
    public var isActive: Bool {
        loop.preconditionInEventLoop()
        return isOpen
    }

    /// Bytes accepted by ``write(_:)-(UnsafeRawBufferPointer)`` but not yet taken by the kernel
    /// (ciphertext for TLS).
    public var queuedByteCount: Int {
        loop.preconditionInEventLoop()
        return queue.byteCount + pendingPlaintext.count
    }

    /// Negotiated TLS parameters (nil for plain connections, or before the handshake completed).
    public var tlsInfo: TLSConnectionInfo? {
        loop.preconditionInEventLoop()
        return tls?.info
    }

    /// The socket descriptor, for diagnostics (`getsockopt`, `TCP_INFO`); -1 after close. Do not read,
    /// write or close it yourself.
    public var fileDescriptor: Int32 {
        loop.preconditionInEventLoop()
        return fd
    }

    /// True when this connection runs TLS.
    public var isTLS: Bool { tls != nil }

    /// Sends `bytes` (copied if they must wait). Ignored after close or after output was shut down.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        loop.preconditionInEventLoop()
        guard isOpen, !writeFailed, !shutdownOutputRequested, !closeAfterFlushRequested, bytes.count > 0 else {
            return
        }
        if let tls {
            guard tls.isHandshakeComplete else {
                if let limit = writeQueueLimit, pendingPlaintext.count + bytes.count > limit {
                    failSoon(.writeQueueOverflow(peer: peerName, queued: pendingPlaintext.count + bytes.count, limit: limit))
                    return
                }
                pendingPlaintext.append(contentsOf: bytes)
                return
            }
            if let error = tls.write(bytes) {
                failSoon(.tls(error))
                return
            }
            flushTLSOutput()
        } else {
            writeToSocket(bytes)
        }
    }

    /// Sends `bytes`.
    public func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { write($0) }
    }

    /// Sends `bytes` like ``write(_:)-([UInt8])`` and empties the array, keeping its storage for the
    /// caller's next message.
    public func write(taking bytes: inout [UInt8]) {
        write(bytes)
        bytes.removeAll(keepingCapacity: true)
    }

    /// Stops reading (backpressure): the kernel's receive buffer fills and TCP slows the peer down.
    public func pauseReading() {
        loop.preconditionInEventLoop()
        guard isOpen, !readPaused else { return }
        readPaused = true
        updateInterest()
    }

    /// Resumes reading after ``pauseReading()``.
    public func resumeReading() {
        loop.preconditionInEventLoop()
        guard isOpen, readPaused else { return }
        readPaused = false
        updateInterest()
        if tls != nil { scheduleDrain() }
    }

    /// Half-close: after the queue has drained (and, with TLS, a close_notify), `shutdown(SHUT_WR)`.
    /// Reading goes on until the peer closes.
    public func shutdownOutput() {
        loop.preconditionInEventLoop()
        guard isOpen, !shutdownOutputRequested else { return }
        queueTLSCloseNotify()
        shutdownOutputRequested = true
        if queue.isEmpty { shutdownWriteSide() }
    }

    /// Closes once everything queued is sent (with TLS, after a close_notify). Stops reading now.
    /// A peer that never reads keeps it open: pair this with a timer that calls ``close()``.
    public func closeAfterFlush() {
        loop.preconditionInEventLoop()
        guard isOpen, !closeAfterFlushRequested else { return }
        queueTLSCloseNotify()
        closeAfterFlushRequested = true
        if queue.isEmpty && !writeFailed {
            closeNow(.closedLocally)
        } else {
            updateInterest()
        }
    }

    /// With TLS past its handshake: queues the close_notify alert ahead of the end of output.
    private func queueTLSCloseNotify() {
        guard let tls, tls.isHandshakeComplete else { return }
        tls.close()
        flushTLSOutput()
    }

    /// Closes now; queued bytes are dropped (with TLS, a close_notify is attempted without waiting).
    /// `onClose(.closedLocally)` is called before this returns, unless the connection was already closed.
    public func close() {
        loop.preconditionInEventLoop()
        closeNow(.closedLocally)
    }

    /// The peer's credentials (Unix sockets; `SO_PEERCRED`). Nil after close or on error.
    public func peerCredentials() -> PeerCredentials? {
        loop.preconditionInEventLoop()
        guard isOpen else { return nil }
        return ioPeerCredentials(fd: fd)
    }

    /// The remote address (`getpeername`). Nil after close.
    public var remoteAddress: SocketAddress? {
        loop.preconditionInEventLoop()
        guard isOpen else { return nil }
        return ioSocketName(fd: fd, peer: true)
    }

    /// The local address (`getsockname`). Nil after close.
    public var localAddress: SocketAddress? {
        loop.preconditionInEventLoop()
        guard isOpen else { return nil }
        return ioSocketName(fd: fd, peer: false)
    }

    /// Client side: starts TLS over this so far plaintext connection (after an HTTP CONNECT through a
    /// proxy, for instance), verifying `serverName`. `completion` is called once on the loop thread: nil
    /// when the handshake completed, or the error (the connection is then closed and `onClose` is called
    /// too). Bytes written meanwhile wait for the handshake. The connection must be plaintext, with
    /// nothing queued; pair it with a timer that calls ``close()`` for a deadline.
    public func startTLS(
        context: TLSContext, serverName: String, completion: @escaping (SocketError?) -> Void
    ) {
        loop.preconditionInEventLoop()
        guard isOpen else {
            completion(.tls(.handshakeFailed(name: serverName, reason: "connection closed before the TLS handshake")))
            return
        }
        guard tls == nil, queue.isEmpty else {
            completion(.invalidArgument("startTLS on \(peerName): the connection already runs TLS or has bytes queued"))
            return
        }
        let engine: TLSEngine
        do throws(TLSError) {
            engine = try TLSEngine(clientContext: context, serverName: serverName)
        } catch {
            completion(.tls(error))
            return
        }
        tls = engine
        handshakeWaiter = completion
        updateInterest()  // reading is on while the handshake runs, even when paused
        processTLS()  // sends the ClientHello
    }

    /// Server side: fails the connection unless its TLS handshake completes within `timeout`.
    func armHandshakeTimeout(_ timeout: Duration) {
        guard let tls, !tls.isHandshakeComplete, isOpen else { return }
        let timer = LoopTimer(loop: loop) { [weak self] in
            guard let self, self.isOpen, let tls = self.tls, !tls.isHandshakeComplete else { return }
            self.closeNow(.failed(.tls(.handshakeFailed(
                name: self.peerName, reason: "no TLS handshake within \(timeout.ioText)"))))
        }
        timer.schedule(after: timeout)
        handshakeTimer = timer
    }

    // MARK: EventLoopHandler

    public func handleEvents(_ events: IOEvents) {
        guard isOpen else { return }
        // Input first: a peer that wrote its last request and closed without reading what we
        // queued makes our write fail (EPIPE); its request, already in our receive buffer, is
        // still read and handled.
        if wantsRead && !events.isDisjoint(with: [.readable, .hangup, .error]) {
            readFromSocket()
            guard isOpen else { return }
        }
        if !queue.isEmpty && !events.isDisjoint(with: [.writable, .error, .hangup]) {
            flushQueue()
            guard isOpen else { return }
        }
        if wantsRead {
            return
        } else if events.contains(.error) {
            var code: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length)
            closeNow(.failed(.system(operation: "socket error on", target: peerName, errno: code == 0 ? EIO : code)))
        } else if events.contains(.hangup) && queue.isEmpty {
            // EPOLLHUP is reported whatever the interest: while not reading, leave epoll so a level-triggered
            // hang-up does not spin. Reading again re-registers and then sees the EOF.
            loop.unregister(fd: fd)
            registered = false
            interest = []
        }
    }

    public func eventLoopDidShutDown() {
        registered = false
        closeNow(.failed(.eventLoop(.shutDown(loop: loop.name))))
    }

    // MARK: Reading

    private var wantsRead: Bool {
        guard isOpen, !inputEnded, !closeAfterFlushRequested else { return false }
        if let tls, !tls.isHandshakeComplete { return true }
        return started && !readPaused
    }

    private func desiredInterest() -> IOInterest {
        var wanted: IOInterest = []
        if wantsRead { wanted.insert(.read) }
        if !queue.isEmpty { wanted.insert(.write) }
        return wanted
    }

    private func updateInterest() {
        guard isOpen else { return }
        let wanted = desiredInterest()
        if !registered {
            guard !wanted.isEmpty else { return }
            do {
                try loop.register(fd: fd, interest: wanted, handler: self)
                registered = true
                interest = wanted
            } catch {
                failSoon(.eventLoop(error))
            }
            return
        }
        guard wanted != interest else { return }
        do {
            try loop.modify(fd: fd, interest: wanted)
            interest = wanted
        } catch {
            failSoon(.eventLoop(error))
        }
    }

    private func readFromSocket() {
        let buffer = loop.readBuffer
        var rounds = 0
        while wantsRead && rounds < 16 {
            rounds += 1
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n > 0 {
                handleIncoming(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                if n < buffer.count { break }
            } else if n == 0 {
                handleEndOfInput()
                break
            } else {
                let e = errno
                if e == EINTR { continue }
                if e == EAGAIN || e == EWOULDBLOCK { break }
                closeNow(.failed(.system(operation: "read from", target: peerName, errno: e)))
                break
            }
        }
    }

    private func handleIncoming(_ bytes: UnsafeRawBufferPointer) {
        if let tls {
            tls.feed(bytes)
            processTLS()
        } else {
            onRead?(bytes)
        }
    }

    private func handleEndOfInput() {
        if let tls, !tls.receivedCloseNotify {
            if tls.isHandshakeComplete {
                closeNow(.failed(.tls(.truncated(name: peerName))))
            } else {
                closeNow(.failed(.tls(tls.handshakeInterrupted())))
            }
            return
        }
        inputEnded = true
        if let onInputEnded {
            updateInterest()
            onInputEnded()
        } else {
            closeNow(.peerClosed)
        }
    }

    /// Advances the handshake, then delivers plaintext, then sends what TLS produced.
    private func processTLS() {
        guard let tls, isOpen else { return }
        if !tls.isHandshakeComplete {
            switch tls.handshake() {
            case .needsInput:
                flushTLSOutput()
                return
            case .failed(let error):
                flushTLSOutput()  // the alert, so the peer learns why
                closeNow(.failed(.tls(error)))
                return
            case .complete:
                handshakeTimer?.invalidate()
                handshakeTimer = nil
                flushTLSOutput()
                if !pendingPlaintext.isEmpty {
                    let waiting = pendingPlaintext
                    pendingPlaintext = []
                    waiting.withUnsafeBytes { bytes in
                        if let error = tls.write(bytes) { failSoon(.tls(error)) }
                    }
                    flushTLSOutput()
                }
                updateInterest()
                if let waiter = handshakeWaiter {
                    handshakeWaiter = nil
                    waiter(nil)
                }
                guard isOpen else { return }
            }
        }
        let buffer = loop.plaintextBuffer
        while isOpen && started && !readPaused && !inputEnded {
            switch tls.read(into: buffer) {
            case .bytes(let n):
                onRead?(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            case .needsInput:
                flushTLSOutput()
                return
            case .closed:
                flushTLSOutput()
                handleEndOfInput()
                return
            case .failed(let error):
                closeNow(.failed(.tls(error)))
                return
            }
        }
        flushTLSOutput()
    }

    private func scheduleDrain() {
        guard !drainScheduled else { return }
        drainScheduled = true
        loop.execute { [self] in
            drainScheduled = false
            processTLS()
        }
    }

    // MARK: Writing

    private func flushTLSOutput() {
        guard let tls, isOpen, tls.pendingOutputCount > 0 else { return }
        tls.withPendingOutput { writeToSocket($0) }
    }

    private func writeToSocket(_ bytes: UnsafeRawBufferPointer) {
        guard isOpen, !writeFailed, bytes.count > 0 else { return }
        guard let sent = sendWhileNothingIsQueued(bytes) else { return }
        let rest = UnsafeRawBufferPointer(rebasing: bytes[sent...])
        if rest.count > 0, mayQueue(rest.count) {
            queue.append(rest)
            queued()
        }
    }

    /// Sends what the socket takes of `bytes` now, unless bytes are queued before them (then 0).
    /// Returns how many went, or nil when the send failed (the connection then fails).
    private func sendWhileNothingIsQueued(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard queue.isEmpty else { return 0 }
        var sent = 0
        while sent < bytes.count {
            let n = send(fd, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            if n >= 0 {
                sent += n
                continue
            }
            let e = errno
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK { break }
            failSoon(.system(operation: "send to", target: peerName, errno: e))
            return nil
        }
        return sent
    }

    /// True when `count` more bytes fit the write queue's limit; else the connection fails.
    private func mayQueue(_ count: Int) -> Bool {
        if let limit = writeQueueLimit, queue.byteCount + count > limit {
            failSoon(.writeQueueOverflow(peer: peerName, queued: queue.byteCount + count, limit: limit))
            return false
        }
        return true
    }

    /// Bytes went into the queue: wait for the socket to become writable.
    private func queued() {
        hadQueuedBytes = true
        updateInterest()
    }

    private func flushQueue() {
        let error = queue.flush(fd: fd)
        if error != 0 {
            // The peer went away (EPIPE, ECONNRESET): what it sent before it did is still in our
            // receive buffer, and is handled before the connection ends (its last request, an ack).
            if wantsRead {
                readFromSocket()
                guard isOpen else { return }
            }
            closeNow(.failed(.system(operation: "send to", target: peerName, errno: error)))
            return
        }
        guard queue.isEmpty else { return }
        if closeAfterFlushRequested {
            closeNow(.closedLocally)
            return
        }
        if shutdownOutputRequested { shutdownWriteSide() }
        updateInterest()
        if hadQueuedBytes {
            hadQueuedBytes = false
            onWritable?()
        }
    }

    private func shutdownWriteSide() {
        guard !outputShut, isOpen else { return }
        outputShut = true
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
    }

    /// Marks the connection failed and closes it on the next loop iteration (not inside the caller's write).
    private func failSoon(_ error: SocketError) {
        guard !writeFailed else { return }
        writeFailed = true
        queue.removeAll()
        loop.execute { [self] in
            guard isOpen else { return }
            // What the peer sent before it went away is still in our receive buffer: handled first.
            if wantsRead {
                readFromSocket()
                guard isOpen else { return }
            }
            closeNow(.failed(error))
        }
    }

    // MARK: Closing

    private func closeNow(_ reason: StreamCloseReason) {
        guard isOpen else { return }
        if case .closedLocally = reason, let tls, tls.isHandshakeComplete, !writeFailed {
            tls.close()
            tls.withPendingOutput { bytes in
                if bytes.count > 0 && queue.isEmpty { _ = send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)) }
            }
        }
        isOpen = false
        handshakeTimer?.invalidate()
        handshakeTimer = nil
        if registered {
            loop.unregister(fd: fd)
            registered = false
        }
        Glibc.close(fd)
        fd = -1
        queue.removeAll()
        pendingPlaintext = []
        let closeHandler = onClose
        let waiter = handshakeWaiter
        onRead = nil
        onClose = nil
        onWritable = nil
        onInputEnded = nil
        handshakeWaiter = nil
        if let waiter {
            switch reason {
            case .failed(let error): waiter(error)
            case .peerClosed: waiter(.tls(tls?.handshakeInterrupted() ?? .handshakeFailed(name: peerName, reason: "closed")))
            case .closedLocally: waiter(.tls(.handshakeFailed(name: peerName, reason: "closed locally during the handshake")))
            }
        }
        closeHandler?(reason)
    }
}

/// `SO_PEERCRED` of a Unix socket.
func ioPeerCredentials(fd: Int32) -> PeerCredentials? {
    // struct ucred { pid_t pid; uid_t uid; gid_t gid; } (Glibc hides it behind _GNU_SOURCE).
    var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
    var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
    guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return nil }
    return PeerCredentials(pid: credentials.0, uid: credentials.1, gid: credentials.2)
}

/// `getpeername`/`getsockname` as a ``SocketAddress``.
func ioSocketName(fd: Int32, peer: Bool) -> SocketAddress? {
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    return withUnsafeMutablePointer(to: &storage) { pointer -> SocketAddress? in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address -> SocketAddress? in
            let rc = peer ? getpeername(fd, address, &length) : getsockname(fd, address, &length)
            guard rc == 0 else { return nil }
            return SocketAddress(address, length: length)
        }
    }
}
