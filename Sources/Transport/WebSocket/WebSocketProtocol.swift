/// Limits and behaviour of one WebSocket connection.
public struct WebSocketConfiguration: Hashable, Sendable {
    /// Largest payload of one inbound frame (close 1009 beyond).
    public var maxFrameSize: Int
    /// Largest inbound message after reassembly and inflation (close 1009 beyond).
    public var maxMessageSize: Int
    /// Split outbound messages into frames of at most this many payload bytes (`nil`: one frame).
    public var outboundFragmentSize: Int?
    /// How long to wait for the peer's Close reply, or (client) for the server to close TCP.
    public var closeTimeout: Duration
    /// With permessage-deflate, messages shorter than this are sent uncompressed.
    public var compressionThreshold: Int
    /// Deliver text messages as `.textBytes` (their UTF-8 bytes, already validated) instead of
    /// `.text`: for a reader that works on bytes, no `String` is made (a copy and a second UTF-8
    /// check per message) only to be turned back into bytes.
    public var textAsBytes: Bool

    public init(
        maxFrameSize: Int = 16 << 20, maxMessageSize: Int = 16 << 20, outboundFragmentSize: Int? = nil,
        closeTimeout: Duration = .seconds(5), compressionThreshold: Int = 0, textAsBytes: Bool = false
    ) {
        self.maxFrameSize = maxFrameSize
        self.maxMessageSize = maxMessageSize
        self.outboundFragmentSize = outboundFragmentSize
        self.closeTimeout = closeTimeout
        self.compressionThreshold = compressionThreshold
        self.textAsBytes = textAsBytes
    }
}

/// Something the application should know about.
public enum WebSocketEvent: Hashable, Sendable {
    /// A complete text message (reassembled, inflated, UTF-8 validated).
    case text(String)
    /// A complete text message as its UTF-8 bytes (validated), when `textAsBytes` is set.
    case textBytes([UInt8])
    /// A complete binary message.
    case binary([UInt8])
    /// A Ping arrived; the Pong with the same payload is already in `outbound`.
    case ping([UInt8])
    case pong([UInt8])
    /// The peer's Close frame arrived (as the opening of the close handshake or as the reply to
    /// ours). `code` is `.noStatusReceived` (1005) when the frame had no status code.
    case closing(code: WebSocketCloseCode, reason: String)
    /// The connection failed: the Close frame with `error.closeCode` is in `outbound` (unless a
    /// Close was already sent) and `.closeTransport` is among the actions. `.closed` follows.
    case failed(WebSocketError)
    /// Terminal: the WebSocket is closed. `code` is the peer's close code after a clean close
    /// handshake, our error code after a failure, or `.abnormalClosure` (1006) when TCP went away
    /// (or the close timeout elapsed) without a Close frame from the peer.
    case closed(code: WebSocketCloseCode, reason: String)
}

/// Something the I/O driver must do, after writing `outbound`.
public enum WebSocketAction: Hashable, Sendable {
    /// Write all pending outbound bytes, then close the TCP connection.
    case closeTransport
    /// Start the close timer (at most one per connection); when it fires, call
    /// `closeTimeoutElapsed()`. Cancel it when the transport closes.
    case startCloseTimer(Duration)
}

/// The result of every call: events for the application, bytes to write (in order), actions for the driver.
public struct WebSocketOutput: Hashable, Sendable {
    public var events: [WebSocketEvent] = []
    public var outbound: [UInt8] = []
    public var actions: [WebSocketAction] = []
    public init() {}
}

/// The sans-I/O WebSocket protocol (RFC 6455 + RFC 7692) of one connection, after the opening
/// handshake: bytes in, events/bytes/actions out. No sockets, threads or clocks; not thread-safe
/// (owned by one event loop).
///
/// - Control frames may be interleaved with the fragments of a message; pings are answered
///   automatically with the same payload.
/// - Text is UTF-8-validated incrementally as frames arrive: a bad byte fails the connection
///   (1007) before the message ends.
/// - Close handshake (RFC 6455 §5.5.1, §7): the close code is validated and echoed; after our
///   Close is sent, data is ignored; the server closes TCP first, the client waits for it (with
///   `startCloseTimer`).
/// - Violations send Close 1002 (1007 bad UTF-8, 1009 too big) and fail the connection.
///
/// Driving it (the I/O side):
/// 1. After the handshake, create it with the negotiated `deflate` and feed the handshake's
///    `remainder`, then every read: `receive(readBuffer)` (unmasks in place).
/// 2. For every `WebSocketOutput`: write `outbound` (in order, before anything written later),
///    deliver `events`, then perform `actions` (`.closeTransport` after the write has drained;
///    `.startCloseTimer(d)` → call `closeTimeoutElapsed()` after `d`).
/// 3. On EOF or a socket error call `transportClosed()` (it reports `.closed` once).
/// `.closed` is always the last event; after it the object does nothing.
public final class WebSocketProtocol {
    public enum State: Hashable, Sendable {
        case open
        /// We sent Close and wait for the peer's.
        case closeSent
        /// Client: the close handshake is complete; waiting for the server to close TCP.
        case awaitingTransportClose
        case closed
    }

