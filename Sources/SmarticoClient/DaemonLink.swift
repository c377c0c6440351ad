#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SmarticoProtocol
import Synchronization

/// A thread-safe, reconnecting client of the daemon's socket for a long-running app.
///
/// One pthread of its own owns one connection and sleeps in `poll` on the socket and an
/// `pipe`: idle and connected, it does not wake; nothing runs on Swift concurrency's
/// cooperative pool. It
///
/// - connects, retrying with a backoff of 0.1 s doubling to 2 s while the daemon is away (not
///   running, restarting), sends `hello`, then subscribes (``Configuration/types``,
///   ``Configuration/durable``); on every reconnect it subscribes again with the same durable
///   name, so the daemon resumes after the last acknowledged seq;
/// - delivers each event to `onEvent` on its thread, in order, once: a journaled event the
///   daemon replays after a reconnect (delivered, not yet acknowledged) is not delivered again.
///   An app that is restarted gets the events it had not acknowledged (at least once);
/// - delivers `connected(version)` and `disconnected(reason)` to `onState`;
/// - takes requests from any thread (``send(_:timeout:completion:)``): a request made while the
///   daemon is away waits, at most its timeout (default 30 s), and goes out once reconnected;
///   at most ``Configuration/maxPendingRequests`` wait at once (beyond: `.queueFull`);
/// - acknowledges (``ack(_:)``) on the durable subscription, again after a reconnect when the
///   daemon had not confirmed it.
///
/// Callbacks run on the link's thread, one at a time: return quickly (hand work to your own
/// thread or main loop). They may call ``send(_:timeout:completion:)``, ``ack(_:)`` and
/// ``stop()``. Call ``stop()`` when done: the thread runs until then.
///
/// ```swift
/// let link = try DaemonLink(.init(types: ["engagement"], durable: "kiosk"),
///     onEvent: { event in show(event) },
///     onState: { state in print("smarticod:", state) })
/// link.send(.report(.impression, engagementUID: uid)) { result in
///     if case .success = result { link.ack(seq) }
/// }
/// link.stop()
/// ```
public final class DaemonLink: Sendable {
    /// What the link connects to and subscribes to.
    public struct Configuration: Sendable {
        /// The daemon's socket (default `$SMARTICOD_SOCKET`, else `/run/smarticod/smarticod.sock`).
        public var path: String
        /// Subscribe at all (false: a link for requests only).
        public var subscribe: Bool
        /// Event names (nil: all).
        public var types: [String]?
        /// A durable name: the daemon resumes after what it acknowledged, across reconnects and
        /// restarts of the app and of the daemon.
        public var durable: String?
        /// Replay the journaled events after this seq on the first subscribe (for a durable name:
        /// only when the name is new).
        public var since: Int64?
        /// Seconds a request waits for its answer, also while the daemon is away (default 30).
        public var requestTimeout: Double
        /// The most requests waiting for an answer at once (default 1,000).
        public var maxPendingRequests: Int
        /// The longest line accepted from the daemon (default 16 MiB).
        public var maxLineBytes: Int
        /// Seconds `hello` and `subscribe` may take before the connection is dropped and tried again.
        public var handshakeTimeout: Double
        /// The first retry delay and its cap, in seconds (0.1 and 2).
        public var initialRetryDelay: Double
        public var maxRetryDelay: Double

        public init(path: String = SmarticoClient.defaultSocketPath, subscribe: Bool = true, types: [String]? = nil,
                    durable: String? = nil, since: Int64? = nil, requestTimeout: Double = 30, maxPendingRequests: Int = 1000,
                    maxLineBytes: Int = 16 << 20, handshakeTimeout: Double = 10, initialRetryDelay: Double = 0.1,
                    maxRetryDelay: Double = 2) {
            self.path = path
            self.subscribe = subscribe
            self.types = types
            self.durable = durable
            self.since = since
            self.requestTimeout = requestTimeout
            self.maxPendingRequests = maxPendingRequests
            self.maxLineBytes = maxLineBytes
            self.handshakeTimeout = handshakeTimeout
            self.initialRetryDelay = initialRetryDelay
            self.maxRetryDelay = maxRetryDelay
        }
    }

