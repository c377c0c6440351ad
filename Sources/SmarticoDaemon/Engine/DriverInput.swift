import Logging
import Synchronization
import SmarticoProtocol
import Transport

/// One item of the driver's single FIFO (docs/session.md, "The driver"): everything that
/// reaches the session — transport results, timer firings, hash results, socket requests,
/// signals — goes through it, so every `SessionMachine.handle` sees the results of the one
/// before it.
enum DriverInput: Sendable {
    /// An input for the machine as it is.
    case session(SessionInput)
    /// A timer armed for `atMs` fired; stale when the timer was re-armed or cancelled since.
    case timer(SessionTimer, atMs: Int64)
    /// The WebSocket of `.connect(conn, …)` is open (the driver attaches its handler).
    case opened(ConnectionID, WebSocketConnection)
    /// The transport of `conn` ended (the last event of a connection). `clean`: a close
    /// handshake completed (no error, not 1006).
    case transportClosed(ConnectionID, code: Int?, reason: String, clean: Bool)
    /// A socket API call that needs the session (`status` and the session ops), from the peer
    /// with this connection number.
    case call(SocketAPICall, SocketAPIReply, peer: UInt64, owner: RequestOwner)
    /// A session request of a data API call made for `user` (docs/api.md): answered `not_ready`
    /// when the daemon acts for another user by the time it is handled, so no step of a call
    /// speaks for, or reads the data of, a user other than the one it started with.
    case apiSession(SessionRequest, user: String?, SocketAPIReply, peer: UInt64, owner: RequestOwner)
    /// The peer with this connection number went away: its requests still waiting are abandoned.
    case peerClosed(UInt64)
    /// SIGTERM or SIGINT.
    case terminate(signal: Int32)
    /// SIGHUP: the configuration file was re-read (on the blocking pool).
    case reloaded(Result<ResolvedConfig, ConfigError>)
    /// An event of the HTTP queue (``HTTPReportQueue``: a dropped call's `error`), to publish.
    case httpEvent(DaemonEvent)
}

/// The driver's FIFO: any thread yields, ``SessionDriver/run(_:)`` alone consumes.
///
/// Not an `AsyncStream`: its consumer would resume on the global executor and then hop back to the
/// loop; here the consumer's continuation resumes on its own executor (the loop), and ``next()``
/// hands over every input queued meanwhile at once.
final class DriverInbox: Sendable {
    private struct State {
        var items: [DriverInput] = []
        var waiter: CheckedContinuation<Void, Never>?
        var finished = false
        /// Bytes of the server messages in `items`.
        var messageBytes = 0
    }

    private let state = Mutex(State())

    /// Queues `input`; false (dropped) once ``finish()`` was called. Any thread.
    @discardableResult
    func yield(_ input: DriverInput) -> Bool {
        yield(input, messageBytes: 0).accepted
    }

    /// Queues a server message of `messageBytes` bytes; returns whether it was accepted and the
    /// bytes of server messages queued now (the driver's backpressure reads it).
    func yield(_ input: DriverInput, messageBytes: Int) -> (accepted: Bool, queuedBytes: Int) {
        let outcome = state.withLock { s -> (waiter: CheckedContinuation<Void, Never>?, accepted: Bool, queued: Int) in
            guard !s.finished else { return (nil, false, s.messageBytes) }
            s.items.append(input)
            s.messageBytes += messageBytes
            defer { s.waiter = nil }
            return (s.waiter, true, s.messageBytes)
        }
        outcome.waiter?.resume()
        return (outcome.accepted, outcome.queued)
    }

    /// Bytes of the server messages queued (not yet handed to the consumer).
    var queuedMessageBytes: Int { state.withLock { $0.messageBytes } }

    /// No more inputs are accepted; returns those still queued.
    func finish() -> [DriverInput] {
        state.withLock { s in
            s.finished = true
            s.messageBytes = 0
            defer { s.items = [] }
            return s.items
        }
    }

    /// Every queued input, in order, waiting (without leaving the caller's executor) while there is
    /// none; nil once finished. One consumer only.
    func next(isolation: isolated (any Actor)? = #isolation) async -> [DriverInput]? {
        while true {
            let ready = state.withLock { s -> [DriverInput]?? in
                if !s.items.isEmpty {
                    defer {
                        s.items = []
                        s.messageBytes = 0
                    }
                    return .some(s.items)
                }
                return s.finished ? .some(nil) : .none
            }
            if let ready { return ready }
            await withCheckedContinuation(isolation: isolation) { (c: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { s -> Bool in
                    if !s.items.isEmpty || s.finished { return true }
                    s.waiter = c
                    return false
                }
                if resumeNow { c.resume() }
            }
        }
    }
}

extension DriverInbox {
    /// Backpressure on the server (docs/session.md, "Backpressure"): the socket stops being read
    /// when this many bytes of server messages wait in the inbox; it is read again once they are
    /// below the resume mark.
    static let pauseReadingBytes = 1 << 20
    static let resumeReadingBytes = 256 << 10

