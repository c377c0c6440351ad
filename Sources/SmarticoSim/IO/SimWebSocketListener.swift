import Transport

/// One upgraded WebSocket connection as the runtime sees it: Transport's server-role
/// `WebSocketConnection` behind `SimClientConnection`. Every method runs on the loop thread.
///
/// Immutable (one `let` of a Sendable type), hence Sendable.
final class SimWebSocketClient: SimClientConnection, Sendable {
    let connection: WebSocketConnection

    init(_ connection: WebSocketConnection) { self.connection = connection }

    var remoteDescription: String { connection.peerName }
    var queuedByteCount: Int { connection.queuedByteCount }

    func sendText(_ bytes: [UInt8]) {
        // The core produces valid UTF-8 JSON; a connection already closing refuses sends (nothing to do).
        try? connection.send(text: String(decoding: bytes, as: UTF8.self))
    }

    /// Puts `bytes` on the stream as-is through Transport's test-only raw write: for
    /// `SimWire.malformedFrame` (a frame with the reserved opcode 0x3) the client must fail the
    /// connection itself (RFC 6455 §5.2, close 1002). The server's protocol state is unchanged, so it
    /// answers the client's Close like any other.
    func sendRaw(_ bytes: [UInt8]) {
        connection.sendRawBytesForTesting(bytes)
    }

    func close(code: UInt16, reason: String) {
        do {
            try connection.close(code: WebSocketCloseCode(code), reason: reason)
        } catch {
            connection.abort()  // already closing or closed: make sure TCP goes
        }
    }

    func abort() { connection.abort() }
}

/// The simulator's WebSocket listener: Transport's `WebSocketServer` on `host:port` (TLS when
/// given), upgrades only on `SimUpgrade.path` (anything else: 404 with the reason), and each
/// upgraded connection handed to the runtime (`accepted`, `received`, `receivedBinary`, `closed`),
/// synchronously on the loop the runtime runs on.
public final class SimWebSocketListener: Sendable {
    public let server: WebSocketServer
    public let runtime: SimRuntime
    /// The bound port (the chosen one after `--port 0`).
    public var port: Int { server.port }

    private init(server: WebSocketServer, runtime: SimRuntime) {
        self.server = server
        self.runtime = runtime
    }

    /// Listens and starts handing connections to `runtime` (which must run on `runtime.loop`).
    public static func start(host: String, port: Int, tls: TLSContext? = nil, runtime: SimRuntime,
                             configuration: WebSocketServerConfiguration = WebSocketServerConfiguration())
        async throws(SocketError) -> SimWebSocketListener
    {
        let server = try await WebSocketServer.listen(
            host: host, port: port, tls: tls, configuration: configuration, on: runtime.loop,
            accept: { request in
                if let why = SimUpgrade.refusal(target: request.head.target) {
                    return .reject(status: 404, reason: "Not Found", body: why + "\n")
                }
                return .accept()
            },
            onConnection: { connection in
                let client = SimWebSocketClient(connection)
                let id = runtime.assumeIsolated { $0.accepted(client) }
                connection.start { event in
                    switch event {
                    case .text(let text):
                        runtime.assumeIsolated { $0.received(client: id, text: Array(text.utf8)) }
                    case .textBytes(let bytes):
                        runtime.assumeIsolated { $0.received(client: id, text: bytes) }
                    case .binary(let bytes):
                        runtime.assumeIsolated { $0.receivedBinary(client: id, byteCount: bytes.count) }
                    case .closed:
                        runtime.assumeIsolated { $0.closed(client: id) }
                    case .ping, .pong, .closing:
                        break  // WebSocket-level pings are answered by Transport; Smartico's keepalive is cid 1/2
                    }
                }
            })
        return SimWebSocketListener(server: server, runtime: runtime)
    }

    /// Stops accepting (open connections are left to the runtime and the process).
    public func close() async { await server.closeAsync() }
}
