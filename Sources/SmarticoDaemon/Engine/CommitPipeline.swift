import Synchronization

/// The order and batching of the driver's journal commits, without the I/O: which events go out at
/// once, which wait, what each commit takes, and in what order committed batches are published.
///
/// Rules (socket-api.md: a journaled event is shown only once it is on disk, and every subscriber
/// sees events in emission order):
/// - With no commit in flight, an event that is not journaled goes out at once.
/// - Otherwise events queue in emission order; a journaled one starts a commit of the whole queue
///   when fewer than `depth` commits are in flight (so a commit is everything emitted while the
///   one before it ran: one append and one `fsync` for all of them).
/// - Commits are published in submission (ticket) order, whatever order their results come in.
/// - When a commit's results are published, the queue is submitted if it holds a journaled event
///   and a slot is free, or published if it holds none and nothing is in flight any more.
///
/// With `depth` 2, the commit of an event that arrived while another commit was running is already
/// waiting at the store when that one ends: the store starts it at once, instead of the result
/// first travelling back to the loop and the next batch then out to the store (two thread
/// wake-ups). A commit stays open while it waits (`CommitBatch`): every event emitted until the
/// store starts it joins it, so batches stay as large as with one commit at a time. (Sealed at
/// submission, the waiting commit held the one event that opened it: 40 % of the commits of the
/// saturation benchmark carried a single event, each its own `pwrite` and `fdatasync`.)
struct CommitPipeline<Item: Sendable, Outcome> {
    /// What the driver does next, in this order.
    enum Step {
        /// Nothing is in flight: this event goes out now.
        case publishNow(Item)
        /// Hand `batch` to the store as commit `ticket`; the store seals it when it starts it.
        case submit(ticket: Int, batch: CommitBatch<Item>)
        /// Commit `ticket` is done and every commit before it was published: publish its batch
        /// with what the store said.
        case publishCommitted(ticket: Int, batch: [Item], outcome: Outcome)
        /// Events that are not journaled waited behind commits that are all published now.
        case publishWaiting([Item])
    }

    let depth: Int
    private let isJournaled: (Item) -> Bool
    private(set) var queue: [Item] = []
    private var nextTicket = 0
    /// The commits in flight, oldest first (ticket `nextToPublish` + index), with their outcome
    /// once it came back.
    private var flying: [(batch: CommitBatch<Item>, outcome: Outcome?)] = []
    private var nextToPublish = 0

    init(depth: Int, isJournaled: @escaping (Item) -> Bool) {
        precondition(depth >= 1, "a commit pipeline needs at least one slot")
        self.depth = depth
        self.isJournaled = isJournaled
    }

    /// Commits handed to the store whose batches are not published yet.
    var inFlight: Int { flying.count }

    /// True when nothing is queued or in flight: every emitted event was published.
    var isIdle: Bool { flying.isEmpty && queue.isEmpty }

    /// An event was emitted.
    /// Consumed: the event moves into the queue or the batch (a copy retained its data and row).
    mutating func emitted(_ item: consuming Item) -> [Step] {
        let journaled = isJournaled(item)
        if inFlight == 0 && !journaled { return [.publishNow(item)] }
        // The newest commit takes it while the store has not started it (nothing queued after it).
        if queue.isEmpty, let newest = flying.last?.batch {
            guard let refused = newest.append(item) else { return [] }
            queue.append(refused)
        } else {
            queue.append(item)
        }
        return journaled && inFlight < depth ? [submitQueue()] : []
    }

    /// Commit `ticket` came back with `outcome` (written or failed: either way its batch is
    /// published now or after the commits before it).
    mutating func committed(ticket: Int, outcome: Outcome) -> [Step] {
        let index = ticket - nextToPublish
        precondition(index >= 0 && index < flying.count && flying[index].outcome == nil, "commit \(ticket) is not in flight")
        flying[index].outcome = outcome
        _ = flying[index].batch.seal()  // nothing joins a commit that is over (even one never started)
        var steps: [Step] = []
        while let first = flying.first, let done = first.outcome {
            // Sealed by the store as it started; sealed here when it failed before that.
            steps.append(.publishCommitted(ticket: nextToPublish, batch: first.batch.seal(), outcome: done))
            flying.removeFirst()
            nextToPublish += 1
        }
        if !queue.isEmpty && inFlight < depth {
            if queue.contains(where: isJournaled) {
                steps.append(submitQueue())
            } else if inFlight == 0 {
                steps.append(.publishWaiting(queue))
                queue = []
            }
        }
        return steps
    }

    private mutating func submitQueue() -> Step {
        let batch = CommitBatch(queue)
        queue = []
        let ticket = nextTicket
        nextTicket += 1
        flying.append((batch, nil))
        return .submit(ticket: ticket, batch: batch)
    }
}

/// The events of one commit: open to more while the commit waits at the store, sealed when the
/// store starts it (`seal`, on the store's thread) — after that, events go to the next commit.
final class CommitBatch<Item: Sendable>: Sendable {
    private let state: Mutex<(items: [Item], sealed: Bool)>

    init(_ items: [Item]) { state = Mutex((items, false)) }

    /// Adds `item` at the end (moved in); once sealed, hands it back instead.
    func append(_ item: consuming Item) -> Item? {
        var item = Optional(item)
        return state.withLock { s in
            guard !s.sealed else { return item.take() }
            s.items.append(item.take()!)
            return nil
        }
    }

    /// Closes the batch to more events and returns them (the same ones at every call).
    func seal() -> [Item] {
        state.withLock { s in
            s.sealed = true
            return s.items
        }
    }

    /// Closes the batch like ``seal()`` and lets `body` change the events in place (under the lock):
    /// the store's thread moves each event's journal row out instead of copying it.
    func seal<R>(changing body: (inout [Item]) -> R) -> R {
        state.withLock { s in
            s.sealed = true
            return body(&s.items)
        }
    }

    /// The events so far, leaving the batch open (tests).
    var items: [Item] { state.withLock { $0.items } }
}
