import Synchronization

/// A request/response exchange over a ``StreamConnection`` during connection setup (proxy CONNECT,
/// WebSocket upgrade, HTTP request). Created by the connecting task, then used only on the loop thread
/// until the exchange completes; the continuation's resume orders those accesses.
protocol StreamExchange: AnyObject, Sendable {
    associatedtype Output: Sendable
    /// Bytes to write first.
    var request: [UInt8] { get }
    /// Received bytes; a value when the exchange is complete.
    func feed(_ bytes: UnsafeRawBufferPointer) throws -> Output?
    /// The connection closed before `feed` returned a value.
    func closed(_ reason: StreamCloseReason) -> Result<Output, any Error>
}

/// The overall connect deadline ran out.
struct DialTimeout: Error {}

/// The connect path shared by the WebSocket client and the HTTP client: DNS, TCP, proxy CONNECT, TLS,
/// each step recorded in a ``ConnectTrace``, all within one deadline.
enum Dialer {
    struct Target: Sendable {
        var host: String
        var port: Int
        var tls: TLSContext?
        var proxy: HTTPProxy?
        var tcp: TCPOptions
        var timeout: Duration
        var userAgent: String?
    }

    /// Connects and returns a stream that is open, TLS done, reading paused (resume it to read).
    static func dial(
        _ target: Target, trace: inout ConnectTrace, deadline: LoopInstant, on loop: EventLoop
    ) async throws(ConnectError) -> StreamConnection {
        let hop = target.proxy.map { (host: $0.host, port: $0.port) } ?? (host: target.host, port: target.port)
        let hopName = HTTPProxy.authority(host: hop.host, port: hop.port)
        let targetName = HTTPProxy.authority(host: target.host, port: target.port)
        func fail(_ step: ConnectStep, _ peer: String, _ reason: ConnectError.Reason) -> ConnectError {
            ConnectError(step: step, peer: peer, reason: reason, trace: trace)
        }
        // DNS
        let addresses: [SocketAddress]
        do {
            addresses = try await resolve(host: hop.host, port: hop.port, deadline: deadline, loop: loop)
        } catch {
            throw fail(.dns, hopName, .init(error, timeout: target.timeout))
        }
        trace.addresses = addresses
        trace.finish(.dns, "\(hop.host) → " + addresses.map(\.host).joined(separator: ", "))
        // TCP
        var tcp = target.tcp
        let left = LoopInstant.now.duration(to: deadline)
        guard left > .zero else { throw fail(.tcp, hopName, .timeout(target.timeout)) }
        tcp.connectTimeout = left
        let stream: StreamConnection
        do {
            stream = try await StreamConnection.connect(to: addresses, host: hop.host, port: hop.port, options: tcp, tls: nil, on: loop)
        } catch {
            if case .connectTimeout = error { throw fail(.tcp, hopName, .timeout(target.timeout)) }
            throw fail(.tcp, hopName, .socket(error))
        }
        let address: SocketAddress? = (try? await loop.submit { stream.remoteAddress }) ?? nil
        trace.connectedAddress = address
        trace.finish(.tcp, "connected to \(address?.description ?? hopName)")
        // Proxy
        if let proxy = target.proxy {
            trace.proxy = proxy.description
            let exchange = ConnectExchange(HTTPConnectHandshake(proxy: proxy, targetHost: target.host, targetPort: target.port, userAgent: target.userAgent))
            do {
                _ = try await run(exchange, on: stream, deadline: deadline)
            } catch {
                throw fail(.proxy, hopName, .init(error, timeout: target.timeout))
            }
            trace.finish(.proxy, "\(proxy) opened a tunnel to \(targetName)")
        }
        // TLS
        if let context = target.tls {
            do {
                trace.tls = try await startTLS(stream, context: context, serverName: target.host, deadline: deadline)
            } catch {
                throw fail(.tls, targetName, .init(error, timeout: target.timeout))
            }
            let info = trace.tls
            trace.finish(.tls, "\(info?.version ?? "?") \(info?.cipher ?? "?"), peer \(info?.peerSubject ?? "?"), notAfter \(info?.peerNotAfter ?? "?")")
        }
        return stream
    }

    /// The client TLS context of a `secure` target: `given`, else loaded from `configuration` on the
    /// loop's blocking pool (a failure fails the `configuration` step); nil for a plain target.
    static func tlsContext(
        secure: Bool, given: TLSContext?, configuration: TLSClientConfiguration, peer: String, trace: ConnectTrace,
        on loop: EventLoop
    ) async throws(ConnectError) -> TLSContext? {
        guard secure else { return nil }
        if let given { return given }
        do {
            return try await TLSContext.load(client: configuration, pool: loop.blockingPool)
        } catch {
            throw ConnectError(step: .configuration, peer: peer, reason: .tls(error), trace: trace)
        }
    }

    /// Resolves on the blocking pool, racing the deadline.
    static func resolve(host: String, port: Int, deadline: LoopInstant, loop: EventLoop) async throws -> [SocketAddress] {
        if let literal = SocketAddress(ip: host, port: port) { return [literal] }
        let once = Mutex(false)
        let result: Result<[SocketAddress], any Error> = await withCheckedContinuation { continuation in
            @Sendable func finish(_ r: Result<[SocketAddress], any Error>) -> Bool {
                let first = once.withLock { done -> Bool in
                    defer { done = true }
                    return !done
                }
                if first { continuation.resume(returning: r) }
                return first
            }
            let box = TimerBox()
            let accepted = loop.execute {
                box.timer = loop.scheduleTimer(after: LoopInstant.now.duration(to: deadline)) {
                    _ = finish(.failure(DialTimeout()))
                }
            }
            if !accepted {
                _ = finish(.failure(SocketError.eventLoop(.shutDown(loop: loop.name))))
                return
            }
            loop.blockingPool.submit {
                let r = Result { () throws(SocketError) -> [SocketAddress] in try Resolver.resolveBlocking(host: host, port: port) }
                _ = finish(r.mapError { $0 })
                loop.execute { box.timer?.invalidate() }
            }
        }
        return try result.get()
    }

