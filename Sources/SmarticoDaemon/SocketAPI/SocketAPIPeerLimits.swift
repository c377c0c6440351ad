#if canImport(Glibc)
import Glibc
#endif
import Transport

// The server's protections against misbehaving local peers (docs/security.md): who may connect and
// act, the peers' memory budget, unfinished lines, answers a peer does not read, and the calls one
// uid may have answered at once. Loop thread only, as the rest of the server.
extension SocketAPIServer {
    // MARK: Connecting

    /// Why a new connection of `uid` is refused, if it is: all peers hold ``Configuration/maxPeers``,
    /// or the uid (not root) holds ``Configuration/maxPeersPerUID``.
    func connectionRefusal(uid: UInt32?) -> SocketAPIError? {
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
    func hasControlRole(_ credentials: PeerCredentials, fd: Int32) -> Bool {
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

    // MARK: Memory

    /// A safety net on each connection's write queue (answers to a peer that does not read them);
    /// raised for one oversized event line at a time (``SubscriptionBook/Decision/sendOversized(_:_:)``).
    var baseWriteQueueLimit: Int { configuration.maxQueueBytes + Self.responseSlackBytes + 4 * configuration.maxLineBytes }

    /// Below this a connection is not checked against the memory budget (a sum over the peers).
    static let memoryCheckBytes = 64 << 10

    /// Root and the daemon's own uid are trusted, as with `socket.max_peers_per_uid`.
    func isMemoryExempt(_ peer: SocketAPIPeerConnection) -> Bool {
        guard let uid = peer.info.uid else { return false }
        return uid == 0 || uid == ownUID
    }

    /// Why the peer's uid (or all peers) hold too much if `extra` more bytes were added (and
    /// `pending`, bytes by connection about to be queued), or nil.
    func memoryRefusal(_ peer: SocketAPIPeerConnection, extra: Int = 0, pending: [UInt64: Int] = [:]) -> String? {
        guard !isMemoryExempt(peer) else { return nil }
        var ofUID = 0, all = 0
        for other in peers.values where other.isOpen {
            let held = other.heldBytes + (pending[other.number] ?? 0)
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
    func checkMemory(_ peer: SocketAPIPeerConnection) -> Bool {
        guard peer.isOpen, !peer.dropping, peer.heldBytes >= Self.memoryCheckBytes,
              let why = memoryRefusal(peer) else { return false }
        handler?.peerRefused(peer.info, SocketAPIError(.memoryLimit, why + "; closing this connection"))
        // Its unfinished line goes now; its unread output with the connection.
        peer.framer = LineFramer(maxLineBytes: configuration.maxLineBytes)
        peer.partialSinceMs = nil
        if peer.queuedBytes >= Self.memoryCheckBytes {
            // It does not read: what it was sent is dropped, and the error line would wait behind it.
            peer.out = []
            peer.connection.close()
        } else {
            respond(peer, id: nil, .failure(SocketAPIError(.memoryLimit, why + "; closing this connection")))
            drop(peer)
        }
        return true
    }

    // MARK: Unfinished lines

    /// Arms the check of unfinished lines for the earliest one's deadline, if none is armed.
    func schedulePartialLineCheck() {
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
    func closeStalledLines() {
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

    // MARK: Answers not read, calls rationed

    /// Room for answers beyond a peer's event queue before it stops being read.
    static let responseSlackBytes = 64 << 10

    /// A peer that sends requests but does not read the answers (more than its queue's bound and
    /// ``responseSlackBytes`` wait) is not read until it does: the answers are never dropped, so
    /// this is what bounds them. Event lines alone never fill the slack, so a subscriber whose
    /// queue is full of events is still read: its `ack`s are heard.
    func updateOutputPause(_ peer: SocketAPIPeerConnection) {
        guard peer.isOpen else { return }
        let full = peer.queuedBytes > configuration.maxQueueBytes + Self.responseSlackBytes
        if full != peer.pausedForOutput {
            peer.pausedForOutput = full
            peer.updateReading()
        }
        feedBacklog(peer)
    }

    /// What a paused peer had sent beyond the line it was paused at, fed once it may go on (the
    /// socket is read again only after it).
    func feedBacklog(_ peer: SocketAPIPeerConnection) {
        guard peer.isOpen, !peer.dropping, !peer.backlog.isEmpty, !peer.pausedForOutput, !peer.pausedForRequests else { return }
        let pending = peer.backlog
        peer.backlog = []
        pending.withUnsafeBytes { received($0, from: peer) }
        peer.updateReading()
    }

    /// Calls of all the connections of one uid (not root, not the daemon's) being answered at once:
    /// beyond it, its connections are not read until some are answered. Each call's answer may
    /// wait unread in memory, and 64 connections × 256 calls each made the daemon work through
    /// tens of thousands of them while everyone else waited.
    static let maxInFlightPerUID = 256

    /// The uid whose calls are rationed, or nil (root, the daemon's own uid, no credentials).
    func rationedUID(_ peer: SocketAPIPeerConnection) -> UInt32? {
        guard let uid = peer.info.uid, !isMemoryExempt(peer) else { return nil }
        return uid
    }

    func updateRequestPause(_ peer: SocketAPIPeerConnection) {
        let uidFull = rationedUID(peer).map { (inFlightByUID[$0] ?? 0) >= Self.maxInFlightPerUID } ?? false
        peer.pausedForRequests = peer.inFlight >= configuration.maxInFlightPerConnection || uidFull
        peer.updateReading()
        feedBacklog(peer)
    }

    func requestsOfUIDAnswered(_ uid: UInt32, _ count: Int) {
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
}
