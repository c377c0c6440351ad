import Synchronization

/// What a ``WebSocketConnection`` reports, in order; `.closed` is always the last one.
public enum WebSocketConnectionEvent: Sendable, Hashable {
    /// A complete text message (reassembled, inflated, UTF-8 validated).
    case text(String)
    /// A complete text message as its UTF-8 bytes (validated), when the configuration's
    /// `textAsBytes` is set.
    case textBytes([UInt8])
    /// A complete binary message.
    case binary([UInt8])
    /// The peer pinged (the Pong is already sent).
    case ping([UInt8])
    /// A Pong arrived (keepalive logic above uses it).
    case pong([UInt8])
    /// The peer's Close frame arrived (it opens the close handshake or answers ours).
    case closing(code: WebSocketCloseCode, reason: String)
    /// Terminal.
    case closed(WebSocketCloseInfo)
}

/// How a WebSocket connection ended.
public struct WebSocketCloseInfo: Sendable, Hashable, CustomStringConvertible {
    /// The peer's close code after a clean close handshake, ours after a protocol failure, or 1006
    /// (`abnormalClosure`) when TCP went away or the close timeout elapsed without a Close from the peer.
    public var code: WebSocketCloseCode
    public var reason: String
    /// What went wrong, when something did.
    public var error: WebSocketConnectionError?

    public var description: String {
        var s = "closed with \(code)"
        if !reason.isEmpty { s += " \"\(reason)\"" }
        if let error { s += ": \(error)" }
        return s
    }
}

/// A failure of an open WebSocket connection.
public enum WebSocketConnectionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The peer violated RFC 6455/7692 (we sent Close with `error.closeCode`).
    case protocolViolation(WebSocketError)
    /// The socket failed (reset, TLS error, write queue over its limit…).
    case transport(String)
    /// We sent Close and the peer did not answer within the close timeout.
    case closeTimeout(Duration)

    public var description: String {
        switch self {
        case .protocolViolation(let e): return "protocol violation: \(e)"
        case .transport(let s): return "transport: \(s)"
        case .closeTimeout(let d): return "no Close reply within \(d.ioText)"
        }
    }
}

