#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import COpenSSL

/// Interest of a registered descriptor.
public struct IOInterest: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let read = IOInterest(rawValue: 1)
    public static let write = IOInterest(rawValue: 2)
    public static let none: IOInterest = []
}

/// Readiness reported by the kernel for a registered descriptor.
public struct IOEvents: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let readable = IOEvents(rawValue: 1)
    public static let writable = IOEvents(rawValue: 2)
    /// `EPOLLHUP`/`EPOLLRDHUP`: the peer hung up (read until EOF to see it).
    public static let hangup = IOEvents(rawValue: 4)
    /// `EPOLLERR`: an error is pending on the socket (`SO_ERROR`).
    public static let error = IOEvents(rawValue: 8)
}

/// Receives readiness of one descriptor registered with ``EventLoop/register(fd:interest:handler:)``.
/// Both methods are called on the loop thread.
public protocol EventLoopHandler: AnyObject {
    /// The descriptor is ready. The loop is level-triggered: readiness that is not consumed is reported again.
    func handleEvents(_ events: IOEvents)
    /// The loop is shutting down while this descriptor is still registered: close the descriptor.
    func eventLoopDidShutDown()
}

/// Errors of the event loop itself.
public enum EventLoopError: Error, Sendable, CustomStringConvertible {
    /// The loop was shut down before the work could run.
    case shutDown(loop: String)
    /// A system call of the loop failed.
    case system(operation: String, errno: Int32)

    public var description: String {
        switch self {
        case .shutDown(let loop): return "event loop \"\(loop)\" is shut down"
        case .system(let op, let e): return "event loop: \(op) failed: \(ioErrnoText(e)) (errno \(e))"
        }
    }
}

