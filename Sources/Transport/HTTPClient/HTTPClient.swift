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

    public var description: String {
        switch self {
        case let .invalidURL(url, problem): return "invalid HTTP URL \"\(url)\": \(problem)"
        case let .malformedResponse(e): return "invalid HTTP response: \(e)"
        case let .responseTooLarge(limit): return "response body larger than the limit of \(limit) bytes"
        case let .connectionClosed(n): return "connection closed after \(n) bytes, before the response was complete"
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
    /// the `http` step for the exchange itself). A non-2xx status is a response, not an error.
    public static func send(
        _ request: HTTPClientRequest, options: HTTPClientOptions = HTTPClientOptions(), on loop: EventLoop
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
        let deadline = LoopInstant.now + options.timeout
        var context: TLSContext? = nil
        if url.secure {
            if let given = options.tlsContext {
                context = given
            } else {
                do {
                    context = try await TLSContext.load(client: options.tls, pool: loop.blockingPool)
                } catch {
                    throw ConnectError(step: .configuration, peer: peer, reason: .tls(error), trace: trace)
                }
            }
        }
        let target = Dialer.Target(
            host: url.host, port: url.port, tls: context, proxy: options.proxy, tcp: options.tcp, timeout: options.timeout,
            userAgent: request.headers["User-Agent"])
        let stream = try await Dialer.dial(target, trace: &trace, deadline: deadline, on: loop)
        var headers = HTTPHeaders()
        let defaultPort = url.secure ? 443 : 80
        let hostHeader = (url.host.contains(":") ? "[\(url.host)]" : url.host) + (url.port == defaultPort ? "" : ":\(url.port)")
        headers.add(name: "Host", value: hostHeader)
        for f in request.headers where !HTTPSyntax.equalsIgnoringCase(f.name, "Host") { headers.add(name: f.name, value: f.value) }
        if headers["Content-Length"] == nil && (!request.body.isEmpty || request.method == "POST" || request.method == "PUT") {
            headers.add(name: "Content-Length", value: String(request.body.count))
        }
        headers.replaceOrAdd(name: "Connection", value: "close")
        let head = HTTPRequestHead(method: request.method, target: url.target, headers: headers)
        let exchange = ResponseExchange(
            request: head.serialized() + request.body, method: request.method, limits: options.headLimits,
            maxBodySize: options.maxResponseSize)
        let response: (HTTPResponseHead, [UInt8])
        do {
            response = try await Dialer.run(exchange, on: stream, deadline: deadline)
        } catch {
            let reason: ConnectError.Reason
            switch error {
            case is DialTimeout: reason = .timeout(options.timeout)
            case let e as HTTPClientError: reason = .http(e)
            case let e as SocketError:
                if case .tls(let t) = e { reason = .tls(t) } else { reason = .socket(e) }
            default: reason = .configuration("\(error)")
            }
            throw ConnectError(step: .http, peer: peer, reason: reason, trace: trace)
        }
        _ = try? await loop.submit { stream.close() }
        trace.finish(.http, "\(request.method) \(url.target) → \(response.0.statusLine), \(response.1.count) body bytes")
        return HTTPClientResponse(
            status: response.0.status, reason: response.0.reason, headers: response.0.headers, body: response.1, trace: trace)
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

/// Writes the request, reads head and body.
final class ResponseExchange: StreamExchange,
    // Confined to the loop thread once handed over (see StreamExchange).
    @unchecked Sendable
{
    let request: [UInt8]
    private let method: String
    private var parser: HTTPHeadParser
    private let maxBodySize: Int
    private var head: HTTPResponseHead?
    private var decoder: HTTPBodyDecoder?
    private var body: [UInt8] = []
    private var received = 0

    init(request: [UInt8], method: String, limits: HTTPHeadLimits, maxBodySize: Int) {
        self.request = request
        self.method = method
        parser = HTTPHeadParser(limits: limits)
        self.maxBodySize = maxBodySize
    }

    func feed(_ bytes: UnsafeRawBufferPointer) throws -> (HTTPResponseHead, [UInt8])? {
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

    private func decode(_ bytes: UnsafeRawBufferPointer) throws -> (HTTPResponseHead, [UInt8])? {
        guard let head, var d = decoder else { return nil }
        do { try d.decode(bytes, into: &body) } catch {
            if case .bodyTooLarge = error { throw HTTPClientError.responseTooLarge(limit: maxBodySize) }
            throw HTTPClientError.malformedResponse(error)
        }
        decoder = d
        return d.isComplete ? (head, body) : nil
    }

    func closed(_ reason: StreamCloseReason) -> Result<(HTTPResponseHead, [UInt8]), any Error> {
        if case .failed(let e) = reason { return .failure(e) }
        guard let head, var d = decoder else { return .failure(HTTPClientError.connectionClosed(bytesReceived: received)) }
        do { try d.finish() } catch { return .failure(HTTPClientError.connectionClosed(bytesReceived: received)) }
        return .success((head, body))
    }
}