    /// The link's state, as delivered to `onState`.
    public enum State: Sendable, Equatable {
        /// Connected, `hello` answered, subscribed: events flow, requests go out.
        case connected(version: String)
        /// Not connected: why (the daemon closed the connection, the socket is missing, …).
        /// Reported when a connection drops, when the first attempt fails, and once on ``stop()``.
        case disconnected(reason: String)
    }

    public let configuration: Configuration
    private let core: LinkCore

    /// Starts the link's thread, which connects at once. `onEvent` gets every event, in order;
    /// `onState` every change of ``State``. Both run on the link's thread. Throws only when the
    /// thread or its wake-up pipe cannot be made (`.ioFailed`).
    public init(_ configuration: Configuration = Configuration(),
                onEvent: @escaping @Sendable (SmarticoEvent) -> Void = { _ in },
                onState: @escaping @Sendable (State) -> Void = { _ in }) throws(ClientError) {
        self.configuration = configuration
        let core = try LinkCore(path: configuration.path)
        self.core = core
        let loop = LinkLoop(core: core, configuration: configuration, onEvent: onEvent, onState: onState)
        try core.start(loop)
    }

    deinit { stop() }

    /// Sends `request` once connected and subscribed; `completion` gets its `result`, or the
    /// error: `.refused` (the daemon's answer), `.closed` (the connection dropped after the
    /// request went out: it may or may not have been done), `.timedOut` (no answer within
    /// `timeout`, default ``Configuration/requestTimeout``, or the request's own longer wait),
    /// `.queueFull`, `.stopped`. Called exactly once: on the link's thread, or at once on the
    /// caller's when the request is refused before it is queued (`.queueFull`, `.stopped`).
    public func send(_ request: ClientRequest, timeout: Double? = nil,
                     completion: @escaping @Sendable (Result<JSONValue, ClientError>) -> Void) {
        let wait = request.wait(timeout: timeout ?? configuration.requestTimeout)
        let pending = PendingRequest(op: request.op, arguments: request.arguments, deadline: .after(seconds: wait), completion: completion)
        let limit = configuration.maxPendingRequests
        let path = configuration.path
        let refusal: ClientError? = core.shared.withLock { s in
            if s.stopping { return .stopped(path: path) }
            if s.pendingCount >= limit { return .queueFull(path: path, limit: limit) }
            s.incoming.append(pending)
            s.pendingCount += 1
            return nil
        }
        if let refusal {
            completion(.failure(refusal))
            return
        }
        core.wake()
    }

    /// ``send(_:timeout:completion:)`` of `op` with `arguments`.
    public func send(op: String, arguments: JSONObject = JSONObject(), timeout: Double? = nil,
                     completion: @escaping @Sendable (Result<JSONValue, ClientError>) -> Void) {
        send(ClientRequest(op: op, arguments: arguments), timeout: timeout, completion: completion)
    }

