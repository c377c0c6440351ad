#if canImport(Glibc)
import Glibc
#endif
import COpenSSL

/// TCP options applied to every client socket (and to accepted sockets of a TCP ``StreamListener``).
public struct TCPOptions: Sendable {
    /// TCP keepalive probes (`SO_KEEPALIVE`, `TCP_KEEPIDLE`, `TCP_KEEPINTVL`, `TCP_KEEPCNT`).
    public struct KeepAlive: Sendable {
        /// Idle time before the first probe.
        public var idle: Duration
        /// Time between probes.
        public var interval: Duration
        /// Unanswered probes before the connection is dropped.
        public var count: Int
        public init(idle: Duration = .seconds(60), interval: Duration = .seconds(10), count: Int = 5) {
            self.idle = idle
            self.interval = interval
            self.count = count
        }
    }
    /// `TCP_NODELAY` (on by default: protocols here write whole messages).
    public var noDelay: Bool
    /// Keepalive settings, or nil for the kernel default (off).
    public var keepAlive: KeepAlive?
    /// Overall limit for DNS + TCP connect (each address within what is left) + TLS handshake.
    public var connectTimeout: Duration

    public init(noDelay: Bool = true, keepAlive: KeepAlive? = KeepAlive(), connectTimeout: Duration = .seconds(10)) {
        self.noDelay = noDelay
        self.keepAlive = keepAlive
        self.connectTimeout = connectTimeout
    }
}

/// A non-blocking, close-on-exec socket.
func ioMakeSocket(family: Int32, target: String) throws(SocketError) -> Int32 {
    let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    let fd = socket(family, type, 0)
    guard fd >= 0 else { throw .system(operation: "socket for", target: target, errno: errno) }
    return fd
}

func ioSetIntOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32, what: String, target: String)
    throws(SocketError)
{
    var v = value
    guard setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
        throw .system(operation: "setsockopt(\(what)) on", target: target, errno: errno)
    }
}

func ioApplyTCPOptions(_ options: TCPOptions, fd: Int32, target: String) throws(SocketError) {
    if options.noDelay {
        try ioSetIntOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1, what: "TCP_NODELAY", target: target)
    }
    if let keepAlive = options.keepAlive {
        func seconds(_ d: Duration) -> Int32 { Int32(clamping: max(1, d.components.seconds)) }
        try ioSetIntOption(fd, SOL_SOCKET, SO_KEEPALIVE, 1, what: "SO_KEEPALIVE", target: target)
        try ioSetIntOption(fd, Int32(IPPROTO_TCP), TCP_KEEPIDLE, seconds(keepAlive.idle), what: "TCP_KEEPIDLE", target: target)
        try ioSetIntOption(fd, Int32(IPPROTO_TCP), TCP_KEEPINTVL, seconds(keepAlive.interval), what: "TCP_KEEPINTVL", target: target)
        try ioSetIntOption(fd, Int32(IPPROTO_TCP), TCP_KEEPCNT, Int32(clamping: max(1, keepAlive.count)), what: "TCP_KEEPCNT", target: target)
    }
}
