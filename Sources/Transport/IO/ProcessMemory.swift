// Giving the heap's free pages back to the kernel after a burst.
import COpenSSL

#if canImport(Glibc)
import Glibc
#endif

/// The process's heap, as far as a long-running daemon must care about it.
public enum ProcessMemory {
    /// Returns the free pages of glibc's heap to the kernel (`malloc_trim(0)`: the top of the heap
    /// and every whole free page inside it). glibc keeps what a burst freed — and after freeing a
    /// large block it raises its mmap threshold, so later large buffers come from the heap too —
    /// so without this a daemon that once served 100 busy subscribers stays at that size. Costs a
    /// walk of the heap's free lists (milliseconds at most); call it when a burst is over, not per
    /// event. Returns true when some memory was released.
    @discardableResult
    public static func returnFreePagesToSystem() -> Bool {
        #if canImport(Glibc)
        return malloc_trim(0) == 1
        #else
        return false
        #endif
    }

    /// Makes every thread allocate from glibc's main arena. `malloc_trim` gives back the free
    /// top of the main arena but not of a thread's own arena (glibc's `mtrim` only releases whole
    /// free pages inside a thread arena's bins), so memory a burst left at the top of, say, the
    /// store thread's arena would stay resident for good. With one arena the post-burst trim
    /// reaches all of it. Call before starting threads. Returns false if glibc refused.
    @discardableResult
    public static func useOneArena() -> Bool {
        #if canImport(Glibc)
        return mallopt(M_ARENA_MAX, 1) == 1
        #else
        return false
        #endif
    }
}
