#if canImport(Glibc)
import Glibc
#endif
import COpenSSL

/// A few dedicated threads for calls that block (`getaddrinfo`, file reads, joins), so they never run on
/// Swift concurrency's cooperative pool. Idle threads sleep on a condition variable (no polling).
public final class BlockingPool:
    // All mutable state (`queue`, `stopping`) is accessed only with `mutex` held.
    @unchecked Sendable
{
    /// A process-wide pool with two threads, started on first use.
    public static let shared = BlockingPool(threadCount: 2, name: "transport-block")

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var queue: [@Sendable () -> Void] = []
    private var queueHead = 0
    private var stopping = false
    private var threads: [pthread_t] = []
    public let name: String

    /// Starts `threadCount` threads.
    public init(threadCount: Int, name: String = "transport-block") {
        precondition(threadCount > 0)
        self.name = name
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        for _ in 0..<threadCount {
            var thread = pthread_t()
            let box = Unmanaged.passRetained(self).toOpaque()
            let rc = pthread_create(&thread, nil, { arg in
                let pool = Unmanaged<BlockingPool>.fromOpaque(arg!).takeRetainedValue()
                pool.work()
                return nil
            }, box)
            precondition(rc == 0, "pthread_create failed: \(ioErrnoText(rc))")
            threads.append(thread)
        }
    }

    /// Queues `work` to run on one of the pool's threads. Work submitted after ``shutdownAndJoin()`` runs
    /// on the calling thread.
    public func submit(_ work: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(mutex)
        if stopping {
            pthread_mutex_unlock(mutex)
            work()
            return
        }
        queue.append(work)
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
    }

    /// Runs `body` on a pool thread and returns its result.
    public func run<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { c in
            submit {
                c.resume(returning: Result { () throws(E) -> T in try body() })
            }
        }
        return try result.get()
    }

    /// Runs `work` on a pool thread, then `completion` with its result on `loop`'s thread.
    public func run<T: Sendable>(
        _ work: @escaping @Sendable () -> T, deliverOn loop: EventLoop,
        _ completion: @escaping @Sendable (T) -> Void
    ) {
        submit {
            let result = work()
            loop.execute { completion(result) }
        }
    }

    /// The threads hold the pool while they run, so this runs once they have ended. The mutex and
    /// condition were never freed before (LeakSanitizer, docs/reliability.md "Sanitizers").
    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Lets queued work finish, stops the threads and joins them. Not from a pool thread.
    public func shutdownAndJoin() {
        pthread_mutex_lock(mutex)
        stopping = true
        let toJoin = threads
        threads = []
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
        for thread in toJoin { pthread_join(thread, nil) }
    }

    private func work() {
        _ = smartico_set_thread_name(String(name.utf8.prefix(15)) ?? "transport-block")
        pthread_mutex_lock(mutex)
        while true {
            if queueHead < queue.count {
                let item = queue[queueHead]
                queueHead += 1
                if queueHead == queue.count { queue.removeAll(keepingCapacity: true); queueHead = 0 }
                pthread_mutex_unlock(mutex)
                item()
                pthread_mutex_lock(mutex)
            } else if stopping {
                break
            } else {
                pthread_cond_wait(condition, mutex)
            }
        }
        pthread_mutex_unlock(mutex)
    }
}