    /// Queues the messages and the end of `connection`, the WebSocket of `conn`; past
    /// ``pauseReadingBytes`` of messages waiting for the driver, the socket is not read until the
    /// driver has caught up (``resumeReading(_:logger:)``). Loop thread.
    func feed(from connection: WebSocketConnection, _ conn: ConnectionID, logger: Logger) {
        let received = { [weak connection, self] (bytes: [UInt8]) in
            let queued = yield(.session(.received(conn, bytes)), messageBytes: bytes.count).queuedBytes
            if queued >= Self.pauseReadingBytes, let connection, !connection.isReadingPaused {
                connection.pauseReading()
                logger.debug("server reading paused", metadata: ["conn": "\(conn)", "inbox_bytes": "\(queued)"])
            }
        }
        connection.start { [self] event in
            switch event {
            case .textBytes(let bytes): received(bytes)
            case .text(let text): received(Array(text.utf8))
            case .binary(let bytes): received(bytes)
            case .closed(let info):
                yield(.transportClosed(
                    conn, code: Int(info.code.rawValue), reason: info.error?.description ?? info.reason,
                    clean: info.error == nil && info.code != .abnormalClosure))
            case .ping, .pong, .closing: break
            }
        }
    }

    /// Resumes reading the server once the inbox has drained; after every batch of inputs.
    func resumeReading(_ connections: [ConnectionID: WebSocketConnection], logger: Logger) {
        guard queuedMessageBytes < Self.resumeReadingBytes else { return }
        for (conn, connection) in connections where connection.isReadingPaused {
            connection.resumeReading()
            logger.debug("server reading resumed", metadata: ["conn": "\(conn)"])
        }
    }
}

/// The machine's timers as loop timers: one that fires queues `.timer(kind, atMs:)`, unless the
/// wall clock is still short of its deadline (the loop's monotonic clock and the wall clock may
/// disagree by a millisecond). Loop thread only: the driver's.
final class DriverTimers {
    private let loop: EventLoop
    private let inbox: DriverInbox
    private var timers = SessionTimerSlots<LoopTimer>()
    private var deadlines = SessionTimerSlots<Int64>()

    init(loop: EventLoop, inbox: DriverInbox) {
        self.loop = loop
        self.inbox = inbox
    }

    func arm(_ kind: SessionTimer, atMs: Int64, now: Int64) {
        deadlines[kind] = atMs
        let timer: LoopTimer
        if let existing = timers[kind] {
            timer = existing
        } else {
            // The handler reads the deadline when it runs.
            timer = LoopTimer(loop: loop) { [weak self] in self?.fired(kind) }
            timers[kind] = timer
        }
        timer.schedule(after: .milliseconds(max(0, atMs - now)))
    }

    func disarm(_ kind: SessionTimer) {
        deadlines[kind] = nil
        timers[kind]?.cancel()
    }

    /// `.timer(kind, atMs:)` taken from the FIFO: true (and no longer armed) unless the timer was
    /// re-armed or cancelled since it fired.
    func take(_ kind: SessionTimer, atMs: Int64) -> Bool {
        guard deadlines[kind] == atMs else { return false }
        deadlines[kind] = nil
        return true
    }

    func invalidateAll() {
        for timer in timers.values { timer.invalidate() }
        timers.removeAll()
    }

    private func fired(_ kind: SessionTimer) {
        guard let at = deadlines[kind] else { return }
        let now = SessionDriver.wallClockMs()
        if at > now, let timer = timers[kind] {
            timer.schedule(after: .milliseconds(at - now))
            return
        }
        inbox.yield(.timer(kind, atMs: at))
    }
}

/// The daemon's ``SocketAPIHandler``: `hello` is answered at once on the server's loop thread;
/// every other call is queued, in arrival order, into the driver's FIFO.
final class DriverSocketHandler: SocketAPIHandler {
    private let inbox: DriverInbox
    private let trimmer: MemoryTrimmer
    /// The public session state as last reported by the machine (`hello`).
    let state = Mutex<SessionState>(.disconnected)
    private let logger: Logger
    /// The socket server's loop: refusals arrive on it, and the end of their window is a timer on it.
    private let loop: EventLoop
    /// How long refused connections are counted before their number is logged.
    static let refusalWindow: Duration = .seconds(10)
    /// Refused connections: the first after a quiet window is logged at once; the ones after it
    /// are counted, and the count is logged when the window ends (a timer), so a burst is counted
    /// in the log even when nothing is refused after it. `last`: who was refused last, and why.
    private let refusals = Mutex<(windowStart: ContinuousClock.Instant?, unlogged: Int, last: String)>((nil, 0, ""))

