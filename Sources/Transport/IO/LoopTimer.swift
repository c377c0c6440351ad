/// A timer of an ``EventLoop``, created once and scheduled, rescheduled and cancelled as often as needed
/// without allocating (it sits in the loop's min-heap by index). Loop thread only.
///
/// ```swift
/// let keepalive = LoopTimer(loop: loop) { [weak self] in self?.sendPing() }
/// keepalive.schedule(after: .seconds(30))   // on every received message: reschedule, no churn
/// ```
public final class LoopTimer {
    /// The loop this timer runs on.
    public let loop: EventLoop
    private var handler: (() -> Void)?
    var deadline = LoopInstant(nanoseconds: 0)
    var sequence: UInt64 = 0
    var heapIndex = -1

    /// A timer that calls `handler` on the loop thread each time it fires. It holds `handler` strongly
    /// until ``invalidate()``; capture owners weakly or invalidate when done.
    public init(loop: EventLoop, handler: @escaping () -> Void) {
        self.loop = loop
        self.handler = handler
    }

    /// Fires at `deadline` (or on the next loop iteration if it has passed). Reschedules if already scheduled.
    public func schedule(at deadline: LoopInstant) {
        guard handler != nil else { return }
        loop.scheduleTimer(self, at: deadline)
    }

    /// Fires `delay` from now.
    public func schedule(after delay: Duration) {
        schedule(at: .now + delay)
    }

    /// Removes the timer from the loop if scheduled. Cheap (O(log n), no allocation).
    public func cancel() {
        loop.cancelTimer(self)
    }

    /// Cancels and drops the handler; the timer cannot fire again.
    public func invalidate() {
        cancel()
        handler = nil
    }

    /// True while scheduled.
    public var isScheduled: Bool { heapIndex >= 0 }

    /// When it fires, if scheduled.
    public var scheduledDeadline: LoopInstant? { heapIndex >= 0 ? deadline : nil }

    func fire() { handler?() }
}

extension EventLoop {
    /// One-shot convenience: calls `body` on the loop thread after `delay`. Keep the returned timer to
    /// cancel it. Loop thread.
    @discardableResult
    public func scheduleTimer(after delay: Duration, _ body: @escaping () -> Void) -> LoopTimer {
        let timer = LoopTimer(loop: self, handler: body)
        timer.schedule(after: delay)
        return timer
    }
}

/// Indexed binary min-heap of timers ordered by (deadline, sequence); each timer knows its index.
struct TimerHeap {
    private var items: [LoopTimer] = []

    init() { items.reserveCapacity(64) }

    var count: Int { items.count }
    var isEmpty: Bool { items.isEmpty }
    var first: LoopTimer? { items.first }

    private static func less(_ a: LoopTimer, _ b: LoopTimer) -> Bool {
        a.deadline < b.deadline || (a.deadline == b.deadline && a.sequence < b.sequence)
    }

    mutating func insert(_ timer: LoopTimer) {
        timer.heapIndex = items.count
        items.append(timer)
        siftUp(items.count - 1)
    }

    mutating func update(_ timer: LoopTimer, deadline: LoopInstant, sequence: UInt64) {
        let i = timer.heapIndex
        timer.deadline = deadline
        timer.sequence = sequence
        siftUp(i)
        siftDown(timer.heapIndex)
    }

    mutating func remove(_ timer: LoopTimer) {
        let i = timer.heapIndex
        precondition(i >= 0 && i < items.count && items[i] === timer, "timer not in this heap")
        let last = items.count - 1
        if i != last {
            items.swapAt(i, last)
            items[i].heapIndex = i
        }
        items.removeLast()
        timer.heapIndex = -1
        if i < items.count {
            let moved = items[i]
            siftUp(i)
            siftDown(moved.heapIndex)
        }
    }

    private mutating func siftUp(_ start: Int) {
        var i = start
        while i > 0 {
            let parent = (i - 1) / 2
            guard TimerHeap.less(items[i], items[parent]) else { break }
            items.swapAt(i, parent)
            items[i].heapIndex = i
            items[parent].heapIndex = parent
            i = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var i = start
        let n = items.count
        while true {
            let l = 2 * i + 1
            let r = l + 1
            var smallest = i
            if l < n && TimerHeap.less(items[l], items[smallest]) { smallest = l }
            if r < n && TimerHeap.less(items[r], items[smallest]) { smallest = r }
            if smallest == i { return }
            items.swapAt(i, smallest)
            items[i].heapIndex = i
            items[smallest].heapIndex = smallest
            i = smallest
        }
    }
}
