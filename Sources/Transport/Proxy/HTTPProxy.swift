/// An HTTP proxy reached with `CONNECT` (RFC 9110 §9.3.6): `http://[user:pass@]host:port`.
/// Its description never shows the password.
public struct HTTPProxy: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// Credentials for `Proxy-Authorization: Basic`, when given.
    public var username: String?
    public var password: String?

    public init(host: String, port: Int, username: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
    }

    /// Parses `http://[user[:pass]@]host[:port][/]` (port 80 by default; user info percent-decoded).
    /// With `schemeOptional`, `host:port` alone is accepted (as environment variables often have it).
    public init(url text: String, schemeOptional: Bool = false) throws(HTTPProxyError) {
        var rest = Substring(text)
        while rest.first == " " { rest = rest.dropFirst() }
        while rest.last == " " { rest = rest.dropLast() }
        guard !rest.isEmpty else { throw .invalidURL(url: text, problem: "empty") }
        if let sep = HTTPProxy.schemeSeparator(in: rest) {
            let scheme = rest[..<sep.lowerBound].lowercased()
            guard scheme == "http" else {
                throw .invalidURL(url: HTTPProxy.masked(text), problem: "scheme \"\(scheme)\" is not supported; use http://")
            }
            rest = rest[sep.upperBound...]
        } else if !schemeOptional {
            throw .invalidURL(url: HTTPProxy.masked(text), problem: "missing http:// scheme")
        }
        if let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            guard rest[end...] == "/" else {
                throw .invalidURL(url: HTTPProxy.masked(text), problem: "a proxy URL has no path or query")
            }
            rest = rest[..<end]
        }
        var user: String? = nil
        var pass: String? = nil
        if let at = rest.lastIndex(of: "@") {
            let info = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let parts = info.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard let u = HTTPProxy.percentDecode(parts[0]) else {
                throw .invalidURL(url: HTTPProxy.masked(text), problem: "bad percent-encoding in the user name")
            }
            user = u
            if parts.count == 2 {
                guard let p = HTTPProxy.percentDecode(parts[1]) else {
                    throw .invalidURL(url: HTTPProxy.masked(text), problem: "bad percent-encoding in the password")
                }
                pass = p
            }
        }
        var hostPart = rest
        var portPart: Substring? = nil
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                throw .invalidURL(url: HTTPProxy.masked(text), problem: "unterminated IPv6 literal")
            }
            hostPart = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw .invalidURL(url: HTTPProxy.masked(text), problem: "junk after the IPv6 literal") }
                portPart = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            hostPart = rest[..<colon]
            portPart = rest[rest.index(after: colon)...]
        }
        guard !hostPart.isEmpty else { throw .invalidURL(url: HTTPProxy.masked(text), problem: "the host is empty") }
        var port = 80
        if let portPart {
            guard let n = Int(portPart), (1...65535).contains(n) else {
                throw .invalidURL(url: HTTPProxy.masked(text), problem: "invalid port \"\(portPart)\"")
            }
            port = n
        }
        self.init(host: String(hostPart), port: port, username: user, password: pass)
    }

    /// `host:port` (IPv6 in brackets).
    public var authority: String { HTTPProxy.authority(host: host, port: port) }

    public var description: String {
        guard let username else { return "http://" + authority }
        return "http://" + username + (password == nil ? "" : ":(masked)") + "@" + authority
    }

    /// `Basic base64(user:pass)` when credentials are set.
    public var authorizationHeaderValue: String? {
        guard let username else { return nil }
        return "Basic " + Base64.encode((username + ":" + (password ?? "")).utf8)
    }

    static func authority(host: String, port: Int) -> String {
        (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
    }

    private static func masked(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@") else { return text }
        let start = schemeSeparator(in: Substring(text))?.upperBound ?? text.startIndex
        let info = text[start..<at]
        guard let colon = info.firstIndex(of: ":") else { return text }
        return String(text[..<colon]) + ":(masked)" + String(text[at...])
    }

    /// The range of "://" in `s`.
    static func schemeSeparator(in s: Substring) -> Range<Substring.Index>? {
        var i = s.startIndex
        while i < s.endIndex {
            if s[i...].hasPrefix("://") { return i..<s.index(i, offsetBy: 3) }
            i = s.index(after: i)
        }
        return nil
    }

    private static func percentDecode(_ s: Substring) -> String? {
        var out: [UInt8] = []
        var it = Array(s.utf8)[...]
        while let c = it.popFirst() {
            if c == UInt8(ascii: "%") {
                guard it.count >= 2, let h = hex(it[it.startIndex]), let l = hex(it[it.startIndex + 1]) else { return nil }
                out.append(h << 4 | l)
                it = it.dropFirst(2)
            } else {
                out.append(c)
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x41 + 10
        case 0x61...0x66: return c - 0x61 + 10
        default: return nil
        }
    }

    /// The proxy for `host` from the environment, curl's rules: `https_proxy` (or `HTTPS_PROXY`) for
    /// secure targets, `http_proxy` for plain ones (lowercase only: `HTTP_PROXY` is ignored, as CGI sets it
    /// from a request header), then `all_proxy`/`ALL_PROXY`; none when `no_proxy`/`NO_PROXY` matches (`*`,
    /// an exact host, or a domain suffix: `example.com` and `.example.com` match `a.example.com`).
    /// A value that does not parse is returned as the error, so a typo is not silently ignored.
    public static func fromEnvironment(
        _ environment: [String: String], host: String, secure: Bool
    ) throws(HTTPProxyError) -> HTTPProxy? {
        func value(_ names: [String]) -> String? {
            for n in names { if let v = environment[n], !v.isEmpty { return v } }
            return nil
        }
        if let noProxy = value(["no_proxy", "NO_PROXY"]), matchesNoProxy(noProxy, host: host) { return nil }
        let names = secure ? ["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] : ["http_proxy", "all_proxy", "ALL_PROXY"]
        guard let text = value(names) else { return nil }
        return try HTTPProxy(url: text, schemeOptional: true)
    }

    /// True when `no_proxy` (comma-separated) excludes `host`.
    public static func matchesNoProxy(_ list: String, host: String) -> Bool {
        let h = host.lowercased()
        for raw in list.split(separator: ",") {
            var entry = Substring(raw.lowercased())
            while entry.first == " " { entry = entry.dropFirst() }
            while entry.last == " " { entry = entry.dropLast() }
            if entry.isEmpty { continue }
            if entry == "*" { return true }
            // Drop a port ("example.com:443") when the entry is not an IPv6 literal.
            if entry.filter({ $0 == ":" }).count == 1, let colon = entry.firstIndex(of: ":") { entry = entry[..<colon] }
            if entry.hasPrefix("[") && entry.hasSuffix("]") { entry = entry.dropFirst().dropLast() }
            if entry.hasPrefix("*.") { entry = entry.dropFirst() }
            if entry.hasPrefix(".") { entry = entry.dropFirst() }
            if h == entry || h.hasSuffix("." + entry) { return true }
        }
        return false
    }
}

/// Why reaching a target through an HTTP proxy failed.
public enum HTTPProxyError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The proxy URL is unusable (the password is masked in `url`).
    case invalidURL(url: String, problem: String)
    /// The proxy answered CONNECT with a non-2xx status (407: credentials missing or wrong).
    case refused(proxy: String, target: String, statusLine: String, bodyPrefix: [UInt8])
    /// The proxy's answer is not valid HTTP.
    case malformedResponse(proxy: String, HTTPParseError)
    /// The proxy closed the connection before answering.
    case closed(proxy: String, bytesReceived: Int)
    /// The proxy sent bytes after its 2xx answer, before the tunnel was used.
    case unexpectedData(proxy: String, count: Int)

    public var description: String {
        switch self {
        case let .invalidURL(url, problem):
            return "invalid proxy URL \"\(url)\": \(problem)"
        case let .refused(proxy, target, line, body):
            var s = "proxy \(proxy) refused CONNECT \(target): \"\(line)\""
            // The status code is the status line's second word (not `contains(" 407")`: String
            // searches for a String come from _StringProcessing, kept out of the static daemon).
            if line.split(separator: " ", maxSplits: 2).dropFirst().first == "407" { s += " (proxy authentication required: check the user and password of the proxy URL)" }
            if !body.isEmpty { s += "; body starts with: " + String(decoding: body, as: UTF8.self) }
            return s
        case let .malformedResponse(proxy, e):
            return "proxy \(proxy) answered CONNECT with invalid HTTP: \(e)"
        case let .closed(proxy, n):
            return "proxy \(proxy) closed the connection after \(n) bytes, before answering CONNECT"
        case let .unexpectedData(proxy, n):
            return "proxy \(proxy) sent \(n) unexpected bytes after accepting CONNECT"
        }
    }
}

/// The `CONNECT` exchange, sans-I/O: write ``request``, feed the proxy's bytes to ``receive(_:)`` until it
/// returns true (tunnel open) or throws.
public struct HTTPConnectHandshake: Sendable {
    public let proxy: HTTPProxy
    /// `host:port` of the target.
    public let target: String
    public let requestHead: HTTPRequestHead
    public var request: [UInt8] { requestHead.serialized() }
    /// How much of a refusal's body is kept for the error.
    public var maxErrorBodySize = 512

    private var parser = HTTPHeadParser()
    private var refusal: HTTPResponseHead?
    private var decoder: HTTPBodyDecoder?
    private var body: [UInt8] = []
    private var received = 0

    public init(proxy: HTTPProxy, targetHost: String, targetPort: Int, userAgent: String? = nil) {
        self.proxy = proxy
        target = HTTPProxy.authority(host: targetHost, port: targetPort)
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: target)
        if let auth = proxy.authorizationHeaderValue { headers.add(name: "Proxy-Authorization", value: auth) }
        if let userAgent { headers.add(name: "User-Agent", value: userAgent) }
        requestHead = HTTPRequestHead(method: "CONNECT", target: target, headers: headers)
    }

    /// Feeds the proxy's bytes; true once a 2xx answer is complete (the tunnel is open).
    public mutating func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTPProxyError) -> Bool {
        received += bytes.count
        if refusal != nil {
            try collect(bytes)
            return false
        }
        let head: HTTPResponseHead
        do {
            guard let h = try parser.parseResponse(bytes) else { return false }
            head = h
        } catch {
            throw .malformedResponse(proxy: proxy.authority, error)
        }
        if (200..<300).contains(head.status) {
            if !parser.remainder.isEmpty { throw .unexpectedData(proxy: proxy.authority, count: parser.remainder.count) }
            return true
        }
        refusal = head
        let framing = (try? HTTPBodyFraming.forResponse(head, requestMethod: "GET")) ?? .closeDelimited
        decoder = HTTPBodyDecoder(framing: framing, maxBodySize: Int.max)
        let rest = parser.remainder
        try withTypedBytes(rest) { (raw) throws(HTTPProxyError) in try collect(raw) }
        return false
    }

    /// The proxy closed the connection: throws the most informative error.
    public func transportClosed() throws(HTTPProxyError) {
        if let refusal {
            throw .refused(proxy: proxy.authority, target: target, statusLine: refusal.statusLine, bodyPrefix: body)
        }
        throw .closed(proxy: proxy.authority, bytesReceived: received)
    }

    private mutating func collect(_ bytes: UnsafeRawBufferPointer) throws(HTTPProxyError) {
        guard let head = refusal, var d = decoder else { return }
        var bad = false
        do { try d.decode(bytes, into: &body) } catch { bad = true }
        decoder = d
        if bad || d.isComplete || body.count >= maxErrorBodySize {
            if body.count > maxErrorBodySize { body.removeLast(body.count - maxErrorBodySize) }
            throw .refused(proxy: proxy.authority, target: target, statusLine: head.statusLine, bodyPrefix: body)
        }
    }
}
