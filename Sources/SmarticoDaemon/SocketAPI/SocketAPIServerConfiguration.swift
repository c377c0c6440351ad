#if canImport(Glibc)
import Glibc
#endif
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

extension SocketAPIServer {
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
}
