#if canImport(Glibc)
import Glibc
#endif
import Synchronization

extension StreamConnection {
    /// Connects to `host:port` over TCP: resolves on the blocking pool (IPv4 and IPv6, resolver order),
    /// tries each address in turn within what is left of `options.connectTimeout`, and with `tls` set runs
    /// the TLS handshake (verifying `host`) before returning. The connection is not reading yet: set the
    /// handlers on the loop thread, then call ``start()``. Any context.
    ///
    /// Errors: ``SocketError/dns(host:port:reason:)``, ``SocketError/connectFailed(host:port:attempts:)``
    /// (e.g. every address refused), ``SocketError/connectTimeout(host:port:timeout:phase:attempts:)``,
    /// ``SocketError/tls(_:)``.
    public static func connect(
        host: String, port: Int, options: TCPOptions = TCPOptions(), tls: TLSContext? = nil, on loop: EventLoop
    ) async throws(SocketError) -> StreamConnection {
        let deadline = LoopInstant.now + options.connectTimeout
        let addresses = try await resolveBefore(deadline: deadline, host: host, port: port, options: options, loop: loop)
        return try await connect(to: addresses, host: host, port: port, options: options, tls: tls, deadline: deadline, on: loop)
    }

    /// Connects to already-resolved `addresses` in order; `host` is used for TLS verification and errors.
    public static func connect(
        to addresses: [SocketAddress], host: String, port: Int, options: TCPOptions = TCPOptions(),
        tls: TLSContext? = nil, on loop: EventLoop
    ) async throws(SocketError) -> StreamConnection {
        try await connect(
            to: addresses, host: host, port: port, options: options, tls: tls,
            deadline: .now + options.connectTimeout, on: loop)
    }

    private static func connect(
        to addresses: [SocketAddress], host: String, port: Int, options: TCPOptions, tls: TLSContext?,
        deadline: LoopInstant, on loop: EventLoop
    ) async throws(SocketError) -> StreamConnection {
        let result: Result<StreamConnection, SocketError> = await withCheckedContinuation { continuation in
            let accepted = loop.execute {
                let connector = TCPConnector(
                    loop: loop, host: host, port: port, addresses: addresses, options: options, tls: tls,
                    deadline: deadline, completion: { continuation.resume(returning: $0) })
                connector.begin()
            }
            if !accepted { continuation.resume(returning: .failure(.eventLoop(.shutDown(loop: loop.name)))) }
        }
        return try result.get()
    }

    /// Connects to a Unix stream socket at `path`. Not reading yet: set handlers, then ``start()``.
    public static func connect(unixPath path: String, on loop: EventLoop) async throws(SocketError) -> StreamConnection {
        let result: Result<StreamConnection, SocketError>
        do {
            result = try await loop.submit { () -> Result<StreamConnection, SocketError> in
                Result { () throws(SocketError) -> StreamConnection in
                    let fd = try ioMakeSocket(family: AF_UNIX, target: path)
                    do throws(SocketError) {
                        try SocketAddress.unix(path: path).withSockAddr { address, length throws(SocketError) in
                            guard Glibc.connect(fd, address, length) == 0 else {
                                // A Unix connect does not go "in progress"; EAGAIN means the backlog is full.
                                throw .system(operation: "connect to", target: path, errno: errno)
                            }
                        }
                    } catch {
                        Glibc.close(fd)
                        throw error
                    }
                    return try StreamConnection(fd: fd, loop: loop, peerName: path, tls: nil)
                }
            }
        } catch {
            throw .eventLoop(.shutDown(loop: loop.name))
        }
        return try result.get()
    }

    /// Resolves on the pool, racing the deadline (a stuck resolver cannot hold the caller past it).
    private static func resolveBefore(
        deadline: LoopInstant, host: String, port: Int, options: TCPOptions, loop: EventLoop
    ) async throws(SocketError) -> [SocketAddress] {
        if let literal = SocketAddress(ip: host, port: port) { return [literal] }
        guard (0...65535).contains(port) else {
            throw .invalidArgument("port \(port) of \"\(host)\" is outside 0...65535")
        }
        let once = Mutex(false)
        let result: Result<[SocketAddress], SocketError> = await withCheckedContinuation { continuation in
            @Sendable func finish(_ r: Result<[SocketAddress], SocketError>) -> Bool {
                let first = once.withLock { done -> Bool in
                    if done { return false }
                    done = true
                    return true
                }
                if first { continuation.resume(returning: r) }
                return first
            }
            let timer = LoopTimerBox()
            loop.execute {
                timer.timer = loop.scheduleTimer(after: LoopInstant.now.duration(to: deadline)) {
                    _ = finish(.failure(.connectTimeout(host: host, port: port, timeout: options.connectTimeout, phase: .dns, attempts: [])))
                }
            }
            loop.blockingPool.submit {
                let r = Result { () throws(SocketError) -> [SocketAddress] in
                    try Resolver.resolveBlocking(host: host, port: port)
                }
                if finish(r) {
                    loop.execute { timer.timer?.cancel() }
                }
            }
        }
        return try result.get()
    }
}

