// A serial executor backed by one dedicated thread. SQLite calls block (fsync at every commit), so they
// must not run on Swift concurrency's cooperative pool nor on the network event loop: `SmarticoStore` is
// an actor whose `unownedExecutor` is this executor, and every isolated method runs on this thread.
import COpenSSL  // smartico_set_thread_name, smartico_cpu_relax, smartico_usable_cpus
import Synchronization
import Transport  // LoopInstant: the monotonic clock

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A `SerialExecutor` that runs jobs, in order, on one dedicated thread.
///
/// The thread sleeps in `pthread_cond_wait` while there is no job; it is woken only by `enqueue`
/// (no timers, no polling). It ends when the executor is released and its queue is empty.
public final class StoreThreadExecutor: SerialExecutor, @unchecked Sendable {
    // @unchecked Sendable: the only stored property is `state`, whose mutable fields are all guarded by
    // its pthread mutex; `UnownedJob` values are handed from enqueuers to the thread under that mutex.
    private let state: ExecutorState

    /// Starts the thread. `name` (at most 15 bytes are kept) shows up in `top -H` and `/proc`.
    /// `anticipation`: how long the thread waits spinning for a job announced by `anticipateJob()`
    /// before it sleeps; nil turns anticipation off. The default is 100 µs on a machine with two
    /// CPUs or more and off on one CPU, where a spinning thread would only hold up the thread
    /// that is making its job.
    /// `afterSleep`: a thread asleep for less than this is not woken by `anticipateJob()`.
    public init(name: String = "smarticod-store", anticipation: Duration? = StoreThreadExecutor.defaultAnticipation,
                afterSleep: Duration = .microseconds(200)) {
        state = ExecutorState(spin: anticipation, afterSleep: afterSleep)
        state.executor = UnownedSerialExecutor(ordinary: self)
        state.start(name: name)
    }

    deinit {
        state.stop()
    }

    /// Queues `job` to run on the thread after the jobs already queued; wakes the thread if it sleeps.
    public func enqueue(_ job: consuming ExecutorJob) {
        state.push(.job(UnownedJob(job)))
    }

    /// Queues `body` to run on the thread, in the same FIFO as the jobs, without a task: for
    /// synchronous store work whose caller does not await it (the driver's journal commits; their
    /// result goes back to the event loop as a closure too). Handed to the thread at once, from
    /// any thread, where a `Task` would first have to be started on its caller's executor — for
    /// the event loop, only after the I/O handler running now returns.
    public func submit(_ body: @escaping @Sendable () -> Void) {
        state.push(.closure(body))
    }

    /// Announces a job that is likely to be queued within microseconds (a server message that
    /// may be journaled has arrived and is being decoded). A sleeping thread is woken now, and
    /// when it finds no job it waits for one spinning (at most the `anticipation` given at init)
    /// instead of sleeping: its wake-up (15–30 µs where an idle CPU halts, as in a VM) overlaps
    /// the caller's work instead of following it. Without a job pushed in that time the thread
    /// goes back to sleep. A busy thread, or one that went to sleep less than `afterSleep` ago (under
    /// sustained load), is left alone: it finds the job when its current ones are done, or is
    /// woken by it. Cheap to call (a clock read and one uncontended lock); does nothing when
    /// anticipation is off.
    ///
    /// The spin is only worth it on another CPU than the caller's: a thread woken on the caller's
    /// CPU (where the scheduler may well put it, and let it preempt the caller) would hold up the
    /// very work that makes the job. So the thread skips the spin, or ends it, whenever it finds
    /// itself on the CPU the caller was on, and sleeps instead (the push then wakes it on that
    /// CPU, without an inter-processor wake-up); while it spins it yields its CPU to any other
    /// thread waiting for it (docs/store.md, "Anticipation").
    public func anticipateJob() {
        state.anticipate(announcerCPU: smartico_current_cpu())
    }

    /// `anticipateJob()` as if called on CPU `cpu` (-1: unknown, the spin is never cut short for
    /// sharing the caller's CPU). For tests, which pin the threads.
    func anticipateJob(announcedOn cpu: Int32) {
        state.anticipate(announcerCPU: cpu)
    }

    /// Counts kept for tests and benchmarks: how many spins `anticipateJob()` caused, and how
    /// many of them ended with a job pushed (taken without a wake-up).
    public var anticipationCounts: (spins: Int, hits: Int) { state.anticipationCounts }