    /// ``send(_:timeout:completion:)`` for async code: suspends (never blocks a thread) until
    /// the completion.
    public func send(_ request: ClientRequest, timeout: Double? = nil) async throws(ClientError) -> JSONValue {
        let result: Result<JSONValue, ClientError> = await withCheckedContinuation { continuation in
            send(request, timeout: timeout) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Acknowledges everything up to `seq` on the durable subscription (the daemon's cursor for
    /// ``Configuration/durable`` moves there). Returns at once; the link sends the highest seq
    /// asked for as soon as it is connected, and again after a reconnect until the daemon has
    /// confirmed it (``acknowledgedSeq``).
    public func ack(_ seq: Int64) {
        let changed = core.shared.withLock { s in
            guard !s.stopping, seq > s.ackWanted else { return false }
            s.ackWanted = seq
            return true
        }
        if changed { core.wake() }
    }

    /// The durable cursor the daemon confirmed after this link's last acknowledgement (nil
    /// before one).
    public var acknowledgedSeq: Int64? { core.shared.withLock { $0.acknowledged } }

    /// The daemon's refusal of the latest acknowledgement it refused (e.g. a seq beyond its
    /// journal), nil when none was.
    public var lastAckRefusal: ClientError? { core.shared.withLock { $0.ackRefusal } }

    /// The last state delivered to `onState` (nil before the first).
    public var state: State? { core.shared.withLock { $0.state } }

    /// Iterations of the link thread's loop so far (each wake-up of its `poll`), for tests that
    /// check that an idle link sleeps.
    public var loopIterations: Int { core.shared.withLock { $0.iterations } }

    /// Ends the link: wakes its thread, which fails what still waits with `.stopped`, reports
    /// `disconnected` if it was connected, closes the connection and exits; then joins it.
    /// From a callback (on the link's thread) it returns at once and the thread ends after the
    /// callback. Calling it again does nothing.
    public func stop() {
        core.stop()
    }
}

/// A request waiting for its answer.
struct PendingRequest: Sendable {
    let op: String
    let arguments: JSONObject
    let deadline: Deadline
    let completion: @Sendable (Result<JSONValue, ClientError>) -> Void
}

/// What other threads and the link's thread share, under one lock.
struct LinkShared: Sendable {
    /// Requests handed in and not yet taken by the link's thread.
    var incoming: [PendingRequest] = []
    /// Requests handed in and not yet completed (the bound of ``DaemonLink/Configuration/maxPendingRequests``).
    var pendingCount = 0
    /// The highest seq the app acknowledged.
    var ackWanted: Int64 = -1
    /// The cursor the daemon confirmed.
    var acknowledged: Int64?
    var ackRefusal: ClientError?
    var stopping = false
    var state: DaemonLink.State?
    var iterations = 0
    /// The thread, once started; never cleared (``LinkCore/stop()`` compares it with the caller's).
    var thread: pthread_t?
    /// The thread was joined or detached: nobody may join it again.
    var released = false
}

/// The link's shared state and its wake-up pipe; outlives both the ``DaemonLink`` and the
/// thread, whichever goes last.
final class LinkCore: Sendable {
    let shared = Mutex(LinkShared())
    let path: String
    /// A pipe the link's thread polls beside its socket (its read end): other threads write a byte
    /// to wake it. Both ends non-blocking: a full pipe already means "wake up".
    let wakeFD: Int32
    private let wakeWriteFD: Int32

    init(path: String) throws(ClientError) {
        self.path = path
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw .ioFailed(path: path, operation: "pipe for the link's thread", errno: errno) }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        wakeFD = fds[0]
        wakeWriteFD = fds[1]
    }

    deinit {
        close(wakeFD)
        close(wakeWriteFD)
    }

    func start(_ loop: LinkLoop) throws(ClientError) {
        let context = Unmanaged.passRetained(loop).toOpaque()
        // The thread is recorded before it can run: it takes the lock first.
        let rc: Int32 = shared.withLock { s in
            var thread = pthread_t()
            let rc = pthread_create(&thread, nil, { raw in
                Unmanaged<LinkLoop>.fromOpaque(raw!).takeRetainedValue().run()
                return nil
            }, context)
            if rc == 0 { s.thread = thread }
            return rc
        }
        if rc != 0 {
            Unmanaged<LinkLoop>.fromOpaque(context).release()
            throw .ioFailed(path: path, operation: "pthread_create for the link's thread", errno: rc)
        }
    }

    func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWriteFD, &byte, 1)  // EAGAIN: the pipe is full, a wake-up is pending anyway
    }

