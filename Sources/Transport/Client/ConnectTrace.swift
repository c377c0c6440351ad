/// A step of establishing a connection, in order.
public enum ConnectStep: String, Sendable, Hashable, CustomStringConvertible {
    /// Parsing the URL, loading the TLS trust roots.
    case configuration
    /// Name resolution (of the proxy when one is used).
    case dns
    /// The TCP connect (to the proxy when one is used).
    case tcp
    /// `CONNECT` through the HTTP proxy.
    case proxy
    /// The TLS handshake with the target (through the tunnel when proxied).
    case tls
    /// The WebSocket opening handshake.
    case upgrade
    /// HTTPClient: sending the request and reading the response.
    case http

    public var description: String { rawValue }
}

/// What each step of a connect did and how long it took: the diagnostic `smartico-ws probe` prints.
public struct ConnectTrace: Sendable, CustomStringConvertible {
    /// One completed step.
    public struct Entry: Sendable, CustomStringConvertible {
        public var step: ConnectStep
        /// From the start of the connect to the end of this step.
        public var elapsed: Duration
        /// How long this step took.
        public var duration: Duration
        /// Human-readable details (addresses, TLS version, status line…).
        public var detail: String
        public var description: String { "\(step) \(ConnectTrace.milliseconds(duration)) (at \(ConnectTrace.milliseconds(elapsed))): \(detail)" }
    }

    /// `host:port` of the target as asked.
    public var target: String
    /// Completed steps, in order.
    public var entries: [Entry] = []
    /// Addresses DNS returned (for the proxy when one is used).
    public var addresses: [SocketAddress] = []
    /// The address the TCP connection reached.
    public var connectedAddress: SocketAddress?
    /// The proxy used (password masked), if any.
    public var proxy: String?
    /// The negotiated TLS parameters and the server certificate, if TLS was used.
    public var tls: TLSConnectionInfo?
    /// WebSocket: the status line of the upgrade response.
    public var upgradeStatus: String?
    /// WebSocket: the negotiated `Sec-WebSocket-Extensions` (nil: none).
    public var extensions: String?
    /// WebSocket: the subprotocol the server chose.
    public var subprotocol: String?

    let start: LoopInstant
    var stepStart: LoopInstant

    init(target: String) {
        self.target = target
        start = .now
        stepStart = start
    }

    mutating func finish(_ step: ConnectStep, _ detail: String) {
        let now = LoopInstant.now
        entries.append(Entry(step: step, elapsed: start.duration(to: now), duration: stepStart.duration(to: now), detail: detail))
        stepStart = now
    }

    /// Time since the connect began.
    public var totalElapsed: Duration { start.duration(to: .now) }

    public var description: String { entries.map(\.description).joined(separator: "\n") }

    /// "12.3ms".
    public static func milliseconds(_ d: Duration) -> String {
        let us = d.ioNanoseconds / 1000
        return "\(us / 1000).\(us % 1000 / 100)ms"
    }
}

/// Why a connect failed: the step, the peer it concerns, the cause, and the trace of what was done.
/// Its description starts with the step: `tls: hostname mismatch: …`, `upgrade: server example.com:443
/// answered "HTTP/1.1 403 Forbidden": <start of the body>`.
public struct ConnectError: Error, Sendable, CustomStringConvertible {
    public enum Reason: Sendable {
        /// Bad options, unreadable CA file, unusable URL.
        case configuration(String)
        /// A socket failure (DNS, refused, reset…).
        case socket(SocketError)
        /// TLS failure (verification, pin, handshake).
        case tls(TLSError)
        /// The proxy refused or failed.
        case proxy(HTTPProxyError)
        /// The WebSocket upgrade failed (non-101 status with the start of the body, bad headers…).
        case upgrade(WebSocketHandshakeError)
        /// The HTTP response was invalid or too large.
        case http(HTTPClientError)
        /// The overall connect timeout ran out during `step`.
        case timeout(Duration)
        /// The task waiting for it was cancelled (its owner is shutting down); the connection was closed.
        case cancelled

        /// The reason for what a step or an exchange threw: the deadline (`timeout` is the limit
        /// that ran out), a cancelled wait, or the socket, TLS, proxy, upgrade or HTTP failure.
        init(_ error: any Error, timeout: Duration) {
            switch error {
            case is DialTimeout: self = .timeout(timeout)
            case is CancellationError: self = .cancelled
            case let e as SocketError:
                if case .tls(let t) = e { self = .tls(t) } else { self = .socket(e) }
            case let e as HTTPProxyError: self = .proxy(e)
            case let e as WebSocketHandshakeError: self = .upgrade(e)
            case let e as HTTPClientError: self = .http(e)
            default: self = .configuration("\(error)")
            }
        }
    }

    /// The step that failed.
    public var step: ConnectStep
    /// `host:port` this step talked to (the proxy for dns/tcp/proxy when proxied).
    public var peer: String
    public var reason: Reason
    /// What was done before the failure.
    public var trace: ConnectTrace

    public var description: String {
        let text: String
        switch reason {
        case .configuration(let s): text = s
        case .socket(let e):
            if case .tls(let t) = e { text = t.description } else { text = e.description }
        case .tls(let e): text = e.description
        case .proxy(let e): text = e.description
        case .upgrade(.unexpectedStatus(let line, _, let body)):
            var s = "server \(peer) answered \"\(line)\" instead of 101 Switching Protocols"
            if !body.isEmpty { s += ": " + String(decoding: body, as: UTF8.self) }
            text = s
        case .upgrade(let e): text = "\(peer): \(e)"
        case .http(let e): text = "\(peer): \(e)"
        case .timeout(let d) where step == .http:
            text = "\(peer): no complete HTTP response within the response timeout of \(d.ioText)"
        case .timeout(let d):
            text = "\(peer): no answer within the connect timeout of \(d.ioText) (it covers DNS, TCP, proxy, TLS and upgrade)"
        case .cancelled: text = "\(peer): cancelled"
        }
        return "\(step): \(text)"
    }
}