/// An open WebSocket (client or server role) driven by its ``EventLoop``: the sans-I/O
/// ``WebSocketProtocol`` glued to a ``StreamConnection``.
///
/// Events go to a handler on the loop thread (``start(_:)``; the daemon's actor runs on the same loop)
/// and/or to the ``events`` `AsyncStream` (tools, tests). Nothing is read from the socket until one of
/// them is attached, so no event is lost between connecting and attaching.
///
/// Sending: ``send(text:)``, ``send(binary:)-([UInt8])``, ``ping(_:)``, ``close(code:reason:)`` on the loop
/// thread; `…Async` forms from any context. Watch ``queuedByteCount`` for backpressure (bytes the kernel
/// has not taken yet); ``onWritable`` fires when it drained.
///
/// Timers: only the close timer while a close handshake runs (and a guard while flushing before
/// closing TCP). An idle open connection has no timer and costs no wake-up.
public final class WebSocketConnection: CustomStringConvertible,
    // Mutable state is confined to `loop`'s thread (loop-thread methods check it); the event stream's
    // continuation is created under a Mutex; `trace`, `subprotocol`, … are immutable.
    @unchecked Sendable
{
    public let loop: EventLoop
    public let role: WebSocketRole
    /// The negotiated subprotocol, if any.
    public let subprotocol: String?
    /// The negotiated permessage-deflate parameters, if any.
    public let deflate: PerMessageDeflateParameters?
    /// Client: what each connect step did and how long it took.
    public let trace: ConnectTrace?
    /// Server: the upgrade request (path, query, headers).
    public let request: WebSocketUpgradeRequest?
    /// Who the other end is (host:port or address), for logs.
    public let peerName: String
    public let configuration: WebSocketConfiguration

    /// Called on the loop thread when the write queue drained (after ``queuedByteCount`` was non-zero).
    public var onWritable: (() -> Void)? {
        didSet { installWritable() }
    }

    private let stream: StreamConnection
    private let proto: WebSocketProtocol
    private var remainder: [UInt8]
    private var handler: ((WebSocketConnectionEvent) -> Void)?
    private var continuation: AsyncStream<WebSocketConnectionEvent>.Continuation?
    private let streamState = Mutex<AsyncStream<WebSocketConnectionEvent>?>(nil)
    private var reading = false
    /// Set by ``pauseReading()``: the socket is not read until ``resumeReading()``.
    private var pausedByUser = false
    private var closedEvent: WebSocketConnectionEvent?
    private var pendingError: WebSocketConnectionError?
    private var closeTimer: LoopTimer?
    private var flushGuard: LoopTimer?

    init(
        stream: StreamConnection, role: WebSocketRole, configuration: WebSocketConfiguration,
        deflate: PerMessageDeflateParameters?, subprotocol: String?, remainder: [UInt8],
        trace: ConnectTrace?, request: WebSocketUpgradeRequest?, writeQueueLimit: Int?
    ) {
        stream.loop.preconditionInEventLoop()
        self.loop = stream.loop
        self.stream = stream
        self.role = role
        self.configuration = configuration
        self.deflate = deflate
        self.subprotocol = subprotocol
        self.remainder = remainder
        self.trace = trace
        self.request = request
        self.peerName = stream.peerName
        proto = WebSocketProtocol(role: role, configuration: configuration, deflate: deflate)
        stream.writeQueueLimit = writeQueueLimit
        stream.pauseReading()
        stream.onRead = { [self] bytes in
            // The loop's read buffers are mutable memory lent for this call only: unmask in place.
            self.perform(self.proto.receive(UnsafeMutableRawBufferPointer(mutating: bytes)))
        }
        stream.onClose = { [self] reason in transportClosed(reason) }
        if !stream.isActive { transportClosed(.peerClosed) }
    }

    public var description: String { "WebSocketConnection(\(role), \(peerName))" }

    // MARK: Events

    /// Delivers every event to `handler` on the loop thread and starts reading. Loop thread; call once.
    public func start(_ handler: @escaping (WebSocketConnectionEvent) -> Void) {
        loop.preconditionInEventLoop()
        self.handler = handler
        beginReading()
    }

    /// The events as an `AsyncStream` (unbounded buffer: consume it). The first access starts reading.
    /// Any thread. A connection has one stream; later accesses return the same one (single consumer).
    public var events: AsyncStream<WebSocketConnectionEvent> {
        let (stream, continuation, isNew) = streamState.withLock { state in
            if let existing = state { return (existing, AsyncStream<WebSocketConnectionEvent>.Continuation?.none, false) }
            let (s, c) = AsyncStream.makeStream(of: WebSocketConnectionEvent.self)
            state = s
            return (s, c, true)
        }
        if isNew, let continuation {
            let attached = loop.execute { [self] in
                self.continuation = continuation
                if reading {
                    if let closedEvent {
                        continuation.yield(closedEvent)
                        continuation.finish()
                        self.continuation = nil
                    }
                    return
                }
                beginReading()
            }
            if !attached {
                continuation.yield(.closed(WebSocketCloseInfo(
                    code: .abnormalClosure, reason: "", error: .transport("event loop \(loop.name) is shut down"))))
                continuation.finish()
            }
        }
        return stream
    }

    private func beginReading() {
        guard !reading else { return }
        reading = true
        if let closedEvent {
            deliver(closedEvent)
            return
        }
        if !remainder.isEmpty {
            var bytes = remainder
            remainder = []
            perform(bytes.withUnsafeMutableBytes { proto.receive($0) })
        }
        stream.start()
        if !pausedByUser { stream.resumeReading() }
    }

    /// Stops reading from the socket (backpressure): what was read already is still delivered,
    /// then the kernel's receive buffer fills and TCP slows the peer down. Pings and a close from
    /// the peer wait too. Loop thread.
    public func pauseReading() {
        loop.preconditionInEventLoop()
        guard !pausedByUser else { return }
        pausedByUser = true
        if reading { stream.pauseReading() }
    }

    /// Reads again after ``pauseReading()``. Loop thread.
    public func resumeReading() {
        loop.preconditionInEventLoop()
        guard pausedByUser else { return }
        pausedByUser = false
        if reading { stream.resumeReading() }
    }

    /// True between ``pauseReading()`` and ``resumeReading()``. Loop thread.
    public var isReadingPaused: Bool { pausedByUser }

    private func deliver(_ event: WebSocketConnectionEvent) {
        handler?(event)
        continuation?.yield(event)
        if case .closed = event {
            continuation?.finish()
            continuation = nil
            handler = nil
        }
    }

    // MARK: Loop-thread API

    /// True until the close handshake started or the connection closed. Loop thread.
    public var isOpen: Bool {
        loop.preconditionInEventLoop()
        return proto.state == .open
    }

    /// Bytes written but not yet taken by the kernel (ciphertext with TLS). Loop thread.
    public var queuedByteCount: Int {
        loop.preconditionInEventLoop()
        return stream.queuedByteCount
    }

    /// The TLS parameters, when TLS is used. Loop thread.
    public var tlsInfo: TLSConnectionInfo? {
        loop.preconditionInEventLoop()
        return stream.tlsInfo
    }

    /// Sends a text message (fragmented by `configuration.outboundFragmentSize`). Loop thread.
    public func send(text: String) throws(WebSocketSendError) {
        loop.preconditionInEventLoop()
        perform(try proto.send(text: text))
    }

    /// Sends a binary message. Loop thread.
    public func send(binary: [UInt8]) throws(WebSocketSendError) {
        loop.preconditionInEventLoop()
        perform(try proto.send(binary: binary))
    }

    /// Sends a binary message. Loop thread.
    public func send(binary: UnsafeRawBufferPointer) throws(WebSocketSendError) {
        loop.preconditionInEventLoop()
        perform(try proto.send(binary: binary))
    }

    /// Sends a Ping (≤ 125 bytes); the Pong arrives as `.pong`. Loop thread.
    public func ping(_ payload: [UInt8] = []) throws(WebSocketSendError) {
        loop.preconditionInEventLoop()
        perform(try proto.ping(payload))
    }

    /// Sends an unsolicited Pong (a heartbeat). Loop thread.
    public func pong(_ payload: [UInt8] = []) throws(WebSocketSendError) {
        loop.preconditionInEventLoop()
        perform(try proto.pong(payload))
    }

    /// Starts the close handshake; `.closed` follows when the peer answered and TCP closed, or after
    /// `configuration.closeTimeout`. Loop thread.
    public func close(code: WebSocketCloseCode = .normalClosure, reason: String = "") throws(WebSocketSendError) {
        loop.preconditionInEventLoop()
        perform(try proto.close(code: code, reason: reason))
    }

    /// Writes `bytes` on the stream exactly as given, outside the framing: no header, no masking, no
    /// compression, and the protocol state does not change. Loop thread.
    ///
    /// **For test peers only** (smartico-sim's `malformed_frame` fault uses it to put a frame with a
    /// reserved opcode on the wire, so a client's failure path can be tested). Anything written here
    /// that is not a whole, valid frame corrupts the stream for the peer; never use it to send data.
    /// Ignored once TCP is closing or closed. With TLS the bytes are encrypted like any others.
    public func sendRawBytesForTesting(_ bytes: [UInt8]) {
        loop.preconditionInEventLoop()
        stream.write(bytes)
    }

    /// Drops the TCP connection now, without a close handshake (`.closed` with 1006 follows). Loop thread.
    public func abort() {
        loop.preconditionInEventLoop()
        stream.close()
    }

    // MARK: Any-context API

    /// ``send(text:)`` from any context.
    public func sendAsync(text: String) async throws(WebSocketSendError) {
        try await hop { (c) throws(WebSocketSendError) in try c.send(text: text) }
    }

    /// ``send(binary:)-([UInt8])`` from any context.
    public func sendAsync(binary: [UInt8]) async throws(WebSocketSendError) {
        try await hop { (c) throws(WebSocketSendError) in try c.send(binary: binary) }
    }

    /// ``ping(_:)`` from any context.
    public func pingAsync(_ payload: [UInt8] = []) async throws(WebSocketSendError) {
        try await hop { (c) throws(WebSocketSendError) in try c.ping(payload) }
    }

    /// ``close(code:reason:)`` from any context.
    public func closeAsync(code: WebSocketCloseCode = .normalClosure, reason: String = "") async throws(WebSocketSendError) {
        try await hop { (c) throws(WebSocketSendError) in try c.close(code: code, reason: reason) }
    }

    /// ``abort()`` from any context.
    public func abortAsync() async {
        _ = try? await loop.submit { [self] in abort() }
    }

    /// ``queuedByteCount`` from any context (0 once the loop is gone).
    public func queuedByteCountAsync() async -> Int {
        (try? await loop.submit { [self] in queuedByteCount }) ?? 0
    }

    private func hop(_ body: @escaping @Sendable (WebSocketConnection) throws(WebSocketSendError) -> Void) async throws(WebSocketSendError) {
        if loop.inEventLoop {
            try body(self)
            return
        }
        let result: Result<Void, WebSocketSendError>
        do {
            result = try await loop.submit { [self] in Result { () throws(WebSocketSendError) in try body(self) } }
        } catch {
            throw .notOpen
        }
        try result.get()
    }

    // MARK: Driving the protocol

    private func perform(_ out: WebSocketOutput) {
        if !out.outbound.isEmpty {
            out.outbound.withUnsafeBytes { stream.write($0) }
        }
        for event in out.events {
            switch event {
            case .text(let s): deliver(.text(s))
            case .textBytes(let b): deliver(.textBytes(b))
            case .binary(let b): deliver(.binary(b))
            case .ping(let p): deliver(.ping(p))
            case .pong(let p): deliver(.pong(p))
            case .closing(let code, let reason): deliver(.closing(code: code, reason: reason))
            case .failed(let e): pendingError = pendingError ?? .protocolViolation(e)
            case .closed(let code, let reason):
                let info = WebSocketCloseInfo(code: code, reason: reason, error: pendingError)
                closedEvent = .closed(info)
                if reading { deliver(.closed(info)) }
            }
        }
        for action in out.actions {
            switch action {
            case .closeTransport:
                closeTimer?.invalidate()
                closeTimer = nil
                stream.closeAfterFlush()
                if stream.isActive && flushGuard == nil {
                    // A peer that does not read must not keep the socket: give it the close timeout.
                    flushGuard = loop.scheduleTimer(after: configuration.closeTimeout) { [weak self] in
                        self?.stream.close()
                    }
                }
            case .startCloseTimer(let delay):
                guard closeTimer == nil else { break }
                closeTimer = loop.scheduleTimer(after: delay) { [weak self] in
                    guard let self else { return }
                    self.closeTimer = nil
                    if self.proto.state == .closeSent { self.pendingError = self.pendingError ?? .closeTimeout(delay) }
                    self.perform(self.proto.closeTimeoutElapsed())
                }
            }
        }
    }

    private func transportClosed(_ reason: StreamCloseReason) {
        closeTimer?.invalidate()
        closeTimer = nil
        flushGuard?.invalidate()
        flushGuard = nil
        // After a complete close handshake a missing TLS close_notify or a reset is not worth an error.
        if case .failed(let e) = reason, pendingError == nil, proto.state == .open || proto.state == .closeSent {
            pendingError = .transport(e.description)
        }
        perform(proto.transportClosed())
    }

    private func installWritable() {
        stream.onWritable = onWritable
    }
}
