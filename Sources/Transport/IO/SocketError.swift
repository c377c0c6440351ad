/// One address tried while connecting and how it failed.
public struct ConnectAttempt: Sendable, CustomStringConvertible {
    public var address: SocketAddress
    /// The errno of the failure, or nil when the attempt ran out of time.
    public var errno: Int32?
    public var description: String {
        if let errno { return "\(address): \(ioErrnoText(errno))" }
        return "\(address): timed out"
    }
}

/// The step of a connect that ran out of time.
public enum ConnectPhase: String, Sendable {
    case dns = "while resolving the name"
    case tcp = "while connecting"
    case tlsHandshake = "in the TLS handshake"
}

/// Socket failures, each with the step and the peer or address concerned.
public enum SocketError: Error, Sendable, CustomStringConvertible {
    /// Name resolution failed (`getaddrinfo`).
    case dns(host: String, port: Int, reason: String)
    /// Every address failed to connect (refused, unreachable…).
    case connectFailed(host: String, port: Int, attempts: [ConnectAttempt])
    /// The overall connect timeout (covering DNS, TCP and TLS handshake) ran out.
    case connectTimeout(host: String, port: Int, timeout: Duration, phase: ConnectPhase, attempts: [ConnectAttempt])
    /// A system call failed: `operation` ("bind", "listen", "read", "send"…) on `target` (address, path, peer).
    case system(operation: String, target: String, errno: Int32)
    /// A TLS failure on this connection.
    case tls(TLSError)
    /// The event loop shut down.
    case eventLoop(EventLoopError)
    /// Bad input (path too long, descriptor not a listening socket…).
    case invalidArgument(String)
    /// The peer does not read fast enough: more than `limit` bytes were waiting to be sent to it.
    case writeQueueOverflow(peer: String, queued: Int, limit: Int)

    public var description: String {
        switch self {
        case .dns(let host, let port, let reason):
            return "dns: cannot resolve \"\(host)\" (port \(port)): \(reason)"
        case .connectFailed(let host, let port, let attempts):
            return "connect to \(host):\(port) failed: "
                + (attempts.isEmpty ? "no address" : attempts.map(\.description).joined(separator: "; "))
        case .connectTimeout(let host, let port, let timeout, let phase, let attempts):
            let tried = attempts.isEmpty ? "" : " (" + attempts.map(\.description).joined(separator: "; ") + ")"
            return "connect to \(host):\(port) timed out after \(timeout.ioText) \(phase.rawValue)\(tried)"
        case .system(let operation, let target, let code):
            return "\(operation) \(target): \(ioErrnoText(code)) (errno \(code))"
        case .tls(let error):
            return error.description
        case .eventLoop(let error):
            return error.description
        case .invalidArgument(let text):
            return text
        case .writeQueueOverflow(let peer, let queued, let limit):
            return "\(peer) reads too slowly: \(queued) bytes waiting to be sent, limit \(limit); connection dropped"
        }
    }

    /// The errno carried by a `.system` error.
    public var errno: Int32? {
        if case .system(_, _, let code) = self { return code }
        return nil
    }
}

/// How a ``StreamConnection`` ended; its `onClose` handler receives exactly one.
public enum StreamCloseReason: Sendable, CustomStringConvertible {
    /// We closed it (``StreamConnection/close()`` or after ``StreamConnection/closeAfterFlush()``).
    case closedLocally
    /// The peer closed its side (EOF; with TLS, after close_notify) and the connection was closed.
    case peerClosed
    /// An error ended it.
    case failed(SocketError)

    public var description: String {
        switch self {
        case .closedLocally: return "closed locally"
        case .peerClosed: return "closed by peer"
        case .failed(let error): return error.description
        }
    }
}
