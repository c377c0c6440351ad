import Transport

/// Serves `SimHTTPRouter` over TCP with Transport's `StreamListener`/`StreamConnection`: one
/// request per connection (`Connection: close`), a 16 KiB head limit and a 10 s idle limit, so
/// a slow or silent client costs nothing for long.
public final class SimHTTPServer:
    // Every mutable member is touched on `loop`'s thread only (created in `loop.submit`, closed there).
    @unchecked Sendable
{
    public let loop: EventLoop
    public let listener: StreamListener
    /// Closes a connection that has not sent a complete request head by then.
    public static let idleTimeout: Duration = .seconds(10)

    private init(loop: EventLoop, listener: StreamListener) {
        self.loop = loop
        self.listener = listener
    }

    /// The bound TCP port.
    public var port: Int { listener.localAddress.port ?? 0 }

    /// Listens on `host:port` (port 0: any free port) on `loop`.
    /// `onRecord` is called (on the loop thread) with every public API call (`/services/public`).
    public static func start(host: String, port: Int, router: SimHTTPRouter = SimHTTPRouter(), on loop: EventLoop,
                             onRecord: (@Sendable (SimHTTPRouter.Record) -> Void)? = nil) async throws -> SimHTTPServer {
        try await loop.submit {
            let listener = try StreamListener.tcp(host: host, port: port, on: loop)
            listener.onAccept = { connection in Self.serve(connection, router: router, loop: loop, onRecord: onRecord) }
            return SimHTTPServer(loop: loop, listener: listener)
        }
    }

    private static func serve(_ connection: StreamConnection, router: SimHTTPRouter, loop: EventLoop,
                              onRecord: (@Sendable (SimHTTPRouter.Record) -> Void)?) {
        var parser = SimHTTPRequestParser()
        var answered = false
        let idle = LoopTimer(loop: loop) { [weak connection] in connection?.close() }
        idle.schedule(after: idleTimeout)
        connection.writeQueueLimit = 1 << 20
        connection.onRead = { [weak connection] bytes in
            guard let connection, !answered else { return }
            let response: [UInt8]
            switch parser.feed(bytes) {
            case .needMore: return
            case .request(let request):
                let (r, record) = router.handle(request)
                if let record { onRecord?(record) }
                response = r.bytes(includeBody: request.method != "HEAD")
            case .reject(let r): response = r.bytes()
            }
            answered = true
            connection.write(response)
            connection.closeAfterFlush()
        }
        connection.onClose = { _ in idle.invalidate() }
        connection.start()
    }

    /// Stops listening (connections in progress finish on their own).
    public func close() async {
        _ = try? await loop.submit { [listener] in listener.close() }
    }
}
