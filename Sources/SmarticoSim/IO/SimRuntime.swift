import SmarticoProtocol
import Transport
#if canImport(Glibc)
import Glibc
#endif

/// What the WebSocket server glue hands the runtime for each accepted (upgraded) connection.
/// Every method is called on the loop thread.
public protocol SimClientConnection: AnyObject {
    /// The peer, as text (`127.0.0.1:50312`).
    var remoteDescription: String { get }
    /// Bytes accepted for sending but not yet taken by the kernel (slow-client detection).
    var queuedByteCount: Int { get }
    /// Sends one text frame.
    func sendText(_ bytes: [UInt8])
    /// Writes raw bytes on the TCP stream, outside any frame (`SimWire.malformedFrame`).
    func sendRaw(_ bytes: [UInt8])
    /// Sends a close frame with `code`/`reason`, then closes TCP (after the peer's close or a short wait).
    func close(code: UInt16, reason: String)
    /// Closes TCP at once, without a close frame.
    func abort()
}

/// Per-connection outbound queue: actions are released in (`at`, emission) order, so a delayed
/// answer never holds back a push, and one client's delays never touch another client.
public struct SimOutbox: Sendable {
    private var items: [(at: Int64, seq: UInt64, output: SimOutput)] = []
    private var seq: UInt64 = 0

    public init() {}

    public mutating func add(_ output: SimOutput, at: Int64) {
        seq += 1
        let item = (at: at, seq: seq, output: output)
        // Insert after every item due no later (most actions are due now and go last).
        var i = items.count
        while i > 0, items[i - 1].at > at { i -= 1 }
        items.insert(item, at: i)
    }

    /// Removes and returns the outputs due at `now`, in order.
    public mutating func takeDue(now: Int64) -> [SimOutput] {
        var n = 0
        while n < items.count, items[n].at <= now { n += 1 }
        let due = items[..<n].map(\.output)
        items.removeFirst(n)
        return due
    }

    /// When the next queued output is due.
    public var nextAt: Int64? { items.first?.at }
    public var count: Int { items.count }
}

