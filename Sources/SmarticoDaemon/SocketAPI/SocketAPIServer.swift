#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import SmarticoProtocol
import Transport

/// The local socket API server (socket-api.md): NDJSON requests and events over a Unix stream
/// socket, every connection on one ``EventLoop``. The I/O shell around a ``SubscriptionBook``.
///
/// - Requests are answered **as they complete** (each response carries the request's `id`), handed
///   to the ``SocketAPIHandler`` in arrival order. At most
///   ``Configuration/maxInFlightPerConnection`` unanswered requests per connection: beyond that the
///   server stops reading from it until answers go out.
/// - Subscribers are cursors over the journal, kept by the ``SubscriptionBook``: it decides what
///   each peer is sent and which journal page to read; the server owns the sockets, the store reads
///   and the timers, and carries its decisions out. A peer's queued output is held under
///   ``Configuration/maxQueueBytes``, all peers' together under ``Configuration/maxTotalQueueBytes``:
///   nothing blocks, nobody who reads is dropped, and a replay of any size costs one page of
///   memory. docs/socket-api.md, "Slow peers".
/// - The protections against misbehaving peers (memory budget, unfinished lines, unread answers,
///   calls rationed per uid) are in SocketAPIPeerLimits.swift.
///
/// All state is confined to the loop thread; the public methods hop onto it.
public final class SocketAPIServer: CustomStringConvertible,
    // Mutable state is only touched on `loop`'s thread (every entry point hops there with
    // `loop.execute`/`loop.submit` or is called by the loop's handlers); the counters are atomic.
    @unchecked Sendable
{
    public let loop: EventLoop
    public let configuration: Configuration
    let store: SmarticoStore?

    private var listener: StreamListener?
    var handler: (any SocketAPIHandler)?
    var peers: [UInt64: SocketAPIPeerConnection] = [:]
    /// Open connections by uid (not root's), for `maxPeersPerUID`.
    var peersByUID: [UInt32: Int] = [:]
    /// The daemon's effective uid: it has the control role, as root has.
    let ownUID = geteuid()
    private var nextPeerNumber: UInt64 = 1
    /// The subscriptions: cursors, live or catching up, queue accounting, the gap policy.
    var book: SubscriptionBook
    private var dirty: [SocketAPIPeerConnection] = []
    private var flushScheduled = false
    private var state: RunState = .idle
    private let subscribers = Atomic<Int>(0)
    private let connections = Atomic<Int>(0)
    /// Calls being answered by uid (``maxInFlightPerUID``).
    var inFlightByUID: [UInt32: Int] = [:]
    var partialLineTimer: LoopTimer?

    private enum RunState { case idle, running, closed }

    /// A server that is not listening yet. `store` serves `since`, `durable`, `ack` and catch-up;
    /// without it `since` and `durable` answer `internal` and a peer whose queue was full misses
    /// what was published meanwhile (it gets a `gap`).
    public init(loop: EventLoop, configuration: Configuration, store: SmarticoStore?) {
        self.loop = loop
        self.configuration = configuration
        self.store = store
        self.book = SubscriptionBook(limits: .init(maxQueueBytes: configuration.maxQueueBytes,
                                                   maxTotalQueueBytes: configuration.maxTotalQueueBytes))
    }

    public var description: String { "SocketAPIServer(\(loop.name))" }

    /// Peers with an active subscription (the status object's `subscribers`). Any thread.
    public var subscriberCount: Int { subscribers.load(ordering: .relaxed) }

    /// Open connections. Any thread.
    public var connectionCount: Int { connections.load(ordering: .relaxed) }

    /// The `hello` result: `{"api": 1, "version", "state"}`.
    public static func helloResult(version: String, state: SessionState) -> JSONValue {
        ["api": 1, "version": .string(version), "state": .string(state.rawValue)]
    }

    /// The queued output of every connection. Any context.
    func queueStatistics() async throws -> QueueStatistics {
        try await loop.submit {
            QueueStatistics(queuedBytes: self.peers.mapValues(\.queuedBytes),
                            peakQueuedBytes: self.peers.mapValues { self.book.peakQueuedBytes[$0.number] ?? 0 },
                            peakTotalQueuedBytes: self.book.peakTotalQueuedBytes)
        }
    }

    // MARK: Starting and stopping

    /// Starts listening and serving. `handler` answers everything but `subscribe`/`unsubscribe`/`ack`/`forget`
    /// and is kept until ``close()``. The seq counter starts at the store's last seq.
    /// Returns the bound address (the path, or the adopted socket's name).
    @discardableResult
    public func start(_ endpoint: Endpoint, handler: any SocketAPIHandler) async throws(SocketAPIServerError) -> SocketAddress {
        var resolved: UInt32? = nil
        if case .path(_, _, let group?) = endpoint {
            resolved = try await Self.resolveGroup(group, pool: loop.blockingPool)
        }
        let gid = resolved
        let initialSeq = await store?.lastSeq() ?? 0
        let journal = await store?.journalID()
        let result: Result<SocketAddress, SocketAPIServerError>
        do {
            result = try await loop.submit { () -> Result<SocketAddress, SocketAPIServerError> in
                self.book.journalID = journal
                return self.startOnLoop(endpoint, gid: gid, handler: handler, initialSeq: initialSeq)
            }
        } catch {
            throw .listen("\(error)")
        }
        return try result.get()
    }

    private func startOnLoop(
        _ endpoint: Endpoint, gid: UInt32?, handler: any SocketAPIHandler, initialSeq: JournalSeq
    ) -> Result<SocketAddress, SocketAPIServerError> {
        guard case .idle = state else { return .failure(.notIdle) }
        let listener: StreamListener
        do {
            switch endpoint {
            case .path(let path, let mode, _):
                listener = try StreamListener.unix(path: path, mode: mode_t(mode), on: loop)
                if let gid, chown(path, uid_t.max, gid) != 0 {
                    let e = errno
                    listener.close()
                    return .failure(.chownFailed(path: path, gid: gid, errno: e))
                }
            case .adopted(let fd):
                listener = try StreamListener.adopt(fd: fd, on: loop)
            }
        } catch {
            return .failure(.listen("\(error)"))
        }
        state = .running
        self.handler = handler
        self.listener = listener
        book.started(lastSeq: initialSeq)
        listener.onAccept = { [unowned self] connection in self.accepted(connection) }
        return .success(listener.localAddress)
    }

    /// Stops listening (removing the socket file it created) and closes every connection. Any context.
    public func close() async {
        _ = try? await loop.submit { self.closeOnLoop() }
    }

    private func closeOnLoop() {
        guard case .running = state else {
            state = .closed
            return
        }
        state = .closed
        listener?.close()
        listener = nil
        for peer in Array(peers.values) { peer.connection.close() }
        peers.removeAll()
        handler = nil
    }

    // MARK: Publishing

    /// Sends an event to the subscribed peers. Any thread. `seq`: the journal seq of a journaled event
    /// (journal it first, publish those in seq order; one at or below the last published seq is
    /// ignored as a repeat); nil for a live-only event, which carries the seq of the last journaled
    /// event sent before it on each connection. `tsMs`: when the daemon received it.
    public func publish(_ event: DaemonEvent, seq: JournalSeq?, tsMs: Int64) {
        publish([PreparedEvent(name: event.name, seq: seq, tsMs: tsMs, body: event.body)])
    }

    /// ``publish(_:seq:tsMs:)`` for an event's data as the driver keeps it.
    func publish(name: String, body: EventBody, seq: JournalSeq?, tsMs: Int64) {
        publish([PreparedEvent(name: name, seq: seq, tsMs: tsMs, body: body)])
    }

    /// Publishes several events, in order (a group commit's batch). On the loop's thread (the
    /// driver always is) they go out now; from elsewhere, as a task on the loop.
    func publish(_ events: [PreparedEvent]) {
        guard !events.isEmpty else { return }
        if loop.inEventLoop {
            for event in events { publishOnLoop(event) }
        } else {
            _ = loop.execute {
                for event in events { self.publishOnLoop(event) }
            }
        }
    }

    private func publishOnLoop(_ event: PreparedEvent) {
        guard case .running = state else { return }
        apply(book.publish(event, queues: self))
    }

    // MARK: Connections

    private func accepted(_ connection: StreamConnection) {
        guard case .running = state else {
            connection.close()
            return
        }
        let credentials = connection.peerCredentials()
        if let refusal = connectionRefusal(uid: credentials?.uid) {
            // One line, then closed at once: a refused connection must not hold a descriptor.
            var line: [UInt8] = []
            line.appendLiteral("{\"id\":null,\"ok\":false,\"error\":")
            refusal.json.serialize(into: &line)
            line.appendLiteral("}\n")
            connection.write(line)
            connection.close()
            handler?.connectionRefused(uid: credentials?.uid, pid: credentials?.pid, refusal)
            return
        }
        let number = nextPeerNumber
        nextPeerNumber += 1
        let mayControl = credentials.map { hasControlRole($0, fd: connection.fileDescriptor) } ?? false
        let info = SocketPeer(connectionNumber: number, pid: credentials?.pid, uid: credentials?.uid,
                              gid: credentials?.gid, mayControl: mayControl)
        let peer = SocketAPIPeerConnection(connection: connection, info: info, maxLineBytes: configuration.maxLineBytes)
        peers[number] = peer
        if let uid = credentials?.uid, uid != 0 { peersByUID[uid, default: 0] += 1 }
        connections.add(1, ordering: .relaxed)
        // A safety net against a peer that sends requests without reading their answers (events
        // never come near it: they stop at `maxQueueBytes`, but for one line alone, see
        // `SubscriptionBook.Decision.sendOversized`).
        connection.writeQueueLimit = baseWriteQueueLimit
        connection.onRead = { [unowned self, unowned peer] bytes in self.received(bytes, from: peer) }
        connection.onWritable = { [unowned self, unowned peer] in self.drained(peer) }
        connection.onClose = { [unowned self, unowned peer] _ in self.closed(peer) }
        connection.start()
    }

    private func closed(_ peer: SocketAPIPeerConnection) {
        peer.isOpen = false
        // Its calls still being answered no longer count for its uid (their answers find no peer).
        if let uid = rationedUID(peer), peer.inFlight > 0 { requestsOfUIDAnswered(uid, peer.inFlight) }
        peer.inFlight = 0
        peer.lingerTimer?.invalidate()
        peer.lingerTimer = nil
        endSubscription(peer)
        handler?.peerClosed(peer.info)
        // What its queue held goes back to the heap; the daemon trims the heap once it is quiet.
        // (Its connection's queue may be gone already: the most it ever held counts.)
        let held = max(book.peerClosed(peer.number), peer.out.capacity + peer.connection.queuedByteCount)
        if held >= Self.releaseNoticeBytes { handler?.peerReleased(bytes: held) }
        peer.out = []
        if peers.removeValue(forKey: peer.number) != nil {
            connections.subtract(1, ordering: .relaxed)
            if let uid = peer.info.uid, uid != 0, let held = peersByUID[uid] {
                peersByUID[uid] = held > 1 ? held - 1 : nil
            }
        }
    }

    /// A closing peer that held this much output is reported to the handler (``SocketAPIHandler/peerReleased(bytes:)``).
    static let releaseNoticeBytes = 64 << 10

    func received(_ bytes: UnsafeRawBufferPointer, from peer: SocketAPIPeerConnection) {
        guard peer.isOpen, !peer.dropping else { return }
        let before = peer.framer.consumed
        let outcome = peer.framer.feed(bytes) { line in
            if line.count > 0 { self.handleLine(line, from: peer) }
            // Paused for its calls: the rest of this read waits (one read holds thousands of lines).
            return peer.isOpen && !peer.dropping && !peer.pausedForRequests
        }
        let used = peer.framer.consumed - before
        if case .ok = outcome, used < bytes.count, peer.isOpen, !peer.dropping {
            peer.backlog.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[used...]))
            peer.updateReading()
        }
        if case .lineTooLong(let offset) = outcome {
            respond(peer, id: nil, .failure(SocketAPIError(
                .lineTooLong,
                "the line starting at byte \(offset) of this connection is longer than socket.max_line_bytes (\(configuration.maxLineBytes)); closing")))
            drop(peer)
            return
        }
        guard peer.isOpen, !peer.dropping else { return }
        if peer.framer.bufferedByteCount > 0 {
            if peer.partialSinceMs == nil {
                peer.partialSinceMs = Self.monotonicMs()
                schedulePartialLineCheck()
            }
        } else {
            peer.partialSinceMs = nil
        }
        if checkMemory(peer) { return }
        updateOutputPause(peer)
    }

    /// The connection's write queue is empty again.
    private func drained(_ peer: SocketAPIPeerConnection) {
        if peer.raisedWriteLimit {
            peer.raisedWriteLimit = false
            peer.connection.writeQueueLimit = baseWriteQueueLimit
        }
        updateOutputPause(peer)
        catchUpIfRoom(peer)
    }

    // MARK: Requests

    private func handleLine(_ line: UnsafeRawBufferPointer, from peer: SocketAPIPeerConnection) {
        let parsed = SocketRequestParser.parse(line)
        let request: SocketRequest
        switch parsed.request {
        case .failure(let error):
            respond(peer, id: parsed.id, .failure(error))
            return
        case .success(let r):
            request = r
        }
        if !request.isReadOnly && !peer.info.mayControl {
            respond(peer, id: parsed.id, .failure(Self.controlRefusal(request, peer.info)))
            return
        }
        let id = parsed.id
        switch request {
        case .subscribe(let options):
            apply(book.subscribe(peer.number, id: id, options, uid: peer.info.uid, hasJournal: store != nil,
                                 nowMs: Self.nowMs(), queues: self))
        case .unsubscribe:
            endSubscription(peer)
            respond(peer, id: id, .success(.object([:])))
        case .ack(let seq):
            apply([book.ack(peer.number, id: id, seq: seq, uid: peer.info.uid, hasJournal: store != nil)])
        case .forget(let name): forget(peer, id: id, name: name)
        case .hello: dispatch(.hello, peer: peer, id: id)
        case .status: dispatch(.status, peer: peer, id: id)
        case .metrics: dispatch(.metrics, peer: peer, id: id)
        case .session(let r):
            if case .request = r {
                dispatchPendingRequest(.session(r), peer: peer, id: id)
            } else {
                dispatch(.session(r), peer: peer, id: id)
            }
        case .api(let r): dispatchPendingRequest(.api(r), peer: peer, id: id)
        case .pushReport(let r): dispatch(.pushReport(r), peer: peer, id: id)
        case .logLevel(let level): dispatch(.logLevel(level), peer: peer, id: id)
        }
    }

    /// A `request` or `api` op: it waits for the server, so one connection may have only so many.
    private func dispatchPendingRequest(_ call: SocketAPICall, peer: SocketAPIPeerConnection, id: JSONValue?) {
        guard peer.pendingRequests < configuration.maxPendingRequestsPerPeer else {
            respond(peer, id: id, .failure(SocketAPIError(.queueFull, "this connection already has \(peer.pendingRequests) request or api ops waiting for the server's answer, the most one connection may (\(configuration.maxPendingRequestsPerPeer)); wait for answers, or open another connection")))
            return
        }
        dispatch(call, peer: peer, id: id, pendingRequest: true)
    }

    private func dispatch(_ call: SocketAPICall, peer: SocketAPIPeerConnection, id: JSONValue?, pendingRequest: Bool = false) {
        guard let handler else {
            respond(peer, id: id, .failure(SocketAPIError(.notReady, "the daemon is shutting down")))
            return
        }
        peer.inFlight += 1
        if pendingRequest { peer.pendingRequests += 1 }
        if let uid = rationedUID(peer) { inFlightByUID[uid, default: 0] += 1 }
        updateRequestPause(peer)
        let number = peer.number
        let reply = SocketAPIReply { [self] result in
            _ = loop.execute { self.answered(number, id: id, result, pendingRequest: pendingRequest) }
        }
        handler.handle(call, from: peer.info, reply: reply)
    }

    private func answered(_ number: UInt64, id: JSONValue?, _ result: Result<JSONValue, SocketAPIError>, pendingRequest: Bool) {
        guard let peer = peers[number] else { return }
        peer.inFlight -= 1
        if pendingRequest { peer.pendingRequests -= 1 }
        if let uid = rationedUID(peer) { requestsOfUIDAnswered(uid, 1) }
        guard peer.isOpen else { return }
        respond(peer, id: id, result)
        if checkMemory(peer) { return }
        updateRequestPause(peer)
    }

    /// Queues one response line (sent at the end of this loop iteration, in order with events). A
    /// response counts against the peer's queue but is never held back.
    func respond(_ peer: SocketAPIPeerConnection, id: JSONValue?, _ result: Result<JSONValue, SocketAPIError>) {
        guard peer.isOpen, !peer.dropping else { return }
        var line: [UInt8] = []
        line.appendLiteral("{\"id\":")
        (id ?? .null).serialize(into: &line)
        switch result {
        case .success(let value):
            line.appendLiteral(",\"ok\":true,\"result\":")
            value.serialize(into: &line)
        case .failure(let error):
            line.appendLiteral(",\"ok\":false,\"error\":")
            error.json.serialize(into: &line)
        }
        line.appendLiteral("}\n")
        append(line, to: peer)
    }

    // MARK: Subscriptions (the book's decisions carried out)

    /// Carries out the book's decisions, in order.
    func apply(_ decisions: [SubscriptionBook.Decision]) {
        for decision in decisions {
            switch decision {
            case .send(let number, let line):
                if let peer = peers[number] { append(line, to: peer) }
            case .sendOversized(let number, let line):
                guard let peer = peers[number] else { continue }
                // The connection's safety net is raised for it until its queue drains.
                peer.connection.writeQueueLimit = max(baseWriteQueueLimit, line.count + baseWriteQueueLimit)
                peer.raisedWriteLimit = true
                append(line, to: peer)
            case .respond(let number, let id, let result):
                if let peer = peers[number] { respond(peer, id: id, result) }
            case .readPage(let number, let request): readPage(number, request)
            case .claimCursor(let number, let claim): claimCursor(number, claim)
            case .setCursor(let number, let id, let name, let seq, let uid):
                setCursor(number, id: id, name: name, seq: seq, uid: uid)
            case .retrySoon(let number):
                if let peer = peers[number] { retryCatchUpSoon(peer) }
            case .drop(let number):
                if let peer = peers[number] { drop(peer) }
            }
        }
        subscribers.store(book.subscriberCount, ordering: .relaxed)
    }

    /// A catching-up peer's queue may have room: the book says whether to read its next page.
    private func catchUpIfRoom(_ peer: SocketAPIPeerConnection) {
        guard peer.isOpen, !peer.dropping else { return }
        apply(book.roomMayHaveGrown(peer.number, queues: self))
    }

    func endSubscription(_ peer: SocketAPIPeerConnection) {
        if book.unsubscribe(peer.number) { subscribers.store(book.subscriberCount, ordering: .relaxed) }
    }

    /// A big line waits for room in the memory budget, which other peers free: look again soon
    /// (nothing else wakes a peer whose own queue is empty).
    private func retryCatchUpSoon(_ peer: SocketAPIPeerConnection) {
        guard !peer.retryScheduled else { return }
        peer.retryScheduled = true
        let number = peer.number
        _ = loop.scheduleTimer(after: .milliseconds(250)) { [weak self] in
            guard let self, let peer = self.peers[number] else { return }
            peer.retryScheduled = false
            self.catchUpIfRoom(peer)
        }
    }

    // MARK: Queues and writing

    /// Queues a line whatever the bound (responses, `gap`, the state sent on rejoining, event lines
    /// the book let through).
    private func append(_ line: [UInt8], to peer: SocketAPIPeerConnection) {
        peer.out.append(contentsOf: line)
        if !peer.isDirty {
            peer.isDirty = true
            dirty.append(peer)
        }
        if !flushScheduled {
            flushScheduled = true
            _ = loop.execute { self.flush() }
        }
    }

    /// Hands every peer's pending lines to its connection: one write per connection per loop
    /// iteration.
    private func flush() {
        flushScheduled = false
        let batch = dirty
        dirty = []
        for peer in batch { flush(peer) }
    }

    private func flush(_ peer: SocketAPIPeerConnection) {
        peer.isDirty = false
        guard peer.isOpen else {
            peer.out = []
            return
        }
        // What the socket does not take now stays queued in the connection as this array.
        peer.connection.write(taking: &peer.out)
        // Give a burst's memory back.
        if peer.out.capacity > 65_536 { peer.out = [] }
        updateOutputPause(peer)
        catchUpIfRoom(peer)
    }

    /// Stops serving the peer: what is queued is still sent, then the output is shut down (the peer
    /// sees EOF after the last line) and it is closed when the peer closes, at the latest after
    /// `lingerMs`. Input is read and discarded meanwhile: closing a Unix socket with unread input
    /// resets it, and the peer would lose the last line.
    func drop(_ peer: SocketAPIPeerConnection) {
        guard peer.isOpen, !peer.dropping else { return }
        peer.dropping = true
        endSubscription(peer)
        flush(peer)
        guard peer.isOpen else { return }
        peer.connection.shutdownOutput()
        peer.connection.resumeReading()
        guard peer.isOpen else { return }
        let number = peer.number
        peer.lingerTimer = loop.scheduleTimer(after: .milliseconds(configuration.lingerMs)) { [weak self] in
            self?.peers[number]?.connection.close()
        }
    }

    static func nowMs() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}

/// What the book asks of the queues, answered from the connections.
extension SocketAPIServer: SubscriberQueues {
    func queuedBytes(_ peer: UInt64) -> Int {
        peers[peer]?.queuedBytes ?? 0
    }

    func totalQueuedBytes() -> Int {
        peers.values.reduce(0) { $0 + $1.queuedBytes }
    }

    func memoryAllows(_ peer: UInt64, extra: Int, pending: [UInt64: Int]) -> Bool {
        guard let connection = peers[peer] else { return false }
        return memoryRefusal(connection, extra: extra, pending: pending) == nil
    }
}
