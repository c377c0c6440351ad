#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import SmarticoProtocol
import Transport

/// Why the server could not start.
public enum SocketAPIServerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Creating, binding or adopting the listening socket failed.
    case listen(String)
    /// `socket.group` names no group of this system.
    case unknownGroup(String)
    /// `chown` of the socket file to the group failed (the daemon must be in that group or root).
    case chownFailed(path: String, gid: UInt32, errno: Int32)
    /// The server was already started or closed.
    case notIdle

    public var description: String {
        switch self {
        case .listen(let detail): "cannot listen on the local socket: \(detail)"
        case .unknownGroup(let name): "socket.group: no group named \"\(name)\" on this system (check /etc/group)"
        case .chownFailed(let path, let gid, let e):
            "cannot give \(path) to group \(gid): \(String(cString: strerror(e))) (the daemon's user must be root or a member of that group)"
        case .notIdle: "the socket server was already started or closed"
        }
    }
}

/// The local socket API server (socket-api.md): NDJSON requests and events over a Unix stream
/// socket, every connection on one ``EventLoop``.
///
/// - Requests are answered **as they complete** (each response carries the request's `id`): a slow
///   `request` op does not hold up a `status` sent after it. Requests are handed to the
///   ``SocketAPIHandler`` in arrival order. At most ``Configuration/maxInFlightPerConnection``
///   unanswered requests per connection: beyond that the server stops reading from it until answers
///   go out.
/// - Events: ``publish(_:seq:tsMs:)`` from any thread, journaled events (with their seq) in seq order.
///   Lines written in one loop iteration go out in one write per connection.
/// - Each connection's unsent events are bounded by ``Configuration/maxQueueEvents`` (and
///   ``Configuration/maxQueueBytes``): past that the peer gets one `overflow` event and is dropped.
///
/// All state is confined to the loop thread; the public methods hop onto it.
public final class SocketAPIServer: CustomStringConvertible,
    // Mutable state is only touched on `loop`'s thread (every entry point hops there with
    // `loop.execute`/`loop.submit` or is called by the loop's handlers); `subscriberCount` is atomic.
    @unchecked Sendable
{
    /// Limits and permissions (from `DaemonConfig.Socket`).
    public struct Configuration: Sendable, Equatable {
        /// `socket.max_line_bytes`.
        public var maxLineBytes: Int
        /// `socket.max_queue_events`.
        public var maxQueueEvents: Int
        /// `socket.control_uids`, `socket.control_gids`: when either is set, other peers may only use
        /// `hello`, `status`, `subscribe`, `unsubscribe`, `ack`.
        public var controlUIDs: [UInt32]?
        public var controlGIDs: [UInt32]?
        /// Bytes of unsent output per connection before it counts as overflowing (a safety net for
        /// large events; the event count is the main bound).
        public var maxQueueBytes: Int
        /// Unanswered requests per connection before the server stops reading from it.
        public var maxInFlightPerConnection: Int
        /// How long a connection being dropped (overflow, line too long) may take to take its last
        /// line before it is closed anyway.
        public var lingerMs: Int

        public init(
            maxLineBytes: Int = 1_048_576, maxQueueEvents: Int = 10_000, controlUIDs: [UInt32]? = nil,
            controlGIDs: [UInt32]? = nil, maxQueueBytes: Int = 64 << 20, maxInFlightPerConnection: Int = 256,
            lingerMs: Int = 2000
        ) {
            self.maxLineBytes = max(1, maxLineBytes)
            self.maxQueueEvents = max(1, maxQueueEvents)
            self.controlUIDs = controlUIDs
            self.controlGIDs = controlGIDs
            self.maxQueueBytes = max(4096, maxQueueBytes)
            self.maxInFlightPerConnection = max(1, maxInFlightPerConnection)
            self.lingerMs = max(0, lingerMs)
        }

        /// The configuration's `socket` section.
        public init(_ socket: DaemonConfig.Socket) {
            self.init(maxLineBytes: socket.maxLineBytes,
                      controlUIDs: socket.controlUIDs, controlGIDs: socket.controlGIDs, maxQueueBytes: socket.maxQueueBytes)
        }
    }

    /// Where to listen.
    public enum Endpoint: Sendable, Equatable {
        /// Create the socket file at `path` with `mode`, owned by group `group` when set (a name, or a
        /// numeric id as text; resolved with `getgrnam_r` off the loop).
        case path(String, mode: UInt32 = 0o660, group: String? = nil)
        /// A listening descriptor passed by systemd (``SystemdActivation``).
        case adopted(fd: Int32)
    }

    public let loop: EventLoop
    public let configuration: Configuration
    private let store: SmarticoStore?

    private var listener: StreamListener?
    private var handler: (any SocketAPIHandler)?
    private var peers: [UInt64: Peer] = [:]
    private var nextPeerNumber: UInt64 = 1
    // Loop-confined; never held across a call that could reach the server again: not checked for
    // exclusive access at run time (see `SessionDriver.machine`). `peers` stays checked: a delivery
    // can end in dropping a peer while they are iterated.
    @exclusivity(unchecked) private var dirty: [Peer] = []
    @exclusivity(unchecked) private var flushScheduled = false
    @exclusivity(unchecked) private var lastPublishedSeq: JournalSeq = 0
    /// An engagement's line `data`, built once while one event is published to several peers and
    /// copied into each peer's output (`sharedFor` is the engagement it was built for, nil between
    /// publishes). Built per peer, the `bridge`'s member-by-member copy was repeated for every
    /// subscriber, on the latency path of every line after the first (docs/benchmarks.md).
    @exclusivity(unchecked) private var sharedData: [UInt8] = []
    @exclusivity(unchecked) private var sharedFor: EngagementData?
    private var state: RunState = .idle
    private let subscribers = Atomic<Int>(0)
    private let connections = Atomic<Int>(0)

    private enum RunState { case idle, running, closed }

    /// A server that is not listening yet. `store` serves `since`, `durable` and `ack`; without it
    /// those answer `internal`.
    public init(loop: EventLoop, configuration: Configuration, store: SmarticoStore?) {
        self.loop = loop
        self.configuration = configuration
        self.store = store
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

    // MARK: Starting and stopping

    /// Starts listening and serving. `handler` answers everything but `subscribe`/`unsubscribe`/`ack`
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
        let result: Result<SocketAddress, SocketAPIServerError>
        do {
            result = try await loop.submit { () -> Result<SocketAddress, SocketAPIServerError> in
                self.startOnLoop(endpoint, gid: gid, handler: handler, initialSeq: initialSeq)
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
        lastPublishedSeq = max(lastPublishedSeq, initialSeq)
        listener.onAccept = { [unowned self] connection in self.accepted(connection) }
        return .success(listener.localAddress)
    }

    /// `getgrnam_r` on the blocking pool; a numeric string is taken as the gid.
    static func resolveGroup(_ name: String, pool: BlockingPool) async throws(SocketAPIServerError) -> UInt32 {
        if let gid = UInt32(name) { return gid }
        let found: UInt32? = await pool.run { () -> UInt32? in
            var group = Glibc.group()
            var result: UnsafeMutablePointer<Glibc.group>? = nil
            var size = 16_384
            while size <= 1 << 20 {
                var buffer = [CChar](repeating: 0, count: size)
                let rc = getgrnam_r(name, &group, &buffer, size, &result)
                if rc == ERANGE { size *= 4; continue }
                guard rc == 0, result != nil else { return nil }
                return group.gr_gid
            }
            return nil
        }
        guard let found else { throw .unknownGroup(name) }
        return found
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
    /// (publish those in seq order; one at or below the last published seq is ignored as a repeat);
    /// nil for a live-only event, which carries the seq of the last journaled event sent before it on
    /// each connection. `tsMs`: when the daemon received it.
    public func publish(_ event: DaemonEvent, seq: JournalSeq?, tsMs: Int64) {
        var data: [UInt8] = []
        data.reserveCapacity(256)
        event.data.serialize(into: &data)
        publish(PreparedEvent(name: event.name, seq: seq, tsMs: tsMs, data: data))
    }

    /// ``publish(_:seq:tsMs:)`` for an event whose `data` is already serialized (the bytes that were
    /// journaled): they are copied into the line as they are, not serialized again.
    public func publish(name: String, serializedData data: [UInt8], seq: JournalSeq?, tsMs: Int64) {
        publish(PreparedEvent(name: name, seq: seq, tsMs: tsMs, data: data))
    }

    /// ``publish(name:serializedData:seq:tsMs:)`` for an event's data as the driver keeps it (an
    /// engagement's appended to each peer's output from the 110's bytes).
    func publish(name: String, body: EventBody, seq: JournalSeq?, tsMs: Int64) {
        publish(PreparedEvent(name: name, seq: seq, tsMs: tsMs, body: body))
    }

    /// On the loop's thread (the driver always is) the event goes out now; from elsewhere, as a
    /// task on the loop. (A task made on the loop itself cost a closure per event, for nothing:
    /// every publisher is there, so the order is the same either way.)
    private func publish(_ prepared: PreparedEvent) {
        if loop.inEventLoop {
            publishOnLoop(prepared)
        } else {
            _ = loop.execute { self.publishOnLoop(prepared) }
        }
    }

    /// Publishes several events, in order (a group commit's batch), as ``publish(_:)`` does.
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
        if let seq = event.seq {
            guard seq > lastPublishedSeq else { return }
            lastPublishedSeq = seq
        }
        let share = subscribers.load(ordering: .relaxed) > 1
        for peer in peers.values {
            guard let subscription = peer.subscription, subscription.accepts(event.name) else { continue }
            if subscription.replaying {
                subscription.buffered.append(event)
                if subscription.buffered.count > configuration.maxQueueEvents { overflow(peer) }
            } else {
                deliver(event, to: peer, share: share)
            }
        }
        if sharedFor != nil {
            sharedFor = nil
            // Kept for the next event, unless a large one grew it.
            if sharedData.capacity > 4 * Self.writeAtBytes { sharedData = [] }
        }
    }

    // MARK: Connections

    private func accepted(_ connection: StreamConnection) {
        guard case .running = state else {
            connection.close()
            return
        }
        let credentials = connection.peerCredentials()
        let number = nextPeerNumber
        nextPeerNumber += 1
        let mayControl: Bool
        if configuration.controlUIDs == nil && configuration.controlGIDs == nil {
            mayControl = true
        } else if let credentials {
            mayControl = (configuration.controlUIDs?.contains(credentials.uid) ?? false)
                || (configuration.controlGIDs?.contains(credentials.gid) ?? false)
        } else {
            mayControl = false
        }
        let info = SocketPeer(connectionNumber: number, pid: credentials?.pid, uid: credentials?.uid,
                              gid: credentials?.gid, mayControl: mayControl)
        let peer = Peer(connection: connection, info: info, maxLineBytes: configuration.maxLineBytes)
        peers[number] = peer
        connections.add(1, ordering: .relaxed)
        // Hard net: our own byte check triggers `overflow` first and leaves room for its notice.
        connection.writeQueueLimit = configuration.maxQueueBytes + 2 * configuration.maxLineBytes + 65_536
        connection.onRead = { [unowned self, unowned peer] bytes in self.received(bytes, from: peer) }
        connection.onWritable = { [unowned self, unowned peer] in self.drained(peer) }
        connection.onClose = { [unowned self, unowned peer] _ in self.closed(peer) }
        connection.start()
    }

    private func closed(_ peer: Peer) {
        peer.isOpen = false
        peer.lingerTimer?.invalidate()
        peer.lingerTimer = nil
        if peer.subscription != nil {
            peer.subscription = nil
            subscribers.subtract(1, ordering: .relaxed)
        }
        peer.out = []
        if peers.removeValue(forKey: peer.info.connectionNumber) != nil {
            connections.subtract(1, ordering: .relaxed)
        }
    }

    private func received(_ bytes: UnsafeRawBufferPointer, from peer: Peer) {
        guard peer.isOpen, !peer.dropping else { return }
        let outcome = peer.framer.feed(bytes) { line in
            if line.count > 0 { self.handleLine(line, from: peer) }
            return peer.isOpen && !peer.dropping
        }
        if case .lineTooLong(let offset) = outcome {
            respond(peer, id: nil, .failure(SocketAPIError(
                .lineTooLong,
                "the line starting at byte \(offset) of this connection is longer than socket.max_line_bytes (\(configuration.maxLineBytes)); closing")))
            drop(peer)
            return
        }
        if peer.isOpen, peer.connection.queuedByteCount > configuration.maxQueueBytes / 4 {
            // The peer sends requests but does not read the answers: stop reading until it does.
            peer.pausedForOutput = true
            peer.updateReading()
        }
    }

    private func drained(_ peer: Peer) {
        peer.queuedEvents = 0
        if peer.pausedForOutput {
            peer.pausedForOutput = false
            peer.updateReading()
        }
        if let subscription = peer.subscription, subscription.replayWaitingForDrain {
            subscription.replayWaitingForDrain = false
            fetchReplayPage(peer, subscription)
        }
    }

    // MARK: Requests

    private func handleLine(_ line: UnsafeRawBufferPointer, from peer: Peer) {
        let parsed = SocketRequestParser.parse(line)
        let request: SocketRequest
        switch parsed.request {
        case .failure(let error):
            respond(peer, id: parsed.id, .failure(error))
            return
        case .success(let r):
            request = r
        }
        if !request.op.isReadOnly && !peer.info.mayControl {
            let who = peer.info.uid.map { "uid \($0), gid \(peer.info.gid ?? 0)" } ?? "unknown credentials"
            respond(peer, id: parsed.id, .failure(SocketAPIError(
                .notPermitted,
                "op \"\(request.op.rawValue)\" needs a peer in socket.control_uids or socket.control_gids (this peer: \(who)); allowed: hello, status, subscribe, unsubscribe, ack")))
            return
        }
        let id = parsed.id
        switch request {
        case .subscribe(let options): subscribe(peer, id: id, options)
        case .unsubscribe:
            if peer.subscription != nil {
                peer.subscription = nil
                subscribers.subtract(1, ordering: .relaxed)
            }
            respond(peer, id: id, .success(.object([:])))
        case .ack(let seq): ack(peer, id: id, seq: seq)
        case .hello: dispatch(.hello, peer: peer, id: id)
        case .status: dispatch(.status, peer: peer, id: id)
        case .session(let r): dispatch(.session(r), peer: peer, id: id)
        case .pushReport(let r): dispatch(.pushReport(r), peer: peer, id: id)
        }
    }

    private func dispatch(_ call: SocketAPICall, peer: Peer, id: JSONValue?) {
        guard let handler else {
            respond(peer, id: id, .failure(SocketAPIError(.notReady, "the daemon is shutting down")))
            return
        }
        peer.inFlight += 1
        peer.updateReading(maxInFlight: configuration.maxInFlightPerConnection)
        let number = peer.info.connectionNumber
        let reply = SocketAPIReply { [self] result in
            _ = loop.execute { self.answered(number, id: id, result) }
        }
        handler.handle(call, from: peer.info, reply: reply)
    }

    private func answered(_ number: UInt64, id: JSONValue?, _ result: Result<JSONValue, SocketAPIError>) {
        guard let peer = peers[number], peer.isOpen else { return }
        peer.inFlight -= 1
        respond(peer, id: id, result)
        peer.updateReading(maxInFlight: configuration.maxInFlightPerConnection)
    }

    /// Queues one response line (sent at the end of this loop iteration, in order with events).
    private func respond(_ peer: Peer, id: JSONValue?, _ result: Result<JSONValue, SocketAPIError>) {
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
        peer.out.append(contentsOf: line)
        markDirty(peer)
    }

    // MARK: Subscriptions

    private func subscribe(_ peer: Peer, id: JSONValue?, _ options: SubscribeRequest) {
        guard peer.subscription == nil else {
            respond(peer, id: id, .failure(.badRequest("this connection is already subscribed; send unsubscribe first to change types, since or durable")))
            return
        }
        let subscription = Subscription(types: options.types, durable: options.durable)
        let lastSeq = lastPublishedSeq
        if options.since == nil && options.durable == nil {
            subscription.lastSeqSent = lastSeq
            peer.subscription = subscription
            subscribers.add(1, ordering: .relaxed)
            respond(peer, id: id, .success(.object(["last_seq": .number(lastSeq)])))
            return
        }
        guard let store else {
            respond(peer, id: id, .failure(SocketAPIError(.internal, "this server has no journal: since and durable are unavailable")))
            return
        }
        // Buffer live events from now on, so nothing published during the replay is lost.
        subscription.replaying = true
        peer.subscription = subscription
        subscribers.add(1, ordering: .relaxed)
        let since = options.since
        let durable = options.durable
        Task(executorPreference: loop) {  // never the global executor (docs/transport.md)
            let start: Result<JournalSeq, SocketAPIError>
            do {
                if let durable {
                    if let cursor = try await store.cursor(durable) {
                        start = .success(cursor)
                    } else {
                        // A new name starts at `since`, or now; remember it so a reconnect before the
                        // first ack resumes from here.
                        let from = min(since ?? lastSeq, await store.lastSeq())
                        start = .success(try await store.setCursor(durable, from))
                    }
                } else {
                    start = .success(since!)
                }
            } catch {
                start = .failure(Self.storeFailure(error, field: "durable"))
            }
            _ = self.loop.execute {
                guard peer.isOpen, peer.subscription === subscription else { return }
                switch start {
                case .failure(let error):
                    peer.subscription = nil
                    self.subscribers.subtract(1, ordering: .relaxed)
                    self.respond(peer, id: id, .failure(error))
                case .success(let from):
                    subscription.lastSeqSent = from
                    subscription.replayedThrough = from
                    self.respond(peer, id: id, .success(.object(["last_seq": .number(lastSeq)])))
                    self.fetchReplayPage(peer, subscription)
                }
            }
        }
    }

    private var replayPageSize: Int { max(1, min(256, configuration.maxQueueEvents / 4)) }

    private func fetchReplayPage(_ peer: Peer, _ subscription: Subscription) {
        guard let store, peer.isOpen, peer.subscription === subscription, subscription.replaying else { return }
        let after = subscription.replayedThrough
        let limit = replayPageSize
        let types = subscription.types
        Task(executorPreference: loop) {
            let page: Result<[JournalEvent], StoreError>
            do throws(StoreError) { page = .success(try await store.events(after: after, limit: limit, types: types)) } catch {
                page = .failure(error)
            }
            _ = self.loop.execute { self.replayPage(page, limit: limit, peer: peer, subscription: subscription) }
        }
    }

    private func replayPage(
        _ page: Result<[JournalEvent], StoreError>, limit: Int, peer: Peer, subscription: Subscription
    ) {
        guard peer.isOpen, !peer.dropping, peer.subscription === subscription, subscription.replaying else { return }
        let events: [JournalEvent]
        switch page {
        case .success(let e): events = e
        case .failure(let error):
            // Tell the peer and drop it: going live with a gap would break the contract.
            let notice = DaemonEvent(name: "error", data: .object([
                "code": "journal_read_failed", "message": .string("replay failed: \(error)"),
            ]), journaled: false)
            var data: [UInt8] = []
            notice.data.serialize(into: &data)
            deliver(PreparedEvent(name: "error", seq: nil, tsMs: Self.nowMs(), data: data), to: peer, force: true)
            drop(peer)
            return
        }
        for event in events {
            // An engagement row was journaled without its `bridge` member: put it back.
            let data = EngagementJournal.lineData(name: event.name, journaled: event.data)
            deliver(PreparedEvent(name: event.name, seq: event.seq, tsMs: event.tsMs, data: data), to: peer)
            guard peer.isOpen, !peer.dropping else { return }
            subscription.replayedThrough = max(subscription.replayedThrough, event.seq)
        }
        if events.count >= limit {
            // More to come: keep the peer's queue at most half full. Write the page now, so the
            // decision sees what the kernel took (an empty queue never reports `onWritable`).
            flush(peer)
            guard peer.isOpen else { return }
            if peer.connection.queuedByteCount > 0 && peer.queuedEvents > configuration.maxQueueEvents / 2 {
                subscription.replayWaitingForDrain = true
            } else {
                fetchReplayPage(peer, subscription)
            }
            return
        }
        // Caught up: go live with what was published meanwhile, minus what the replay already sent.
        subscription.replaying = false
        let buffered = subscription.buffered
        subscription.buffered = []
        for event in buffered {
            if let seq = event.seq, seq <= subscription.replayedThrough { continue }
            deliver(event, to: peer)
            guard peer.isOpen, !peer.dropping else { return }
        }
    }

    private func ack(_ peer: Peer, id: JSONValue?, seq: JournalSeq) {
        guard let name = peer.subscription?.durable else {
            respond(peer, id: id, .failure(.badRequest("ack needs a durable subscription on this connection (subscribe with \"durable\" first)")))
            return
        }
        guard let store else {
            respond(peer, id: id, .failure(SocketAPIError(.internal, "this server has no journal")))
            return
        }
        let number = peer.info.connectionNumber
        Task(executorPreference: loop) {
            let result: Result<JSONValue, SocketAPIError>
            do {
                let cursor = try await store.setCursor(name, seq)
                result = .success(.object(["cursor": .number(cursor)]))
            } catch {
                result = .failure(Self.storeFailure(error, field: "seq"))
            }
            _ = self.loop.execute {
                guard let peer = self.peers[number] else { return }
                self.respond(peer, id: id, result)
            }
        }
    }

    private static func storeFailure(_ error: any Error, field: String) -> SocketAPIError {
        if let error = error as? StoreError {
            switch error {
            case .cursorBeyondLastSeq(let name, let seq, let last):
                return .badRequest("field \"\(field)\": \(seq) is beyond the last seq \(last) (durable \"\(name)\")")
            case .tooManyCursors(let name, let max):
                return .badRequest("field \"durable\": \"\(name)\" would be one name more than the \(max) kept; reuse a name")
            case .invalidArgument(let detail):
                return .badRequest("field \"\(field)\": \(detail)")
            default:
                return SocketAPIError(.internal, "journal: \(error)")
            }
        }
        return SocketAPIError(.internal, "journal: \(error)")
    }

    // MARK: Delivery and overflow

    /// Appends one event line to the peer's output, or drops the peer when its queue is full.
    /// `share`: an engagement's line data is built once into `sharedData` and copied from there
    /// (the event is being published to several peers).
    private func deliver(_ event: PreparedEvent, to peer: Peer, force: Bool = false, share: Bool = false) {
        guard peer.isOpen, !peer.dropping, let subscription = peer.subscription else { return }
        // Sent already: a replay page reads what the driver journaled, which can be an event it
        // has not published yet; published a moment later, when this subscription is live, it
        // would go out twice. Journaled events reach a peer in seq order, so anything at or below
        // the last one sent was sent (or came before the subscription started). Checked before
        // the queue bound: a repeat is not one more event for the peer.
        if let eventSeq = event.seq, eventSeq <= subscription.lastSeqSent { return }
        if !force {
            let events = peer.queuedEvents + peer.outEvents
            let bytes = peer.out.count + peer.connection.queuedByteCount
            if events >= configuration.maxQueueEvents || bytes >= configuration.maxQueueBytes {
                overflow(peer)
                return
            }
        }
        let seq = event.seq ?? subscription.lastSeqSent
        subscription.lastSeqSent = seq
        peer.out.appendLiteral("{\"event\":")
        JSONValue.serializeString(event.name, into: &peer.out)
        peer.out.appendLiteral(",\"seq\":")
        appendDecimal(seq, to: &peer.out)
        peer.out.appendLiteral(",\"ts\":")
        appendDecimal(event.tsMs, to: &peer.out)
        peer.out.appendLiteral(",\"data\":")
        if share, case .engagement(let engagement) = event.body {
            if sharedFor !== engagement {
                sharedData.removeAll(keepingCapacity: true)
                engagement.appendLine(to: &sharedData)
                sharedFor = engagement
            }
            peer.out.append(contentsOf: sharedData)
        } else {
            event.body.appendLine(to: &peer.out)
        }
        peer.out.appendLiteral("}\n")
        peer.outEvents += 1
        // A batch of events (a group commit publishes hundreds at once under load) goes out in
        // pieces of `writeAtBytes` rather than as one buffer grown to megabytes: each doubling
        // copied the lines again, and a buffer above malloc's mmap threshold came back as fresh
        // pages, faulted in for every batch (~8 % of the loop thread's time in the CPU benchmark).
        if peer.out.count >= Self.writeAtBytes {
            writeOut(peer)
        }
        markDirty(peer)
    }

    /// The size at which a peer's pending lines are written without waiting for the end of the
    /// loop iteration.
    static let writeAtBytes = 65_536

    /// Sends one `overflow` notice (after what is already queued) and drops the peer.
    private func overflow(_ peer: Peer) {
        guard peer.isOpen, !peer.dropping, let subscription = peer.subscription else { return }
        let after = subscription.lastSeqSent
        subscription.buffered = []
        var data: [UInt8] = []
        data.appendLiteral("{\"dropped_after_seq\":")
        appendDecimal(after, to: &data)
        data.appendLiteral("}")
        deliver(PreparedEvent(name: "overflow", seq: nil, tsMs: Self.nowMs(), data: data), to: peer, force: true)
        drop(peer)
    }

    /// Stops serving the peer: what is queued is still sent, then the output is shut down (the peer
    /// sees EOF after the last line) and it is closed when the peer closes, at the latest after
    /// `lingerMs`. Input is read and discarded meanwhile: closing a Unix socket with unread input
    /// resets it, and the peer would lose the last line.
    private func drop(_ peer: Peer) {
        guard peer.isOpen, !peer.dropping else { return }
        peer.dropping = true
        if peer.subscription != nil {
            peer.subscription = nil
            subscribers.subtract(1, ordering: .relaxed)
        }
        flush(peer)
        guard peer.isOpen else { return }
        peer.connection.shutdownOutput()
        peer.connection.resumeReading()
        guard peer.isOpen else { return }
        peer.lingerTimer = loop.scheduleTimer(after: .milliseconds(configuration.lingerMs)) { [weak peer] in
            peer?.connection.close()
        }
    }

    private func markDirty(_ peer: Peer) {
        if !peer.isDirty {
            peer.isDirty = true
            dirty.append(peer)
        }
        if !flushScheduled {
            flushScheduled = true
            _ = loop.execute { self.flush() }
        }
    }

    /// Writes every pending batch: one write per connection per loop iteration.
    private func flush() {
        flushScheduled = false
        let batch = dirty
        dirty = []
        for peer in batch { flush(peer) }
    }

    private func flush(_ peer: Peer) {
        peer.isDirty = false
        guard peer.isOpen else {
            peer.out.removeAll(keepingCapacity: false)
            peer.outEvents = 0
            return
        }
        writeOut(peer)
    }

    /// Hands the peer's pending lines to its connection (which writes what the socket takes now).
    private func writeOut(_ peer: Peer) {
        guard !peer.out.isEmpty else {
            peer.outEvents = 0
            return
        }
        // Taken by the connection: what the socket does not take now is queued as this array, not
        // copied into the queue (under a reader slower than the daemon every line was copied twice,
        // ~2 % of the daemon's CPU on the CPU row). Emptied with its storage when all went out; else
        // the next lines get a new one.
        peer.connection.write(taking: &peer.out)
        // Kept for the next lines: at most `writeAtBytes` plus one line (a line bigger than that
        // is written alone and its buffer freed).
        if peer.out.capacity > 2 * Self.writeAtBytes {
            peer.out = []
        } else if peer.out.capacity == 0 {
            // Taken by a busy peer's queue: the next lines fill a buffer of the usual size at once
            // rather than regrowing one from nothing (each doubling a copy).
            peer.out.reserveCapacity(Self.writeAtBytes + 8_192)
        }
        if peer.isOpen, peer.connection.queuedByteCount > 0 {
            peer.queuedEvents += peer.outEvents
        } else {
            peer.queuedEvents = 0
        }
        peer.outEvents = 0
    }

    static func nowMs() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}

// MARK: Per-connection state (loop thread only)

/// An event ready to be written: the name, its journal seq (nil: live only), its time and its
/// `data` serialized once for every peer (the line's bytes as they were built or journaled, shared,
/// copied only into each peer's output).
struct PreparedEvent: Sendable {
    let name: String
    let seq: JournalSeq?
    let tsMs: Int64
    /// The line's `data`: bytes, or an engagement's pieces, appended to each peer's output as they are.
    let body: EventBody

    init(name: String, seq: JournalSeq?, tsMs: Int64, data: [UInt8]) {
        self.init(name: name, seq: seq, tsMs: tsMs, body: .bytes(data))
    }

    init(name: String, seq: JournalSeq?, tsMs: Int64, body: EventBody) {
        self.name = name
        self.seq = seq
        self.tsMs = tsMs
        self.body = body
    }
}

// Loop-confined like the server: created, read and changed only on the loop thread; closures that
// capture it off the loop only carry it back there with `loop.execute`.
private final class Subscription: @unchecked Sendable {
    let types: Set<String>?
    let durable: String?
    /// The seq of the last journaled event written to this peer (what live-only events carry).
    // Not checked for exclusive access at run time (see `SocketAPIServer.dirty`).
    @exclusivity(unchecked) var lastSeqSent: JournalSeq = 0
    var replaying = false
    var replayedThrough: JournalSeq = 0
    var replayWaitingForDrain = false
    /// Live events published during the replay.
    var buffered: [PreparedEvent] = []

    /// `types` as a list, for `accepts`: a subscription names a few of the dozen event names, and
    /// comparing short strings beats hashing the name of every event delivered.
    private let typeList: [String]?

    init(types: Set<String>?, durable: String?) {
        self.types = types
        self.typeList = types.map { Array($0) }
        self.durable = durable
    }

    func accepts(_ name: String) -> Bool {
        guard let types, let typeList else { return true }
        return (typeList.count > 16 ? types.contains(name) : typeList.contains(name)) || name == "overflow"
    }
}

// Loop-confined like the server (see Subscription).
private final class Peer: @unchecked Sendable {
    let connection: StreamConnection
    let info: SocketPeer
    var framer: LineFramer
    var isOpen = true
    var dropping = false
    var subscription: Subscription?
    /// Bytes built this loop iteration, written by `flush`.
    // The output path is not checked for exclusive access at run time (see `SocketAPIServer.dirty`).
    @exclusivity(unchecked) var out: [UInt8] = []
    /// Events in `out`.
    var outEvents = 0
    /// Events handed to the connection while its write queue was not empty (an upper bound of the
    /// events still waiting for the peer); reset when the queue drains.
    var queuedEvents = 0
    var isDirty = false
    var inFlight = 0
    var pausedForOutput = false
    var pausedForRequests = false
    var lingerTimer: LoopTimer?

    init(connection: StreamConnection, info: SocketPeer, maxLineBytes: Int) {
        self.connection = connection
        self.info = info
        self.framer = LineFramer(maxLineBytes: maxLineBytes)
    }

    func updateReading(maxInFlight: Int? = nil) {
        if let maxInFlight { pausedForRequests = inFlight >= maxInFlight }
        guard isOpen, !dropping else { return }
        if pausedForOutput || pausedForRequests {
            connection.pauseReading()
        } else {
            connection.resumeReading()
        }
    }
}

private func appendDecimal(_ value: Int64, to out: inout [UInt8]) {
    if value == 0 {
        out.append(0x30)
        return
    }
    var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                 UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
        (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    var magnitude = value.magnitude
    var count = 0
    withUnsafeMutableBytes(of: &digits) { buffer in
        while magnitude > 0 {
            buffer[19 - count] = UInt8(truncatingIfNeeded: magnitude % 10) + 0x30
            magnitude /= 10
            count += 1
        }
        if value < 0 { out.append(0x2D) }
        out.append(contentsOf: buffer[(20 - count)...])
    }
}