    public let role: WebSocketRole
    public let configuration: WebSocketConfiguration
    /// The negotiated permessage-deflate parameters, if any.
    public let deflate: PerMessageDeflateParameters?
    public private(set) var state: State = .open

    private var parser: WebSocketFrameParser
    private var random: any RandomNumberGenerator
    private let deflater: MessageDeflater?
    private let inflater: MessageInflater?

    // Message being received.
    private var messageOpcode: WebSocketOpcode? = nil
    private var messageCompressed = false
    private var message: [UInt8] = []
    private var utf8 = UTF8Validator()
    // Control frame being received.
    private var control: [UInt8] = []
    private var frameIsControl = false
    private var frameOpcode: WebSocketOpcode = .binary
    private var ignoringData = false
    // Close bookkeeping.
    private var closeCode: WebSocketCloseCode = .abnormalClosure
    private var closeReason = ""

    /// - Parameters:
    ///   - role: client (masks its frames) or server.
    ///   - deflate: the parameters negotiated in the handshake, or `nil`.
    ///   - random: source of masking keys (client role); inject a seeded generator in tests.
    public init(
        role: WebSocketRole, configuration: WebSocketConfiguration = WebSocketConfiguration(),
        deflate: PerMessageDeflateParameters? = nil, random: any RandomNumberGenerator = WebSocketRandomSource()
    ) {
        self.role = role
        self.configuration = configuration
        self.deflate = deflate
        self.random = random
        parser = WebSocketFrameParser(
            role: role, maxFrameSize: configuration.maxFrameSize, maxMessageSize: configuration.maxMessageSize,
            allowedRSV: deflate == nil ? 0 : 0x4)
        if let d = deflate {
            let ours = role == .client
                ? (bits: d.clientMaxWindowBits, reset: d.clientNoContextTakeover)
                : (bits: d.serverMaxWindowBits, reset: d.serverNoContextTakeover)
            let theirs = role == .client
                ? (bits: d.serverMaxWindowBits, reset: d.serverNoContextTakeover)
                : (bits: d.clientMaxWindowBits, reset: d.clientNoContextTakeover)
            deflater = MessageDeflater(windowBits: ours.bits, noContextTakeover: ours.reset, level: d.compressionLevel, memoryLevel: d.memoryLevel)
            // Inflated with the largest window whatever the peer's negotiated one: a conforming
            // stream inflates the same, and one that refers back further than the peer promised
            // is taken the same way however the reads cut it. With a smaller window zlib allows a
            // distance into what it wrote in the same inflate call but not into its window, so
            // such a message passed when it arrived in one read and failed (1007) in several.
            inflater = MessageInflater(windowBits: 15, noContextTakeover: theirs.reset)
        } else {
            deflater = nil
            inflater = nil
        }
    }

    /// Bytes received from the peer (in place: masked payloads are unmasked in `bytes`).
    public func receive(_ bytes: UnsafeMutableRawBufferPointer) -> WebSocketOutput {
        var out = WebSocketOutput()
        guard state == .open || state == .closeSent else { return out }
        var index = 0
        do {
            while let item = try parser.next(in: bytes, at: &index) {
                switch item {
                case let .header(h, _):
                    try frameStarted(h)
                case let .payload(range):
                    try payload(UnsafeRawBufferPointer(rebasing: bytes[range]))
                case .end:
                    try frameEnded(&out)
                }
                if state != .open && state != .closeSent { break }
            }
        } catch {
            fail(error, &out)
        }
        return out
    }

    /// Bytes received from the peer (copied, then unmasked).
    public func receive(_ bytes: [UInt8]) -> WebSocketOutput {
        var copy = bytes
        return copy.withUnsafeMutableBytes { receive($0) }
    }

    /// Sends a text message.
    public func send(text: String) throws(WebSocketSendError) -> WebSocketOutput {
        var s = text
        var result: Result<WebSocketOutput, WebSocketSendError>?
        s.withUTF8 { u in result = Result { () throws(WebSocketSendError) in try sendMessage(.text, UnsafeRawBufferPointer(u)) } }
        return try result!.get()
    }

    /// Sends a binary message.
    public func send(binary: UnsafeRawBufferPointer) throws(WebSocketSendError) -> WebSocketOutput {
        try sendMessage(.binary, binary)
    }

    /// Sends a binary message.
    public func send(binary: [UInt8]) throws(WebSocketSendError) -> WebSocketOutput {
        try withTypedBytes(binary) { (raw) throws(WebSocketSendError) in try sendMessage(.binary, raw) }
    }