    func drainWake() {
        var bytes = [UInt8](repeating: 0, count: 256)
        while read(wakeFD, &bytes, bytes.count) == bytes.count {}
    }

    /// Held while a caller joins the thread, so that a second caller of ``stop()`` returns only
    /// once the thread has ended too.
    private let joining = Mutex(())

    func stop() {
        let thread: pthread_t? = shared.withLock { s in
            s.stopping = true
            return s.thread
        }
        guard let thread else { return }
        wake()
        if pthread_equal(thread, pthread_self()) != 0 {
            // A callback stopped its own link: the thread ends after the callback returns.
            if release() { pthread_detach(thread) }
            return
        }
        joining.withLock { _ in
            if release() { pthread_join(thread, nil) }
        }
    }

    /// True for the one caller that may join or detach the thread.
    private func release() -> Bool {
        shared.withLock { s in
            defer { s.released = true }
            return !s.released
        }
    }
}

/// The link's thread: its connection and everything only it touches.
final class LinkLoop {
    private let core: LinkCore
    private let configuration: DaemonLink.Configuration
    private let onEvent: @Sendable (SmarticoEvent) -> Void
    private let onState: @Sendable (DaemonLink.State) -> Void
    private var path: String { configuration.path }

    private enum Phase {
        /// Not connected; the next attempt at `retryAt` (monotonic ns).
        case away(retryAt: UInt64, reason: String)
        /// Connected; `hello` (then `subscribe`) not answered yet.
        case handshaking(deadline: Deadline)
        /// Connected and subscribed: requests go out.
        case ready
    }

    private enum InFlight {
        case hello, subscribe
        case ack(Int64)
        /// A request of the app; `end`: the position in the output stream just past its line.
        case request(PendingRequest, end: Int)
    }

    private var phase: Phase
    private var connection: DaemonConnection?
    private var retryDelay: Double
    /// Requests taken from other threads and not written yet, oldest first (`waiting[waitingHead...]`).
    private var waiting: [PendingRequest] = []
    private var waitingHead = 0
    private var inFlight: [Int64: InFlight] = [:]
    private var nextID: Int64 = 1
    /// Bytes to write; `out[outOffset...]` not written yet.
    private var out: [UInt8] = []
    private var outOffset = 0
    /// Bytes appended to, and written from, the output stream of this connection.
    private var appended = 0
    private var written = 0
    private var version = ""

    // The subscription, across connections.
    private var subscribedOnce = false
    /// The daemon's journal the seqs below count in.
    private var journal: String?
    /// The highest journaled seq delivered to `onEvent`.
    private var delivered: Int64 = -1
    /// The highest seq seen (where a subscription without a durable name resumes).
    private var lastSeq: Int64?
    /// Where the subscription started (the least the durable cursor can be).
    private var startSeq: Int64 = -1
    /// The daemon's confirmed cursor, and the highest ack sent on this connection.
    private var confirmed: Int64 = -1
    private var ackSent: Int64 = -1

    init(core: LinkCore, configuration: DaemonLink.Configuration, onEvent: @escaping @Sendable (SmarticoEvent) -> Void,
         onState: @escaping @Sendable (DaemonLink.State) -> Void) {
        self.core = core
        self.configuration = configuration
        self.onEvent = onEvent
        self.onState = onState
        self.retryDelay = configuration.initialRetryDelay
        self.phase = .away(retryAt: 0, reason: "not connected yet")
    }

    func run() {
        while true {
            let (incoming, ackWanted, stopping) = core.shared.withLock { s in
                s.iterations += 1
                defer { s.incoming.removeAll() }
                return (s.incoming, s.ackWanted, s.stopping)
            }
            if stopping { break }
            waiting.append(contentsOf: incoming)
            expire()

            if case .away(let retryAt, _) = phase, monotonicNanoseconds() >= retryAt {
                connect()
            }
            if case .ready = phase {
                flushWaiting()
                if ackWanted > max(ackSent, confirmed) {
                    ackSent = ackWanted
                    enqueue(id: allocateID(.ack(ackWanted)), op: "ack", ["seq": .number(ackWanted)])
                }
            }
            if connection != nil { writeOut() }
            wait()
        }
        shutdown()
    }