    /// Runs the TLS client handshake over `stream` before `deadline`.
    static func startTLS(
        _ stream: StreamConnection, context: TLSContext, serverName: String, deadline: LoopInstant
    ) async throws -> TLSConnectionInfo? {
        let loop = stream.loop
        return try await withCheckedThrowingContinuation { (c: CheckedContinuation<TLSConnectionInfo?, any Error>) in
            let accepted = loop.execute {
                var done = false
                let timer = loop.scheduleTimer(after: LoopInstant.now.duration(to: deadline)) {
                    guard !done else { return }
                    done = true
                    stream.close()
                    c.resume(throwing: DialTimeout())
                }
                stream.startTLS(context: context, serverName: serverName) { error in
                    guard !done else { return }
                    done = true
                    timer.invalidate()
                    if let error {
                        stream.close()
                        c.resume(throwing: error)
                    } else {
                        stream.pauseReading()
                        c.resume(returning: stream.tlsInfo)
                    }
                }
            }
            if !accepted { c.resume(throwing: SocketError.eventLoop(.shutDown(loop: loop.name))) }
        }
    }

    /// Writes the exchange's request and feeds what arrives until it completes, fails, or the deadline
    /// passes. On success reading is paused and the handlers are cleared; on failure the stream is closed.
    ///
    /// Cancelling the awaiting task closes the stream and throws `CancellationError` at once: an
    /// owner shutting down ends an exchange it no longer waits for, instead of leaving it (its task,
    /// continuation, stream and timer) suspended on a loop that is about to stop, never freed.
    static func run<E: StreamExchange>(_ exchange: E, on stream: StreamConnection, deadline: LoopInstant) async throws -> E.Output {
        let loop = stream.loop
        let cancel = ExchangeCancel()
        return try await withTaskCancellationHandler {
            try await runUncancellable(exchange, on: stream, deadline: deadline, cancel: cancel)
        } onCancel: {
            _ = loop.execute {
                cancel.requested = true
                cancel.action?()
            }
        }
    }

    private static func runUncancellable<E: StreamExchange>(_ exchange: E, on stream: StreamConnection, deadline: LoopInstant,
                                                            cancel: ExchangeCancel) async throws -> E.Output {
        let loop = stream.loop
        return try await withCheckedThrowingContinuation { (c: CheckedContinuation<E.Output, any Error>) in
            let accepted = loop.execute {
                guard !cancel.requested else {
                    c.resume(throwing: CancellationError())
                    return
                }
                guard stream.isActive else {
                    c.resume(with: exchange.closed(.peerClosed))
                    return
                }
                var done = false
                let timer = loop.scheduleTimer(after: LoopInstant.now.duration(to: deadline)) {
                    guard !done else { return }
                    done = true
                    cancel.action = nil
                    stream.onClose = nil
                    stream.close()
                    c.resume(throwing: DialTimeout())
                }
                cancel.action = {
                    guard !done else { return }
                    done = true
                    cancel.action = nil
                    timer.invalidate()
                    stream.onRead = nil
                    stream.onClose = nil
                    stream.close()
                    c.resume(throwing: CancellationError())
                }
                stream.onRead = { bytes in
                    guard !done else { return }
                    do {
                        guard let output = try exchange.feed(bytes) else { return }
                        done = true
                        cancel.action = nil
                        timer.invalidate()
                        stream.pauseReading()
                        stream.onRead = nil
                        stream.onClose = nil
                        c.resume(returning: output)
                    } catch {
                        done = true
                        cancel.action = nil
                        timer.invalidate()
                        stream.onClose = nil
                        stream.close()
                        c.resume(throwing: error)
                    }
                }
                stream.onClose = { reason in
                    guard !done else { return }
                    done = true
                    cancel.action = nil
                    timer.invalidate()
                    c.resume(with: exchange.closed(reason))
                }
                let request = exchange.request
                if !request.isEmpty { stream.write(request) }
                stream.start()
                stream.resumeReading()
            }
            if !accepted { c.resume(throwing: SocketError.eventLoop(.shutDown(loop: loop.name))) }
        }
    }
}

/// What cancels one ``Dialer/run(_:on:deadline:)`` exchange: set and read on the loop thread only.
final class ExchangeCancel:
    // Only touched on the loop thread (inside loop.execute closures).
    @unchecked Sendable
{
    /// The awaiting task was cancelled (possibly before the exchange started).
    var requested = false
    /// Ends the exchange in progress; nil once it has ended.
    var action: (() -> Void)?
}

/// A loop timer handed between loop tasks.
final class TimerBox:
    // `timer` is only touched on the loop thread (inside loop.execute closures).
    @unchecked Sendable
{
    var timer: LoopTimer?
}

/// The proxy CONNECT as a ``StreamExchange``.
final class ConnectExchange: StreamExchange,
    // Confined to the loop thread once handed over (see StreamExchange).
    @unchecked Sendable
{
    private var handshake: HTTPConnectHandshake
    init(_ handshake: HTTPConnectHandshake) { self.handshake = handshake }
    var request: [UInt8] { handshake.request }
    func feed(_ bytes: UnsafeRawBufferPointer) throws -> Bool? {
        try handshake.receive(bytes) ? true : nil
    }
    func closed(_ reason: StreamCloseReason) -> Result<Bool, any Error> {
        if case .failed(let e) = reason { return .failure(e) }
        return Result { try handshake.transportClosed(); return false }
    }
}