    /// How many anticipations woke the thread but did not make it spin: it was on the announcer's
    /// CPU, or the job had come already.
    public var declinedAnticipations: Int { state.declinedAnticipations }

    /// On for two CPUs or more (the CPUs this process may run on).
    public static var defaultAnticipation: Duration? {
        smartico_usable_cpus() >= 2 ? .microseconds(100) : nil
    }

    /// This executor, as actors and the runtime refer to it.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Traps unless called on this executor's thread (used by `assumeIsolated` and isolation checks).
    public func checkIsolated() {
        precondition(state.isCurrentThread, "not on the store thread")
    }

    /// How many times the thread has gone round its loop: once per job and once per wake-up from waiting.
    /// Constant while there is no work, which is how tests show the thread really sleeps.
    public var loopIterations: Int { state.loopIterations }

    /// True when called on this executor's thread.
    public var isCurrentThread: Bool { state.isCurrentThread }
}

/// The executor's shared state: a FIFO of jobs under a mutex, and a condition the thread waits on.
private final class ExecutorState: @unchecked Sendable {
    // @unchecked Sendable: `jobs`, `head`, `stopping` and `iterations` are read and written only with
    // `mutex` held; `executor` and `thread` are written once before the thread starts using them
    // (publication through pthread_create and the mutex).
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    /// A job of the Swift runtime, or a closure (`submit`).
    enum Work {
        case job(UnownedJob)
        case closure(@Sendable () -> Void)
    }

    private var jobs: [Work] = []
    private var head = 0
    private var stopping = false
    private var iterations = 0
    /// True while the thread sleeps in `pthread_cond_wait`: only then does a push signal it.
    private var sleeping = false
    /// Jobs pushed so far. Written under `mutex`; read without it only by the spinning thread, as
    /// a hint to stop spinning (what it then takes is read under the mutex).
    private let pushes = Atomic<Int>(0)
    /// Set by `anticipate()`: the thread spins for the job pushed after `anticipatedAt` pushes.
    private var anticipating = false
    private var anticipatedAt = 0
    /// The CPU `anticipate()` was called on (-1: unknown).
    private var announcerCPU: Int32 = -1
    private var spins = 0
    private var spinHits = 0
    /// Anticipations that found the thread on the announcer's CPU (or the job already pushed).
    private var declinedSpins = 0
    /// When the thread last went to sleep.
    private var sleptAt = LoopInstant(nanoseconds: 0)
    /// A thread asleep for less than this (it had work a moment ago) is not woken by `anticipate()`.
    private let afterSleep: Duration
    /// The spin's bound; nil: `anticipate()` does nothing.
    private let spin: Duration?
    var executor: UnownedSerialExecutor?
    private var thread = pthread_t()

    init(spin: Duration?, afterSleep: Duration) {
        self.spin = spin
        self.afterSleep = afterSleep
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func start(name: String) {
        let context = Unmanaged.passRetained(ThreadContext(state: self, name: name)).toOpaque()
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        #if canImport(Darwin)
        var created: pthread_t?
        let rc = pthread_create(&created, nil, { raw in
            Unmanaged<ThreadContext>.fromOpaque(raw).takeRetainedValue().run()
            return nil
        }, context)
        if let created { thread = created }
        #else
        let rc = pthread_create(&thread, nil, { raw in
            Unmanaged<ThreadContext>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, context)
        #endif
        precondition(rc == 0, "cannot start the store thread: pthread_create returned \(rc)")
        pthread_detach(thread)
    }

    var isCurrentThread: Bool {
        pthread_mutex_lock(mutex)
        let me = thread
        pthread_mutex_unlock(mutex)
        return pthread_equal(me, pthread_self()) != 0
    }

    var loopIterations: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return iterations
    }

    func push(_ job: Work) {
        pthread_mutex_lock(mutex)
        jobs.append(job)
        pushes.add(1, ordering: .relaxed)  // the mutex orders `jobs`; this only ends a spin early
        let wake = sleeping
        sleeping = false
        pthread_mutex_unlock(mutex)
        // Signalled after the unlock, so the woken thread does not block at once on the mutex the
        // pusher still holds; and not at all while the thread is busy (it takes the job next).
        if wake { pthread_cond_signal(condition) }
    }

    func anticipate(announcerCPU cpu: Int32) {
        guard spin != nil else { return }
        let now = LoopInstant.now
        pthread_mutex_lock(mutex)
        // Only a thread that has slept a while: a busy one takes the job after its current ones
        // without a wake-up, and under sustained load (short sleeps between commits) the spin
        // would cost more CPU than the wake-up it hides, for a latency set by batching anyway.
        let wake = sleeping && sleptAt.duration(to: now) >= afterSleep
        if wake {
            sleeping = false
            anticipating = true
            anticipatedAt = pushes.load(ordering: .relaxed)
            announcerCPU = cpu
        }
        pthread_mutex_unlock(mutex)
        if wake { pthread_cond_signal(condition) }
    }

    var anticipationCounts: (spins: Int, hits: Int) {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return (spins, spinHits)
    }

    var declinedAnticipations: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return declinedSpins
    }