    // MARK: Waiting

    /// One `poll` on the wake descriptor and the socket, until the next thing due.
    private func wait() {
        var due = Deadline.never
        for i in waitingHead..<waiting.count { due = due.earlier(waiting[i].deadline) }
        for case .request(let p, _) in inFlight.values { due = due.earlier(p.deadline) }
        switch phase {
        case .away(let retryAt, _):
            due = due.earlier(Deadline(ns: retryAt, seconds: 0))
        case .handshaking(let deadline):
            due = due.earlier(deadline)
        case .ready:
            break
        }
        var fds = [pollfd(fd: core.wakeFD, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: -1, events: 0, revents: 0)]
        if let connection {
            fds[1].fd = connection.fileDescriptor
            fds[1].events = Int16(POLLIN) | (outOffset < out.count ? Int16(POLLOUT) : 0)
        }
        let n = poll(&fds, 2, due.pollTimeoutMs)
        guard n > 0 else { return }  // timeout, or EINTR: the loop looks at everything again
        if fds[0].revents != 0 { core.drainWake() }
        let revents = fds[1].revents
        if revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 { readAndDispatch(hangup: revents & Int16(POLLHUP | POLLERR) != 0) }
        if revents & Int16(POLLOUT) != 0, connection != nil { writeOut() }
        if case .handshaking(let deadline) = phase, deadline.hasPassed {
            drop("no answer to hello and subscribe within \(ClientError.formatSeconds(configuration.handshakeTimeout))")
        }
    }

    /// Fails the requests whose time is up.
    private func expire() {
        var expired: [(PendingRequest, String)] = []
        if waiting[waitingHead...].contains(where: { $0.deadline.hasPassed }) {
            var kept: [PendingRequest] = []
            for p in waiting[waitingHead...] {
                if p.deadline.hasPassed {
                    let why: String = switch phase {
                    case .away(_, let reason): "waiting for smarticod to come back to send \(p.op) (\(reason))"
                    default: "waiting to send \(p.op)"
                    }
                    expired.append((p, why))
                } else {
                    kept.append(p)
                }
            }
            waiting = kept
            waitingHead = 0
        }
        for (id, entry) in inFlight {
            if case .request(let p, _) = entry, p.deadline.hasPassed {
                inFlight[id] = nil
                expired.append((p, "waiting for the answer to \(p.op)"))
            }
        }
        for (p, why) in expired {
            complete(p, .failure(.timedOut(path: path, seconds: p.deadline.seconds, waitingFor: why)))
        }
    }

    // MARK: Connecting

    private func connect() {
        do {
            // A full accept queue counts as the daemon being away: no wait here.
            connection = try DaemonConnection(path: path, maxLineBytes: configuration.maxLineBytes, deadline: .after(seconds: 0))
        } catch {
            away(error.description)
            return
        }
        out.removeAll()
        outOffset = 0
        appended = 0
        written = 0
        phase = .handshaking(deadline: .after(seconds: configuration.handshakeTimeout))
        enqueue(id: allocateID(.hello), op: "hello", JSONObject())
    }

    /// Not connected: report it (once per outage) and retry after the current delay.
    private func away(_ reason: String) {
        connection = nil
        phase = .away(retryAt: monotonicNanoseconds() &+ UInt64(retryDelay * 1e9), reason: reason)
        retryDelay = min(retryDelay * 2, configuration.maxRetryDelay)
        report(.disconnected(reason: reason))
    }