/// The simulator running on one event loop: the `SimServer` core, one outbox per connection,
/// one timer for keepalive and scheduled pushes, one timer per connection with delayed output,
/// the `--record` file. The WebSocket glue calls `accepted`, `received`, `receivedBinary` and
/// `closed`; the control server calls `control`.
public actor SimRuntime {
    public let loop: EventLoop
    private var server: SimServer
    private var clients: [String: Client] = [:]
    private var tickTimer: LoopTimer?
    private var recordFD: Int32 = -1
    /// A client whose unsent bytes exceed this is dropped (abort): a slow reader never delays others.
    public let maxQueuedBytes: Int
    /// The clock (ms since the epoch); injectable for tests.
    private let clock: @Sendable () -> Int64

    private final class Client {
        let connection: any SimClientConnection
        var outbox = SimOutbox()
        var timer: LoopTimer?
        var finished = false
        init(connection: any SimClientConnection) { self.connection = connection }
    }

    nonisolated public var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    /// - Parameter recordPath: `--record FILE` (appended to; created with mode 0644).
    public init(config: SimConfig, loop: EventLoop, recordPath: String? = nil, maxQueuedBytes: Int = 64 << 20,
                clock: @escaping @Sendable () -> Int64 = SimRuntime.wallClockMilliseconds) throws(SimRuntimeError) {
        self.loop = loop
        self.clock = clock
        self.maxQueuedBytes = maxQueuedBytes
        server = SimServer(config: config, now: clock())
        if let recordPath {
            let fd = open(recordPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw .cannotOpenRecord(path: recordPath, errno: errno) }
            recordFD = fd
            server.onReceived = { entry in
                let line = entry.recordLine
                line.withUnsafeBytes { b in
                    var off = 0
                    while off < b.count {
                        let n = write(fd, b.baseAddress! + off, b.count - off)
                        if n < 0 { if errno == EINTR { continue }; return }
                        off += n
                    }
                }
            }
        }
    }

    /// Milliseconds since the Unix epoch that never jump: the wall clock read once at first use,
    /// advanced by the monotonic clock. `ts` values look like Smartico's, and keepalive and delays
    /// are immune to wall-clock steps (NTP, manual changes) while the simulator runs.
    @Sendable public static func wallClockMilliseconds() -> Int64 {
        steadyBase.wall + (milliseconds(CLOCK_MONOTONIC) - steadyBase.monotonic)
    }

    private static let steadyBase = (wall: milliseconds(CLOCK_REALTIME), monotonic: milliseconds(CLOCK_MONOTONIC))

    private static func milliseconds(_ clock: clockid_t) -> Int64 {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Starts the keepalive/schedule timer. Call once after init.
    public func start() {
        tickTimer = LoopTimer(loop: loop) { [weak self] in self?.assumeIsolated { $0.tick() } }
        reschedule()
    }

    /// Stops timers and closes the record file (connections are the glue's to close).
    public func stop() {
        tickTimer?.invalidate()
        tickTimer = nil
        for c in clients.values { c.timer?.invalidate() }
        clients = [:]
        server.onReceived = nil  // never write to the closed (and maybe reused) descriptor
        if recordFD >= 0 { Glibc.close(recordFD); recordFD = -1 }
    }

    // MARK: - From the WebSocket glue

    /// A new upgraded connection; returns its client id.
    @discardableResult
    public func accepted(_ connection: any SimClientConnection) -> String {
        let id = server.connect(remote: connection.remoteDescription, now: clock())
        clients[id] = Client(connection: connection)
        reschedule()
        return id
    }

    /// A complete text message from `client`.
    public func received(client: String, text: [UInt8]) {
        perform(server.receive(client: client, text: text, now: clock()))
    }

    /// A complete binary message from `client`.
    public func receivedBinary(client: String, byteCount: Int) {
        perform(server.receiveBinary(client: client, byteCount: byteCount, now: clock()))
    }

    /// The connection ended (either side).
    public func closed(client: String) {
        if let c = clients.removeValue(forKey: client) {
            c.finished = true
            c.timer?.invalidate()
        }
        server.disconnected(client: client)
        reschedule()
    }

    /// A public API call the HTTP server received (recorded like a message, client `http`).
    public func recordHTTP(_ record: SimHTTPRouter.Record) {
        server.recordHTTP(record, now: clock())
    }

    // MARK: - Control

    /// One control request line → one response line; performs what it asks.
    public func control(line: [UInt8]) -> [UInt8] {
        if let r = try? JSONValue(parsing: line), case .object(let o) = r, o["op"]?.stringValue == "http_fault" {
            var response = httpFault(o).serialized()
            response.append(0x0A)
            return response
        }
        let (response, actions) = SimControl.handle(line: line, server: &server, now: clock())
        perform(actions)
        reschedule()  // faults (half_open cleared) can bring deadlines forward
        return response
    }

    /// The HTTP port, for the `http_fault` op (set by `SimServices`).
    private var http: SimHTTPServer?
    public func attachHTTP(_ server: SimHTTPServer) { http = server }

    /// `{"op":"http_fault","answer":…}`: see docs/simulator.md, "HTTP faults".
    private func httpFault(_ o: JSONObject) -> JSONObject {
        let answers = SimHTTPFault.Answer.allCases.map(\.rawValue).joined(separator: ", ") + ", clear"
        func fail(_ why: String) -> JSONObject { ["ok": false, "error": .string(why)] }
        guard let http else { return fail("the HTTP port is not running") }
        guard let name = o["answer"]?.stringValue else { return fail("http_fault needs \"answer\": \(answers)") }
        func int(_ key: String) -> Int64?? {
            guard let v = o[key] else { return .some(nil) }
            guard let n = v.numberValue?.int64, n >= 0 else { return nil }
            return .some(n)
        }
        guard let status = int("status"), let count = int("count"), let delay = int("delay_ms"), let duration = int("duration_ms") else {
            return fail("status, count, delay_ms and duration_ms must be non-negative integers")
        }
        let fault: SimHTTPFault?
        if name == "clear" {
            fault = nil
        } else {
            guard let answer = SimHTTPFault.Answer(rawValue: name) else {
                return fail("unknown http_fault answer \"\(name.prefix(40))\"; answers: \(answers)")
            }
            if let status, !(100...599).contains(status) { return fail("status must be 100…599, got \(status)") }
            fault = SimHTTPFault(answer: answer, status: Int(status ?? 503), delayMs: delay ?? 1000, remaining: count.map(Int.init),
                                 durationMs: duration)
        }
        do {
            try http.setFault(fault)
        } catch {
            return fail("cannot reopen the HTTP port \(http.port): \(error)")
        }
        return ["ok": true, "answer": .string(name)]
    }

    /// Sends `count` generated pushes of `kind` to `target` now, as the control socket's `emit`
    /// does but without building a response (benchmarks, tools). Returns the number of messages sent.
    @discardableResult
    public func emit(kind: SimPushKind, to target: SimServer.Target = .identified, count: Int = 1) throws(SimControlError) -> Int {
        let now = clock()
        var actions: [SimAction] = []
        for _ in 0..<max(0, count) {
            actions += try server.emit(kind: kind, to: target, now: now).actions
        }
        perform(actions)
        return actions.count
    }

    /// Connected client ids, in connection order (tests, diagnostics).
    public var clientIDs: [String] { server.order }

    // MARK: - Performing actions

    private func tick() {
        perform(server.tick(now: clock()))
        reschedule()
    }

    private func perform(_ actions: [SimAction]) {
        let now = clock()
        var touched: [String] = []
        var seen: Set<String> = []
        for a in actions {
            guard let c = clients[a.client], !c.finished else { continue }
            c.outbox.add(a.output, at: a.at)
            if seen.insert(a.client).inserted { touched.append(a.client) }
        }
        for id in touched { flush(id, now: now) }
        // No reschedule here: a received message never brings a keepalive or push deadline
        // forward (a PONG only moves it later; an early wake-up finds nothing and re-arms), so
        // the per-message path stays O(1) in the number of clients.
    }

    private func flush(_ id: String, now: Int64) {
        guard let c = clients[id], !c.finished else { return }
        for output in c.outbox.takeDue(now: now) {
            switch output {
            case .text(let bytes): c.connection.sendText(bytes)
            case .malformedFrame: c.connection.sendRaw(SimWire.malformedFrame)
            case .close(let code, let reason):
                c.finished = true
                c.connection.close(code: code, reason: reason)
            case .abort:
                c.finished = true
                c.connection.abort()
            }
            if c.finished { break }
            if c.connection.queuedByteCount > maxQueuedBytes {
                c.finished = true
                c.connection.abort()
                break
            }
        }
        if c.finished {
            c.timer?.invalidate()
            return
        }
        if let next = c.outbox.nextAt {
            if c.timer == nil {
                c.timer = LoopTimer(loop: loop) { [weak self] in
                    self?.assumeIsolated { $0.flush(id, now: $0.clock()) }
                }
            }
            c.timer?.schedule(after: .milliseconds(max(0, next - now)))
        }
    }

    private func reschedule() {
        guard let timer = tickTimer else { return }
        if let d = server.nextDeadline() {
            timer.schedule(after: .milliseconds(max(0, d - clock())))
        } else {
            timer.cancel()
        }
    }
}

/// Errors starting the runtime.
public enum SimRuntimeError: Error, Sendable, CustomStringConvertible {
    case cannotOpenRecord(path: String, errno: Int32)

    public var description: String {
        switch self {
        case .cannotOpenRecord(let path, let e): "cannot open --record file \(path): \(String(cString: strerror(e)))"
        }
    }
}