    /// Spins until a job is pushed after `pushed` pushes, `limit` passes, or the thread finds
    /// itself on `avoiding` (the announcer's CPU, whose work it would hold up); called and returns
    /// with `mutex` held, which it releases while spinning. Every 16 rounds it also yields its CPU
    /// to any thread waiting for it: the spin is a bet on a wake-up saved, not a claim on the CPU.
    private func spinForJob(after pushed: Int, limit: Duration, avoiding: Int32) {
        spins += 1
        pthread_mutex_unlock(mutex)
        let deadline = LoopInstant.now + limit
        var round = 0
        var hit = false
        while true {
            if pushes.load(ordering: .relaxed) != pushed {
                hit = true
                break
            }
            smartico_cpu_relax()
            round &+= 1
            if round & 15 == 0 {
                if LoopInstant.now >= deadline || (avoiding >= 0 && smartico_current_cpu() == avoiding) { break }
                sched_yield()
            }
        }
        pthread_mutex_lock(mutex)
        if hit { spinHits += 1 }
    }

    func stop() {
        pthread_mutex_lock(mutex)
        stopping = true
        pushes.add(1, ordering: .relaxed)  // ends a spin
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
    }

    /// The thread's body: take the next job or sleep until there is one.
    fileprivate func loop() {
        pthread_mutex_lock(mutex)
        while true {
            iterations &+= 1
            if head < jobs.count {
                let job = jobs[head]
                head += 1
                if head == jobs.count {
                    jobs.removeAll(keepingCapacity: jobs.capacity <= 64)
                    head = 0
                }
                let executor = self.executor!
                pthread_mutex_unlock(mutex)
                switch job {
                case .job(let job): job.runSynchronously(on: executor)
                case .closure(let body): body()
                }
                pthread_mutex_lock(mutex)
            } else if stopping {
                pthread_mutex_unlock(mutex)
                return
            } else if anticipating {
                // A job was announced: wait for it awake, unless it came already (then it was taken).
                anticipating = false
                // Not on the announcer's CPU: there it would only delay the job (it sleeps instead).
                if let limit = spin, pushes.load(ordering: .relaxed) == anticipatedAt,
                   announcerCPU < 0 || smartico_current_cpu() != announcerCPU {
                    spinForJob(after: anticipatedAt, limit: limit, avoiding: announcerCPU)
                } else {
                    declinedSpins += 1
                }
            } else {
                sleeping = true
                sleptAt = LoopInstant.now
                pthread_cond_wait(condition, mutex)  // spurious wake-ups just go round again
                sleeping = false
            }
        }
    }
}

/// What the new thread receives: the state it serves and its name.
private final class ThreadContext {
    let state: ExecutorState
    let name: String

    init(state: ExecutorState, name: String) {
        self.state = state
        self.name = name
    }

    func run() {
        _ = smartico_set_thread_name(String(name.utf8.prefix(15)) ?? name)
        state.loop()
    }
}

/// The kernel thread id of the calling thread, read from `/proc/thread-self` (Linux), or nil.
/// (`gettid` and `pthread_setname_np` are GNU extensions the Swift Glibc module does not import.)
func currentKernelThreadID() -> Int32? {
    var buffer = [CChar](repeating: 0, count: 64)
    let count = readlink("/proc/thread-self", &buffer, buffer.count - 1)
    guard count > 0 else { return nil }
    let link = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    guard let last = link.split(separator: "/").last else { return nil }
    return Int32(last)
}