    /// The connection failed: answers that will not come fail with `.closed`, requests not
    /// written entirely wait for the next connection.
    private func drop(_ reason: String) {
        var unsent: [(Int64, PendingRequest)] = []
        var lost: [PendingRequest] = []
        for (id, entry) in inFlight {
            guard case .request(let p, let end) = entry else { continue }
            if end > written { unsent.append((id, p)) } else { lost.append(p) }
        }
        inFlight.removeAll()
        if !unsent.isEmpty {
            waiting = unsent.sorted { $0.0 < $1.0 }.map(\.1) + waiting[waitingHead...]
            waitingHead = 0
        }
        ackSent = -1
        out.removeAll()
        outOffset = 0
        away(reason)
        for p in lost {
            complete(p, .failure(.closed(path: path, waitingFor: "waiting for the answer to \(p.op) (\(reason))")))
        }
    }

    private func report(_ state: DaemonLink.State) {
        let changed: Bool = core.shared.withLock { s in
            switch (s.state, state) {
            case (.disconnected?, .disconnected): return false  // one report per outage
            default:
                s.state = state
                return true
            }
        }
        if changed { onState(state) }
    }

    // MARK: Writing

    private func allocateID(_ entry: InFlight) -> Int64 {
        let id = nextID
        nextID += 1
        inFlight[id] = entry
        return id
    }

    private func enqueue(id: Int64, op: String, _ arguments: JSONObject) {
        let line = requestLine(id: id, op: op, arguments)
        out.append(contentsOf: line)
        appended += line.count
    }

    /// Writes the waiting requests (connected and subscribed).
    private func flushWaiting() {
        guard waitingHead < waiting.count else { return }
        for p in waiting[waitingHead...] {
            let line = requestLine(id: nextID, op: p.op, p.arguments)
            out.append(contentsOf: line)
            appended += line.count
            inFlight[nextID] = .request(p, end: appended)
            nextID += 1
        }
        waiting.removeAll(keepingCapacity: waiting.capacity <= 64)
        waitingHead = 0
    }

    private func writeOut() {
        guard let connection else { return }
        while outOffset < out.count {
            let n: Int
            do {
                n = try connection.writeSome(out, from: outOffset, what: "requests")
            } catch {
                drop(error.description)
                return
            }
            if n == 0 { return }  // POLLOUT later
            outOffset += n
            written += n
        }
        out.removeAll(keepingCapacity: out.capacity <= 1 << 16)
        outOffset = 0
    }

    // MARK: Reading

    /// One read, and every complete line handled. `hangup`: poll said the connection failed.
    private func readAndDispatch(hangup: Bool) {
        guard let connection else { return }
        let received: DaemonConnection.Received
        do {
            received = try connection.receive(waitingFor: "following events")
        } catch {
            drop(error.description)
            return
        }
        do {
            while let line = try connection.nextBufferedLine() {
                guard let parsed = try DaemonLine.parse(line, path: path) else { continue }
                switch parsed {
                case .answer(let answer): handle(answer)
                case .event(let event): handle(event)
                }
                // Stopped from a callback, or the connection dropped: nothing more from this batch.
                if self.connection !== connection || core.shared.withLock({ $0.stopping }) { return }
            }
        } catch {
            drop(error.description)
            return
        }
        if received == .endOfStream {
            drop("smarticod closed the connection")
        } else if received == .wouldBlock && hangup {
            drop("the connection failed (poll: POLLERR/POLLHUP)")  // else poll would return at once, again and again
        }
    }