/// Holds a loop timer created in one loop task and cancelled in another.
private final class LoopTimerBox:
    // `timer` is only read and written on the loop thread (inside loop.execute closures).
    @unchecked Sendable
{
    var timer: LoopTimer?
}

/// One connect operation on the loop: the addresses in order, then the TLS handshake. Loop thread.
private final class TCPConnector: EventLoopHandler {
    let loop: EventLoop
    let host: String
    let port: Int
    let addresses: [SocketAddress]
    let options: TCPOptions
    let tls: TLSContext?
    let deadline: LoopInstant
    var completion: ((Result<StreamConnection, SocketError>) -> Void)?
    var index = 0
    var fd: Int32 = -1
    var attempts: [ConnectAttempt] = []
    var timer: LoopTimer?
    var handshaking: StreamConnection?

    init(
        loop: EventLoop, host: String, port: Int, addresses: [SocketAddress], options: TCPOptions,
        tls: TLSContext?, deadline: LoopInstant, completion: @escaping (Result<StreamConnection, SocketError>) -> Void
    ) {
        self.loop = loop
        self.host = host
        self.port = port
        self.addresses = addresses
        self.options = options
        self.tls = tls
        self.deadline = deadline
        self.completion = completion
    }

    func begin() {
        timer = loop.scheduleTimer(after: LoopInstant.now.duration(to: deadline)) { [self] in timedOut() }
        tryNext()
    }

    private var peerName: String { "\(host):\(port)" }

    private func tryNext() {
        while completion != nil {
            guard index < addresses.count else {
                finish(.failure(.connectFailed(host: host, port: port, attempts: attempts)))
                return
            }
            let address = addresses[index]
            index += 1
            do {
                fd = try ioMakeSocket(family: address.family, target: address.description)
                try ioApplyTCPOptions(options, fd: fd, target: address.description)
                let rc = try address.withSockAddr { sa, length throws(SocketError) in Glibc.connect(fd, sa, length) }
                if rc == 0 {
                    connected()
                    return
                }
                let e = errno
                if e == EINPROGRESS {
                    do {
                        try loop.register(fd: fd, interest: .write, handler: self)
                    } catch {
                        closeSocket()
                        finish(.failure(.eventLoop(error)))
                    }
                    return
                }
                attempts.append(ConnectAttempt(address: address, errno: e))
                closeSocket()
            } catch {
                closeSocket()
                finish(.failure(error))
                return
            }
        }
    }

    func handleEvents(_ events: IOEvents) {
        guard fd >= 0 else { return }
        var code: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        if getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length) != 0 { code = errno }
        loop.unregister(fd: fd)
        if code == 0 {
            connected()
        } else {
            attempts.append(ConnectAttempt(address: addresses[index - 1], errno: code))
            closeSocket()
            tryNext()
        }
    }

    func eventLoopDidShutDown() {
        closeSocket()
        finish(.failure(.eventLoop(.shutDown(loop: loop.name))))
    }

    private func connected() {
        let socket = fd
        fd = -1
        var engine: TLSEngine? = nil
        if let tls {
            do throws(TLSError) {
                engine = try TLSEngine(clientContext: tls, serverName: host)
            } catch {
                Glibc.close(socket)
                finish(.failure(.tls(error)))
                return
            }
        }
        let connection: StreamConnection
        do throws(SocketError) {
            // Takes ownership of the socket (closes it if it throws). With TLS it sends the ClientHello.
            connection = try StreamConnection(fd: socket, loop: loop, peerName: peerName, tls: engine)
        } catch {
            finish(.failure(error))
            return
        }
        if engine == nil {
            finish(.success(connection))
            return
        }
        guard connection.isActive else {
            finish(.failure(.tls(.handshakeFailed(name: host, reason: "connection closed while sending the ClientHello"))))
            return
        }
        handshaking = connection
        connection.handshakeWaiter = { [self] error in
            handshaking = nil
            if let error {
                finish(.failure(error))
            } else {
                finish(.success(connection))
            }
        }
    }

    private func timedOut() {
        if fd >= 0 {
            attempts.append(ConnectAttempt(address: addresses[index - 1], errno: nil))
            loop.unregister(fd: fd)
            closeSocket()
        }
        let error = SocketError.connectTimeout(
            host: host, port: port, timeout: options.connectTimeout, phase: handshaking == nil ? .tcp : .tlsHandshake,
            attempts: attempts)
        if let connection = handshaking {
            handshaking = nil
            connection.handshakeWaiter = nil
            finish(.failure(error))
            connection.close()
            return
        }
        finish(.failure(error))
    }

    private func closeSocket() {
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }

    private func finish(_ result: Result<StreamConnection, SocketError>) {
        timer?.invalidate()
        timer = nil
        guard let completion else { return }
        self.completion = nil
        completion(result)
    }
}
