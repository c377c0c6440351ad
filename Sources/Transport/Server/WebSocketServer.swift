/// What the accept callback of a ``WebSocketServer`` decides for an upgrade request.
public enum WebSocketAcceptDecision: Sendable {
    /// Upgrade; `subprotocol` (one the client offered) overrides the server's preference order.
    case accept(subprotocol: String? = nil, headers: HTTPHeaders = HTTPHeaders())
    /// Answer with this status and body (text/plain) and close.
    case reject(status: Int, reason: String, body: String = "")
}

/// Settings of a ``WebSocketServer``.
public struct WebSocketServerConfiguration: Sendable {
    /// Subprotocols and permessage-deflate (on by default), limits of the request head.
    public var handshake: WebSocketServerOptions
    /// Limits, fragmentation and close timeout of each connection.
    public var connection: WebSocketConfiguration
    /// A client that has not completed TLS and the upgrade request by then is dropped.
    public var handshakeTimeout: Duration
    /// A connection with more unsent bytes than this is dropped (a slow reader never holds others up).
    public var writeQueueLimit: Int?
    public var tcp: TCPOptions

    public init(
        handshake: WebSocketServerOptions = WebSocketServerOptions(deflate: PerMessageDeflateOptions()),
        connection: WebSocketConfiguration = WebSocketConfiguration(), handshakeTimeout: Duration = .seconds(10),
        writeQueueLimit: Int? = 64 << 20, tcp: TCPOptions = TCPOptions()
    ) {
        self.handshake = handshake
        self.connection = connection
        self.handshakeTimeout = handshakeTimeout
        self.writeQueueLimit = writeQueueLimit
        self.tcp = tcp
    }
}

