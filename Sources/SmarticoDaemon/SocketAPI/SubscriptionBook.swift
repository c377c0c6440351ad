import SmarticoProtocol

/// What the book asks of the peers' queues during a call; the server answers from its connections.
/// Lines the book decides during a call are not queued yet: it counts them itself and passes them
/// as `pending` where they matter.
protocol SubscriberQueues {
    /// Bytes queued for the peer and not yet taken by its socket.
    func queuedBytes(_ peer: UInt64) -> Int
    /// Bytes queued for all peers.
    func totalQueuedBytes() -> Int
    /// Whether the peer's uid (and all peers together) may hold `extra` bytes more within the peers'
    /// memory budget (`socket.max_peer_memory_bytes`), `pending` (bytes by peer) included.
    func memoryAllows(_ peer: UInt64, extra: Int, pending: [UInt64: Int]) -> Bool
}

/// The subscription rules of the local socket API (socket-api.md, "Framing"; docs/socket-api.md,
/// "Slow peers"), without sockets, store or clock: subscribers are cursors over the journal.
///
/// A subscriber is `live` (published events are queued for it as they come) or `catchingUp` (its
/// queue was full, or it asked for a replay: it is fed pages read from the journal as it drains its
/// socket, then rejoins live delivery with the `session` and `props` state it missed). A peer's
/// queued output is held under ``Limits/maxQueueBytes``, all peers' together under
/// ``Limits/maxTotalQueueBytes``; one event line alone may go beyond them within the peer's memory
/// budget. Behind the journal's retention a subscriber gets one `gap`.
///
/// Inputs are the server's events (subscribe, publish, a page read, a cursor claimed, room in a
/// queue, ack, unsubscribe, closed); outputs are ``Decision``s the server carries out in order.
/// Peers are named by their connection number.
struct SubscriptionBook {
    struct Limits: Sendable, Equatable {
        /// `socket.max_queue_bytes`.
        var maxQueueBytes: Int
        /// `socket.max_total_queue_bytes`.
        var maxTotalQueueBytes: Int

        /// Events per page read from the journal: about 8 KiB of queue per event, so a page of
        /// ordinary events fits in the half of the queue that is free when it is read.
        var pageSize: Int { min(256, max(1, maxQueueBytes / 8192)) }

        /// A catching-up peer's queue is refilled once it holds less than this.
        var lowWater: Int { maxQueueBytes / 2 }
    }

    /// One connection's subscription: a cursor over the journal.
    struct Subscription: Sendable, Equatable {
        enum Phase: Sendable, Equatable {
            /// Published events are queued for it as they come.
            case live
            /// Fed from the journal as its queue drains, until its cursor reaches the last event
            /// published.
            case catchingUp(CatchUp)
        }

        struct CatchUp: Sendable, Equatable {
            /// A store read for this subscription is in flight (or its durable cursor is being
            /// claimed): no other page is asked for meanwhile.
            var reading = false
            /// A `session` or `props` event was published meanwhile: sent on rejoining.
            var missedSession = false
            var missedProps = false
        }

        /// Tells a subscription from the one before it on the same connection (a store read that
        /// comes back checks it).
        let number: UInt64
        let types: Set<String>?
        let durable: String?
        var phase: Phase = .live
        /// The cursor: every wanted journaled event up to here was sent (or is gone, after a `gap`).
        /// Live-only events carry it as their `seq`.
        var lastSeqSent: JournalSeq

        var isLive: Bool { phase == .live }

        func accepts(_ name: String) -> Bool {
            types?.contains(name) ?? true
        }

        /// Notes an event this catching-up peer did not get live.
        mutating func missed(_ name: String) {
            guard case .catchingUp(var catchUp) = phase else { return }
            if name == EventKind.session.rawValue { catchUp.missedSession = true }
            if name == EventKind.props.rawValue { catchUp.missedProps = true }
            phase = .catchingUp(catchUp)
        }

        /// Its store read (or cursor claim) came back.
        mutating func readDone() {
            guard case .catchingUp(var catchUp) = phase else { return }
            catchUp.reading = false
            phase = .catchingUp(catchUp)
        }
    }

    /// A page to read from the journal for a catching-up subscriber: its bounds, then up to `limit`
    /// events after `after` of the subscriber's `types`.
    struct PageRequest: Sendable, Equatable {
        let subscription: UInt64
        let after: JournalSeq
        let limit: Int
        let types: Set<String>?
        /// The last seq published when the read was asked for: everything up to it was journaled.
        let published: JournalSeq
    }

