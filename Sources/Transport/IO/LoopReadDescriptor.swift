#if canImport(Glibc)
import Glibc
#endif

/// A descriptor its owner reads on an ``EventLoop`` (a `signalfd`, an rtnetlink socket): owned from
/// ``watch(_:on:handler:)`` on, and closed when the loop refuses it, on ``cancel(on:)`` and when the
/// loop shuts down. Loop thread only.
struct LoopReadDescriptor {
    /// The descriptor; -1 before ``watch(_:on:handler:)`` and once closed.
    private(set) var fd: Int32 = -1

    var isOpen: Bool { fd >= 0 }

    /// Takes `fd` and registers `handler` to read it; when the loop refuses, `fd` is closed and the
    /// error thrown.
    mutating func watch(_ fd: Int32, on loop: EventLoop, handler: any EventLoopHandler) throws(EventLoopError) {
        do {
            try loop.register(fd: fd, interest: .read, handler: handler)
        } catch {
            Glibc.close(fd)
            throw error
        }
        self.fd = fd
    }

    /// Stops watching and closes the descriptor. Idempotent.
    mutating func cancel(on loop: EventLoop) {
        guard fd >= 0 else { return }
        loop.unregister(fd: fd)
        close()
    }

    /// Closes the descriptor (the loop has already dropped it: ``EventLoopHandler/eventLoopDidShutDown()``).
    /// Idempotent.
    mutating func close() {
        guard fd >= 0 else { return }
        Glibc.close(fd)
        fd = -1
    }
}