    /// Sends a Ping (payload ≤ 125 bytes).
    public func ping(_ payload: [UInt8] = []) throws(WebSocketSendError) -> WebSocketOutput {
        try sendControl(.ping, payload)
    }

    /// Sends an unsolicited Pong (a heartbeat; payload ≤ 125 bytes).
    public func pong(_ payload: [UInt8] = []) throws(WebSocketSendError) -> WebSocketOutput {
        try sendControl(.pong, payload)
    }

    /// Starts the close handshake: sends Close with `code` and `reason` (≤ 123 UTF-8 bytes) and
    /// asks for the close timer. Data received afterwards is ignored.
    public func close(code: WebSocketCloseCode = .normalClosure, reason: String = "") throws(WebSocketSendError) -> WebSocketOutput {
        guard state == .open else { throw .notOpen }
        guard code.isValidOnWire else { throw .invalidCloseCode(code.rawValue) }
        guard reason.utf8.count <= 123 else { throw .closeReasonTooLong(bytes: reason.utf8.count) }
        var out = WebSocketOutput()
        writeClose(code, reason, &out)
        state = .closeSent
        out.actions.append(.startCloseTimer(configuration.closeTimeout))
        return out
    }

    /// The transport closed (EOF, reset or after `.closeTransport`). Returns `.closed` unless
    /// already reported.
    public func transportClosed() -> WebSocketOutput {
        var out = WebSocketOutput()
        switch state {
        case .closed:
            break
        case .awaitingTransportClose:
            out.events.append(.closed(code: closeCode, reason: closeReason))
        case .open, .closeSent:
            out.events.append(.closed(code: .abnormalClosure, reason: ""))
        }
        state = .closed
        return out
    }

    /// The close timer fired: gives up waiting and closes the transport.
    public func closeTimeoutElapsed() -> WebSocketOutput {
        var out = WebSocketOutput()
        switch state {
        case .closed, .open:
            return out
        case .awaitingTransportClose:
            out.events.append(.closed(code: closeCode, reason: closeReason))
        case .closeSent:
            out.events.append(.closed(code: .abnormalClosure, reason: ""))
        }
        out.actions.append(.closeTransport)
        state = .closed
        return out
    }

    // MARK: receiving

    private var position: WebSocketStreamPosition { parser.currentPosition }

    private func frameStarted(_ h: WebSocketFrameHeader) throws(WebSocketError) {
        frameOpcode = h.opcode
        frameIsControl = h.opcode.isControl
        if frameIsControl {
            control.removeAll(keepingCapacity: true)
            return
        }
        if h.opcode != .continuation {
            // The parser guarantees no message is in progress here.
            messageOpcode = h.opcode
            messageCompressed = h.rsv1
            ignoringData = state != .open
            message = []
            utf8.reset()
        }
    }

    private func payload(_ chunk: UnsafeRawBufferPointer) throws(WebSocketError) {
        if frameIsControl {
            control.append(contentsOf: chunk)
            return
        }
        if ignoringData { return }
        if messageCompressed, let inflater {
            let before = message.count
            do {
                try inflater.inflate(chunk, limit: configuration.maxMessageSize, into: &message)
            } catch {
                throw inflateError(error)
            }
            try validateText(from: before)
        } else {
            message.append(contentsOf: chunk)
            try validateText(from: message.count - chunk.count)
        }
    }

    private func inflateError(_ e: InflateFailure) -> WebSocketError {
        switch e {
        case let .tooLarge(n): return .messageTooLarge(size: n, limit: configuration.maxMessageSize, at: position)
        case let .compressedTooLarge(n): return .messageTooLarge(size: n, limit: configuration.maxMessageSize, at: position)
        case let .invalidData(m): return .inflateFailed(reason: m, at: position)
        }
    }

