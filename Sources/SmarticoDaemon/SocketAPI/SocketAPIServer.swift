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
/// - Requests are answered **as they complete** (each response carries the request's `id`), handed
///   to the ``SocketAPIHandler`` in arrival order. At most
///   ``Configuration/maxInFlightPerConnection`` unanswered requests per connection: beyond that the
///   server stops reading from it until answers go out.
/// - Subscribers are cursors over the journal. A subscriber is `live` (published events are queued
///   for it as they come) or `catchingUp` (its queue was full, or it asked for a replay: it is fed
///   pages read from the journal as it drains its socket, then rejoins live delivery). A peer's
///   queued output is held under ``Configuration/maxQueueBytes``, all peers' together under
///   ``Configuration/maxTotalQueueBytes``: nothing blocks, nobody who reads is dropped, and a
///   replay of any size costs one page of memory. docs/socket-api.md, "Slow peers".
///
/// All state is confined to the loop thread; the public methods hop onto it.
public final class SocketAPIServer: CustomStringConvertible,
    // Mutable state is only touched on `loop`'s thread (every entry point hops there with
    // `loop.execute`/`loop.submit` or is called by the loop's handlers); the counters are atomic.
    @unchecked Sendable
{
    /// Limits and permissions (from `DaemonConfig.Socket`).
    public struct Configuration: Sendable, Equatable {
        /// `socket.max_line_bytes`.
        public var maxLineBytes: Int
        /// `socket.control_uids`, `socket.control_gids`: who besides root and the daemon's own uid has
        /// the control role (a gid matches the peer's primary or any supplementary group). Everyone
        /// else may only use `hello`, `status`, `subscribe`, `unsubscribe`, `ack`, `forget`.
        public var controlUIDs: [UInt32]?
        public var controlGIDs: [UInt32]?
        /// `socket.max_peers_per_uid`: connections of one uid at a time (root is not limited).
        public var maxPeersPerUID: Int
        /// `socket.max_durable_per_uid`: durable subscription names one uid may own (root is not
        /// limited).
        public var maxDurablePerUID: Int
        /// Connections of all peers together: by default the descriptor limit less
        /// ``descriptorReserve`` (``peerLimit(reserve:)``), so the upstream connection, the store
        /// and the hash command always find a descriptor.
        public var maxPeers: Int
        /// `request` ops of one connection waiting for the server's answer.
        public var maxPendingRequestsPerPeer: Int
        /// `socket.max_queue_bytes`: output queued for one peer (not yet taken by its socket) beyond
        /// which it gets no more live events and catches up from the journal instead.
        public var maxQueueBytes: Int
        /// `socket.max_total_queue_bytes`: the same bound for all peers together.
        public var maxTotalQueueBytes: Int
        /// Unanswered requests per connection before the server stops reading from it.
        public var maxInFlightPerConnection: Int
        /// How long a connection being dropped (line too long, journal unreadable) may take to take
        /// its last line before it is closed anyway.
        public var lingerMs: Int
        /// `socket.max_peer_memory_bytes`: what all local peers together may hold in the daemon —
        /// unfinished request lines and output not yet taken by their sockets (answers, events).
        /// One uid (not root, not the daemon's own) may hold a quarter of it; a connection that takes
        /// its uid (or everyone) beyond that is closed with `memory_limit`.
        public var maxPeerMemoryBytes: Int
        /// `socket.partial_line_timeout_s`, in ms: a request line left unfinished this long closes
        /// its connection with `line_timeout`.
        public var partialLineTimeoutMs: Int

        /// What one uid may hold: a quarter of ``maxPeerMemoryBytes``. Also the longest event line
        /// that can be delivered at all (the session refuses bigger engagements at the door).
        public var uidMemoryShare: Int { maxPeerMemoryBytes / 4 }

        public init(
            maxLineBytes: Int = 1_048_576, controlUIDs: [UInt32]? = nil, controlGIDs: [UInt32]? = nil,
            maxQueueBytes: Int = 256 << 10, maxTotalQueueBytes: Int = 16 << 20,
            maxInFlightPerConnection: Int = 256, lingerMs: Int = 2000,
            maxPeersPerUID: Int = 64, maxDurablePerUID: Int = 16, maxPeers: Int? = nil,
            maxPendingRequestsPerPeer: Int = 64, maxPeerMemoryBytes: Int = DaemonConfig.Socket.defaultMaxPeerMemoryBytes,
            partialLineTimeoutMs: Int = 30_000
        ) {
            self.maxLineBytes = max(1, maxLineBytes)
            self.controlUIDs = controlUIDs
            self.controlGIDs = controlGIDs
            self.maxPeersPerUID = max(1, maxPeersPerUID)
            self.maxDurablePerUID = max(1, maxDurablePerUID)
            self.maxPeers = max(1, maxPeers ?? SocketAPIServer.peerLimit())
            self.maxPendingRequestsPerPeer = max(1, maxPendingRequestsPerPeer)
            self.maxQueueBytes = max(1024, maxQueueBytes)
            self.maxTotalQueueBytes = max(1024, maxTotalQueueBytes)
            self.maxInFlightPerConnection = max(1, maxInFlightPerConnection)
            self.lingerMs = max(0, lingerMs)
            self.maxPeerMemoryBytes = max(4 << 20, maxPeerMemoryBytes)
            self.partialLineTimeoutMs = max(1, partialLineTimeoutMs)
        }

        /// The configuration's `socket` section.
        public init(_ socket: DaemonConfig.Socket) {
            self.init(maxLineBytes: socket.maxLineBytes, controlUIDs: socket.controlUIDs, controlGIDs: socket.controlGIDs,
                      maxQueueBytes: socket.maxQueueBytes, maxTotalQueueBytes: socket.maxTotalQueueBytes,
                      maxPeersPerUID: socket.maxPeersPerUID, maxDurablePerUID: socket.maxDurablePerUID,
                      maxPeerMemoryBytes: socket.maxPeerMemoryBytes, partialLineTimeoutMs: socket.partialLineTimeoutS * 1000)
        }
    }

    /// Descriptors kept out of the peers' reach: the upstream WebSocket (and its DNS, TLS and proxy
    /// sockets), the store's files, the hash command's pipes, the loops' own descriptors.
    public static let descriptorReserve = 64

    /// The connections all peers may hold: the soft `RLIMIT_NOFILE` less `reserve`, at least 8.
    public static func peerLimit(reserve: Int = descriptorReserve) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 - reserve }
        let soft = limit.rlim_cur == rlim_t.max ? 1 << 20 : Int(clamping: limit.rlim_cur)
        return max(8, soft - reserve)
    }

    /// Where to listen.
    public enum Endpoint: Sendable, Equatable {
        /// Create the socket file at `path` with `mode`, owned by group `group` when set (a name, or a
        /// numeric id as text; resolved with `getgrnam_r` off the loop).
        case path(String, mode: UInt32 = 0o660, group: String? = nil)
        /// A listening descriptor passed by systemd (``SystemdActivation``).
        case adopted(fd: Int32)
    }

    /// Queued output, as the server accounts it (tests, diagnostics).
    struct QueueStatistics: Sendable, Equatable {
        /// Bytes not yet taken by each connection's socket, by connection number.
        var queuedBytes: [UInt64: Int]
        /// The most each connection ever had queued right after an event line was queued for it.
        var peakQueuedBytes: [UInt64: Int]
        /// The most all connections together had queued right after an event line was queued.
        var peakTotalQueuedBytes: Int
    }

    public let loop: EventLoop
    public let configuration: Configuration
    private let store: SmarticoStore?

    private var listener: StreamListener?
    private var handler: (any SocketAPIHandler)?
    private var peers: [UInt64: Peer] = [:]
    /// Open connections by uid (not root's), for `maxPeersPerUID`.
    private var peersByUID: [UInt32: Int] = [:]
    /// The daemon's effective uid: it has the control role, as root has.
    private let ownUID = geteuid()
    private var nextPeerNumber: UInt64 = 1
    private var nextSubscriptionNumber: UInt64 = 1
    private var dirty: [Peer] = []
    private var flushScheduled = false
    /// The seq of the last journaled event published: a catching-up peer whose cursor reached it
    /// rejoins live delivery.
    private var lastPublishedSeq: JournalSeq = 0
    /// The store's journal id (the subscribe answer's `journal`); nil without a store.
    private var journalID: String?
    /// The last `session` and `props` events published: what a peer that missed some while catching
    /// up gets when it rejoins.
    private var lastSession: PreparedEvent?
    private var lastProps: PreparedEvent?
    private var peakTotalQueuedBytes = 0
    private var state: RunState = .idle
    private let subscribers = Atomic<Int>(0)
    private let connections = Atomic<Int>(0)

    private enum RunState { case idle, running, closed }

    /// A server that is not listening yet. `store` serves `since`, `durable`, `ack` and catch-up;
    /// without it `since` and `durable` answer `internal` and a peer whose queue was full misses
    /// what was published meanwhile (it gets a `gap`).
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

    /// The queued output of every connection. Any context.
    func queueStatistics() async throws -> QueueStatistics {
        try await loop.submit {
            QueueStatistics(queuedBytes: self.peers.mapValues { self.queuedBytes($0) },
                            peakQueuedBytes: self.peers.mapValues { $0.peakQueuedBytes },
                            peakTotalQueuedBytes: self.peakTotalQueuedBytes)
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
                self.journalID = journal
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
    /// (journal it first, publish those in seq order; one at or below the last published seq is
    /// ignored as a repeat); nil for a live-only event, which carries the seq of the last journaled
    /// event sent before it on each connection. `tsMs`: when the daemon received it.
    public func publish(_ event: DaemonEvent, seq: JournalSeq?, tsMs: Int64) {
        var data: [UInt8] = []
        event.data.serialize(into: &data)
        publish([PreparedEvent(name: event.name, seq: seq, tsMs: tsMs, data: data)])
    }

    /// ``publish(_:seq:tsMs:)`` for an event whose `data` is already serialized (the bytes that were
    /// journaled).
    public func publish(name: String, serializedData data: [UInt8], seq: JournalSeq?, tsMs: Int64) {
        publish([PreparedEvent(name: name, seq: seq, tsMs: tsMs, data: data)])
    }

    /// ``publish(name:serializedData:seq:tsMs:)`` for an event's data as the driver keeps it.
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
        if let seq = event.seq {
            guard seq > lastPublishedSeq else { return }
            lastPublishedSeq = seq
        } else if event.name == "session" {
            lastSession = event
        } else if event.name == "props" {
            lastProps = event
        }
        var total = totalQueuedBytes()
        // A journaled event's line is the same for every peer; a live-only one carries each
        // peer's own last seq.
        var journaledLine: [UInt8]? = nil
        for peer in peers.values {
            guard peer.isOpen, !peer.dropping, let subscription = peer.subscription,
                  subscription.accepts(event.name) else { continue }
            guard subscription.phase == .live else {
                subscription.missed(event.name)
                continue
            }
            let line: [UInt8]
            if let seq = event.seq {
                guard seq > subscription.lastSeqSent else { continue }  // sent by a catch-up page already
                line = journaledLine ?? Self.line(event, seq: seq)
                journaledLine = line
            } else {
                line = Self.line(event, seq: subscription.lastSeqSent)
            }
            if enqueue(line, to: peer, total: &total) {
                if let seq = event.seq { subscription.lastSeqSent = seq }
            } else {
                // Full: the journal has this event and what follows; the peer reads it from there.
                subscription.phase = .catchingUp
                subscription.missed(event.name)
            }
        }
    }

    /// One event line: `{"event":…,"seq":…,"ts":…,"data":…}\n`.
    private static func line(_ event: PreparedEvent, seq: JournalSeq) -> [UInt8] {
        var line: [UInt8] = []
        line.appendLiteral("{\"event\":")
        JSONValue.serializeString(event.name, into: &line)
        line.append(contentsOf: ",\"seq\":\(seq),\"ts\":\(event.tsMs),\"data\":".utf8)
        event.body.appendLine(to: &line)
        line.appendLiteral("}\n")
        return line
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
        let peer = Peer(connection: connection, info: info, maxLineBytes: configuration.maxLineBytes)
        peers[number] = peer
        if let uid = credentials?.uid, uid != 0 { peersByUID[uid, default: 0] += 1 }
        connections.add(1, ordering: .relaxed)
        // A safety net against a peer that sends requests without reading their answers (events
        // never come near it: they stop at `maxQueueBytes`, but for one line alone, see `enqueue`).
        connection.writeQueueLimit = baseWriteQueueLimit
        connection.onRead = { [unowned self, unowned peer] bytes in self.received(bytes, from: peer) }
        connection.onWritable = { [unowned self, unowned peer] in self.drained(peer) }
        connection.onClose = { [unowned self, unowned peer] _ in self.closed(peer) }
        connection.start()
    }

    /// Why a new connection of `uid` is refused, if it is: all peers hold ``Configuration/maxPeers``,
    /// or the uid (not root) holds ``Configuration/maxPeersPerUID``.
    private func connectionRefusal(uid: UInt32?) -> SocketAPIError? {
        if peers.count >= configuration.maxPeers {
            return SocketAPIError(.tooManyConnections, "the daemon serves at most \(configuration.maxPeers) local connections (its descriptor limit less \(Self.descriptorReserve) kept for the server connection and the store); close idle connections, or raise LimitNOFILE=")
        }
        guard let uid, uid != 0 else { return nil }
        let held = peersByUID[uid] ?? 0
        guard held >= configuration.maxPeersPerUID else { return nil }
        return SocketAPIError(.tooManyConnections, "uid \(uid) already holds \(held) connections, the most socket.max_peers_per_uid (\(configuration.maxPeersPerUID)) allows; close idle connections or raise socket.max_peers_per_uid")
    }

    /// The control role: root, the daemon's uid, `control_uids`, or `control_gids` matching the
    /// primary group or a supplementary one (`SO_PEERGROUPS`).
    private func hasControlRole(_ credentials: PeerCredentials, fd: Int32) -> Bool {
        if credentials.uid == 0 || credentials.uid == ownUID { return true }
        if configuration.controlUIDs?.contains(credentials.uid) == true { return true }
        guard let gids = configuration.controlGIDs, !gids.isEmpty else { return false }
        if gids.contains(credentials.gid) { return true }
        return Self.peerGroups(fd: fd).contains { gids.contains($0) }
    }

    /// The peer's supplementary groups as they were at connect (`SO_PEERGROUPS`, Linux ≥ 4.13);
    /// empty when they cannot be read.
    static func peerGroups(fd: Int32) -> [UInt32] {
        let soPeerGroups: Int32 = 59
        var groups = [gid_t](repeating: 0, count: 64)
        for _ in 0..<2 {
            var length = socklen_t(groups.count * MemoryLayout<gid_t>.size)
            let rc = groups.withUnsafeMutableBytes { getsockopt(fd, SOL_SOCKET, soPeerGroups, $0.baseAddress, &length) }
            if rc == 0 { return Array(groups.prefix(Int(length) / MemoryLayout<gid_t>.size)) }
            // ERANGE: `length` now says how much is needed.
            guard errno == ERANGE, Int(length) > groups.count * MemoryLayout<gid_t>.size else { return [] }
            groups = [gid_t](repeating: 0, count: Int(length) / MemoryLayout<gid_t>.size + 1)
        }
        return []
    }

    private func closed(_ peer: Peer) {
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
        let held = max(peer.peakQueuedBytes, peer.out.capacity + peer.connection.queuedByteCount)
        if held >= Self.releaseNoticeBytes { handler?.peerReleased(bytes: held) }
        peer.out = []
        if peers.removeValue(forKey: peer.info.connectionNumber) != nil {
            connections.subtract(1, ordering: .relaxed)
            if let uid = peer.info.uid, uid != 0, let held = peersByUID[uid] {
                peersByUID[uid] = held > 1 ? held - 1 : nil
            }
        }
    }

    /// A closing peer that held this much output is reported to the handler (``SocketAPIHandler/peerReleased(bytes:)``).
    static let releaseNoticeBytes = 64 << 10

    private func received(_ bytes: UnsafeRawBufferPointer, from peer: Peer) {
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

    // MARK: Memory

    /// A safety net on each connection's write queue (answers to a peer that does not read them);
    /// raised for one oversized event line at a time (``enqueue(_:to:total:)``).
    private var baseWriteQueueLimit: Int { configuration.maxQueueBytes + Self.responseSlackBytes + 4 * configuration.maxLineBytes }

    /// Below this a connection is not checked against the memory budget (a sum over the peers).
    static let memoryCheckBytes = 64 << 10

    /// What the peer holds in the daemon: its unfinished line, what it sent while paused, and its
    /// unsent output.
    private func heldBytes(_ peer: Peer) -> Int {
        peer.framer.bufferedByteCount + peer.backlog.count + queuedBytes(peer)
    }

    /// Root and the daemon's own uid are trusted, as with `socket.max_peers_per_uid`.
    private func isMemoryExempt(_ peer: Peer) -> Bool {
        guard let uid = peer.info.uid else { return false }
        return uid == 0 || uid == ownUID
    }

    /// Why the peer's uid (or all peers) hold too much if `extra` more bytes were added, or nil.
    private func memoryRefusal(_ peer: Peer, extra: Int = 0) -> String? {
        guard !isMemoryExempt(peer) else { return nil }
        var ofUID = 0, all = 0
        for other in peers.values where other.isOpen {
            let held = heldBytes(other)
            all += held
            if other.info.uid == peer.info.uid { ofUID += held }
        }
        let who = peer.info.uid.map { "uid \($0)" } ?? "a peer without credentials"
        if ofUID + extra > configuration.uidMemoryShare {
            return "\(who) holds \(ofUID + extra) bytes in unfinished lines and unread output, more than its share (\(configuration.uidMemoryShare), a quarter of socket.max_peer_memory_bytes)"
        }
        if all + extra > configuration.maxPeerMemoryBytes {
            return "the local peers hold \(all + extra) bytes in unfinished lines and unread output, more than socket.max_peer_memory_bytes (\(configuration.maxPeerMemoryBytes))"
        }
        return nil
    }

    /// Closes the peer when it holds enough to matter and its uid (or everyone) is over the budget.
    /// True when it was closed.
    private func checkMemory(_ peer: Peer) -> Bool {
        guard peer.isOpen, !peer.dropping, heldBytes(peer) >= Self.memoryCheckBytes,
              let why = memoryRefusal(peer) else { return false }
        handler?.peerRefused(peer.info, SocketAPIError(.memoryLimit, why + "; closing this connection"))
        // Its unfinished line goes now; its unread output with the connection.
        peer.framer = LineFramer(maxLineBytes: configuration.maxLineBytes)
        peer.partialSinceMs = nil
        if queuedBytes(peer) >= Self.memoryCheckBytes {
            // It does not read: what it was sent is dropped, and the error line would wait behind it.
            peer.out = []
            peer.connection.close()
        } else {
            respond(peer, id: nil, .failure(SocketAPIError(.memoryLimit, why + "; closing this connection")))
            drop(peer)
        }
        return true
    }

    private var partialLineTimer: LoopTimer?

    /// Arms the check of unfinished lines for the earliest one's deadline, if none is armed.
    private func schedulePartialLineCheck() {
        guard partialLineTimer == nil,
              let earliest = peers.values.compactMap({ $0.isOpen && !$0.dropping ? $0.partialSinceMs : nil }).min() else { return }
        let delay = max(0, earliest + Int64(configuration.partialLineTimeoutMs) - Self.monotonicMs())
        partialLineTimer = loop.scheduleTimer(after: .milliseconds(delay)) { [weak self] in
            guard let self else { return }
            self.partialLineTimer = nil
            self.closeStalledLines()
            self.schedulePartialLineCheck()
        }
    }

    /// Connections whose line stayed unfinished for `socket.partial_line_timeout_s` are closed.
    private func closeStalledLines() {
        let now = Self.monotonicMs()
        let timeout = Int64(configuration.partialLineTimeoutMs)
        for peer in peers.values where peer.isOpen && !peer.dropping {
            guard let since = peer.partialSinceMs, now - since >= timeout else { continue }
            let error = SocketAPIError(.lineTimeout, "a request line of \(peer.framer.bufferedByteCount) bytes was left unfinished for \(timeout / 1000) s (socket.partial_line_timeout_s); closing")
            handler?.peerRefused(peer.info, error)
            peer.framer = LineFramer(maxLineBytes: configuration.maxLineBytes)
            peer.partialSinceMs = nil
            respond(peer, id: nil, .failure(error))
            drop(peer)
        }
    }

    static func monotonicMs() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// Room for answers beyond a peer's event queue before it stops being read.
    static let responseSlackBytes = 64 << 10

    /// The connection's write queue is empty again.
    private func drained(_ peer: Peer) {
        if peer.raisedWriteLimit {
            peer.raisedWriteLimit = false
            peer.connection.writeQueueLimit = baseWriteQueueLimit
        }
        updateOutputPause(peer)
        catchUpIfRoom(peer)
    }

    /// A peer that sends requests but does not read the answers (more than its queue's bound and
    /// ``responseSlackBytes`` wait) is not read until it does: the answers are never dropped, so
    /// this is what bounds them. Event lines alone never fill the slack, so a subscriber whose
    /// queue is full of events is still read: its `ack`s are heard.
    private func updateOutputPause(_ peer: Peer) {
        guard peer.isOpen else { return }
        let full = queuedBytes(peer) > configuration.maxQueueBytes + Self.responseSlackBytes
        if full != peer.pausedForOutput {
            peer.pausedForOutput = full
            peer.updateReading()
        }
        feedBacklog(peer)
    }

    /// What a paused peer had sent beyond the line it was paused at, fed once it may go on (the
    /// socket is read again only after it).
    private func feedBacklog(_ peer: Peer) {
        guard peer.isOpen, !peer.dropping, !peer.backlog.isEmpty, !peer.pausedForOutput, !peer.pausedForRequests else { return }
        let pending = peer.backlog
        peer.backlog = []
        pending.withUnsafeBytes { received($0, from: peer) }
        peer.updateReading()
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
        if !request.isReadOnly && !peer.info.mayControl {
            respond(peer, id: parsed.id, .failure(Self.controlRefusal(request, peer.info)))
            return
        }
        let id = parsed.id
        switch request {
        case .subscribe(let options): subscribe(peer, id: id, options)
        case .unsubscribe:
            endSubscription(peer)
            respond(peer, id: id, .success(.object([:])))
        case .ack(let seq): ack(peer, id: id, seq: seq)
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

    /// The `not_permitted` answer to a control op from a peer of the read role.
    static func controlRefusal(_ request: SocketRequest, _ peer: SocketPeer) -> SocketAPIError {
        let op = request.op
        let how: String
        if let uid = peer.uid {
            let gid = peer.gid.map { " (gid \($0))" } ?? ""
            how = "this peer is uid \(uid)\(gid); to allow it, add uid \(uid) to socket.control_uids or one of its groups to socket.control_gids"
        } else {
            how = "this peer's credentials could not be read (SO_PEERCRED)"
        }
        var what = "op \"\(op.rawValue)\""
        if case .api(let r) = request { what = "call \"\(r.call)\" (it changes something)" }
        return SocketAPIError(.notPermitted, "\(what) needs the control role (root, the daemon's uid, socket.control_uids or socket.control_gids); \(how). Allowed without it: \(SocketOp.allCases.filter(\.isReadOnly).map(\.rawValue).joined(separator: ", ")), and api calls of the read role")
    }

    /// A `request` or `api` op: it waits for the server, so one connection may have only so many.
    private func dispatchPendingRequest(_ call: SocketAPICall, peer: Peer, id: JSONValue?) {
        guard peer.pendingRequests < configuration.maxPendingRequestsPerPeer else {
            respond(peer, id: id, .failure(SocketAPIError(.queueFull, "this connection already has \(peer.pendingRequests) request or api ops waiting for the server's answer, the most one connection may (\(configuration.maxPendingRequestsPerPeer)); wait for answers, or open another connection")))
            return
        }
        dispatch(call, peer: peer, id: id, pendingRequest: true)
    }

    private func dispatch(_ call: SocketAPICall, peer: Peer, id: JSONValue?, pendingRequest: Bool = false) {
        guard let handler else {
            respond(peer, id: id, .failure(SocketAPIError(.notReady, "the daemon is shutting down")))
            return
        }
        peer.inFlight += 1
        if pendingRequest { peer.pendingRequests += 1 }
        if let uid = rationedUID(peer) { inFlightByUID[uid, default: 0] += 1 }
        updateRequestPause(peer)
        let number = peer.info.connectionNumber
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

    /// Calls of all the connections of one uid (not root, not the daemon's) being answered at once:
    /// beyond it, its connections are not read until some are answered. Each call's answer may
    /// wait unread in memory, and 64 connections × 256 calls each made the daemon work through
    /// tens of thousands of them while everyone else waited.
    static let maxInFlightPerUID = 256

    private var inFlightByUID: [UInt32: Int] = [:]

    /// The uid whose calls are rationed, or nil (root, the daemon's own uid, no credentials).
    private func rationedUID(_ peer: Peer) -> UInt32? {
        guard let uid = peer.info.uid, !isMemoryExempt(peer) else { return nil }
        return uid
    }

    private func updateRequestPause(_ peer: Peer) {
        let uidFull = rationedUID(peer).map { (inFlightByUID[$0] ?? 0) >= Self.maxInFlightPerUID } ?? false
        peer.pausedForRequests = peer.inFlight >= configuration.maxInFlightPerConnection || uidFull
        peer.updateReading()
        feedBacklog(peer)
    }

    private func requestsOfUIDAnswered(_ uid: UInt32, _ count: Int) {
        let before = inFlightByUID[uid] ?? 0
        let held = max(0, before - count)
        inFlightByUID[uid] = held > 0 ? held : nil
        // Back under the bound: the uid's connections paused for it are read again.
        if before >= Self.maxInFlightPerUID && held < Self.maxInFlightPerUID {
            for other in peers.values where other.isOpen && other.pausedForRequests && other.info.uid == uid {
                updateRequestPause(other)
            }
        }
    }

    /// Queues one response line (sent at the end of this loop iteration, in order with events). A
    /// response counts against the peer's queue but is never held back.
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
        append(line, to: peer)
    }

    // MARK: Subscriptions

    private func subscribe(_ peer: Peer, id: JSONValue?, _ options: SubscribeRequest) {
        guard peer.subscription == nil else {
            respond(peer, id: id, .failure(.badRequest("this connection is already subscribed; send unsubscribe first to change types, since or durable")))
            return
        }
        let lastSeq = lastPublishedSeq
        let subscription = Subscription(number: nextSubscriptionNumber, types: options.types,
                                        durable: options.durable, after: lastSeq)
        nextSubscriptionNumber += 1
        let answer: JSONObject =
            if let journalID { ["last_seq": .number(lastSeq), "journal": .string(journalID)] } else { ["last_seq": .number(lastSeq)] }
        if options.since == nil && options.durable == nil {
            peer.subscription = subscription
            subscribers.add(1, ordering: .relaxed)
            respond(peer, id: id, .success(.object(answer)))
            return
        }
        guard let store else {
            respond(peer, id: id, .failure(SocketAPIError(.internal, "this server has no journal: since and durable are unavailable")))
            return
        }
        // A replay is a catch-up from its start point.
        subscription.phase = .catchingUp
        peer.subscription = subscription
        subscribers.add(1, ordering: .relaxed)
        // A position in another journal (a store that was replaced after damage, docs/store.md):
        // the peer names the journal its `since` came from and it is not this one, or, for a peer
        // that does not name it, a `since` beyond the last seq. All of this journal's events are new
        // to the peer, so the replay starts at its beginning, after a `gap` saying why.
        let otherJournal = options.journal.flatMap { $0 != journalID ? $0 : nil }
        let sinceBeyond = options.since.flatMap { $0 > lastSeq ? $0 : nil }
        let restart: JSONObject? =
            if let otherJournal {
                ["reason": "journal_replaced", "since": options.since.map { .number($0) } ?? .null,
                 "journal": .string(otherJournal), "last_seq": .number(lastSeq)]
            } else if let sinceBeyond {
                ["reason": "since_beyond_last_seq", "since": .number(sinceBeyond), "last_seq": .number(lastSeq)]
            } else {
                nil
            }
        let since = restart == nil ? options.since : 0
        guard let durable = options.durable else {
            subscription.lastSeqSent = since ?? lastSeq
            respond(peer, id: id, .success(.object(answer)))
            if let restart { notify(peer, "gap", .object(restart)) }
            catchUpIfRoom(peer)
            return
        }
        // The durable name's cursor first (`reading` until then: no page is read before it).
        subscription.reading = true
        let number = peer.info.connectionNumber
        let subscriptionNumber = subscription.number
        guard let uid = peer.info.uid else {
            endSubscription(peer)
            respond(peer, id: id, .failure(Self.noCredentials("durable")))
            return
        }
        let maxPerOwner = configuration.maxDurablePerUID
        Task(executorPreference: loop) {  // never the global executor (docs/transport.md)
            let start: Result<JournalSeq, SocketAPIError>
            do {
                // A new name starts at `since`, or now, and is stored at once (owned by this uid) so
                // a reconnect before the first ack resumes from here.
                start = .success(try await store.claimCursor(durable, uid: uid, start: since ?? lastSeq, maxPerOwner: maxPerOwner))
            } catch {
                start = .failure(Self.storeFailure(error, field: "durable"))
            }
            _ = self.loop.execute {
                guard case let (peer, subscription)? = self.subscription(number, subscriptionNumber) else {
                    // Unsubscribed before the name's cursor came: the subscribe is still answered
                    // (every request gets exactly one answer), after the unsubscribe's.
                    if let peer = self.peers[number], peer.isOpen {
                        self.respond(peer, id: id, start.map { _ in JSONValue.object(answer) })
                    }
                    return
                }
                subscription.reading = false
                switch start {
                case .failure(let error):
                    self.endSubscription(peer)
                    self.respond(peer, id: id, .failure(error))
                case .success(let from):
                    subscription.lastSeqSent = from
                    self.respond(peer, id: id, .success(.object(answer)))
                    if let restart, from == 0 { self.notify(peer, "gap", .object(restart)) }
                    self.catchUpIfRoom(peer)
                }
            }
        }
    }

    /// The peer `number` and its subscription, if it is still subscription `subscriptionNumber`
    /// (what a store read checks when it comes back to the loop).
    private func subscription(_ number: UInt64, _ subscriptionNumber: UInt64) -> (Peer, Subscription)? {
        guard let peer = peers[number], peer.isOpen, !peer.dropping, let subscription = peer.subscription,
              subscription.number == subscriptionNumber else { return nil }
        return (peer, subscription)
    }

    private func endSubscription(_ peer: Peer) {
        guard peer.subscription != nil else { return }
        peer.subscription = nil
        subscribers.subtract(1, ordering: .relaxed)
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
        guard let uid = peer.info.uid else {
            respond(peer, id: id, .failure(Self.noCredentials("ack")))
            return
        }
        let number = peer.info.connectionNumber
        let maxPerOwner = configuration.maxDurablePerUID
        Task(executorPreference: loop) {
            let result: Result<JSONValue, SocketAPIError>
            do {
                let cursor = try await store.setCursor(name, seq, uid: uid, maxPerOwner: maxPerOwner)
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

    /// `forget`: deletes a durable name of this peer's uid (any name for root).
    private func forget(_ peer: Peer, id: JSONValue?, name: String) {
        guard let store else {
            respond(peer, id: id, .failure(SocketAPIError(.internal, "this server has no journal")))
            return
        }
        guard let uid = peer.info.uid else {
            respond(peer, id: id, .failure(Self.noCredentials("forget")))
            return
        }
        let number = peer.info.connectionNumber
        Task(executorPreference: loop) {
            let result: Result<JSONValue, SocketAPIError>
            do {
                if try await store.removeCursor(name, uid: uid) {
                    result = .success(.object([:]))
                } else {
                    result = .failure(.badRequest("field \"durable\": there is no durable subscription named \"\(name)\" (already forgotten, or never acknowledged)"))
                }
            } catch {
                result = .failure(Self.storeFailure(error, field: "durable"))
            }
            _ = self.loop.execute {
                guard let peer = self.peers[number] else { return }
                self.respond(peer, id: id, result)
            }
        }
    }

    private static func noCredentials(_ what: String) -> SocketAPIError {
        SocketAPIError(.notPermitted, "\(what): durable names belong to a uid, and this peer's credentials could not be read (SO_PEERCRED)")
    }

    private static func storeFailure(_ error: any Error, field: String) -> SocketAPIError {
        if let error = error as? StoreError {
            switch error {
            case .cursorBeyondLastSeq(let name, let seq, let last):
                return .badRequest("field \"\(field)\": \(seq) is beyond the last seq \(last) (durable \"\(name)\")")
            case .tooManyCursors(let name, let max):
                return .badRequest("field \"durable\": \"\(name)\" would be one name more than the \(max) kept; reuse a name, or delete unused ones with the forget op")
            case .cursorOwned:
                return SocketAPIError(.notPermitted, "field \"durable\": \(error)")
            case .tooManyCursorsForOwner:
                return SocketAPIError(.queueFull, "field \"durable\": \(error)")
            case .invalidArgument(let detail):
                return .badRequest("field \"\(field)\": \(detail)")
            default:
                return SocketAPIError(.internal, "journal: \(error)")
            }
        }
        return SocketAPIError(.internal, "journal: \(error)")
    }

    // MARK: Catch-up

    /// Events per page read from the journal: about 8 KiB of queue per event, so a page of
    /// ordinary events fits in the half of the queue that is free when it is read.
    private var pageSize: Int { min(256, max(1, configuration.maxQueueBytes / 8192)) }

    /// A catching-up peer's queue is refilled once it holds less than this.
    private var lowWater: Int { configuration.maxQueueBytes / 2 }

    /// What one catch-up round read: the journal's bounds, then a page of events after the cursor.
    private typealias Page = (bounds: JournalBounds, events: [JournalEvent])

    /// Reads the next page for a catching-up peer whose queue has room (one read at a time). Called
    /// whenever its queue may have gone down: after a flush, when its socket drained, after a page.
    private func catchUpIfRoom(_ peer: Peer) {
        guard peer.isOpen, !peer.dropping, let subscription = peer.subscription,
              subscription.phase == .catchingUp, !subscription.reading,
              queuedBytes(peer) < lowWater else { return }
        subscription.reading = true
        let after = subscription.lastSeqSent
        let limit = pageSize
        let types = subscription.types
        // Everything published up to here was journaled before this read starts.
        let published = lastPublishedSeq
        let number = peer.info.connectionNumber
        let subscriptionNumber = subscription.number
        let store = self.store
        Task(executorPreference: loop) {
            let page: Result<Page, StoreError>
            if let store {
                do throws(StoreError) {
                    let bounds = try await store.journalBounds()
                    page = .success((bounds, try await store.events(after: after, limit: limit, types: types)))
                } catch {
                    page = .failure(error)
                }
            } else {
                // No journal: what was published meanwhile is gone.
                page = .success((JournalBounds(firstSeq: nil, lastSeq: published), []))
            }
            _ = self.loop.execute {
                guard case let (peer, subscription)? = self.subscription(number, subscriptionNumber) else { return }
                subscription.reading = false
                self.caughtUp(page, limit: limit, published: published, peer: peer, subscription: subscription)
            }
        }
    }

    /// Queues what fits of a page, moves the cursor past it, and rejoins live delivery once the
    /// cursor reached the last event published.
    private func caughtUp(
        _ page: Result<Page, StoreError>, limit: Int, published: JournalSeq, peer: Peer, subscription: Subscription
    ) {
        let read: Page
        switch page {
        case .success(let p): read = p
        case .failure(let error):
            // Tell the peer and drop it: going on with a gap would break the contract.
            notify(peer, "error", ["code": "journal_read_failed", "message": .string("reading the journal failed: \(error)")])
            drop(peer)
            return
        }
        // Behind retention: one `gap`, then on from the oldest event kept.
        let firstAvailable = read.bounds.firstSeq ?? (read.bounds.lastSeq + 1)
        if firstAvailable > subscription.lastSeqSent + 1 {
            notify(peer, "gap", ["first_available_seq": .number(firstAvailable),
                                 "missed": .number(firstAvailable - 1 - subscription.lastSeqSent)])
            subscription.lastSeqSent = firstAvailable - 1
        }
        var total = totalQueuedBytes()
        var whole = true
        for event in read.events where event.seq > subscription.lastSeqSent {
            // An engagement was journaled without its `bridge`: put it back, as on the live line.
            let data = EngagementJournal.lineData(name: event.name, journaled: event.data)
            let line = Self.line(PreparedEvent(name: event.name, seq: event.seq, tsMs: event.tsMs, data: data), seq: event.seq)
            guard enqueue(line, to: peer, total: &total) else {
                // The rest is read again once the queue drained (its flush or drain comes back here).
                whole = false
                break
            }
            subscription.lastSeqSent = event.seq
        }
        // A short page holds every wanted event up to `published` (journaled before the read).
        if whole && read.events.count < limit {
            subscription.lastSeqSent = max(subscription.lastSeqSent, published)
        }
        if subscription.lastSeqSent >= lastPublishedSeq {
            rejoin(peer, subscription)
        } else if whole {
            catchUpIfRoom(peer)
        }
    }

    /// Back to live delivery: the `session` and `props` state first, if the peer missed any.
    private func rejoin(_ peer: Peer, _ subscription: Subscription) {
        subscription.phase = .live
        if subscription.missedSession, let lastSession {
            append(Self.line(lastSession, seq: subscription.lastSeqSent), to: peer)
        }
        if subscription.missedProps, let lastProps {
            append(Self.line(lastProps, seq: subscription.lastSeqSent), to: peer)
        }
        subscription.missedSession = false
        subscription.missedProps = false
    }

    /// Queues a live-only notice for this peer alone (`gap`, `error`).
    private func notify(_ peer: Peer, _ name: String, _ data: JSONValue) {
        var bytes: [UInt8] = []
        data.serialize(into: &bytes)
        let seq = peer.subscription?.lastSeqSent ?? lastPublishedSeq
        append(Self.line(PreparedEvent(name: name, seq: nil, tsMs: Self.nowMs(), data: bytes), seq: seq), to: peer)
    }

    // MARK: Queues and writing

    /// Bytes queued for the peer and not yet taken by its socket.
    private func queuedBytes(_ peer: Peer) -> Int {
        peer.out.count + (peer.isOpen ? peer.connection.queuedByteCount : 0)
    }

    /// Bytes queued for all peers.
    private func totalQueuedBytes() -> Int {
        peers.values.reduce(0) { $0 + queuedBytes($1) }
    }

    /// Queues an event line if it fits the peer's bound and the total (`total`: all peers' queued
    /// bytes, kept up to date by the caller across a loop). An empty queue always takes one line,
    /// so a peer that reads always moves on, whatever the others do.
    private func enqueue(_ line: [UInt8], to peer: Peer, total: inout Int) -> Bool {
        let queued = queuedBytes(peer)
        let fits = queued + line.count <= configuration.maxQueueBytes && total + line.count <= configuration.maxTotalQueueBytes
        guard queued == 0 || fits else { return false }
        if !fits {
            // One line alone beyond the queue's bounds (a big engagement): taken only within the
            // uid's share of the memory budget (its other peers wait for it in the journal), and
            // the connection's safety net is raised for it until its queue drains.
            if memoryRefusal(peer, extra: line.count) != nil {
                retryCatchUpSoon(peer)
                return false
            }
            peer.connection.writeQueueLimit = max(baseWriteQueueLimit, line.count + baseWriteQueueLimit)
            peer.raisedWriteLimit = true
        }
        append(line, to: peer)
        total += line.count
        peer.peakQueuedBytes = max(peer.peakQueuedBytes, queued + line.count)
        peakTotalQueuedBytes = max(peakTotalQueuedBytes, total)
        return true
    }

    /// A big line waits for room in the memory budget, which other peers free: look again soon
    /// (nothing else wakes a peer whose own queue is empty).
    private func retryCatchUpSoon(_ peer: Peer) {
        guard !peer.retryScheduled else { return }
        peer.retryScheduled = true
        let number = peer.info.connectionNumber
        _ = loop.scheduleTimer(after: .milliseconds(250)) { [weak self] in
            guard let self, let peer = self.peers[number] else { return }
            peer.retryScheduled = false
            self.catchUpIfRoom(peer)
        }
    }

    /// Queues a line whatever the bound (responses, `gap`, the state sent on rejoining).
    private func append(_ line: [UInt8], to peer: Peer) {
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

    private func flush(_ peer: Peer) {
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
    private func drop(_ peer: Peer) {
        guard peer.isOpen, !peer.dropping else { return }
        peer.dropping = true
        endSubscription(peer)
        flush(peer)
        guard peer.isOpen else { return }
        peer.connection.shutdownOutput()
        peer.connection.resumeReading()
        guard peer.isOpen else { return }
        let number = peer.info.connectionNumber
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

// MARK: Per-connection state (loop thread only)

/// An event ready to be written: the name, its journal seq (nil: live only), its time and its
/// `data`.
struct PreparedEvent: Sendable {
    let name: String
    let seq: JournalSeq?
    let tsMs: Int64
    /// The line's `data`: bytes, or an engagement's pieces (its line gets the `bridge`).
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

/// One connection's subscription: a cursor over the journal.
private final class Subscription {
    enum Phase { case live, catchingUp }

    /// Tells a subscription from the one before it on the same connection (a store read that comes
    /// back checks it).
    let number: UInt64
    let types: Set<String>?
    let durable: String?
    var phase: Phase = .live
    /// The cursor: every wanted journaled event up to here was sent (or is gone, after a `gap`).
    /// Live-only events carry it as their `seq`.
    var lastSeqSent: JournalSeq
    /// A store read for this subscription is in flight.
    var reading = false
    /// A `session` or `props` event was published while catching up.
    var missedSession = false
    var missedProps = false

    init(number: UInt64, types: Set<String>?, durable: String?, after: JournalSeq) {
        self.number = number
        self.types = types
        self.durable = durable
        self.lastSeqSent = after
    }

    func accepts(_ name: String) -> Bool {
        types?.contains(name) ?? true
    }

    /// Notes a live-only event this peer did not get.
    func missed(_ name: String) {
        if name == "session" { missedSession = true }
        if name == "props" { missedProps = true }
    }
}

private final class Peer {
    let connection: StreamConnection
    let info: SocketPeer
    var framer: LineFramer
    var isOpen = true
    var dropping = false
    var subscription: Subscription?
    /// Lines built this loop iteration, written by `flush`.
    var out: [UInt8] = []
    var isDirty = false
    var inFlight = 0
    /// `request` ops handed to the handler and not answered yet.
    var pendingRequests = 0
    var pausedForOutput = false
    var pausedForRequests = false
    var lingerTimer: LoopTimer?
    /// The most this peer had queued right after an event line was queued (``SocketAPIServer/QueueStatistics``).
    var peakQueuedBytes = 0
    /// Since when (monotonic ms) its framer holds an unfinished line.
    var partialSinceMs: Int64?
    /// Its write queue's limit was raised for one oversized event line.
    var raisedWriteLimit = false
    /// A look for room for a big line is scheduled.
    var retryScheduled = false
    /// Bytes read after the line at which it was paused for its calls; fed before it is read again.
    var backlog: [UInt8] = []

    init(connection: StreamConnection, info: SocketPeer, maxLineBytes: Int) {
        self.connection = connection
        self.info = info
        self.framer = LineFramer(maxLineBytes: maxLineBytes)
    }

    func updateReading() {
        guard isOpen, !dropping else { return }
        if pausedForOutput || pausedForRequests || !backlog.isEmpty {
            connection.pauseReading()
        } else {
            connection.resumeReading()
        }
    }
}
