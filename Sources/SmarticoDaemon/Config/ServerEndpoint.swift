import Transport

/// What tells the WebSocket server's URL and the public HTTP API's apart, for ``ServerEndpoint``.
public protocol ServerEndpointKind: Sendable {
    /// The schemes accepted, in the order messages name them, and the one with TLS.
    static var schemes: [String] { get }
    static var secureScheme: String { get }
    /// "must be a … URL such as …"
    static var form: String { get }
    /// Whether the URL may have a query: the WebSocket URL's is part of the request target, the
    /// daemon adds the HTTP API's.
    static var allowsQuery: Bool { get }
    static var queryOrFragmentProblem: String { get }
    static func userinfoProblem(_ url: String) -> String
}

public enum WebSocketEndpointKind: ServerEndpointKind {
    public static let schemes = ["ws", "wss"], secureScheme = "wss", allowsQuery = true
    public static let form = "must be a ws:// or wss:// URL such as \"wss://api.smartico.ai/websocket/services?master&domain=…&version=…\""
    public static let queryOrFragmentProblem = "must not have a #fragment"
    public static func userinfoProblem(_ url: String) -> String {
        "must not contain user:password@ (got \(quoted(redactedURL(url)))); put credentials in server.headers"
    }
}

public enum HTTPEndpointKind: ServerEndpointKind {
    public static let schemes = ["https", "http"], secureScheme = "https", allowsQuery = false
    public static let form = "must be an https:// or http:// URL such as \"https://papi.smartico.ai/services/public\""
    public static let queryOrFragmentProblem = "must not have a query or fragment (the daemon adds the query)"
    public static func userinfoProblem(_ url: String) -> String { "must not contain user:password@" }
}

/// A parsed `ws://` or `wss://` URL: what the transport needs to connect.
public typealias WebSocketEndpoint = ServerEndpoint<WebSocketEndpointKind>
/// A parsed `https://` or `http://` URL of Smartico's public HTTP API.
public typealias HTTPEndpoint = ServerEndpoint<HTTPEndpointKind>

/// A parsed URL of a server the daemon connects to.
public struct ServerEndpoint<Kind: ServerEndpointKind>: Sendable, Hashable, CustomStringConvertible {
    /// The URL as configured or derived.
    public let url: String
    /// `wss` or `https`.
    public let secure: Bool
    /// Lower-case host name or IP literal (no brackets).
    public let host: String
    /// The explicit port, or 443 / 80.
    public let port: Int
    /// Path and query for the request line, e.g. `/websocket/services?master&domain=&version=0.1.0`.
    public let requestTarget: String
    /// The path, e.g. `/services/public` (the HTTP API's URL has no query).
    public var path: String { requestTarget }

    public var description: String { url }

    /// Parses and checks a URL: a URL, a scheme of `Kind`, no user info, a host, no fragment (nor
    /// query where `Kind` allows none), the port. The failure is a message for a ``ConfigProblem``.
    public static func parse(_ url: String) -> Result<ServerEndpoint, URLProblem> {
        func fail(_ message: String) -> Result<ServerEndpoint, URLProblem> { .failure(URLProblem(message)) }
        guard let c = AbsoluteURL.parse(url) else { return fail("\(Kind.form), got \(quoted(redactedURL(url)))") }
        guard Kind.schemes.contains(c.scheme) else {
            return fail("\(Kind.form); the scheme \(quoted(c.scheme)) is not \(Kind.schemes.joined(separator: " or "))")
        }
        guard !c.hasUserinfo else { return fail(Kind.userinfoProblem(url)) }
        guard let host = c.host, !host.isEmpty else { return fail("\(Kind.form); the URL has no host") }
        guard !c.hasFragment, Kind.allowsQuery || c.percentEncodedQuery == nil else { return fail(Kind.queryOrFragmentProblem) }
        let secure = c.scheme == Kind.secureScheme
        let port = c.port ?? (secure ? 443 : 80)
        guard (1...65535).contains(port) else { return fail("has an invalid port \(port)") }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let target = (c.percentEncodedPath.isEmpty ? "/" : c.percentEncodedPath) + (c.percentEncodedQuery.map { "?" + $0 } ?? "")
        return .success(ServerEndpoint(url: url, secure: secure, host: bare.lowercased(), port: port, requestTarget: target))
    }
}

/// Why a URL of the configuration was refused: a message for a ``ConfigProblem``.
public struct URLProblem: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension Result where Failure == URLProblem {
    /// The message of a failure.
    var problem: String? { if case .failure(let p) = self { p.message } else { nil } }
}

/// `url` with any `user:password@` replaced by `(masked)@`, for messages.
func redactedURL(_ url: String) -> String {
    guard let schemeEnd = url.firstRange(ofBytes: "://") else { return url }
    let afterScheme = url[schemeEnd.upperBound...]
    let authorityEnd = afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? afterScheme.endIndex
    guard let at = afterScheme[..<authorityEnd].lastIndex(of: "@") else { return url }
    return String(url[..<schemeEnd.upperBound]) + "(masked)" + String(afterScheme[at...])
}