/// A WebSocket server on an ``EventLoop``: a TCP listener (IPv4 or IPv6, optional TLS); each accepted
/// client runs the upgrade handshake (within `handshakeTimeout`), the `accept` callback sees the request
/// (path, query, headers) and may reject it, then `onConnection` receives a server-role
/// ``WebSocketConnection`` (not reading yet: call ``WebSocketConnection/start(_:)``).
/// Everything runs on the loop thread; thousands of connections share it.
public final class WebSocketServer: CustomStringConvertible,
    // Mutable state is confined to the loop thread (public methods check it).
    @unchecked Sendable
{
    public let loop: EventLoop
    public let configuration: WebSocketServerConfiguration
    /// The bound address (with the chosen port after port 0).
    public let localAddress: SocketAddress
    /// The TCP port.
    public var port: Int { localAddress.port ?? 0 }
    /// Called for every upgrade request; nil accepts all. Loop thread.
    public var accept: ((WebSocketUpgradeRequest) -> WebSocketAcceptDecision)?
    /// Receives each upgraded connection. Loop thread.
    public var onConnection: ((WebSocketConnection) -> Void)?
    /// Handshakes that failed (bad request, TLS failure, timeout), for logs. Loop thread.
    public var onHandshakeError: ((String) -> Void)?

    private let listener: StreamListener
    private var handshaking: [ObjectIdentifier: ServerHandshake] = [:]

    private init(listener: StreamListener, configuration: WebSocketServerConfiguration) {
        self.loop = listener.loop
        self.listener = listener
        self.configuration = configuration
        self.localAddress = listener.localAddress
    }

    /// Listens on `host` (an IP literal: "127.0.0.1", "::1", "0.0.0.0", "::") and `port` (0: chosen by
    /// the kernel). Any context; set the callbacks on the loop thread, or pass them here.
    public static func listen(
        host: String, port: Int, tls: TLSContext? = nil,
        configuration: WebSocketServerConfiguration = WebSocketServerConfiguration(), on loop: EventLoop,
        accept: (@Sendable (WebSocketUpgradeRequest) -> WebSocketAcceptDecision)? = nil,
        onConnection: (@Sendable (WebSocketConnection) -> Void)? = nil
    ) async throws(SocketError) -> WebSocketServer {
        let result: Result<WebSocketServer, SocketError>
        do {
            result = try await loop.submit {
                Result { () throws(SocketError) -> WebSocketServer in
                    let listener = try StreamListener.tcp(host: host, port: port, tls: tls, tcpOptions: configuration.tcp, on: loop)
                    listener.tlsHandshakeTimeout = configuration.handshakeTimeout
                    let server = WebSocketServer(listener: listener, configuration: configuration)
                    server.accept = accept
                    server.onConnection = onConnection
                    listener.onAccept = { [weak server] stream in
                        guard let server else { stream.close(); return }
                        server.handshake(stream)
                    }
                    return server
                }
            }
        } catch {
            throw .eventLoop(.shutDown(loop: loop.name))
        }
        return try result.get()
    }

    public var description: String { "WebSocketServer(\(localAddress))" }

    /// Stops listening (open connections stay). Loop thread.
    public func close() {
        loop.preconditionInEventLoop()
        listener.close()
        for h in handshaking.values { h.stream.close() }
        handshaking.removeAll()
    }

    /// ``close()`` from any context.
    public func closeAsync() async {
        _ = try? await loop.submit { [self] in close() }
    }

    /// Connections still in the opening handshake. Loop thread.
    public var handshakeCount: Int {
        loop.preconditionInEventLoop()
        return handshaking.count
    }

    private func handshake(_ stream: StreamConnection) {
        let h = ServerHandshake(stream: stream, options: configuration.handshake)
        let id = ObjectIdentifier(h)
        handshaking[id] = h
        let timer = loop.scheduleTimer(after: configuration.handshakeTimeout) { [weak self, weak h] in
            guard let self, let h else { return }
            self.onHandshakeError?("\(h.stream.peerName): no upgrade request within \(self.configuration.handshakeTimeout.ioText)")
            self.handshaking[id] = nil
            h.stream.close()
        }
        stream.onClose = { [weak self] reason in
            timer.invalidate()
            guard let self, self.handshaking.removeValue(forKey: id) != nil else { return }
            if case .failed(let e) = reason { self.onHandshakeError?("\(stream.peerName): \(e)") }
        }
        stream.onRead = { [weak self] bytes in
            guard let self else { return }
            var parser = h.parser
            let request: WebSocketUpgradeRequest
            do throws(WebSocketHandshakeError) {
                guard let r = try parser.receive(bytes) else {
                    h.parser = parser
                    return
                }
                request = r
            } catch {
                timer.invalidate()
                self.handshaking[id] = nil
                self.onHandshakeError?("\(stream.peerName): \(error)")
                stream.onRead = nil
                stream.onClose = nil
                stream.write(WebSocketServerHandshake.rejectionResponse(for: error))
                stream.closeAfterFlush()
                return
            }
            h.parser = parser
            timer.invalidate()
            self.handshaking[id] = nil
            stream.onRead = nil
            stream.onClose = nil
            self.upgrade(stream, request: request, parser: parser)
        }
        stream.start()
    }

    private func upgrade(_ stream: StreamConnection, request: WebSocketUpgradeRequest, parser: WebSocketServerHandshake) {
        let decision = accept?(request) ?? .accept()
        switch decision {
        case .reject(let status, let reason, let body):
            var headers = HTTPHeaders()
            let bytes = Array(body.utf8)
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            headers.add(name: "Content-Length", value: String(bytes.count))
            headers.add(name: "Connection", value: "close")
            stream.write(HTTPResponseHead(status: status, reason: reason, headers: headers).serialized() + bytes)
            stream.closeAfterFlush()
        case .accept(let subprotocol, let headers):
            let acceptance = parser.accept(request, subprotocol: subprotocol, headers: headers)
            stream.write(acceptance.response)
            let connection = WebSocketConnection(
                stream: stream, role: .server, configuration: configuration.connection, deflate: acceptance.deflate,
                subprotocol: acceptance.subprotocol, remainder: request.remainder, trace: nil, request: request,
                writeQueueLimit: configuration.writeQueueLimit)
            if let onConnection {
                onConnection(connection)
            } else {
                connection.abort()
            }
        }
    }
}

/// One client in the opening handshake. Loop thread.
private final class ServerHandshake {
    let stream: StreamConnection
    var parser: WebSocketServerHandshake
    init(stream: StreamConnection, options: WebSocketServerOptions) {
        self.stream = stream
        parser = WebSocketServerHandshake(options: options)
    }
}
