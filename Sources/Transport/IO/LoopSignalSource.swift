#if canImport(Glibc)
import Glibc
#endif
import COpenSSL

/// Signals delivered to an ``EventLoop`` through a `signalfd`: no signal handler, no extra thread
/// (libdispatch's signal sources would start its worker threads and their 1 Hz timer).
///
/// A `signalfd` only sees signals that are **blocked in every thread** (otherwise the kernel runs the
/// default action in a thread that has them unblocked): call ``blockInCallingThread(_:)`` on the
/// main thread before any thread starts — threads inherit the mask. Child processes inherit it too:
/// reset it when spawning (`posix_spawnattr_setsigmask`). A signal that arrives before the source
/// exists stays pending in the kernel and is read when the source starts.
public final class LoopSignalSource: EventLoopHandler {
    public let loop: EventLoop
    private var descriptor = LoopReadDescriptor()
    private let handler: (Int32) -> Void

    /// Blocks `signals` in the calling thread and in every thread it starts from now on. Any thread.
    public static func blockInCallingThread(_ signals: [Int32]) {
        var set = signalSet(signals)
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    private static func signalSet(_ signals: [Int32]) -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for s in signals { sigaddset(&set, s) }
        return set
    }

    /// Reads `signals` from a new `signalfd` on `loop` and calls `handler` with each, on the loop
    /// thread, until ``cancel()``. Loop thread.
    public init(loop: EventLoop, signals: [Int32], handler: @escaping (Int32) -> Void) throws(EventLoopError) {
        loop.preconditionInEventLoop()
        var set = Self.signalSet(signals)
        let fd = signalfd(-1, &set, Int32(SFD_NONBLOCK | SFD_CLOEXEC))
        guard fd >= 0 else { throw .system(operation: "signalfd", errno: errno) }
        self.loop = loop
        self.handler = handler
        try descriptor.watch(fd, on: loop, handler: self)
    }

    /// Stops reading and closes the descriptor; signals stay blocked (and pending ones stay queued).
    /// Idempotent. Loop thread.
    public func cancel() {
        loop.preconditionInEventLoop()
        descriptor.cancel(on: loop)
    }

    public func handleEvents(_ events: IOEvents) {
        var infos = [signalfd_siginfo](repeating: signalfd_siginfo(), count: 8)
        while descriptor.isOpen {
            let n = infos.withUnsafeMutableBytes { Glibc.read(descriptor.fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }  // EAGAIN: all read
            let count = n / MemoryLayout<signalfd_siginfo>.size
            for i in 0..<count {
                handler(Int32(bitPattern: infos[i].ssi_signo))
                if !descriptor.isOpen { return }  // the handler cancelled
            }
        }
    }

    public func eventLoopDidShutDown() { descriptor.close() }
}