/// The parts of an absolute URL (RFC 3986: `scheme:[//[userinfo@]host[:port]]path[?query][#fragment]`)
/// that the configuration checks need. It stands in for Foundation's `URLComponents` and accepts
/// what that accepts: an invalid host or port makes the whole URL invalid, while characters not
/// allowed in the path or query (a space, `{`, `"`, non-ASCII) are percent-encoded.
struct AbsoluteURL: Equatable {
    /// Lower-cased.
    var scheme: String
    /// `user[:password]@` was present (even empty).
    var hasUserinfo = false
    /// Percent-decoded, IPv6/IPvFuture literals in their brackets; nil without `//`, empty for `ws:///x`.
    var host: String?
    /// The explicit port; nil when absent or empty (`host:`).
    var port: Int?
    /// The path, percent-encoded; empty for `wss://host?q`.
    var percentEncodedPath = ""
    /// The query without its `?`, percent-encoded; nil without a `?`.
    var percentEncodedQuery: String?
    /// A `#` was present (even with nothing after it).
    var hasFragment = false

    /// Nil for a relative reference (no scheme) or an invalid scheme, host or port.
    static func parse(_ text: String) -> AbsoluteURL? {
        var rest = Substring(text)
        let hash = rest.firstIndex(of: "#")
        rest = rest[..<(hash ?? rest.endIndex)]
        guard let colon = rest.firstIndex(of: ":"), let first = rest.unicodeScalars.first, first.isASCII, first.properties.isAlphabetic,
              rest[..<colon].unicodeScalars.allSatisfy({ isAlphanumeric($0) || "+-.".unicodeScalars.contains($0) }) else { return nil }
        var url = AbsoluteURL(scheme: rest[..<colon].lowercased(), hasFragment: hash != nil)
        rest = rest[rest.index(after: colon)...]

        if rest.hasPrefix("//") {
            rest = rest.dropFirst(2)
            var authority = rest.prefix { $0 != "/" && $0 != "?" }
            rest = rest[authority.endIndex...]
            if let at = authority.lastIndex(of: "@") {
                url.hasUserinfo = true
                authority = authority[authority.index(after: at)...]
            }
            var portText: Substring?
            if authority.hasPrefix("[") {
                guard let close = authority.firstIndex(of: "]"), isIPLiteral(authority.dropFirst()[..<close]) else { return nil }
                url.host = String(authority[...close])
                let after = authority[authority.index(after: close)...]
                guard after.isEmpty || after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            } else {
                let hostText = authority.prefix { $0 != ":" }
                portText = authority[hostText.endIndex...].dropFirst()
                guard hostText.unicodeScalars.allSatisfy(isRegNameScalar), let decoded = percentDecoded(hostText) else { return nil }
                url.host = decoded
            }
            if let portText, !portText.isEmpty {
                guard portText.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let port = Int(portText) else { return nil }
                url.port = port
            }
        }
        let query = rest.firstIndex(of: "?")
        url.percentEncodedPath = percentEncodingInvalid(rest[..<(query ?? rest.endIndex)], query: false)
        url.percentEncodedQuery = query.map { percentEncodingInvalid(rest[rest.index(after: $0)...], query: true) }
        return url
    }

    private static func isAlphanumeric(_ s: Unicode.Scalar) -> Bool { s.isASCII && (s.properties.isAlphabetic || ("0"..."9").contains(s)) }

    /// unreserved, sub-delims, `%` (escapes are checked when decoding) and non-ASCII (an IDN, as
    /// Foundation lets through).
    private static func isRegNameScalar(_ s: Unicode.Scalar) -> Bool {
        !s.isASCII || isAlphanumeric(s) || "-._~!$&'()*+,;=%".unicodeScalars.contains(s)
    }

    /// The inside of `[…]`: an IPv6 address (hex digits, `:`, `.` for an embedded IPv4) or an
    /// IPvFuture (`v1.x`).
    private static func isIPLiteral(_ text: Substring) -> Bool {
        guard let first = text.first else { return false }
        if first == "v" || first == "V" {
            return text.unicodeScalars.allSatisfy { $0.isASCII && ($0 == ":" || ($0 != "%" && isRegNameScalar($0))) }
        }
        return text.utf8.allSatisfy { hexValue($0) != nil || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }
    }

    /// `text` with every byte that may not appear in a path (or a query, which may hold `?`) as `%XX`:
    /// unreserved, sub-delims, `:`, `@`, `/` and well-formed `%XX` escapes stay.
    private static func percentEncodingInvalid(_ text: Substring, query: Bool) -> String {
        let bytes = Array(text.utf8), hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for (i, b) in bytes.enumerated() {
            let escape = b == UInt8(ascii: "%") && i + 2 < bytes.count && hexValue(bytes[i + 1]) != nil && hexValue(bytes[i + 2]) != nil
            let allowed = isAlphanumeric(Unicode.Scalar(b)) || "-._~!$&'()*+,;=:@/".utf8.contains(b) || (query && b == UInt8(ascii: "?"))
            out += escape || allowed ? [b] : [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 15)]]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
