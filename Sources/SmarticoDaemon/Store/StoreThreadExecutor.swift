// A serial executor backed by one dedicated thread. SQLite calls block (fsync at every commit), so they
// must not run on Swift concurrency's cooperative pool nor on the network event loop: `SmarticoStore` is
// an actor whose `unownedExecutor` is this executor, and every isolated method runs on this thread.
import COpenSSL  // smartico_set_thread_name

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A `SerialExecutor` that runs jobs, in order, on one dedicated thread. The thread sleeps in
/// `pthread_cond_wait` while there is no job and ends when the executor is released.
public final class StoreThreadExecutor: SerialExecutor, @unchecked Sendable {
    // @unchecked Sendable: the only stored property is `state`, whose mutable fields are all guarded by
    // its pthread mutex; jobs are handed from enqueuers to the thread under that mutex.
    private let state: ExecutorState

    /// Starts the thread. `name` (at most 15 bytes are kept) shows up in `top -H` and `/proc`.
    public init(name: String = "smarticod-store") {
        state = ExecutorState()
        state.executor = UnownedSerialExecutor(ordinary: self)
        state.start(name: name)
    }

    deinit { state.stop() }

    /// Queues `job` to run on the thread after the jobs already queued.
    public func enqueue(_ job: consuming ExecutorJob) {
        state.push(.job(UnownedJob(job)))
    }

    /// Queues `body` to run on the thread, in the same FIFO as the jobs, without a task (for a
    /// caller that does not await the result; it can hand it back to its own executor).
    public func submit(_ body: @escaping @Sendable () -> Void) {
        state.push(.closure(body))
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Traps unless called on this executor's thread (used by `assumeIsolated` and isolation checks).
    public func checkIsolated() {
        precondition(state.isCurrentThread, "not on the store thread")
    }

    /// How many times the thread has gone round its loop (once per job and per wake-up): constant
    /// while there is no work, which is how tests show the thread really sleeps.
    public var loopIterations: Int { state.loopIterations }

    /// True when called on this executor's thread.
    public var isCurrentThread: Bool { state.isCurrentThread }
}

/// The executor's shared state: a FIFO of work under a mutex, and a condition the thread waits on.
private final class ExecutorState: @unchecked Sendable {
    // @unchecked Sendable: `jobs`, `stopping` and `iterations` are read and written only with `mutex`
    // held; `executor` and `thread` are written once before the thread uses them (published through
    // pthread_create and the mutex).
    enum Work {
        case job(UnownedJob)
        case closure(@Sendable () -> Void)
    }

    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var jobs: [Work] = []
    private var head = 0
    private var stopping = false
    private var iterations = 0
    var executor: UnownedSerialExecutor?
    private var thread = pthread_t()

    init() {
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

    func push(_ work: Work) {
        pthread_mutex_lock(mutex)
        jobs.append(work)
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
    }

    func stop() {
        pthread_mutex_lock(mutex)
        stopping = true
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
    }

    /// The thread's body: take the next job or sleep until there is one.
    fileprivate func loop() {
        pthread_mutex_lock(mutex)
        while true {
            iterations &+= 1
            if head < jobs.count {
                let work = jobs[head]
                head += 1
                if head == jobs.count {
                    jobs.removeAll(keepingCapacity: true)
                    head = 0
                }
                let executor = self.executor!
                pthread_mutex_unlock(mutex)
                switch work {
                case .job(let job): job.runSynchronously(on: executor)
                case .closure(let body): body()
                }
                pthread_mutex_lock(mutex)
            } else if stopping {
                pthread_mutex_unlock(mutex)
                return
            } else {
                pthread_cond_wait(condition, mutex)  // spurious wake-ups just go round again
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
/// (`gettid` is a GNU extension the Swift Glibc module does not import.)
func currentKernelThreadID() -> Int32? {
    var buffer = [CChar](repeating: 0, count: 64)
    let count = readlink("/proc/thread-self", &buffer, buffer.count - 1)
    guard count > 0 else { return nil }
    let link = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    guard let last = link.split(separator: "/").last else { return nil }
    return Int32(last)
}
