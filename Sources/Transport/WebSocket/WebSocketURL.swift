/// A `ws://` or `wss://` URL (RFC 6455 §3), parsed without Foundation.
public struct WebSocketURL: Hashable, Sendable, CustomStringConvertible {
    /// `true` for `wss`.
    public var secure: Bool
    /// Host name or IP literal, without brackets.
    public var host: String
    /// The explicit port, or the scheme's default (80/443).
    public var port: Int
    /// Path and query (`/` when the URL has none), the request target of the handshake.
    public var target: String

    /// Parses `ws[s]://host[:port][/path][?query]`. Fragments and user info are rejected
    /// (RFC 6455 §3 forbids fragments; credentials belong in headers).
    public init(_ string: String) throws(WebSocketURLError) {
        let s = Substring(string)
        let lower = s.lowercased()
        let rest: Substring
        if lower.hasPrefix("wss://") {
            secure = true
            rest = s.dropFirst(6)
        } else if lower.hasPrefix("ws://") {
            secure = false
            rest = s.dropFirst(5)
        } else {
            throw .init(url: string, problem: "the scheme must be ws:// or wss://")
        }
        if rest.contains("#") { throw .init(url: string, problem: "fragments are not allowed in WebSocket URLs") }
        if rest.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) {
            throw .init(url: string, problem: "spaces, control and non-ASCII characters must be percent-encoded")
        }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var path = String(rest[authorityEnd...])
        if path.isEmpty { path = "/" } else if path.hasPrefix("?") { path = "/" + path }
        target = path
        if authority.contains("@") { throw .init(url: string, problem: "user info is not supported; send credentials in a header") }
        var hostPart = authority
        var portPart: Substring? = nil
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw .init(url: string, problem: "unterminated IPv6 literal") }
            hostPart = authority[authority.index(after: authority.startIndex) ..< close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw .init(url: string, problem: "unexpected characters after the IPv6 literal") }
                portPart = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        }
        guard !hostPart.isEmpty else { throw .init(url: string, problem: "the host is empty") }
        host = String(hostPart)
        if let p = portPart {
            guard !p.isEmpty, p.utf8.count <= 5, p.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(p), (1 ... 65535).contains(n) else {
                throw .init(url: string, problem: "invalid port \"\(p)\" (1...65535)")
            }
            port = n
        } else {
            port = secure ? 443 : 80
        }
    }

    public var description: String {
        let h = host.contains(":") ? "[\(host)]" : host
        let defaultPort = secure ? 443 : 80
        return (secure ? "wss://" : "ws://") + h + (port == defaultPort ? "" : ":\(port)") + target
    }
}

/// An unusable WebSocket URL.
public struct WebSocketURLError: Error, Hashable, Sendable, CustomStringConvertible {
    public var url: String
    public var problem: String
    public var description: String { "invalid WebSocket URL \"\(url)\": \(problem)" }
}

extension WebSocketClientOptions {
    /// Options for `url` (host, port, `secure`, target); the other settings as given.
    public init(
        url: WebSocketURL, subprotocols: [String] = [], headers: HTTPHeaders = HTTPHeaders(),
        deflate: PerMessageDeflateOptions? = nil, limits: HTTPHeadLimits = HTTPHeadLimits(), maxErrorBodySize: Int = 512
    ) {
        self.init(
            host: url.host, port: url.port, secure: url.secure, target: url.target, subprotocols: subprotocols,
            headers: headers, deflate: deflate, limits: limits, maxErrorBodySize: maxErrorBodySize)
    }
}
