/// Options of ``WebSocketClient/connect(url:options:on:)``.
public struct WebSocketConnectOptions: Sendable {
    /// Extra request headers (`Origin`, `Authorization`, `User-Agent`…).
    public var headers: HTTPHeaders
    /// Subprotocols to offer, in preference order.
    public var subprotocols: [String]
    /// permessage-deflate offer (with `client_max_window_bits`), or nil to offer none. On by default.
    public var deflate: PerMessageDeflateOptions?
    /// Trust roots (system store or a CA file) and SPKI pins for `wss://`. Verification is always on.
    public var tls: TLSClientConfiguration
    /// A prebuilt client context (takes precedence over `tls`; build it once to avoid reading the
    /// trust store on every connect).
    public var tlsContext: TLSContext?
    /// An HTTP proxy to reach the server through with CONNECT (see ``HTTPProxy/Environment``).
    public var proxy: HTTPProxy?
    /// One deadline for DNS + TCP + proxy CONNECT + TLS + upgrade.
    public var connectTimeout: Duration
    /// TCP keepalive and no-delay (its `connectTimeout` is ignored: `connectTimeout` above rules).
    public var tcp: TCPOptions
    /// Frame and message size limits (the message limit applies after inflation), fragmentation of
    /// outbound messages, close timeout.
    public var configuration: WebSocketConfiguration
    /// When set, a connection whose unsent bytes exceed this is dropped (a stalled peer).
    public var writeQueueLimit: Int?
    /// Limits of the upgrade response head.
    public var headLimits: HTTPHeadLimits

    public init(
        headers: HTTPHeaders = HTTPHeaders(), subprotocols: [String] = [],
        deflate: PerMessageDeflateOptions? = PerMessageDeflateOptions(),
        tls: TLSClientConfiguration = TLSClientConfiguration(), tlsContext: TLSContext? = nil, proxy: HTTPProxy? = nil,
        connectTimeout: Duration = .seconds(15), tcp: TCPOptions = TCPOptions(),
        configuration: WebSocketConfiguration = WebSocketConfiguration(), writeQueueLimit: Int? = nil,
        headLimits: HTTPHeadLimits = HTTPHeadLimits()
    ) {
        self.headers = headers
        self.subprotocols = subprotocols
        self.deflate = deflate
        self.tls = tls
        self.tlsContext = tlsContext
        self.proxy = proxy
        self.connectTimeout = connectTimeout
        self.tcp = tcp
        self.configuration = configuration
        self.writeQueueLimit = writeQueueLimit
        self.headLimits = headLimits
    }
}

/// The WebSocket client: DNS, TCP, optional proxy CONNECT, TLS for `wss://`, upgrade, each step timed
/// in the connection's ``WebSocketConnection/trace``.
public enum WebSocketClient {
    /// Connects to `url` (`ws://` or `wss://`). The returned connection is not reading yet: attach a
    /// handler with ``WebSocketConnection/start(_:)`` (loop thread) or iterate ``WebSocketConnection/events``.
    /// Any context. Errors name the step and the peer (``ConnectError``).
    public static func connect(
        url: WebSocketURL, options: WebSocketConnectOptions = WebSocketConnectOptions(), on loop: EventLoop
    ) async throws(ConnectError) -> WebSocketConnection {
        var trace = ConnectTrace(target: HTTPProxy.authority(host: url.host, port: url.port))
        let deadline = LoopInstant.now + options.connectTimeout
        let targetName = HTTPProxy.authority(host: url.host, port: url.port)
        let context = try await Dialer.tlsContext(
            secure: url.secure, given: options.tlsContext, configuration: options.tls, peer: targetName, trace: trace, on: loop)
        let target = Dialer.Target(
            host: url.host, port: url.port, tls: context, proxy: options.proxy, tcp: options.tcp,
            timeout: options.connectTimeout, userAgent: options.headers["User-Agent"])
        let stream = try await Dialer.dial(target, trace: &trace, deadline: deadline, on: loop)
        let handshake = WebSocketClientHandshake(options: WebSocketClientOptions(
            url: url, subprotocols: options.subprotocols, headers: options.headers, deflate: options.deflate,
            limits: options.headLimits))
        let exchange = UpgradeExchange(handshake)
        let result: WebSocketClientHandshakeResult
        do {
            result = try await Dialer.run(exchange, on: stream, deadline: deadline)
        } catch {
            throw ConnectError(step: .upgrade, peer: targetName, reason: .init(error, timeout: options.connectTimeout), trace: trace)
        }
        trace.upgradeStatus = result.response.statusLine
        trace.extensions = result.deflate?.responseHeaderValue
        trace.subprotocol = result.subprotocol
        trace.finish(.upgrade, "\(result.response.statusLine); extensions: \(result.deflate?.responseHeaderValue ?? "none"); subprotocol: \(result.subprotocol ?? "none")")
        let finalTrace = trace
        do {
            return try await loop.submit {
                WebSocketConnection(
                    stream: stream, role: .client, configuration: options.configuration, deflate: result.deflate,
                    subprotocol: result.subprotocol, remainder: result.remainder, trace: finalTrace, request: nil,
                    writeQueueLimit: options.writeQueueLimit)
            }
        } catch {
            throw ConnectError(step: .upgrade, peer: targetName, reason: .socket(.eventLoop(.shutDown(loop: loop.name))), trace: trace)
        }
    }

    /// Connects to `url` given as text (see ``connect(url:options:on:)``); a bad URL fails the
    /// `configuration` step.
    public static func connect(
        url: String, options: WebSocketConnectOptions = WebSocketConnectOptions(), on loop: EventLoop
    ) async throws(ConnectError) -> WebSocketConnection {
        let parsed: WebSocketURL
        do {
            parsed = try WebSocketURL(url)
        } catch {
            throw ConnectError(step: .configuration, peer: url, reason: .configuration(error.description), trace: ConnectTrace(target: url))
        }
        return try await connect(url: parsed, options: options, on: loop)
    }
}

/// The client upgrade as a ``StreamExchange``.
final class UpgradeExchange: StreamExchange,
    // Confined to the loop thread once handed over (see StreamExchange).
    @unchecked Sendable
{
    private var handshake: WebSocketClientHandshake
    init(_ handshake: WebSocketClientHandshake) { self.handshake = handshake }
    var request: [UInt8] { handshake.request }
    func feed(_ bytes: UnsafeRawBufferPointer) throws -> WebSocketClientHandshakeResult? {
        try handshake.receive(bytes)
    }
    func closed(_ reason: StreamCloseReason) -> Result<WebSocketClientHandshakeResult, any Error> {
        if case .failed(let e) = reason { return .failure(e) }
        return Result { () throws(WebSocketHandshakeError) -> WebSocketClientHandshakeResult in
            try handshake.transportClosed()
            throw .connectionClosed(bytesReceived: 0)
        }.mapError { $0 }
    }
}