/// One dedicated thread running `epoll_wait`: descriptors, timers and tasks.
///
/// - Descriptors are registered **level-triggered** (`EPOLLIN`/`EPOLLOUT`, no `EPOLLET`): a handler may stop
///   reading before `EAGAIN` (fairness) and is called again on the next iteration. Ask for `.write` only
///   while you have something queued.
/// - Timers (``LoopTimer``) live in a min-heap whose earliest deadline becomes the `epoll_wait` timeout,
///   rounded up to the millisecond, so the loop never spins. With no timers and no tasks the loop waits
///   with an infinite timeout: an idle loop makes no wake-ups (see ``wakeUpCount``).
/// - ``execute(_:)`` works from any thread; a cross-thread call writes an `eventfd` once per batch.
/// - The loop is a `SerialExecutor`: an actor can run on it with
///   `nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }`.
/// - The loop is also a `TaskExecutor`: `Task(executorPreference: loop) { … }` or
///   `withTaskExecutorPreference(loop) { … }` runs that task's nonisolated async code (and the
///   continuations it awaits) on the loop thread instead of Swift's global concurrent executor, so a
///   program can run without libdispatch's worker threads (see docs/transport.md, "No global executor").
///
/// Everything not marked "any thread" must be called on the loop thread (see ``preconditionInEventLoop()``).
public final class EventLoop: SerialExecutor, TaskExecutor, CustomStringConvertible,
    // Mutable state is either confined to the loop thread (registrations, timers, buffers; every
    // entry point checks `preconditionInEventLoop()`), or guarded by `pending` (a Mutex), or atomic.
    @unchecked Sendable
{
    private enum Task {
        case closure(@Sendable () -> Void)
        case job(UnownedJob)
    }

    private struct Pending {
        var tasks: [Task] = []
        var wakePending = false
        var state: RunState = .running
    }

    private enum RunState { case running, stopping, stopped }

    private struct Registration {
        var handler: any EventLoopHandler
        var interest: IOInterest
        var generation: UInt32
    }

    /// Name used in errors and the thread name.
    public let name: String
    /// Pool for blocking calls (DNS, file reads) made on behalf of this loop's users.
    public let blockingPool: BlockingPool

    private let epollFD: Int32
    private let wakeFD: Int32
    /// Written once, before the loop thread runs (under `started`); only read after that, by any
    /// thread (`inEventLoop`, every `assumeIsolated` of an actor on the loop).
    private var thread: pthread_t
    private let pending = Mutex(Pending())
    private let joinLock = Mutex(false)
    private let wakeUps = Atomic<UInt64>(0)
    private let started = Mutex(false)

    // Loop-thread state.
    private var registrations: [Registration?] = []
    private var generationCounter: UInt32 = 0
    private var timers = TimerHeap()
    private var timerSequence: UInt64 = 0
    private var localTasks: [Task] = []
    /// Shared read buffer for every socket of this loop (delivery is synchronous; consumers copy what they keep).
    let readBuffer: UnsafeMutableRawBufferPointer
    /// Shared plaintext buffer for TLS reads.
    let plaintextBuffer: UnsafeMutableRawBufferPointer

    private static let wakeToken: UInt64 = .max

    /// Starts a loop on its own thread.
    public init(name: String = "transport-loop", blockingPool: BlockingPool = .shared) throws(EventLoopError) {
        self.name = name
        self.blockingPool = blockingPool
        let ep = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard ep >= 0 else { throw .system(operation: "epoll_create1", errno: errno) }
        let ev = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard ev >= 0 else {
            let e = errno
            Glibc.close(ep)
            throw .system(operation: "eventfd", errno: e)
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = EventLoop.wakeToken
        guard epoll_ctl(ep, EPOLL_CTL_ADD, ev, &event) == 0 else {
            let e = errno
            Glibc.close(ep); Glibc.close(ev)
            throw .system(operation: "epoll_ctl(ADD eventfd)", errno: e)
        }
        epollFD = ep
        wakeFD = ev
        readBuffer = .allocate(byteCount: 64 * 1024, alignment: 16)
        plaintextBuffer = .allocate(byteCount: 32 * 1024, alignment: 16)
        thread = pthread_t()
        // The loop thread takes `started` before running, so it sees `thread` assigned.
        let failure: Int32 = started.withLock { _ in
            let box = Unmanaged.passRetained(self).toOpaque()
            let rc = pthread_create(&thread, nil, { arg in
                let loop = Unmanaged<EventLoop>.fromOpaque(arg!).takeRetainedValue()
                loop.started.withLock { $0 = true }
                loop.runLoop()
                return nil
            }, box)
            if rc != 0 { Unmanaged<EventLoop>.fromOpaque(box).release() }
            return rc
        }
        if failure != 0 {
            Glibc.close(ep); Glibc.close(ev)
            readBuffer.deallocate(); plaintextBuffer.deallocate()
            throw .system(operation: "pthread_create", errno: failure)
        }
    }

    deinit {
        readBuffer.deallocate()
        plaintextBuffer.deallocate()
    }

    public var description: String { "EventLoop(\(name))" }

    // MARK: Thread identity

    /// True when called on this loop's thread. Any thread.
    public var inEventLoop: Bool { pthread_equal(pthread_self(), thread) != 0 }

    /// Traps unless called on this loop's thread.
    public func preconditionInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        precondition(inEventLoop, "must be called on the thread of \(self)", file: file, line: line)
    }

    /// Number of times `epoll_wait` has returned since the loop started (a measure of wake-ups). Any thread.
    public var wakeUpCount: UInt64 { wakeUps.load(ordering: .relaxed) }

    // MARK: Tasks

    /// Runs `task` on the loop thread, after the current handler returns. Any thread.
    /// Returns false, dropping the task, when the loop has shut down (``submit(_:)`` throws instead).
    @discardableResult
    public func execute(_ task: @escaping @Sendable () -> Void) -> Bool {
        enqueueTask(.closure(task))
    }

    @discardableResult
    private func enqueueTask(_ task: Task) -> Bool {
        if inEventLoop {
            // The loop drains local tasks before it waits again.
            localTasks.append(task)
            return true
        }
        let (accepted, wake) = pending.withLock { p -> (Bool, Bool) in
            guard p.state == .running else { return (false, false) }
            p.tasks.append(task)
            if p.wakePending { return (true, false) }
            p.wakePending = true
            return (true, true)
        }
        if wake { signalWake() }
        return accepted
    }

    private func signalWake() {
        var one: UInt64 = 1
        while Glibc.write(wakeFD, &one, 8) < 0 && errno == EINTR {}
    }

    /// Runs `body` on the loop thread and returns its result to the caller. Any context.
    public func submit<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
            let accepted = enqueueTask(.closure {
                c.resume(with: Result { try body() })
            })
            if !accepted { c.resume(throwing: EventLoopError.shutDown(loop: name)) }
        }
    }

    // MARK: SerialExecutor, TaskExecutor

    /// Jobs of actors running on this loop and of tasks that prefer it. Any thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        if !enqueueTask(.job(unowned)) {
            // A job must run; after shutdown there is no loop thread, so run it here (best effort).
            runJob(unowned)
        }
    }

    private func runJob(_ job: UnownedJob) {
        job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    public func checkIsolated() {
        preconditionInEventLoop()
    }

    public func isIsolatingCurrentContext() -> Bool? {
        inEventLoop
    }

    // MARK: Descriptors

    /// Registers `fd` with the given interest. The loop keeps a strong reference to `handler` until
    /// ``unregister(fd:)``. The loop never closes a registered fd except through
    /// ``EventLoopHandler/eventLoopDidShutDown()``. Loop thread.
    public func register(fd: Int32, interest: IOInterest, handler: any EventLoopHandler) throws(EventLoopError) {
        preconditionInEventLoop()
        precondition(fd >= 0)
        generationCounter &+= 1
        var event = epoll_event()
        event.events = epollMask(interest)
        event.data.u64 = UInt64(generationCounter) << 32 | UInt64(UInt32(fd))
        guard epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) == 0 else {
            throw .system(operation: "epoll_ctl(ADD fd \(fd))", errno: errno)
        }
        let index = Int(fd)
        if index >= registrations.count {
            registrations.append(contentsOf: repeatElement(nil, count: max(index + 1 - registrations.count, 64)))
        }
        registrations[index] = Registration(handler: handler, interest: interest, generation: generationCounter)
    }

    /// Changes the interest of a registered descriptor (no-op when unchanged). Loop thread.
    public func modify(fd: Int32, interest: IOInterest) throws(EventLoopError) {
        preconditionInEventLoop()
        let index = Int(fd)
        guard index < registrations.count, var reg = registrations[index] else { return }
        if reg.interest == interest { return }
        var event = epoll_event()
        event.events = epollMask(interest)
        event.data.u64 = UInt64(reg.generation) << 32 | UInt64(UInt32(fd))
        guard epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event) == 0 else {
            throw .system(operation: "epoll_ctl(MOD fd \(fd))", errno: errno)
        }
        reg.interest = interest
        registrations[index] = reg
    }

    /// Removes a descriptor; call it before closing the fd. Loop thread.
    public func unregister(fd: Int32) {
        preconditionInEventLoop()
        let index = Int(fd)
        guard index < registrations.count, registrations[index] != nil else { return }
        var event = epoll_event()
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, &event)
        registrations[index] = nil
    }

    private func epollMask(_ interest: IOInterest) -> UInt32 {
        var mask: UInt32 = 0
        if interest.contains(.read) { mask |= EPOLLIN.rawValue | EPOLLRDHUP.rawValue }
        if interest.contains(.write) { mask |= EPOLLOUT.rawValue }
        return mask
    }

    // MARK: Timers (used by LoopTimer)

    func scheduleTimer(_ timer: LoopTimer, at deadline: LoopInstant) {
        preconditionInEventLoop()
        timerSequence &+= 1
        if timer.heapIndex >= 0 {
            timers.update(timer, deadline: deadline, sequence: timerSequence)
        } else {
            timer.deadline = deadline
            timer.sequence = timerSequence
            timers.insert(timer)
        }
    }

    func cancelTimer(_ timer: LoopTimer) {
        preconditionInEventLoop()
        if timer.heapIndex >= 0 { timers.remove(timer) }
    }

    /// Number of scheduled timers (diagnostics). Loop thread.
    public var scheduledTimerCount: Int {
        preconditionInEventLoop()
        return timers.count
    }

    // MARK: Shutdown

    /// Stops the loop, notifies every still-registered handler (which closes its fd), cancels timers,
    /// closes the loop's own descriptors and joins the thread. Blocks the caller until the thread has
    /// exited: call it from a plain thread, or use ``shutdown()``. Must not be called on the loop thread.
    /// Idempotent.
    public func shutdownAndJoin() {
        precondition(!inEventLoop, "shutdownAndJoin() called on the loop thread of \(self)")
        let wake = pending.withLock { p -> Bool in
            guard p.state == .running else { return false }
            p.state = .stopping
            return true
        }
        if wake { signalWake() }
        joinLock.withLock { joined in
            if joined { return }
            pthread_join(thread, nil)
            joined = true
        }
    }

    /// Async form of ``shutdownAndJoin()``: the join runs on the blocking pool.
    public func shutdown() async {
        let loop = self
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            blockingPool.submit {
                loop.shutdownAndJoin()
                c.resume()
            }
        }
    }

    /// True until shutdown has begun. Any thread.
    public var isRunning: Bool { pending.withLock { $0.state == .running } }

    // MARK: The loop

    private func runLoop() {
        setThreadName()
        let capacity = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        while true {
            let stopping = pending.withLock { $0.state != .running }
            if stopping { break }
            let timeout = computeTimeout()
            let n = epoll_wait(epollFD, events, Int32(capacity), timeout)
            wakeUps.add(1, ordering: .relaxed)
            if n < 0 {
                if errno == EINTR { continue }
                fatalError("\(self): epoll_wait failed: \(ioErrnoText(errno))")
            }
            for i in 0..<Int(n) {
                let event = events[i]
                let data = event.data.u64
                if data == EventLoop.wakeToken {
                    var value: UInt64 = 0
                    _ = Glibc.read(wakeFD, &value, 8)
                    continue
                }
                let fd = Int(UInt32(truncatingIfNeeded: data))
                let generation = UInt32(truncatingIfNeeded: data >> 32)
                // A handler earlier in this batch may have closed this fd (and another may reuse the number).
                guard fd < registrations.count, let reg = registrations[fd], reg.generation == generation else {
                    continue
                }
                var ready: IOEvents = []
                let mask = event.events
                if mask & EPOLLIN.rawValue != 0 { ready.insert(.readable) }
                if mask & EPOLLOUT.rawValue != 0 { ready.insert(.writable) }
                if mask & (EPOLLHUP.rawValue | EPOLLRDHUP.rawValue) != 0 { ready.insert(.hangup) }
                if mask & EPOLLERR.rawValue != 0 { ready.insert(.error) }
                reg.handler.handleEvents(ready)
            }
            runDueTimers()
            runTasks()
        }
        finish()
    }

    private func computeTimeout() -> Int32 {
        if !localTasks.isEmpty { return 0 }
        let hasTasks = pending.withLock { !$0.tasks.isEmpty }
        if hasTasks { return 0 }
        guard let first = timers.first else { return -1 }
        let now = LoopInstant.now
        if first.deadline <= now { return 0 }
        let ns = first.deadline.nanoseconds - now.nanoseconds
        let ms = (ns + 999_999) / 1_000_000  // round up: never wake before the deadline
        return Int32(clamping: ms)
    }

    private func runDueTimers() {
        guard !timers.isEmpty else { return }
        let now = LoopInstant.now
        let sequenceLimit = timerSequence
        while let first = timers.first, first.deadline <= now, first.sequence <= sequenceLimit {
            timers.remove(first)
            first.fire()
        }
    }

    private func runTasks() {
        // Tasks queued from other threads while these run wait for the next iteration (woken by the eventfd).
        var batch = pending.withLock { p -> [Task] in
            p.wakePending = false
            if p.tasks.isEmpty { return [] }
            var taken: [Task] = []
            swap(&taken, &p.tasks)
            return taken
        }
        if !localTasks.isEmpty {
            if batch.isEmpty { swap(&batch, &localTasks) } else { batch.append(contentsOf: localTasks); localTasks.removeAll() }
        }
        for task in batch {
            run(task)
        }
        // What those queued on this thread (actor hops, resumed continuations of tasks that prefer
        // this loop) runs now, for a few rounds, rather than costing one `epoll_wait(0)` each. The
        // bound keeps a task that keeps re-queueing itself from starving the descriptors.
        var rounds = 0
        while !localTasks.isEmpty && rounds < 16 {
            var more: [Task] = []
            swap(&more, &localTasks)
            for task in more { run(task) }
            rounds += 1
        }
    }

    private func run(_ task: Task) {
        switch task {
        case .closure(let body): body()
        case .job(let job): runJob(job)
        }
    }

    private func finish() {
        pending.withLock { $0.state = .stopped }  // no task is accepted from now on
        // Run what was accepted before the stop (close requests, submit continuations, jobs), then
        // let every still-registered handler close its descriptor. Bounded: tasks may add tasks.
        for _ in 0..<8 {
            let leftover = pending.withLock { p -> [Task] in
                var taken: [Task] = []
                swap(&taken, &p.tasks)
                return taken
            }
            var local: [Task] = []
            swap(&local, &localTasks)
            if leftover.isEmpty && local.isEmpty { break }
            for task in leftover { run(task) }
            for task in local { run(task) }
        }
        for index in registrations.indices {
            if let reg = registrations[index] {
                registrations[index] = nil
                var event = epoll_event()
                _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, Int32(index), &event)
                reg.handler.eventLoopDidShutDown()
            }
        }
        while let timer = timers.first { timers.remove(timer) }
        localTasks.removeAll()
        Glibc.close(wakeFD)
        Glibc.close(epollFD)
    }

    private func setThreadName() {
        let short = String(name.utf8.prefix(15)) ?? "transport-loop"
        _ = smartico_set_thread_name(short)
    }
}

/// `strerror` text for an errno value.
func ioErrnoText(_ code: Int32) -> String {
    String(cString: strerror(code))
}