    private func handle(_ answer: Answer) {
        guard let id = answer.id.int64Value, let entry = inFlight.removeValue(forKey: id) else {
            // An error about no request of ours (too many connections, a line too long): the
            // daemon closes the connection after it.
            if answer.id.isNull && !answer.ok { drop(answer.refusal(op: "this connection").description) }
            return
        }
        switch entry {
        case .hello:
            guard answer.ok else { return drop(answer.refusal(op: "hello").description) }
            do {
                version = try DaemonHello(result: answer.result, path: path).version
            } catch {
                return drop(error.description)
            }
            if configuration.subscribe {
                enqueue(id: allocateID(.subscribe), op: "subscribe", subscribeArguments())
            } else {
                becomeReady()
            }
        case .subscribe:
            guard answer.ok else { return drop(answer.refusal(op: "subscribe").description) }
            do {
                subscribed(try SubscribeAnswer(result: answer.result, path: path))
            } catch {
                return drop(error.description)
            }
            becomeReady()
        case .ack:
            if answer.ok, let cursor = answer.result["cursor"]?.int64Value {
                confirmed = max(confirmed, cursor)
                let value = confirmed
                core.shared.withLock { $0.acknowledged = value }
            } else if !answer.ok {
                let refusal = answer.refusal(op: "ack")
                core.shared.withLock { $0.ackRefusal = refusal }
            }
        case .request(let p, _):
            complete(p, answer.ok ? .success(answer.result) : .failure(answer.refusal(op: p.op)))
        }
    }

    private func handle(_ event: SmarticoEvent) {
        if event.isJournaled, let seq = event.seq {
            if seq <= delivered { return }  // replayed after a reconnect: delivered already
            delivered = seq
        }
        if let seq = event.seq, seq > (lastSeq ?? -1) { lastSeq = seq }
        onEvent(event)
    }

    // MARK: The subscription

    /// The first subscribe: the configured `since`. A resume: a durable name resumes from its
    /// cursor (the `since` given counts only if the daemon's store no longer has the name); without
    /// one, after the last seq seen. Both name the journal their seqs count in, so a daemon that
    /// came back on a fresh store replays its new journal from the start (a `gap` says so).
    private func subscribeArguments() -> JSONObject {
        var since: Int64?
        if !subscribedOnce {
            since = configuration.since
        } else if configuration.durable != nil {
            let floor = max(confirmed, startSeq)
            since = floor >= 0 ? floor : nil
        } else {
            since = lastSeq
        }
        let journal = subscribedOnce && since != nil ? self.journal : nil
        return ClientRequest.subscribe(types: configuration.types, since: since, durable: configuration.durable, journal: journal).arguments
    }

    private func subscribed(_ answer: SubscribeAnswer) {
        if !subscribedOnce {
            startSeq = configuration.since ?? answer.lastSeq
            if configuration.durable == nil && lastSeq == nil { lastSeq = configuration.since ?? answer.lastSeq }
        } else {
            let replaced: Bool
            if let old = journal, let new = answer.journal {
                replaced = old != new
            } else {
                replaced = answer.lastSeq < max(delivered, lastSeq ?? -1)
            }
            if replaced {
                // A fresh store (a damaged one moved aside): its seqs begin again at 1.
                delivered = -1
                confirmed = -1
                startSeq = -1
                lastSeq = 0
                core.shared.withLock { s in
                    s.ackWanted = -1
                    s.acknowledged = nil
                }
            }
        }
        journal = answer.journal
        subscribedOnce = true
        ackSent = confirmed
    }

    private func becomeReady() {
        phase = .ready
        retryDelay = configuration.initialRetryDelay
        report(.connected(version: version))
    }

    // MARK: Completing

    private func complete(_ p: PendingRequest, _ result: Result<JSONValue, ClientError>) {
        core.shared.withLock { $0.pendingCount -= 1 }
        p.completion(result)
    }

    private func shutdown() {
        let incoming = core.shared.withLock { s in
            defer { s.incoming.removeAll() }
            return s.incoming
        }
        var all = Array(waiting[waitingHead...]) + incoming
        for case .request(let p, _) in inFlight.values { all.append(p) }
        waiting.removeAll()
        waitingHead = 0
        inFlight.removeAll()
        let wasConnected = connection != nil
        connection = nil
        if wasConnected, case .ready = phase { report(.disconnected(reason: "stopped")) }
        for p in all { complete(p, .failure(.stopped(path: path))) }
    }
}
