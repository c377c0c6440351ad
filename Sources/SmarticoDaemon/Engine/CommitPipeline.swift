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
/// wake-ups). Batches stay as large as with one commit at a time.
struct CommitPipeline<Item, Outcome> {
    /// What the driver does next, in this order.
    enum Step {
        /// Nothing is in flight: this event goes out now.
        case publishNow(Item)
        /// Hand `batch` to the store as commit `ticket`.
        case submit(ticket: Int, batch: [Item])
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
    private var flying: [(batch: [Item], outcome: Outcome?)] = []
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
    mutating func emitted(_ item: Item) -> [Step] {
        let journaled = isJournaled(item)
        if inFlight == 0 && !journaled { return [.publishNow(item)] }
        queue.append(item)
        return journaled && inFlight < depth ? [submitQueue()] : []
    }

    /// Commit `ticket` came back with `outcome` (written or failed: either way its batch is
    /// published now or after the commits before it).
    mutating func committed(ticket: Int, outcome: Outcome) -> [Step] {
        let index = ticket - nextToPublish
        precondition(index >= 0 && index < flying.count && flying[index].outcome == nil, "commit \(ticket) is not in flight")
        flying[index].outcome = outcome
        var steps: [Step] = []
        while let first = flying.first, let done = first.outcome {
            steps.append(.publishCommitted(ticket: nextToPublish, batch: first.batch, outcome: done))
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
        let batch = queue
        queue = []
        let ticket = nextTicket
        nextTicket += 1
        flying.append((batch, nil))
        return .submit(ticket: ticket, batch: batch)
    }
}
