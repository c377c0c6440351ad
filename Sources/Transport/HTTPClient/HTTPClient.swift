import Synchronization

/// Why an HTTP response could not be read.
public enum HTTPClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The URL is not `http://` or `https://host[:port][/path]`.
    case invalidURL(url: String, problem: String)
    /// The response head or body is not valid HTTP/1.1.
    case malformedResponse(HTTPParseError)
    /// The body is larger than the limit.
    case responseTooLarge(limit: Int)
    /// The server closed the connection before the response was complete.
    case connectionClosed(bytesReceived: Int)
    /// The server answered with a redirect; this client never follows one.
    case redirectRefused(status: Int, location: String?)
    /// More bytes arrived after the end of the body than the response announced.
    case bodyLongerThanAnnounced(framing: String, extraBytes: Int)

    public var description: String {
        switch self {
        case let .invalidURL(url, problem): return "invalid HTTP URL \"\(url)\": \(problem)"
        case let .malformedResponse(e): return "invalid HTTP response: \(e)"
        case let .responseTooLarge(limit): return "response body larger than the limit of \(limit) bytes"
        case let .connectionClosed(n): return "connection closed after \(n) bytes, before the response was complete"
        case let .redirectRefused(status, location):
            return "the server answered \(status) redirecting to \(location.map { "\"\($0.prefix(200))\"" } ?? "(no Location)"); "
                + "redirects are not followed: configure the final URL"
        case let .bodyLongerThanAnnounced(framing, extra):
            return "\(extra) byte(s) arrived after the end of the body (\(framing)): the response is longer than it announced"
        }
    }
}

