#if canImport(Glibc)
import Glibc
#endif

/// Changes of the machine's links, addresses and routes, read from an rtnetlink socket
/// (`NETLINK_ROUTE`, groups link, IPv4/IPv6 address and IPv4/IPv6 route) on an ``EventLoop``.
///
/// Messages come in bursts (a link going down removes its addresses and routes: a dozen messages);
/// the first message of a burst arms a timer, and `handler` runs once when it fires, `debounce`
/// later, for everything that arrived meanwhile. What changed is not parsed: any message counts.
/// A receive buffer overrun (`ENOBUFS`: changes were lost) counts as a change too. The socket is
/// drained on every readiness, so the loop never spins on it.
public final class LoopNetworkMonitor: EventLoopHandler {
    public let loop: EventLoop
    private var descriptor = LoopReadDescriptor()
    private let handler: () -> Void
    private let debounce: Duration
    private var timer: LoopTimer?
    private var armed = false

    /// Messages read since the monitor started (tests, debugging).
    public private(set) var messages = 0

    /// Opens the rtnetlink socket and watches it on `loop`; `handler` runs on the loop thread once
    /// per burst of changes, `debounce` after its first message, until ``cancel()``. Throws when
    /// the socket cannot be opened or bound (no netlink in this sandbox or namespace). Loop thread.
    // linux/netlink.h and linux/rtnetlink.h, which Glibc's module does not include.
    private static let afNetlink: Int32 = 16
    private static let netlinkRoute: Int32 = 0
    /// RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR | RTMGRP_IPV6_ROUTE.
    private static let groups: UInt32 = 0x1 | 0x10 | 0x40 | 0x100 | 0x400

    /// `struct sockaddr_nl`: family, padding, port id (0: the kernel assigns one), groups.
    private struct NetlinkAddress {
        var family = UInt16(16)
        var pad: UInt16 = 0
        var pid: UInt32 = 0
        var groups: UInt32
    }

    public init(loop: EventLoop, debounce: Duration = .milliseconds(5), handler: @escaping () -> Void) throws(EventLoopError) {
        loop.preconditionInEventLoop()
        let fd = socket(Self.afNetlink, Int32(SOCK_RAW.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), Self.netlinkRoute)
        guard fd >= 0 else { throw .system(operation: "socket(AF_NETLINK, NETLINK_ROUTE)", errno: errno) }
        var address = NetlinkAddress(groups: Self.groups)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<NetlinkAddress>.size)) }
        }
        guard bound == 0 else {
            let code = errno
            Glibc.close(fd)
            throw .system(operation: "bind(NETLINK_ROUTE)", errno: code)
        }
        self.loop = loop
        self.handler = handler
        self.debounce = debounce
        try descriptor.watch(fd, on: loop, handler: self)
        timer = LoopTimer(loop: loop) { [weak self] in
            guard let self, self.descriptor.isOpen else { return }
            self.armed = false
            self.handler()
        }
    }

    /// Stops watching and closes the socket. Idempotent. Loop thread.
    public func cancel() {
        loop.preconditionInEventLoop()
        timer?.invalidate()
        timer = nil
        descriptor.cancel(on: loop)
    }

    public func handleEvents(_ events: IOEvents) {
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        var changed = false
        while descriptor.isOpen {
            let n = buffer.withUnsafeMutableBytes { recv(descriptor.fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                messages += 1
                changed = true
                continue
            }
            if n < 0 && errno == EINTR { continue }
            // ENOBUFS: the kernel dropped messages for us; something changed.
            if n < 0 && errno == ENOBUFS {
                changed = true
                continue
            }
            break  // EAGAIN: all read (a netlink socket never reports EOF)
        }
        guard changed, !armed, let timer else { return }
        armed = true
        timer.schedule(after: debounce)
    }

    public func eventLoopDidShutDown() { descriptor.close() }
}