    /// What a ``PageRequest`` read.
    struct Page: Sendable, Equatable {
        var bounds: JournalBounds
        /// Each with its line's `data`, as the store hands them back (``SmarticoStore/lines(after:limit:types:)``).
        var events: [JournalEvent]
    }

    /// A durable name's cursor to claim in the store for `uid` (a new name starts at `start`), then
    /// ``cursorClaimed(_:_:_:nowMs:queues:)``.
    struct CursorClaim: Sendable, Equatable {
        let subscription: UInt64
        let id: JSONValue?
        let name: String
        let uid: UInt32
        let start: JournalSeq
        /// The subscribe answer, once the cursor is known.
        let answer: JSONObject
        /// The `gap` a replay from the journal's beginning starts with (another journal's position).
        let restart: JSONObject?
    }

    /// What the server does, in order.
    enum Decision: Sendable, Equatable {
        /// Queue this line for the peer (an event within its bounds, a `gap`, an `error`, the state
        /// sent on rejoining).
        case send(UInt64, [UInt8])
        /// Queue this event line alone beyond the queue's bounds (a big engagement): raise the
        /// connection's write limit for it until its queue drains.
        case sendOversized(UInt64, [UInt8])
        /// Answer the peer's request.
        case respond(UInt64, id: JSONValue?, Result<JSONValue, SocketAPIError>)
        /// Read a page from the journal, then ``pageRead(_:_:_:nowMs:queues:)``.
        case readPage(UInt64, PageRequest)
        /// Claim a durable name's cursor, then ``cursorClaimed(_:_:_:nowMs:queues:)``.
        case claimCursor(UInt64, CursorClaim)
        /// Store the `ack` of durable `name` and answer it.
        case setCursor(UInt64, id: JSONValue?, name: String, seq: JournalSeq, uid: UInt32)
        /// A big line waits for room in the memory budget that other peers free: call
        /// ``roomMayHaveGrown(_:queues:)`` again soon (nothing else wakes a peer whose queue is empty).
        case retrySoon(UInt64)
        /// Stop serving the peer (after what was queued, such as the `error` before it).
        case drop(UInt64)
    }

    let limits: Limits
    /// The seq of the last journaled event published: a catching-up peer whose cursor reached it
    /// rejoins live delivery.
    private(set) var lastPublishedSeq: JournalSeq = 0
    /// The store's journal id (the subscribe answer's `journal`); nil without a store.
    var journalID: String?
    /// The last `session` and `props` events published: what a peer that missed some while
    /// catching up gets when it rejoins.
    private var lastSession: PreparedEvent?
    private var lastProps: PreparedEvent?
    private(set) var subscriptions: [UInt64: Subscription] = [:]
    private var nextSubscriptionNumber: UInt64 = 1
    /// The most each peer ever had queued right after an event line was queued for it.
    private(set) var peakQueuedBytes: [UInt64: Int] = [:]
    /// The most all peers together had queued right after an event line was queued.
    private(set) var peakTotalQueuedBytes = 0

    init(limits: Limits) {
        self.limits = limits
    }

    /// Peers with a subscription.
    var subscriberCount: Int { subscriptions.count }

    /// The server starts: the seq counter starts at the journal's last seq.
    mutating func started(lastSeq: JournalSeq) {
        lastPublishedSeq = max(lastPublishedSeq, lastSeq)
    }

    // MARK: Subscribing

