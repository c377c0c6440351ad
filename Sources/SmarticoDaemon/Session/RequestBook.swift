import SmarticoProtocol

/// A `request` op waiting for the server's answer.
struct PendingRequest {
    var id: SessionRequestID
    /// The user it was made for (nil: anonymous); it goes only on a session speaking as them.
    var user: String?
    var message: OutgoingMessage
    var expectCid: Int64
    var deadlineMs: Int64
    /// The connection it was written on (nil: not written on the current one).
    var sentOn: ConnectionID?
    /// Who asked (its share of the pool, docs/security.md).
    var owner: RequestOwner = .daemon
    /// Nobody waits for the answer any more (its peer left, or it timed out after it was
    /// written): the answer is dropped when it comes, never published or journaled.
    var abandoned = false

    /// Kept only to recognise its answer until `until`: its bytes go.
    mutating func abandon(until: Int64) {
        abandoned = true
        deadlineMs = min(deadlineMs, until)
        message.bytes = []
    }
}

/// Every op that waits, with its deadline: `request`s waiting for the server's answer (and the
/// abandoned ones whose late answer is still recognised), `identify`s for cid 6, `logout`s for
/// cid 12, messages for the store. What to answer is handed back to the machine, which replies.
struct RequestBook {
    var pending: [PendingRequest] = []
    /// How the pool of ``pending`` is shared between the roles and uids.
    var shares: RequestShares
    var identifyWaiters: [(id: SessionRequestID, deadlineMs: Int64)] = []
    var logoutWaiters: [SessionRequestID] = []
    /// Messages given to the store, by uuid, and the op that waits for them to be stored (nil: nobody).
    var storing: [String: (id: SessionRequestID?, entry: OutboxEntry)] = [:]

    /// Requests waiting for the server whose answer somebody waits for (``PendingRequest/abandoned`` not).
    var live: Int { pending.reduce(0) { $0 + ($1.abandoned ? 0 : 1) } }

    /// The earliest deadline of a `request` or an `identify`.
    var nextDeadline: Int64? { (pending.map(\.deadlineMs) + identifyWaiters.map(\.deadlineMs)).min() }

    /// A message with this uuid waits to be stored or answered.
    func isWaiting(uuid: String) -> Bool { storing[uuid] != nil || pending.contains { $0.message.uuid == uuid } }

    /// At most as many abandoned requests as the pool holds live ones are remembered: the oldest
    /// go first (an answer that comes for one then is published, as before this rule).
    mutating func trimAbandoned() {
        var excess = pending.reduce(0) { $0 + ($1.abandoned ? 1 : 0) } - shares.pool
        guard excess > 0 else { return }
        pending.removeAll { p in
            guard p.abandoned, excess > 0 else { return false }
            excess -= 1
            return true
        }
    }

    /// Why a new request of `owner` is refused now, or nil (its share admits it).
    mutating func admit(_ owner: RequestOwner, now: Int64) -> String? {
        var live = 0, ofUID = 0, ofReadRole = 0
        for p in pending where !p.abandoned {
            live += 1
            if !owner.control, !p.owner.control {
                ofReadRole += 1
                if p.owner.uid == owner.uid { ofUID += 1 }
            }
        }
        return shares.admit(owner, waiting: live, waitingOfUID: ofUID, waitingOfReadRole: ofReadRole, now: now)
    }

    mutating func takeIdentifyWaiters() -> [SessionRequestID] {
        defer { identifyWaiters = [] }
        return identifyWaiters.map(\.id)
    }

    /// Everybody who waits for the server, in the order to answer them; the book forgets them.
    mutating func takeAll() -> [SessionRequestID] {
        defer { pending = []; logoutWaiters = [] }
        return pending.filter { !$0.abandoned }.map(\.id) + takeIdentifyWaiters() + logoutWaiters
    }

    /// The connection is gone: what nobody waits for is not written again, the rest is written
    /// again on the next one.
    mutating func connectionGone() {
        pending.removeAll { $0.abandoned }
        for k in pending.indices { pending[k].sentOn = nil }
    }

    /// The peers of these ops went away (``SessionMachine/abandon(_:now:)``).
    mutating func abandon(_ gone: Set<SessionRequestID>, now: Int64) {
        pending.removeAll { gone.contains($0.id) && $0.sentOn == nil }
        for k in pending.indices where gone.contains(pending[k].id) {
            pending[k].abandon(until: now + SessionMachine.lateAnswerGraceMs)
        }
        trimAbandoned()
        identifyWaiters.removeAll { gone.contains($0.id) }
        logoutWaiters.removeAll { gone.contains($0) }
        for (uuid, w) in storing where w.id.map(gone.contains) == true { storing[uuid]?.id = nil }
    }

    /// Takes the live requests `select` picks, to be answered. A written one stays, abandoned until
    /// `until(p)`: its answer may still come on this connection, and is then dropped, not published.
    mutating func take(_ select: (PendingRequest) -> Bool, keepingWrittenUntil until: (PendingRequest) -> Int64) -> [PendingRequest] {
        var taken: [PendingRequest] = []
        pending = pending.compactMap { p in
            guard !p.abandoned, select(p) else { return p }
            taken.append(p)
            guard p.sentOn != nil else { return nil }
            var kept = p
            kept.abandon(until: .max)
            kept.deadlineMs = until(p)
            return kept
        }
        trimAbandoned()
        return taken
    }

    /// Takes the requests and identifies whose deadline has come, to be answered. An expired
    /// request that was written is recognised for ``SessionMachine/lateAnswerGraceMs`` more; an
    /// abandoned one is forgotten: a server that never answers must not hold the pool for ever.
    mutating func expire(now: Int64) -> (requests: [PendingRequest], identifies: [SessionRequestID]) {
        pending.removeAll { $0.abandoned && $0.deadlineMs <= now }
        let expired = take({ $0.deadlineMs <= now }, keepingWrittenUntil: { _ in now + SessionMachine.lateAnswerGraceMs })
        let identifies = identifyWaiters.filter { $0.deadlineMs <= now }.map(\.id)
        identifyWaiters.removeAll { $0.deadlineMs <= now }
        return (expired, identifies)
    }

    /// Takes the request `msg` answers among those written on `conn`: by uuid first, else the
    /// oldest one waiting for this cid.
    mutating func takeAnswered(by msg: ServerMessage, on conn: ConnectionID) -> PendingRequest? {
        var index: Int?
        if let u = msg.uuid { index = pending.firstIndex { $0.sentOn == conn && $0.message.uuid == u } }
        if index == nil { index = pending.firstIndex { $0.sentOn == conn && $0.expectCid == msg.cid.rawValue } }
        return index.map { pending.remove(at: $0) }
    }
}
