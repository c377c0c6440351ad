// Waking a plain thread that waits for work done elsewhere (a task, the loop).
#if canImport(Glibc)
import Glibc
#endif

/// A one-shot latch a plain thread waits on (a POSIX semaphore: no Dispatch).
public final class ThreadLatch: Sendable {
    /// Only used through the sem_* calls, which are thread-safe.
    nonisolated(unsafe) private let semaphore: UnsafeMutablePointer<sem_t>

    public init() {
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, 0)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    /// Lets the waiter go. Any thread.
    public func open() { sem_post(semaphore) }

    /// Blocks the calling thread until ``open()``.
    public func wait() {
        while sem_wait(semaphore) != 0 && errno == EINTR {}
    }
}