    private func validateText(from start: Int) throws(WebSocketError) {
        guard messageOpcode == .text, start < message.count else { return }
        let bad: Int? = message.withUnsafeBytes { utf8.validate(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        if let bad { throw .invalidUTF8InText(messageOffset: bad, at: position) }
    }

    private func frameEnded(_ out: inout WebSocketOutput) throws(WebSocketError) {
        if frameIsControl {
            try controlFrame(&out)
            return
        }
        guard parser.currentHeader.fin, let opcode = messageOpcode else { return }
        if ignoringData {
            messageOpcode = nil
            return
        }
        if messageCompressed, let inflater {
            let before = message.count
            do {
                try inflater.finish(limit: configuration.maxMessageSize, into: &message)
            } catch {
                throw inflateError(error)
            }
            try validateText(from: before)
        }
        messageOpcode = nil
        let bytes = message
        message = []
        if opcode == .text {
            guard utf8.isComplete else { throw .truncatedUTF8InText(messageLength: bytes.count, at: position) }
            out.events.append(configuration.textAsBytes ? .textBytes(bytes) : .text(String(decoding: bytes, as: UTF8.self)))
        } else {
            out.events.append(.binary(bytes))
        }
    }

    private func controlFrame(_ out: inout WebSocketOutput) throws(WebSocketError) {
        switch frameOpcode {
        case .ping:
            out.events.append(.ping(control))
            if state == .open { writeFrame(.pong, control, &out) }
        case .pong:
            out.events.append(.pong(control))
        case .close:
            let (code, reason) = try parseClose()
            out.events.append(.closing(code: code, reason: reason))
            closeCode = code
            closeReason = reason
            if state == .open {
                // Echo the status code (an empty Close is answered with an empty Close).
                if code == .noStatusReceived {
                    writeFrame(.close, [], &out)
                } else {
                    writeClose(code, "", &out)
                }
            }
            switch role {
            case .server:
                out.actions.append(.closeTransport)
                out.events.append(.closed(code: code, reason: reason))
                state = .closed
            case .client:
                if state == .open { out.actions.append(.startCloseTimer(configuration.closeTimeout)) }
                state = .awaitingTransportClose
            }
        default:
            break
        }
    }

    private func parseClose() throws(WebSocketError) -> (WebSocketCloseCode, String) {
        if control.isEmpty { return (.noStatusReceived, "") }
        guard control.count >= 2 else { throw .closePayloadTooShort(at: position) }
        let code = WebSocketCloseCode(UInt16(control[0]) << 8 | UInt16(control[1]))
        guard code.isValidOnWire else { throw .invalidCloseCode(code.rawValue, at: position) }
        let reasonBytes = control[2...]
        guard UTF8Validator.isValid(reasonBytes) else { throw .invalidUTF8InCloseReason(at: position) }
        return (code, String(decoding: reasonBytes, as: UTF8.self))
    }

    private func fail(_ error: any Error, _ out: inout WebSocketOutput) {
        let e = error as? WebSocketError ?? .inflateFailed(reason: "\(error)", at: position)
        if state == .open {
            writeClose(e.closeCode, Self.shortReason(e), &out)
        }
        out.events.append(.failed(e))
        out.events.append(.closed(code: e.closeCode, reason: Self.shortReason(e)))
        out.actions.append(.closeTransport)
        state = .closed
    }

    /// A close reason for a failure, ≤ 123 bytes, cut at a character boundary.
    static func shortReason(_ e: WebSocketError) -> String {
        var s = Substring(e.description)
        while s.utf8.count > 123 { s = s.dropLast() }
        return String(s)
    }

    // MARK: sending

    private func nextMaskKey() -> WebSocketMaskKey? {
        role == .client ? WebSocketMaskKey(wireValue: UInt32(truncatingIfNeeded: random.next())) : nil
    }

    private func writeFrame(_ opcode: WebSocketOpcode, _ payload: [UInt8], _ out: inout WebSocketOutput) {
        WebSocketFrameEncoder.writeFrame(fin: true, opcode: opcode, payload: payload, maskKey: nextMaskKey(), into: &out.outbound)
    }

    private func writeClose(_ code: WebSocketCloseCode, _ reason: String, _ out: inout WebSocketOutput) {
        var payload: [UInt8] = [UInt8(code.rawValue >> 8), UInt8(code.rawValue & 0xFF)]
        payload.append(contentsOf: reason.utf8)
        writeFrame(.close, payload, &out)
    }

    private func sendControl(_ opcode: WebSocketOpcode, _ payload: [UInt8]) throws(WebSocketSendError) -> WebSocketOutput {
        guard state == .open else { throw .notOpen }
        guard payload.count <= 125 else { throw .controlPayloadTooLong(length: payload.count) }
        var out = WebSocketOutput()
        writeFrame(opcode, payload, &out)
        return out
    }

    private func sendMessage(_ opcode: WebSocketOpcode, _ payload: UnsafeRawBufferPointer) throws(WebSocketSendError) -> WebSocketOutput {
        guard state == .open else { throw .notOpen }
        var out = WebSocketOutput()
        if let deflater, payload.count >= configuration.compressionThreshold {
            var compressed: [UInt8] = []
            deflater.compress(payload, into: &compressed)
            compressed.withUnsafeBytes { compressed in
                WebSocketFrameEncoder.writeMessage(
                    opcode: opcode, rsv: 0x4, payload: compressed, fragmentSize: configuration.outboundFragmentSize,
                    maskKey: nextMaskKey, into: &out.outbound)
            }
        } else {
            WebSocketFrameEncoder.writeMessage(
                opcode: opcode, payload: payload, fragmentSize: configuration.outboundFragmentSize,
                maskKey: nextMaskKey, into: &out.outbound)
        }
        return out
    }
}
