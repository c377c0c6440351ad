import Transport

/// The control socket: NDJSON over a Unix stream socket. Each complete line goes to `handler`
/// (on the loop thread) and its return value (one line, with `\n`) is written back, in order.
/// A line longer than `maxLineBytes` gets an error line and the connection is closed.
public final class SimControlServer:
    // Every mutable member is touched on `loop`'s thread only (created in `loop.submit`, closed there).
    @unchecked Sendable
{
    public let loop: EventLoop
    public let listener: StreamListener
    public let path: String
    public static let maxLineBytes = 16 << 20

    private init(loop: EventLoop, listener: StreamListener, path: String) {
        self.loop = loop
        self.listener = listener
        self.path = path
    }

    /// Listens on the Unix socket `path` (mode 0600: the control socket can disconnect clients).
    /// `handler` is called on the loop thread with each line (without `\n`, a trailing `\r` removed).
    public static func start(path: String, on loop: EventLoop,
                             handler: @escaping @Sendable ([UInt8]) -> [UInt8]) async throws -> SimControlServer {
        try await loop.submit {
            let listener = try StreamListener.unix(path: path, mode: 0o600, on: loop)
            listener.onAccept = { connection in serve(connection, handler: handler) }
            return SimControlServer(loop: loop, listener: listener, path: path)
        }
    }

    private static func serve(_ connection: StreamConnection, handler: @escaping @Sendable ([UInt8]) -> [UInt8]) {
        var buffer: [UInt8] = []
        connection.writeQueueLimit = 256 << 20
        connection.onRead = { [weak connection] bytes in
            guard let connection else { return }
            buffer.append(contentsOf: bytes)
            var start = 0
            while let nl = buffer[start...].firstIndex(of: 0x0A) {
                var line = Array(buffer[start..<nl])
                if line.last == 0x0D { line.removeLast() }
                start = nl + 1
                if line.isEmpty { continue }
                connection.write(handler(line))
            }
            buffer.removeFirst(start)
            if buffer.count > maxLineBytes {
                connection.write(Array(#"{"ok":false,"error":"request line longer than \#(maxLineBytes) bytes"}"#.utf8) + [0x0A])
                buffer = []
                connection.closeAfterFlush()
            }
        }
        connection.onClose = { _ in }
        connection.start()
    }

    /// Stops listening and removes the socket file.
    public func close() async {
        _ = try? await loop.submit { [listener] in listener.close() }
    }
}