    init(inbox: DriverInbox, trimmer: MemoryTrimmer, logger: Logger, loop: EventLoop) {
        self.inbox = inbox
        self.trimmer = trimmer
        self.logger = logger
        self.loop = loop
    }

    /// Logged at `warning`, at most one line per 10 s: a peer opening connections in a loop must not
    /// flood the log. The first refusal of a window is logged at once; at the end of the window a
    /// line says how many more were refused in it (none: no line, and the window closes).
    func connectionRefused(uid: UInt32?, pid: Int32?, _ error: SocketAPIError) {
        let now = ContinuousClock.now
        let who = "uid \(uid.map(String.init) ?? "unknown"), pid \(pid.map(String.init) ?? "unknown")"
        let (logNow, unlogged, startWindow): (Bool, Int, Bool) = refusals.withLock { r in
            r.last = "\(who): \(error.message)"
            if let start = r.windowStart, now - start < Self.refusalWindow {
                r.unlogged += 1
                return (false, 0, false)
            }
            // A window whose timer is late (a busy loop) is closed here; its count goes on this line.
            defer { r.windowStart = now; r.unlogged = 0 }
            return (true, r.unlogged, r.windowStart == nil)
        }
        guard logNow else { return }
        let more = unlogged > 0 ? " (and \(unlogged) more refused in the previous 10 s)" : ""
        logger.warning("refused a local connection of \(who): \(error.message)\(more)")
        if startWindow { scheduleRefusalWindowEnd() }
    }

    /// A connection closed for its memory or an unfinished line: logged as refusals are (at most
    /// a line per 10 s, the rest counted), since a hostile peer can cause one per connection.
    func peerRefused(_ peer: SocketPeer, _ error: SocketAPIError) {
        connectionRefused(uid: peer.uid, pid: peer.pid, error)
    }

    /// The timer that ends the refusal window, on the server's loop (no thread blocks on it).
    private func scheduleRefusalWindowEnd() {
        if loop.inEventLoop {
            loop.scheduleTimer(after: Self.refusalWindow) { [weak self] in self?.refusalWindowEnded() }
        } else {
            _ = loop.execute { [weak self] in self?.scheduleRefusalWindowEnd() }
        }
    }

    /// The window ended: its uncounted refusals are logged and a new window starts; a window
    /// without any closes, so the next refusal is logged at once.
    private func refusalWindowEnded() {
        let now = ContinuousClock.now
        let ended: (unlogged: Int, last: String)? = refusals.withLock { r in
            guard r.unlogged > 0 else {
                r.windowStart = nil
                return nil
            }
            defer { r.windowStart = now; r.unlogged = 0 }
            return (r.unlogged, r.last)
        }
        guard let ended else { return }
        logger.warning("refused \(ended.unlogged) more local connection(s) in the last 10 s; the last of \(ended.last)")
        scheduleRefusalWindowEnd()
    }

    func handle(_ call: SocketAPICall, from peer: SocketPeer, reply: SocketAPIReply) {
        switch call {
        case .hello:
            reply.succeed(SocketAPIServer.helloResult(version: SmarticoVersion.string, state: state.withLock { $0 }))
        case .status, .session, .logLevel, .metrics, .pushReport, .api:
            let owner = RequestOwner(uid: peer.uid, control: peer.mayControl)
            if !inbox.yield(.call(call, reply, peer: peer.connectionNumber, owner: owner)) {
                reply.fail(SocketAPIError(.notReady, "the daemon is stopping"))
            }
        }
    }

    /// A local peer with a large queue went away: trim once things are quiet.
    func peerReleased(bytes: Int) {
        trimmer.arm()
    }

    /// Queued after the peer's last call (both on the server's loop thread, in order), so the
    /// driver knows every request of the peer when it gets this.
    func peerClosed(_ peer: SocketPeer) {
        inbox.yield(.peerClosed(peer.connectionNumber))
    }
}