    /// `subscribe`: live from now, or a replay (`since`, `durable`: a catch-up from its start point).
    /// `hasJournal`: the server has a store (`since` and `durable` need it); `uid`: the peer's, which
    /// owns a durable name.
    mutating func subscribe(
        _ peer: UInt64, id: JSONValue?, _ options: SubscribeRequest, uid: UInt32?, hasJournal: Bool,
        nowMs: Int64, queues: some SubscriberQueues
    ) -> [Decision] {
        guard subscriptions[peer] == nil else {
            return [.respond(peer, id: id, .failure(.badRequest("this connection is already subscribed; send unsubscribe first to change types, since or durable")))]
        }
        let lastSeq = lastPublishedSeq
        var subscription = Subscription(number: nextSubscriptionNumber, types: options.types, durable: options.durable, lastSeqSent: lastSeq)
        nextSubscriptionNumber += 1
        let answer: JSONObject =
            if let journalID { ["last_seq": .number(lastSeq), "journal": .string(journalID)] } else { ["last_seq": .number(lastSeq)] }
        if options.since == nil && options.durable == nil {
            subscriptions[peer] = subscription
            return [.respond(peer, id: id, .success(.object(answer)))]
        }
        guard hasJournal else {
            return [.respond(peer, id: id, .failure(SocketAPIError(.internal, "this server has no journal: since and durable are unavailable")))]
        }
        subscription.phase = .catchingUp(.init())
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
            subscriptions[peer] = subscription
            var batch = Batch(queues)
            batch.decisions.append(.respond(peer, id: id, .success(.object(answer))))
            if let restart { notify(peer, EventKind.gap.rawValue, .object(restart), nowMs: nowMs, &batch) }
            catchUpIfRoom(peer, &batch)
            return batch.decisions
        }
        guard let uid else {
            return [.respond(peer, id: id, .failure(Self.noCredentials("durable")))]
        }
        // The durable name's cursor first (`reading` until then: no page is read before it). A new
        // name starts at `since`, or now, and is stored at once (owned by this uid) so a reconnect
        // before the first ack resumes from here.
        subscription.phase = .catchingUp(.init(reading: true))
        subscriptions[peer] = subscription
        return [.claimCursor(peer, CursorClaim(subscription: subscription.number, id: id, name: durable, uid: uid,
                                               start: since ?? lastSeq, answer: answer, restart: restart))]
    }

    /// The durable name's cursor came back from the store: the subscribe is answered and the replay
    /// starts after it.
    mutating func cursorClaimed(
        _ peer: UInt64, _ claim: CursorClaim, _ start: Result<JournalSeq, SocketAPIError>,
        nowMs: Int64, queues: some SubscriberQueues
    ) -> [Decision] {
        guard var subscription = subscriptions[peer], subscription.number == claim.subscription else {
            // Unsubscribed before the name's cursor came: the subscribe is still answered (every
            // request gets exactly one answer), after the unsubscribe's.
            return [.respond(peer, id: claim.id, start.map { _ in .object(claim.answer) })]
        }
        subscription.readDone()
        switch start {
        case .failure(let error):
            subscriptions[peer] = nil
            return [.respond(peer, id: claim.id, .failure(error))]
        case .success(let from):
            subscription.lastSeqSent = from
            subscriptions[peer] = subscription
            var batch = Batch(queues)
            batch.decisions.append(.respond(peer, id: claim.id, .success(.object(claim.answer))))
            if let restart = claim.restart, from == 0 { notify(peer, EventKind.gap.rawValue, .object(restart), nowMs: nowMs, &batch) }
            catchUpIfRoom(peer, &batch)
            return batch.decisions
        }
    }

    /// `unsubscribe`, or the peer is being dropped: true when it had a subscription.
    @discardableResult
    mutating func unsubscribe(_ peer: UInt64) -> Bool {
        subscriptions.removeValue(forKey: peer) != nil
    }

    /// The peer's connection closed: its subscription and its queue's figures go. Returns the most
    /// it ever had queued.
    mutating func peerClosed(_ peer: UInt64) -> Int {
        subscriptions[peer] = nil
        return peakQueuedBytes.removeValue(forKey: peer) ?? 0
    }

    /// `ack`: stored for the durable name of the peer's subscription, if it has one.
    func ack(_ peer: UInt64, id: JSONValue?, seq: JournalSeq, uid: UInt32?, hasJournal: Bool) -> Decision {
        guard let name = subscriptions[peer]?.durable else {
            return .respond(peer, id: id, .failure(.badRequest("ack needs a durable subscription on this connection (subscribe with \"durable\" first)")))
        }
        guard hasJournal else {
            return .respond(peer, id: id, .failure(SocketAPIError(.internal, "this server has no journal")))
        }
        guard let uid else {
            return .respond(peer, id: id, .failure(Self.noCredentials("ack")))
        }
        return .setCursor(peer, id: id, name: name, seq: seq, uid: uid)
    }

    // MARK: Publishing

    /// An event for the subscribers. `seq`: a journaled event's (journaled first, published in seq
    /// order; one at or below the last published seq is ignored as a repeat); nil for a live-only
    /// event, which carries the seq of the last journaled event sent before it on each connection.
    mutating func publish(_ event: PreparedEvent, queues: some SubscriberQueues) -> [Decision] {
        if let seq = event.seq {
            guard seq > lastPublishedSeq else { return [] }
            lastPublishedSeq = seq
        } else if event.name == EventKind.session.rawValue {
            lastSession = event
        } else if event.name == EventKind.props.rawValue {
            lastProps = event
        }
        var batch = Batch(queues)
        // A journaled event's line is the same for every peer; a live-only one carries each
        // peer's own last seq.
        var journaledLine: [UInt8]? = nil
        var index = subscriptions.startIndex
        while index != subscriptions.endIndex {
            defer { subscriptions.formIndex(after: &index) }
            let (peer, subscription) = subscriptions[index]
            guard subscription.accepts(event.name) else { continue }
            guard subscription.isLive else {
                subscriptions.values[index].missed(event.name)
                continue
            }
            let line: [UInt8]
            if let seq = event.seq {
                guard seq > subscription.lastSeqSent else { continue }  // sent by a catch-up page already
                line = journaledLine ?? event.line(seq: seq)
                journaledLine = line
            } else {
                line = event.line(seq: subscription.lastSeqSent)
            }
            if enqueue(line, to: peer, &batch) {
                if let seq = event.seq { subscriptions.values[index].lastSeqSent = seq }
            } else {
                // Full: the journal has this event and what follows; the peer reads it from there.
                subscriptions.values[index].phase = .catchingUp(.init())
                subscriptions.values[index].missed(event.name)
            }
        }
        return batch.decisions
    }

    // MARK: Catch-up

    /// The peer's queue may have gone down (its lines were handed to its socket, its socket
    /// drained, a retry came): a catching-up peer whose queue has room gets its next page read.
    mutating func roomMayHaveGrown(_ peer: UInt64, queues: some SubscriberQueues) -> [Decision] {
        var batch = Batch(queues)
        catchUpIfRoom(peer, &batch)
        return batch.decisions
    }

    /// A page came back from the journal: what fits is queued, the cursor moves past it, and the
    /// peer rejoins live delivery once its cursor reached the last event published. A read that
    /// failed drops the peer after an `error`: going on with a gap would break the contract.
    mutating func pageRead(
        _ peer: UInt64, _ request: PageRequest, _ page: Result<Page, StoreError>,
        nowMs: Int64, queues: some SubscriberQueues
    ) -> [Decision] {
        guard var subscription = subscriptions[peer], subscription.number == request.subscription else { return [] }
        subscription.readDone()
        subscriptions[peer] = subscription
        var batch = Batch(queues)
        let read: Page
        switch page {
        case .success(let p): read = p
        case .failure(let error):
            notify(peer, "error", ["code": "journal_read_failed", "message": .string("reading the journal failed: \(error)")],
                   nowMs: nowMs, &batch)
            subscriptions[peer] = nil
            batch.decisions.append(.drop(peer))
            return batch.decisions
        }
        // Behind retention: one `gap`, then on from the oldest event kept.
        let firstAvailable = read.bounds.firstSeq ?? (read.bounds.lastSeq + 1)
        if firstAvailable > subscription.lastSeqSent + 1 {
            notify(peer, EventKind.gap.rawValue, ["first_available_seq": .number(firstAvailable),
                                 "missed": .number(firstAvailable - 1 - subscription.lastSeqSent)], nowMs: nowMs, &batch)
            subscription.lastSeqSent = firstAvailable - 1
        }
        var whole = true
        for event in read.events where event.seq > subscription.lastSeqSent {
            let line = PreparedEvent(name: event.name, seq: event.seq, tsMs: event.tsMs, data: event.data).line(seq: event.seq)
            guard enqueue(line, to: peer, &batch) else {
                // The rest is read again once the queue drained (its flush or drain comes back here).
                whole = false
                break
            }
            subscription.lastSeqSent = event.seq
        }
        // A short page holds every wanted event up to `published` (journaled before the read).
        if whole && read.events.count < request.limit {
            subscription.lastSeqSent = max(subscription.lastSeqSent, request.published)
        }
        subscriptions[peer] = subscription
        if subscription.lastSeqSent >= lastPublishedSeq {
            rejoin(peer, &batch)
        } else if whole {
            catchUpIfRoom(peer, &batch)
        }
        return batch.decisions
    }

    /// Asks for the next page of a catching-up peer whose queue has room (one read at a time).
    private mutating func catchUpIfRoom(_ peer: UInt64, _ batch: inout Batch<some SubscriberQueues>) {
        guard var subscription = subscriptions[peer], case .catchingUp(var catchUp) = subscription.phase, !catchUp.reading,
              batch.queued(peer) < limits.lowWater else { return }
        catchUp.reading = true
        subscription.phase = .catchingUp(catchUp)
        subscriptions[peer] = subscription
        // Everything published up to here was journaled before this read starts.
        batch.decisions.append(.readPage(peer, PageRequest(
            subscription: subscription.number, after: subscription.lastSeqSent, limit: limits.pageSize,
            types: subscription.types, published: lastPublishedSeq)))
    }

    /// Back to live delivery: the `session` and `props` state first, if the peer missed any.
    private mutating func rejoin(_ peer: UInt64, _ batch: inout Batch<some SubscriberQueues>) {
        guard var subscription = subscriptions[peer], case .catchingUp(let catchUp) = subscription.phase else { return }
        subscription.phase = .live
        subscriptions[peer] = subscription
        if catchUp.missedSession, let lastSession {
            batch.send(peer, lastSession.line(seq: subscription.lastSeqSent))
        }
        if catchUp.missedProps, let lastProps {
            batch.send(peer, lastProps.line(seq: subscription.lastSeqSent))
        }
    }

    /// Queues a live-only notice for this peer alone (`gap`, `error`).
    private func notify(_ peer: UInt64, _ name: String, _ data: JSONValue, nowMs: Int64, _ batch: inout Batch<some SubscriberQueues>) {
        var bytes: [UInt8] = []
        data.serialize(into: &bytes)
        let seq = subscriptions[peer]?.lastSeqSent ?? lastPublishedSeq
        batch.send(peer, PreparedEvent(name: name, seq: nil, tsMs: nowMs, data: bytes).line(seq: seq))
    }

    // MARK: Queues

    /// Queues an event line if it fits the peer's bound and the total. An empty queue always takes
    /// one line, so a peer that reads always moves on, whatever the others do.
    private mutating func enqueue(_ line: [UInt8], to peer: UInt64, _ batch: inout Batch<some SubscriberQueues>) -> Bool {
        let queued = batch.queued(peer)
        let total = batch.total()
        let fits = queued + line.count <= limits.maxQueueBytes && total + line.count <= limits.maxTotalQueueBytes
        guard queued == 0 || fits else { return false }
        if fits {
            batch.send(peer, line)
        } else {
            // One line alone beyond the queue's bounds (a big engagement): taken only within the
            // uid's share of the memory budget (its other peers wait for it in the journal).
            guard batch.queues.memoryAllows(peer, extra: line.count, pending: batch.pending) else {
                batch.decisions.append(.retrySoon(peer))
                return false
            }
            batch.send(peer, line, oversized: true)
        }
        peakQueuedBytes[peer] = max(peakQueuedBytes[peer] ?? 0, queued + line.count)
        peakTotalQueuedBytes = max(peakTotalQueuedBytes, total + line.count)
        return true
    }

    /// The decisions of one call and the bytes they queue, on top of what the queues held when the
    /// call began.
    private struct Batch<Queues: SubscriberQueues> {
        let queues: Queues
        var decisions: [Decision] = []
        /// Bytes of the lines decided in this call, by peer.
        var pending: [UInt64: Int] = [:]
        var pendingTotal = 0
        /// All peers' queued bytes when first asked (nothing else queues during the call).
        var baseTotal: Int?

        init(_ queues: Queues) {
            self.queues = queues
        }

        func queued(_ peer: UInt64) -> Int {
            queues.queuedBytes(peer) + (pending[peer] ?? 0)
        }

        mutating func total() -> Int {
            if baseTotal == nil { baseTotal = queues.totalQueuedBytes() }
            return baseTotal! + pendingTotal
        }

        mutating func send(_ peer: UInt64, _ line: [UInt8], oversized: Bool = false) {
            decisions.append(oversized ? .sendOversized(peer, line) : .send(peer, line))
            pending[peer, default: 0] += line.count
            pendingTotal += line.count
        }
    }

    // MARK: Errors

    static func noCredentials(_ what: String) -> SocketAPIError {
        SocketAPIError(.notPermitted, "\(what): durable names belong to a uid, and this peer's credentials could not be read (SO_PEERCRED)")
    }

    /// The answer to a store failure of `subscribe` (`durable`), `ack` (`seq`) or `forget`.
    static func storeFailure(_ error: any Error, field: String) -> SocketAPIError {
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
}

/// An event ready to be written: the name, its journal seq (nil: live only), its time and its
/// `data`.
struct PreparedEvent: Sendable, Equatable {
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

    /// Its line: `{"event":…,"seq":…,"ts":…,"data":…}\n`, with `seq` (a live-only event carries the
    /// connection's cursor).
    func line(seq: JournalSeq) -> [UInt8] {
        var line: [UInt8] = []
        line.appendLiteral("{\"event\":")
        JSONValue.serializeString(name, into: &line)
        line.append(contentsOf: ",\"seq\":\(seq),\"ts\":\(tsMs),\"data\":".utf8)
        body.appendLine(to: &line)
        line.appendLiteral("}\n")
        return line
    }
}
