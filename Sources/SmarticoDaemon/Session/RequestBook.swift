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

/// A message given to the store, and the op that waits for it to be stored (nil: nobody).
struct StoreWaiter {
    var id: SessionRequestID?
    var entry: OutboxEntry
}

/// Every op that waits for something, with its deadline: `request`s waiting for the server's
/// answer (and the abandoned ones whose late answer is still recognised), `identify`s waiting
/// for cid 6, `logout`s waiting for cid 12, messages waiting for the store. Sans I/O: what to
/// answer is handed back to the machine, which replies.
struct RequestBook {
    var pending: [PendingRequest] = []
    /// How the pool of ``pending`` is shared between the roles and uids.
    var shares: RequestShares
    var identifyWaiters: [(id: SessionRequestID, deadlineMs: Int64)] = []
    var logoutWaiters: [SessionRequestID] = []
    /// By uuid.
    var storing: [String: StoreWaiter] = [:]

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

    mutating func takeLogoutWaiters() -> [SessionRequestID] {
        defer { logoutWaiters = [] }
        return logoutWaiters
    }

    /// Everybody who waits for the server, in the order to answer them; the book forgets them.
    mutating func takeAll() -> [SessionRequestID] {
        defer { pending = [] }
        return pending.filter { !$0.abandoned }.map(\.id) + takeIdentifyWaiters() + takeLogoutWaiters()
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

    /// Takes the live requests made for another user than `ext`, to be answered `not_ready`. Those
    /// written stay, abandoned: their answer may still come on this connection, and is dropped
    /// (until the request's own deadline).
    mutating func takeRequests(notFor ext: String?) -> [PendingRequest] {
        var kept: [PendingRequest] = [], taken: [PendingRequest] = []
        for var p in pending {
            if p.user == ext || p.abandoned {
                kept.append(p)
                continue
            }
            taken.append(p)
            if p.sentOn != nil {
                p.abandon(until: p.deadlineMs)
                kept.append(p)
            }
        }
        pending = kept
        trimAbandoned()
        return taken
    }

    /// Takes the requests and identifies whose deadline has come, to be answered. An expired
    /// request that was written is kept abandoned, so its late answer is dropped rather than
    /// published (recognised for ``SessionMachine/lateAnswerGraceMs`` more); an abandoned one is
    /// forgotten: a server that never answers must not hold the pool for ever.
    mutating func expire(now: Int64) -> (requests: [PendingRequest], identifies: [SessionRequestID]) {
        var kept: [PendingRequest] = [], expired: [PendingRequest] = []
        for var p in pending {
            guard p.deadlineMs <= now else {
                kept.append(p)
                continue
            }
            if p.abandoned { continue }
            expired.append(p)
            if p.sentOn != nil {
                p.abandon(until: .max)
                p.deadlineMs = now + SessionMachine.lateAnswerGraceMs
                kept.append(p)
            }
        }
        pending = kept
        trimAbandoned()
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
