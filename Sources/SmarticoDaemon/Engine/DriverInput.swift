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
    /// The actions of a server message handled in place (``SessionDriver/receivedOnLoop(_:_:)``)
    /// that include store work, which the FIFO awaits; `now` is the time they were made at.
    case perform([SessionAction], now: Int64)
    /// A socket API call that needs the session (`status` and the session ops).
    case call(SocketAPICall, SocketAPIReply)
    /// SIGTERM or SIGINT.
    case terminate(signal: Int32)
    /// SIGHUP: the configuration file was re-read (on the blocking pool).
    case reloaded(Result<ResolvedConfig, ConfigError>)
    /// Hourly: journal retention by age (appends apply it too, but an idle journal has none).
    case maintenance
    /// A burst is over: give the store's page cache and the heap's free pages back.
    case trimMemory
}

/// The driver's FIFO: any thread yields, ``SessionDriver/run(_:)`` alone consumes.
///
/// Not an `AsyncStream`: resuming a task parked in `AsyncStream`'s `next()` runs it on the global
/// concurrent executor first (a libdispatch worker thread) and only then hops back to the loop —
/// two thread switches per input, most of the driver's per-event kernel time in the benchmark.
/// Here the consumer's continuation resumes straight on its own executor (the loop), and
/// ``next(isolation:)`` hands over every input queued meanwhile at once.
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
    func yield(_ input: consuming DriverInput, messageBytes: Int) -> (accepted: Bool, queuedBytes: Int) {
        var queued = 0
        // Moved into the queue, not copied (a copy of an input retained its payload and released it
        // again: ~2 % of the loop thread under load).
        var moving = Optional(input)
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>?? in
            guard !s.finished else { return .none }
            s.items.append(moving.take()!)
            s.messageBytes += messageBytes
            queued = s.messageBytes
            defer { s.waiter = nil }
            return .some(s.waiter)
        }
        guard let waiter else { return (false, queued) }
        waiter?.resume()
        return (true, queued)
    }

    /// True when the consumer waits in ``next(into:isolation:)`` with nothing queued: an input
    /// handled now, in place, is not ahead of any other.
    var isIdle: Bool { state.withLock { $0.items.isEmpty && $0.waiter != nil } }

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

    /// Moves every queued input, in order, into `batch` (replacing what it held), waiting (without
    /// leaving the caller's executor) while there is none; false once finished. One consumer only.
    /// `batch`'s storage, emptied, becomes the queue's: under load the producers append into room
    /// the last batch left instead of regrowing an empty array for every batch (~4 % of the loop
    /// thread in the saturation benchmark). Past ``maxRecycledCapacity`` it is let go.
    func next(into batch: inout [DriverInput], isolation: isolated (any Actor)? = #isolation) async -> Bool {
        if batch.capacity > Self.maxRecycledCapacity {
            batch = []
        } else {
            batch.removeAll(keepingCapacity: true)
        }
        while true {
            let ready = state.withLock { s -> Bool? in
                if !s.items.isEmpty {
                    swap(&s.items, &batch)
                    s.messageBytes = 0
                    return true
                }
                return s.finished ? false : nil
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

    /// Lets go of the storage the consumer's last batch handed back, when nothing was queued in it
    /// since (after a burst, before the heap is trimmed).
    func releaseSpareStorage() {
        state.withLock { s in
            if s.items.isEmpty { s.items = [] }
        }
    }

    /// The largest batch storage ``next(into:)`` hands back to the producers (a burst's worth is
    /// released rather than kept for good).
    static let maxRecycledCapacity = 4_096
}

/// The daemon's ``SocketAPIHandler``: `hello` and `push_report` are answered at once on the
/// server's loop thread; every other call is queued, in arrival order, into the driver's FIFO.
final class DriverSocketHandler: SocketAPIHandler {
    private let inbox: DriverInbox
    /// The public session state as last reported by the machine (`hello`).
    let state = Mutex<SessionState>(.disconnected)

    init(inbox: DriverInbox) {
        self.inbox = inbox
    }

    func handle(_ call: SocketAPICall, from peer: SocketPeer, reply: SocketAPIReply) {
        switch call {
        case .hello:
            reply.succeed(SocketAPIServer.helloResult(version: SmarticoVersion.string, state: state.withLock { $0 }))
        case .pushReport:
            reply.fail(SocketAPIError(
                .notImplemented,
                "push_report is not implemented in this version of smarticod (Smartico's public HTTP API client is not built yet); nothing was stored"))
        case .status, .session:
            if !inbox.yield(.call(call, reply)) {
                reply.fail(SocketAPIError(.notReady, "the daemon is stopping"))
            }
        }
    }
}
