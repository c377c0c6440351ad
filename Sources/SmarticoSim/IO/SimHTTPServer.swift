import SmarticoProtocol
import Transport

/// Serves `SimHTTPRouter` over TCP with Transport's `StreamListener`/`StreamConnection`: one
/// request per connection (`Connection: close`), a 16 KiB head limit and a 10 s idle limit, so
/// a slow or silent client costs nothing for long.
public final class SimHTTPServer:
    // Every mutable member is touched on `loop`'s thread only (created in `loop.submit`, closed there;
    // faults are set from the runtime, which runs on the same loop).
    @unchecked Sendable
{
    public let loop: EventLoop
    public private(set) var listener: StreamListener
    /// Closes a connection that has not sent a complete request head by then.
    public static let idleTimeout: Duration = .seconds(10)
    private let host: String
    private let router: SimHTTPRouter
    private let tls: TLSContext?
    private let onRecord: (@Sendable (SimHTTPRouter.Record) -> Void)?
    /// The fault answering the next requests (`http_fault` control op), if any.
    private var fault: SimHTTPFault?
    /// While the `refuse` fault is on: the listener is closed (connections are refused) until this timer reopens it.
    private var refusing = false
    private var reopenTimer: LoopTimer?
    private let boundPort: Int

    private init(loop: EventLoop, listener: StreamListener, host: String, router: SimHTTPRouter, tls: TLSContext?,
                 onRecord: (@Sendable (SimHTTPRouter.Record) -> Void)?) {
        self.loop = loop
        self.listener = listener
        self.host = host
        self.router = router
        self.tls = tls
        self.onRecord = onRecord
        boundPort = listener.localAddress.port ?? 0
    }

    /// The bound TCP port (kept while the `refuse` fault has the listener closed).
    public var port: Int { boundPort }

    /// Listens on `host:port` (port 0: any free port) on `loop`, over TLS with `tls`.
    /// `onRecord` is called (on the loop thread) with every public API call (`/services/public`).
    public static func start(host: String, port: Int, router: SimHTTPRouter = SimHTTPRouter(), tls: TLSContext? = nil,
                             on loop: EventLoop,
                             onRecord: (@Sendable (SimHTTPRouter.Record) -> Void)? = nil) async throws -> SimHTTPServer {
        try await loop.submit {
            let listener = try StreamListener.tcp(host: host, port: port, tls: tls, on: loop)
            let server = SimHTTPServer(loop: loop, listener: listener, host: host, router: router, tls: tls, onRecord: onRecord)
            server.listen(listener)
            return server
        }
    }

    private func listen(_ listener: StreamListener) {
        listener.onAccept = { [weak self] connection in
            guard let self else { return connection.close() }
            self.serve(connection)
        }
    }

    // MARK: Faults (loop thread)

    /// Sets (nil: clears) the fault that answers the next requests. `refuse` closes the listener
    /// (connections are refused by the kernel) for `durationMs` (nil: until cleared).
    public func setFault(_ f: SimHTTPFault?) throws {
        loop.preconditionInEventLoop()
        if let f, f.answer == .refuse {
            fault = nil
            if !refusing {
                listener.close()
                refusing = true
            }
            reopenTimer?.invalidate()
            reopenTimer = nil
            if let ms = f.durationMs {
                let t = LoopTimer(loop: loop) { [weak self] in try? self?.reopen() }
                t.schedule(after: .milliseconds(ms))
                reopenTimer = t
            }
            return
        }
        fault = f
        try reopen()
    }

    private func reopen() throws {
        reopenTimer?.invalidate()
        reopenTimer = nil
        guard refusing else { return }
        let l = try StreamListener.tcp(host: host, port: boundPort, tls: tls, on: loop)
        listener = l
        listen(l)
        refusing = false
    }

    /// The fault for one request, counting it down.
    private func takeFault() -> SimHTTPFault? {
        guard var f = fault else { return nil }
        if let n = f.remaining {
            if n <= 1 { fault = nil } else { f.remaining = n - 1; fault = f }
        }
        return f
    }

    private func serve(_ connection: StreamConnection) {
        var parser = SimHTTPRequestParser()
        var answered = false
        let idle = LoopTimer(loop: loop) { [weak connection] in connection?.close() }
        idle.schedule(after: Self.idleTimeout)
        connection.writeQueueLimit = 1 << 20
        connection.onRead = { [weak self, weak connection] bytes in
            guard let self, let connection, !answered else { return }
            switch parser.feed(bytes) {
            case .needMore: return
            case .request(let request):
                answered = true
                idle.invalidate()
                let fault = self.takeFault()
                var (r, record) = self.router.handle(request)
                if let f = fault, f.answer != .slow {
                    record?.error = "http_fault \(f.answer.rawValue)"
                }
                // A slow answer is recorded when it is sent: a client gone by then never received it.
                if let record, fault?.answer != .slow { self.onRecord?(record) }
                self.answer(connection, request: request, response: r, fault: fault, record: record)
            case .reject(let r):
                answered = true
                connection.write(r.bytes())
                connection.closeAfterFlush()
            }
        }
        connection.onClose = { _ in idle.invalidate() }
        connection.start()
    }

    private func answer(_ connection: StreamConnection, request: SimHTTPRequest, response: SimHTTPResponse,
                        fault: SimHTTPFault?, record: SimHTTPRouter.Record?) {
        let status = fault?.status ?? 503
        func send(_ bytes: [UInt8]) {
            connection.write(bytes)
            connection.closeAfterFlush()
        }
        switch fault?.answer {
        case nil:
            send(response.bytes(includeBody: request.method != "HEAD"))
        case .status?:
            let body: JSONObject = ["errCode": 1, "detailMessage": .string("simulated fault: HTTP \(status)"), "stackTrace": [],
                                    "suppressedExceptions": []]
            send(SimHTTPResponse(status: status, reason: Self.reason(status), contentType: "application/json",
                                 body: body.serialized()).bytes())
        case .slow?:
            let bytes = response.bytes(includeBody: request.method != "HEAD")
            let delay = fault?.delayMs ?? 0
            let onRecord = self.onRecord
            let t = LoopTimer(loop: loop) { [weak connection] in
                guard let connection, connection.isActive else { return }
                if let record { onRecord?(record) }
                connection.write(bytes)
                connection.closeAfterFlush()
            }
            t.schedule(after: .milliseconds(delay))
            slowTimers.append(t)
            connection.onClose = { [weak self] _ in
                t.invalidate()
                self?.slowTimers.removeAll { $0 === t }
            }
        case .garbageStatus?:
            send(Array("HTTP/1.1 banana OK\r\nContent-Length: 0\r\n\r\n".utf8))
        case .longBody?:
            send(Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n{\"a\":1}EXTRA BYTES BEYOND THE ANNOUNCED LENGTH".utf8))
        case .endlessChunked?:
            connection.write(Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
            let chunk = Array("4000\r\n".utf8) + [UInt8](repeating: 0x61, count: 0x4000) + Array("\r\n".utf8)
            let box = TimerHolder()
            box.timer = LoopTimer(loop: loop) { [weak connection] in
                guard let connection, connection.isActive else { return }
                if connection.queuedByteCount < 256 << 10 { connection.write(chunk) }
                box.timer?.schedule(after: .milliseconds(5))
            }
            box.timer?.schedule(after: .zero)
            connection.onClose = { _ in
                box.timer?.invalidate()
                box.timer = nil
            }
        case .hugeHeader?:
            connection.writeQueueLimit = nil
            var head = Array("HTTP/1.1 200 OK\r\nX-Huge: ".utf8)
            head += [UInt8](repeating: 0x61, count: 10 << 20)
            head += Array("\r\nContent-Length: 0\r\n\r\n".utf8)
            send(head)
        case .refuse?:
            send(response.bytes())
        }
    }

    private var slowTimers: [LoopTimer] = []

    static func reason(_ status: Int) -> String {
        switch status {
        case 400: "Bad Request"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Simulated"
        }
    }

    /// Stops listening (connections in progress finish on their own).
    public func close() async {
        _ = try? await loop.submit { [self] in
            reopenTimer?.invalidate()
            reopenTimer = nil
            refusing = false
            listener.close()
        }
    }
}

/// A fault of the simulator's HTTP port (`http_fault` control op, docs/simulator.md).
public struct SimHTTPFault: Sendable, Equatable {
    public enum Answer: String, Sendable, CaseIterable {
        /// An error status (`status`, default 503) with a JSON body.
        case status
        /// The normal answer, `delay_ms` late.
        case slow
        /// A status line that is not HTTP (`HTTP/1.1 banana OK`).
        case garbageStatus = "garbage_status"
        /// `Content-Length: 5` followed by more bytes.
        case longBody = "long_body"
        /// A chunked body that never ends.
        case endlessChunked = "endless_chunked"
        /// A 10 MB header field.
        case hugeHeader = "huge_header"
        /// The listener is closed: connections are refused (for `duration_ms`, or until cleared).
        case refuse
    }
    public var answer: Answer
    public var status: Int
    public var delayMs: Int64
    /// Requests this fault answers before it clears itself; nil: until cleared.
    public var remaining: Int?
    public var durationMs: Int64?

    public init(answer: Answer, status: Int = 503, delayMs: Int64 = 0, remaining: Int? = nil, durationMs: Int64? = nil) {
        self.answer = answer
        self.status = status
        self.delayMs = delayMs
        self.remaining = remaining
        self.durationMs = durationMs
    }
}

/// A timer that re-arms itself from its own handler (loop thread only; the cycle is broken on close).
private final class TimerHolder {
    var timer: LoopTimer?
}
