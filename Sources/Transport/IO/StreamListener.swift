#if canImport(Glibc)
import Glibc
#endif
import COpenSSL

/// A listening socket on an ``EventLoop``: TCP, Unix stream, or an adopted descriptor (systemd socket
/// activation). Accepted sockets become ``StreamConnection``s (TLS server side when a context is given),
/// handed to `onAccept` not yet reading: set their handlers and call ``StreamConnection/start()``.
///
/// Accepting runs in a loop until `EAGAIN` (at most 256 per wake-up, for fairness). When the process is
/// out of descriptors (`EMFILE`/`ENFILE`) the listener stops watching for 100 ms instead of spinning and
/// reports it through `onError`.
///
/// Create and use it on the loop thread (``EventLoop/submit(_:)`` from elsewhere).
public final class StreamListener: EventLoopHandler, CustomStringConvertible,
    // Mutable state is confined to the loop thread (public methods check it).
    @unchecked Sendable
{
    public let loop: EventLoop
    /// The bound address (with the port the kernel chose for port 0).
    public let localAddress: SocketAddress
    /// Called with each accepted connection (not started).
    public var onAccept: ((StreamConnection) -> Void)?
    /// Called for accept errors that do not stop the listener (e.g. out of descriptors).
    public var onError: ((SocketError) -> Void)?
    /// With TLS: an accepted connection whose handshake has not completed by then is closed with
    /// ``TLSError/handshakeFailed(name:reason:)`` (its `onClose` is called if set). Nil: no limit.
    public var tlsHandshakeTimeout: Duration? = .seconds(10)

    private var fd: Int32
    private let tls: TLSContext?
    private let tcpOptions: TCPOptions?
    private let unlinkPathOnClose: String?
    private var backoff: LoopTimer?
    private var registered = false

    private init(
        fd: Int32, loop: EventLoop, localAddress: SocketAddress, tls: TLSContext?, tcpOptions: TCPOptions?,
        unlinkPathOnClose: String?
    ) {
        self.fd = fd
        self.loop = loop
        self.localAddress = localAddress
        self.tls = tls
        self.tcpOptions = tcpOptions
        self.unlinkPathOnClose = unlinkPathOnClose
    }

    deinit {
        // Reachable only once the loop dropped it (closed, or shut down): then fd is already -1.
        if fd >= 0 { Glibc.close(fd) }
    }

    public var description: String { "StreamListener(\(localAddress))" }

    /// The TCP port (useful after binding port 0).
    public var port: Int? { localAddress.port }

    /// Listens on TCP `host` ("127.0.0.1", "::1", "0.0.0.0", "::"; IP literals only) and `port` (0: the
    /// kernel picks one; read ``port``). `SO_REUSEADDR` is set; an IPv6 socket is IPv6-only.
    /// Accepted sockets get `tcpOptions` (keepalive, no-delay; the connect timeout is ignored).
    public static func tcp(
        host: String, port: Int, backlog: Int32 = 1024, tls: TLSContext? = nil,
        tcpOptions: TCPOptions = TCPOptions(), on loop: EventLoop
    ) throws(SocketError) -> StreamListener {
        loop.preconditionInEventLoop()
        guard let address = SocketAddress(ip: host, port: port) else {
            throw .invalidArgument("listen address must be an IP literal and a port in 0...65535, got \"\(host)\" port \(port)")
        }
        let target = address.description
        let fd = try ioMakeSocket(family: address.family, target: target)
        do throws(SocketError) {
            try ioSetIntOption(fd, SOL_SOCKET, SO_REUSEADDR, 1, what: "SO_REUSEADDR", target: target)
            if address.family == AF_INET6 {
                try ioSetIntOption(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1, what: "IPV6_V6ONLY", target: target)
            }
            try address.withSockAddr { sa, length throws(SocketError) in
                guard bind(fd, sa, length) == 0 else { throw .system(operation: "bind", target: target, errno: errno) }
            }
            guard listen(fd, backlog) == 0 else { throw .system(operation: "listen on", target: target, errno: errno) }
        } catch {
            Glibc.close(fd)
            throw error
        }
        let bound = ioSocketName(fd: fd, peer: false) ?? address
        return try StreamListener(fd: fd, loop: loop, localAddress: bound, tls: tls, tcpOptions: tcpOptions, unlinkPathOnClose: nil)
            .watching()
    }

    /// Listens on a Unix stream socket at `path`. A stale socket file (nobody accepting) is replaced; a
    /// live one is an error (`EADDRINUSE`), as is any other kind of file. The socket file gets `mode`
    /// and is removed by ``close()``.
    public static func unix(
        path: String, mode: mode_t = 0o660, backlog: Int32 = 1024, on loop: EventLoop
    ) throws(SocketError) -> StreamListener {
        loop.preconditionInEventLoop()
        let address = SocketAddress.unix(path: path)
        try removeStaleSocket(path: path)
        let fd = try ioMakeSocket(family: AF_UNIX, target: path)
        do throws(SocketError) {
            try address.withSockAddr { sa, length throws(SocketError) in
                guard bind(fd, sa, length) == 0 else { throw .system(operation: "bind", target: path, errno: errno) }
            }
            guard chmod(path, mode) == 0 else {
                let e = errno
                unlink(path)
                throw .system(operation: "chmod", target: path, errno: e)
            }
            guard listen(fd, backlog) == 0 else {
                let e = errno
                unlink(path)
                throw .system(operation: "listen on", target: path, errno: e)
            }
        } catch {
            Glibc.close(fd)
            throw error
        }
        return try StreamListener(fd: fd, loop: loop, localAddress: address, tls: nil, tcpOptions: nil, unlinkPathOnClose: path)
            .watching()
    }

    /// Adopts a descriptor that is already a listening stream socket (systemd passes fd 3 with
    /// `LISTEN_FDS=1`). It is made non-blocking and close-on-exec; the listener owns it from now on (also
    /// when this throws). TCP sockets get `tcpOptions` on accept.
    public static func adopt(
        fd: Int32, tls: TLSContext? = nil, tcpOptions: TCPOptions = TCPOptions(), on loop: EventLoop
    ) throws(SocketError) -> StreamListener {
        loop.preconditionInEventLoop()
        let target = "fd \(fd)"
        let address: SocketAddress
        do throws(SocketError) {
            var accepting: Int32 = 0
            var type: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0 else {
                throw .system(operation: "getsockopt(SO_TYPE) on", target: target, errno: errno)
            }
            length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) == 0 else {
                throw .system(operation: "getsockopt(SO_ACCEPTCONN) on", target: target, errno: errno)
            }
            guard type == Int32(SOCK_STREAM.rawValue), accepting == 1 else {
                throw .invalidArgument("\(target) is not a listening stream socket (check the .socket unit: ListenStream=)")
            }
            let flags = fcntl(fd, F_GETFL)
            guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0, fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 else {
                throw .system(operation: "fcntl", target: target, errno: errno)
            }
            guard let named = ioSocketName(fd: fd, peer: false) else {
                throw .system(operation: "getsockname", target: target, errno: errno)
            }
            address = named
        } catch {
            Glibc.close(fd)
            throw error
        }
        let isTCP = address.family != AF_UNIX
        return try StreamListener(
            fd: fd, loop: loop, localAddress: address, tls: tls, tcpOptions: isTCP ? tcpOptions : nil, unlinkPathOnClose: nil
        ).watching()
    }

    /// The descriptors systemd passed by socket activation (`sd_listen_fds` semantics): `[3, 4, …]` when
    /// `LISTEN_PID` is this process and `LISTEN_FDS` is a count, else `[]`. Adopt each with
    /// ``adopt(fd:tls:tcpOptions:on:)``. `environment` and `pid` are parameters for tests.
    public static func systemdListenFDs(
        environment: (String) -> String? = { name in getenv(name).map { String(cString: $0) } },
        pid: Int32 = getpid()
    ) -> [Int32] {
        guard let listenPID = environment("LISTEN_PID").flatMap({ Int32($0) }), listenPID == pid,
            let count = environment("LISTEN_FDS").flatMap({ Int32($0) }), count > 0, count < 1024
        else { return [] }
        return Array(3..<(3 + count))
    }

    private static func removeStaleSocket(path: String) throws(SocketError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }  // nothing there
        guard (info.st_mode & S_IFMT) == S_IFSOCK else {
            throw .invalidArgument("\(path) exists and is not a socket; refusing to replace it")
        }
        // Is anyone accepting on it? A blocking connect on a Unix socket returns at once.
        let probe = try ioMakeSocket(family: AF_UNIX, target: path)
        defer { Glibc.close(probe) }
        let live = try SocketAddress.unix(path: path).withSockAddr { sa, length throws(SocketError) -> Bool in
            if Glibc.connect(probe, sa, length) == 0 { return true }
            return errno == EAGAIN  // backlog full: alive
        }
        if live {
            throw .system(operation: "listen on", target: "\(path) (another process is listening)", errno: EADDRINUSE)
        }
        guard unlink(path) == 0 || errno == ENOENT else {
            throw .system(operation: "unlink stale socket", target: path, errno: errno)
        }
    }

    /// Starts watching for connections; when the loop refuses, closes the socket (and removes the
    /// socket file it made) and throws.
    private func watching() throws(SocketError) -> StreamListener {
        do throws(EventLoopError) {
            try loop.register(fd: fd, interest: .read, handler: self)
        } catch {
            close()
            throw .eventLoop(error)
        }
        registered = true
        return self
    }

    /// Stops listening and closes the socket (removing a Unix socket file it created). Connections
    /// already accepted are not affected.
    public func close() {
        loop.preconditionInEventLoop()
        guard fd >= 0 else { return }
        if registered { loop.unregister(fd: fd) }
        registered = false
        backoff?.invalidate()
        backoff = nil
        Glibc.close(fd)
        fd = -1
        if let path = unlinkPathOnClose { unlink(path) }
        onAccept = nil
        onError = nil
    }

    /// True until ``close()``.
    public var isListening: Bool { fd >= 0 }

    public func handleEvents(_ events: IOEvents) {
        for _ in 0..<256 {
            guard fd >= 0 else { return }
            let client = smartico_accept4(fd, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
            if client < 0 {
                let e = errno
                switch e {
                case EINTR, ECONNABORTED, EPROTO:
                    continue
                case EAGAIN, EWOULDBLOCK:
                    return
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    pauseAccepting(error: e)
                    return
                default:
                    onError?(.system(operation: "accept on", target: localAddress.description, errno: e))
                    return
                }
            }
            accepted(client)
        }
    }

    public func eventLoopDidShutDown() {
        registered = false
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
            if let path = unlinkPathOnClose { unlink(path) }
        }
        backoff = nil
        onAccept = nil
        onError = nil
    }

    private func accepted(_ client: Int32) {
        let peerName: String
        if localAddress.family == AF_UNIX {
            let credentials = ioPeerCredentials(fd: client)
            peerName = "\(localAddress) peer " + (credentials.map { "pid \($0.pid) uid \($0.uid)" } ?? "fd \(client)")
        } else {
            peerName = ioSocketName(fd: client, peer: true)?.description ?? "fd \(client)"
        }
        if let tcpOptions {
            var options = tcpOptions
            options.connectTimeout = .zero
            do throws(SocketError) { try ioApplyTCPOptions(options, fd: client, target: peerName) } catch {
                Glibc.close(client)
                onError?(error)
                return
            }
        }
        var engine: TLSEngine? = nil
        if let tls {
            do throws(TLSError) { engine = try TLSEngine(serverContext: tls, peerName: peerName) } catch {
                Glibc.close(client)
                onError?(.tls(error))
                return
            }
        }
        do throws(SocketError) {
            let connection = try StreamConnection(fd: client, loop: loop, peerName: peerName, tls: engine)
            if engine != nil, let timeout = tlsHandshakeTimeout { connection.armHandshakeTimeout(timeout) }
            if let onAccept {
                onAccept(connection)
            } else {
                connection.close()
            }
        } catch {
            onError?(error)
        }
    }

    private func pauseAccepting(error: Int32) {
        onError?(.system(operation: "accept on", target: localAddress.description + " (pausing 100ms)", errno: error))
        guard fd >= 0, registered else { return }
        try? loop.modify(fd: fd, interest: .none)
        if backoff == nil {
            backoff = LoopTimer(loop: loop) { [weak self] in
                guard let self, self.fd >= 0, self.registered else { return }
                try? self.loop.modify(fd: self.fd, interest: .read)
            }
        }
        backoff?.schedule(after: .milliseconds(100))
    }
}
