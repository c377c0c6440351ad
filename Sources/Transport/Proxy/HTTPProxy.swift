/// An HTTP proxy reached with `CONNECT` (RFC 9110 §9.3.6): `http://[user:pass@]host:port`.
/// The password never shows: not in the description, `dump`, reflection, errors or the encoded form.
public struct HTTPProxy: Hashable, Sendable, CustomStringConvertible {
    /// Lower-case host name or IP literal (IPv6 without brackets).
    public var host: String
    public var port: Int
    /// Credentials for `Proxy-Authorization: Basic`, when given.
    public var username: String?
    public var password: Password?

    /// A proxy password: shown as `(masked)` by every way Swift turns a value into text; the raw
    /// value only through ``exposedValue``, for the `Proxy-Authorization` header.
    public struct Password: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible,
        CustomDebugStringConvertible, CustomReflectable
    {
        public let exposedValue: String
        public init(_ value: String) { exposedValue = value }
        public init(stringLiteral value: String) { exposedValue = value }
        public var description: String { "(masked)" }
        public var debugDescription: String { "Password(masked)" }
        public var customMirror: Mirror { Mirror(self, children: [], displayStyle: nil) }
    }

    public init(host: String, port: Int, username: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password.map { Password($0) }
    }

    /// Parses `http://[user[:pass]@]host[:port][/]` (port 80 by default; user info percent-decoded;
    /// the host lower-cased). With `schemeOptional`, `host:port` alone is accepted (as environment
    /// variables often have it, and curl allows). Errors never contain the password.
    public init(url text: String, schemeOptional: Bool = false) throws(HTTPProxyError) {
        func invalid(_ problem: String) -> HTTPProxyError { .invalidURL(url: HTTPProxy.masked(text), problem: problem) }
        var rest = Substring(text)
        while rest.first == " " || rest.first == "\t" { rest = rest.dropFirst() }
        while rest.last == " " || rest.last == "\t" { rest = rest.dropLast() }
        guard !rest.isEmpty else { throw .invalidURL(url: text, problem: "it is empty") }
        if let sep = HTTPProxy.schemeSeparator(in: rest) {
            let scheme = rest[..<sep.lowerBound].lowercased()
            guard scheme == "http" else {
                throw invalid("the scheme \"\(scheme)\" is not supported; only http:// proxies (reached with HTTP CONNECT) are")
            }
            rest = rest[sep.upperBound...]
        } else if !schemeOptional {
            throw invalid("it must start with http:// (the form is http://[user:pass@]host:port)")
        }
        if let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            guard rest[end...] == "/" else { throw invalid("a proxy URL has no path, query or fragment") }
            rest = rest[..<end]
        }
        var user: String? = nil
        var pass: String? = nil
        if let at = rest.lastIndex(of: "@") {
            let info = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let parts = info.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard let u = HTTPProxy.percentDecode(parts[0]) else { throw invalid("bad %-encoding in the user name") }
            user = u
            if parts.count == 2 {
                guard let p = HTTPProxy.percentDecode(parts[1]) else { throw invalid("bad %-encoding in the password") }
                pass = p
            }
        }
        var hostPart = rest
        var portPart: Substring? = nil
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw invalid("unterminated IPv6 literal") }
            hostPart = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("junk after the IPv6 literal") }
                portPart = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            hostPart = rest[..<colon]
            portPart = rest[rest.index(after: colon)...]
        }
        guard !hostPart.isEmpty else { throw invalid("the host is empty (the form is http://[user:pass@]host:port)") }
        let allowed: (Unicode.Scalar) -> Bool = { s in
            ("a"..."z").contains(s) || ("A"..."Z").contains(s) || ("0"..."9").contains(s) || ".-_:%".unicodeScalars.contains(s)
        }
        guard hostPart.unicodeScalars.allSatisfy(allowed), !(hostPart.contains(":") && !rest.hasPrefix("[")) else {
            throw invalid("invalid host \"\(hostPart)\"")
        }
        var port = 80
        if let portPart {
            guard let n = Int(portPart), (1...65535).contains(n) else { throw invalid("invalid port \"\(portPart)\" (must be 1…65535)") }
            port = n
        }
        self.init(host: hostPart.lowercased(), port: port, username: user, password: pass)
    }

    /// `host:port` (IPv6 in brackets).
    public var authority: String { HTTPProxy.authority(host: host, port: port) }

    public var description: String {
        guard let username else { return "http://" + authority }
        return "http://" + username + (password == nil ? "" : ":(masked)") + "@" + authority
    }

    /// `Basic base64(user:pass)` when credentials are set: the raw secret, for the header only.
    public var authorizationHeaderValue: String? {
        guard let username else { return nil }
        return "Basic " + Base64.encode((username + ":" + (password?.exposedValue ?? "")).utf8)
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
}