/// One HTTP/1.1 request.
public struct HTTPClientRequest: Sendable {
    public var method: String
    /// `http://` or `https://host[:port][/path][?query]`.
    public var url: String
    /// Extra headers (`Host`, `Content-Length` and `Connection: close` are added).
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(method: String = "GET", url: String, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// The complete response.
public struct HTTPClientResponse: Sendable {
    public var status: Int
    public var reason: String
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// What each connect step did and how long it took (the `http` step covers request and response).
    public var trace: ConnectTrace
    /// The body as UTF-8 text (invalid sequences replaced).
    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// Options of ``HTTPClient/send(_:options:on:)``.
public struct HTTPClientOptions: Sendable {
    /// Trust roots and pins for `https://` (verification always on).
    public var tls: TLSClientConfiguration
    /// A prebuilt client context (takes precedence over `tls`).
    public var tlsContext: TLSContext?
    /// An HTTP proxy reached with CONNECT (also for `http://` targets).
    public var proxy: HTTPProxy?
    /// One deadline for DNS + TCP + proxy + TLS + request + the whole response.
    public var timeout: Duration
    /// DNS + TCP + proxy + TLS at most this long (within `timeout`); nil: `timeout` alone.
    public var connectTimeout: Duration?
    /// From writing the request to the end of the response at most this long (within `timeout`); nil: `timeout` alone.
    public var responseTimeout: Duration?
    /// A 3xx answer (other than 304) is an error, ``HTTPClientError/redirectRefused(status:location:)``.
    public var refuseRedirects: Bool = true
    /// Largest response body accepted.
    public var maxResponseSize: Int
    public var tcp: TCPOptions
    public var headLimits: HTTPHeadLimits

    public init(
        tls: TLSClientConfiguration = TLSClientConfiguration(), tlsContext: TLSContext? = nil, proxy: HTTPProxy? = nil,
        timeout: Duration = .seconds(30), maxResponseSize: Int = 8 << 20, tcp: TCPOptions = TCPOptions(),
        headLimits: HTTPHeadLimits = HTTPHeadLimits()
    ) {
        self.tls = tls
        self.tlsContext = tlsContext
        self.proxy = proxy
        self.timeout = timeout
        self.maxResponseSize = maxResponseSize
        self.tcp = tcp
        self.headLimits = headLimits
    }
}

/// A small HTTP/1.1 client: one request per connection over the same connect path as the WebSocket
/// client (DNS, TCP, proxy CONNECT, TLS), responses framed by Content-Length, chunked encoding or the
/// connection's end.
public enum HTTPClient {
    /// Sends `request` and reads the whole response. Any context. Errors name the step (``ConnectError``;
    /// the `http` step for the exchange itself). A non-2xx status is a response, not an error (a
    /// redirect is one unless ``HTTPClientOptions/refuseRedirects`` is off).
    ///
    /// With `connections`, the request says `Connection: keep-alive` and a connection the response
    /// left reusable is kept there for the next request to the same host, port, scheme and proxy
    /// (one idle connection); without, every request has its own connection (`Connection: close`).
    public static func send(
        _ request: HTTPClientRequest, options: HTTPClientOptions = HTTPClientOptions(),
        connections: HTTPConnectionCache? = nil, on loop: EventLoop
    ) async throws(ConnectError) -> HTTPClientResponse {
        var trace = ConnectTrace(target: request.url)
        let url: WebSocketURL
        do {
            url = try parse(request.url)
        } catch {
            throw ConnectError(step: .configuration, peer: request.url, reason: .http(error), trace: trace)
        }
        let peer = HTTPProxy.authority(host: url.host, port: url.port)
        trace.target = peer
        let start = LoopInstant.now
        let deadline = start + options.timeout
        let key = "\(url.secure ? "https" : "http")://\(peer) via \(options.proxy?.description ?? "direct")"
        var headers = HTTPHeaders()
        let defaultPort = url.secure ? 443 : 80
        let hostHeader = (url.host.contains(":") ? "[\(url.host)]" : url.host) + (url.port == defaultPort ? "" : ":\(url.port)")
        headers.add(name: "Host", value: hostHeader)
        for f in request.headers where !HTTPSyntax.equalsIgnoringCase(f.name, "Host") { headers.add(name: f.name, value: f.value) }
        if headers["Content-Length"] == nil && (!request.body.isEmpty || request.method == "POST" || request.method == "PUT") {
            headers.add(name: "Content-Length", value: String(request.body.count))
        }
        headers.replaceOrAdd(name: "Connection", value: connections == nil ? "close" : "keep-alive")
        let head = HTTPRequestHead(method: request.method, target: url.target, headers: headers)
        let wire = head.serialized() + request.body

        // A kept connection first; if the server had closed it meanwhile (nothing at all came
        // back), once more on a new one.
        var reused = await connections?.take(key: key, on: loop)
        while true {
            let stream: StreamConnection
            if let kept = reused {
                stream = kept
                trace.finish(.tcp, "reused a kept-alive connection")
            } else {
                stream = try await dial(url, options: options, userAgent: request.headers["User-Agent"], trace: &trace, start: start,
                                        deadline: deadline, on: loop)
            }
            let exchange = ResponseExchange(request: wire, method: request.method, limits: options.headLimits,
                                            maxBodySize: options.maxResponseSize)
            let responseDeadline = options.responseTimeout.map { min(deadline, LoopInstant.now + $0) } ?? deadline
            let response: ResponseExchange.Output
            do {
                response = try await Dialer.run(exchange, on: stream, deadline: responseDeadline)
            } catch {
                // A kept connection the server closed while idle: nothing came back.
                let stale: Bool
                switch error {
                case HTTPClientError.connectionClosed(0): stale = true
                case is SocketError: stale = !(exchange.bytesReceived > 0)
                default: stale = false
                }
                if reused != nil, stale {
                    reused = nil
                    _ = try? await loop.submit { stream.close() }
                    continue
                }
                let limit = options.responseTimeout.map { min($0, options.timeout) } ?? options.timeout
                _ = try? await loop.submit { stream.close() }
                throw ConnectError(step: .http, peer: peer, reason: .init(error, timeout: limit), trace: trace)
            }
            let (responseHead, body) = (response.head, response.body)
            if let connections, response.reusable {
                await connections.keep(stream, key: key, on: loop)
            } else {
                _ = try? await loop.submit { stream.close() }
            }
            // The path only: a query may carry keys (the public API's api_key).
            let path = url.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? url.target
            trace.finish(.http, "\(request.method) \(path)\(path == url.target ? "" : "?…") → \(responseHead.statusLine), \(body.count) body bytes")
            if options.refuseRedirects, (300..<400).contains(responseHead.status), responseHead.status != 304 {
                throw ConnectError(step: .http, peer: peer,
                                   reason: .http(.redirectRefused(status: responseHead.status, location: responseHead.headers["Location"])),
                                   trace: trace)
            }
            return HTTPClientResponse(status: responseHead.status, reason: responseHead.reason, headers: responseHead.headers,
                                      body: body, trace: trace)
        }
    }

    /// DNS, TCP, proxy, TLS within the connect timeout.
    private static func dial(
        _ url: WebSocketURL, options: HTTPClientOptions, userAgent: String?, trace: inout ConnectTrace, start: LoopInstant,
        deadline: LoopInstant, on loop: EventLoop
    ) async throws(ConnectError) -> StreamConnection {
        let peer = HTTPProxy.authority(host: url.host, port: url.port)
        let context = try await Dialer.tlsContext(
            secure: url.secure, given: options.tlsContext, configuration: options.tls, peer: peer, trace: trace, on: loop)
        let connectTimeout = options.connectTimeout.map { min($0, options.timeout) } ?? options.timeout
        let target = Dialer.Target(
            host: url.host, port: url.port, tls: context, proxy: options.proxy, tcp: options.tcp, timeout: connectTimeout,
            userAgent: userAgent)
        return try await Dialer.dial(target, trace: &trace, deadline: min(deadline, start + connectTimeout), on: loop)
    }

    /// `http(s)://…` parsed with the WebSocket URL rules (same authority syntax; no user info or fragment).
    static func parse(_ text: String) throws(HTTPClientError) -> WebSocketURL {
        let lower = text.lowercased()
        let mapped: String
        if lower.hasPrefix("https://") {
            mapped = "wss://" + text.dropFirst(8)
        } else if lower.hasPrefix("http://") {
            mapped = "ws://" + text.dropFirst(7)
        } else {
            throw .invalidURL(url: text, problem: "the scheme must be http:// or https://")
        }
        do {
            return try WebSocketURL(mapped)
        } catch {
            throw .invalidURL(url: text, problem: error.problem)
        }
    }
}

/// One idle kept-alive connection for ``HTTPClient/send(_:options:connections:on:)`` (the next request
/// to the same scheme, host, port and proxy reuses it). A connection idle longer than `maxIdle` is
/// closed instead of reused.
public final class HTTPConnectionCache: Sendable {
    private let idle = Mutex<(key: String, stream: StreamConnection, since: LoopInstant)?>(nil)
    public let maxIdle: Duration

    public init(maxIdle: Duration = .seconds(30)) { self.maxIdle = maxIdle }

    /// The kept connection for `key`, if it is still open and fresh (otherwise it is closed).
    func take(key: String, on loop: EventLoop) async -> StreamConnection? {
        guard let entry = idle.withLock({ e -> (key: String, stream: StreamConnection, since: LoopInstant)? in
            defer { e = nil }
            return e
        }) else { return nil }
        let fresh = entry.key == key && entry.since.duration(to: LoopInstant.now) < maxIdle
        let stream = entry.stream
        let open = (try? await loop.submit { () -> Bool in
            guard fresh, stream.isActive else {
                stream.close()
                return false
            }
            return true
        }) ?? false
        return open ? stream : nil
    }

    func keep(_ stream: StreamConnection, key: String, on loop: EventLoop) async {
        let previous = idle.withLock { e -> StreamConnection? in
            defer { e = (key, stream, LoopInstant.now) }
            return e?.stream
        }
        if let previous { _ = try? await loop.submit { previous.close() } }
    }

    /// Closes the kept connection, if any.
    public func close(on loop: EventLoop) async {
        let previous = idle.withLock { e -> StreamConnection? in
            defer { e = nil }
            return e?.stream
        }
        if let previous { _ = try? await loop.submit { previous.close() } }
    }
}

/// Writes the request, reads head and body.
final class ResponseExchange: StreamExchange,
    // Confined to the loop thread once handed over (see StreamExchange).
    @unchecked Sendable
{
    struct Output: Sendable {
        var head: HTTPResponseHead
        var body: [UInt8]
        /// The connection can carry another request (a delimited body, no `Connection: close`).
        var reusable: Bool
    }

    let request: [UInt8]
    private let method: String
    private var parser: HTTPHeadParser
    private let maxBodySize: Int
    private var head: HTTPResponseHead?
    private var decoder: HTTPBodyDecoder?
    private var body: [UInt8] = []
    private var received = 0
    /// Bytes of the response received so far.
    var bytesReceived: Int { received }

    init(request: [UInt8], method: String, limits: HTTPHeadLimits, maxBodySize: Int) {
        self.request = request
        self.method = method
        parser = HTTPHeadParser(limits: limits)
        self.maxBodySize = maxBodySize
    }

    func feed(_ bytes: UnsafeRawBufferPointer) throws -> Output? {
        received += bytes.count
        if head == nil {
            let parsed: HTTPResponseHead?
            do { parsed = try parser.parseResponse(bytes) } catch { throw HTTPClientError.malformedResponse(error) }
            guard let h = parsed else { return nil }
            if (100..<200).contains(h.status) && h.status != 101 {
                // An interim response (100 Continue): the real one follows.
                let rest = parser.remainder
                parser = HTTPHeadParser(limits: parser.limits)
                return try rest.withUnsafeBytes { try feed($0) }
            }
            head = h
            let framing: HTTPBodyFraming
            do { framing = try HTTPBodyFraming.forResponse(h, requestMethod: method) } catch { throw HTTPClientError.malformedResponse(error) }
            decoder = HTTPBodyDecoder(framing: framing, maxBodySize: maxBodySize)
            let rest = parser.remainder
            return try rest.withUnsafeBytes { try decode($0) }
        }
        return try decode(bytes)
    }

    private func decode(_ bytes: UnsafeRawBufferPointer) throws -> Output? {
        guard let head, var d = decoder else { return nil }
        do { try d.decode(bytes, into: &body) } catch {
            if case .bodyTooLarge = error { throw HTTPClientError.responseTooLarge(limit: maxBodySize) }
            throw HTTPClientError.malformedResponse(error)
        }
        decoder = d
        guard d.isComplete else { return nil }
        // Requests are never pipelined: anything after the body is the server's error.
        if !d.remainder.isEmpty {
            let framing: String
            switch d.framing {
            case .contentLength(let n): framing = "Content-Length: \(n)"
            case .chunked: framing = "chunked"
            default: framing = "no body"
            }
            throw HTTPClientError.bodyLongerThanAnnounced(framing: framing, extraBytes: d.remainder.count)
        }
        return Output(head: head, body: body, reusable: Self.reusable(head, d.framing))
    }

    static func reusable(_ head: HTTPResponseHead, _ framing: HTTPBodyFraming) -> Bool {
        if case .closeDelimited = framing { return false }
        guard head.version == .http11 else { return false }
        return !head.headers.listElements(for: "Connection").contains { HTTPSyntax.equalsIgnoringCase($0, "close") }
    }

    func closed(_ reason: StreamCloseReason) -> Result<Output, any Error> {
        if case .failed(let e) = reason { return .failure(e) }
        guard let head, var d = decoder else { return .failure(HTTPClientError.connectionClosed(bytesReceived: received)) }
        do { try d.finish() } catch { return .failure(HTTPClientError.connectionClosed(bytesReceived: received)) }
        return .success(Output(head: head, body: body, reusable: false))
    }
}