/// A proxy in a configuration file is its URL; it is encoded masked, so that encoding a
/// configuration for display never shows the password.
extension HTTPProxy: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        do {
            try self.init(url: try container.decode(String.self))
        } catch let error as HTTPProxyError {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

extension HTTPProxy {
    /// The proxy settings of a process environment: `https_proxy`, `http_proxy` and `no_proxy`,
    /// each in lower or upper case (lower case wins when both are set; an empty value counts as unset).
    ///
    /// - `wss://` and `https://` destinations use `https_proxy`; `ws://` and `http://` use `http_proxy`.
    /// - `no_proxy` is a comma-separated list: `*` (no proxy at all), a host or domain
    ///   (`example.com` matches it and every subdomain), a leading dot or `*.` (`.example.com`
    ///   matches subdomains only), an IP literal (IPv6 in brackets when a port follows), each
    ///   optionally with `:port` to match that port only. Matching ignores case.
    /// - A proxy value may leave out `http://`. One that does not parse is reported when it would be
    ///   used, naming its variable, so a typo is not silently ignored.
    public struct Environment: Sendable {
        private var https: (variable: String, proxy: Result<HTTPProxy, HTTPProxyError>)?
        private var http: (variable: String, proxy: Result<HTTPProxy, HTTPProxyError>)?
        private var noProxy: [NoProxyEntry]
        /// The variable `no_proxy` came from, if any.
        public let noProxyVariable: String?

        public init(_ environment: [String: String]) {
            func lookup(_ lower: String) -> (value: String, variable: String)? {
                for name in [lower, lower.uppercased()] {
                    if let value = environment[name], value.contains(where: { $0 != " " && $0 != "\t" }) {
                        return (value, name)
                    }
                }
                return nil
            }
            func parsed(_ found: (value: String, variable: String)?) -> (variable: String, proxy: Result<HTTPProxy, HTTPProxyError>)? {
                found.map { found in
                    (found.variable, Result { () throws(HTTPProxyError) in try HTTPProxy(url: found.value, schemeOptional: true) })
                }
            }
            https = parsed(lookup("https_proxy"))
            http = parsed(lookup("http_proxy"))
            let no = lookup("no_proxy")
            noProxyVariable = no?.variable
            noProxy = (no?.value ?? "").split(separator: ",").compactMap { NoProxyEntry(String($0)) }
        }

        /// Whether `no_proxy` excludes `host:port`.
        public func bypasses(host: String, port: Int) -> Bool {
            noProxy.contains { $0.matches(host: host, port: port) }
        }

        /// The proxy for a destination and the variable it came from; nil to connect directly.
        /// - Parameter secure: `wss://`/`https://` (true) or `ws://`/`http://` (false).
        public func proxy(secure: Bool, host: String, port: Int) -> Result<(HTTPProxy, String)?, EnvironmentError> {
            guard let setting = secure ? https : http, !bypasses(host: host, port: port) else { return .success(nil) }
            switch setting.proxy {
            case .success(let proxy): return .success((proxy, setting.variable))
            case .failure(let error): return .failure(EnvironmentError(variable: setting.variable, error: error))
            }
        }
    }

    /// A proxy variable of the environment that would be used is not a valid proxy URL.
    public struct EnvironmentError: Error, Hashable, Sendable, CustomStringConvertible {
        /// The variable's name as set (`https_proxy`, `HTTPS_PROXY`…).
        public var variable: String
        public var error: HTTPProxyError
        public var description: String { "\(variable): \(error)" }
    }
}

/// One entry of `no_proxy`.
private struct NoProxyEntry: Sendable {
    /// Lower-case host, domain or IP (no brackets); empty for `*`.
    var host = ""
    /// Matches subdomains only (`.example.com`, `*.example.com`).
    var subdomainsOnly = false
    /// Only this port, when given.
    var port: Int?
    /// `*`: everything.
    var matchesAll = false

    /// Parses one comma-separated item; nil for an empty item.
    init?(_ raw: String) {
        var text = Substring(raw.lowercased())
        while text.first == " " || text.first == "\t" { text = text.dropFirst() }
        while text.last == " " || text.last == "\t" { text = text.dropLast() }
        if text.isEmpty { return nil }
        if text == "*" { matchesAll = true; return }
        if text.hasPrefix("[") {
            // [v6] or [v6]:port
            guard let close = text.firstIndex(of: "]") else { host = String(text); return }
            host = String(text[text.index(after: text.startIndex)..<close])
            let after = text[text.index(after: close)...]
            if after.hasPrefix(":"), let p = Int(after.dropFirst()) { port = p }
            return
        }
        if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            if let p = Int(text[text.index(after: colon)...]) { port = p }
            text = text[..<colon]
        }
        if text.hasPrefix("*.") { text = text.dropFirst(2); subdomainsOnly = true }
        else if text.hasPrefix(".") { text = text.dropFirst(); subdomainsOnly = true }
        if text.hasSuffix(".") { text = text.dropLast() }
        host = String(text)
    }

    func matches(host candidate: String, port candidatePort: Int) -> Bool {
        if matchesAll { return true }
        if let port, port != candidatePort { return false }
        var h = candidate.lowercased()
        if h.hasPrefix("["), h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        if h.hasSuffix(".") { h = String(h.dropLast()) }
        if host.isEmpty { return false }
        if h.hasSuffix("." + host) { return true }
        return !subdomainsOnly && h == host
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

    private var answer = HTTPExpectedResponse(expecting: 200..<300)

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
        let outcome: HTTPExpectedResponse.Outcome?
        do {
            outcome = try answer.receive(bytes, maxBodySize: maxErrorBodySize)
        } catch {
            throw .malformedResponse(proxy: proxy.authority, error)
        }
        switch outcome {
        case nil:
            return false
        case .accepted?:
            if !answer.remainder.isEmpty { throw .unexpectedData(proxy: proxy.authority, count: answer.remainder.count) }
            return true
        case .refused(let head, let body)?:
            throw .refused(proxy: proxy.authority, target: target, statusLine: head.statusLine, bodyPrefix: body)
        }
    }

    /// The proxy closed the connection: throws the most informative error.
    public func transportClosed() throws(HTTPProxyError) {
        if let refusal = answer.refusal {
            throw .refused(proxy: proxy.authority, target: target, statusLine: refusal.statusLine, bodyPrefix: answer.body)
        }
        throw .closed(proxy: proxy.authority, bytesReceived: answer.received)
    }
}
