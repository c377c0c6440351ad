/// An HTTP proxy reached with HTTP CONNECT: `http://[user:pass@]host:port`.
/// Its description masks the password: `http://user:(masked)@proxy.example:3128`.
public struct ProxyEndpoint: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var username: String?
    public var password: Secret?

    public init(host: String, port: Int, username: String? = nil, password: Secret? = nil) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
    }

    /// The value of the `Proxy-Authorization` header (`Basic base64(user:pass)`), when the
    /// URL carried credentials. A ``Secret``: use `exposedValue` only to write the header.
    public var authorization: Secret? {
        guard let username else { return nil }
        let pair = username + ":" + (password?.exposedValue ?? "")
        return Secret("Basic " + Base64.encode(pair.utf8))
    }

    /// `host:port` as written in a CONNECT request line (IPv6 in brackets).
    public var authority: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }

    public var description: String {
        var userinfo = ""
        if let username {
            userinfo = username + (password == nil ? "" : ":(masked)") + "@"
        }
        return "http://" + userinfo + authority
    }

    /// Parses a proxy URL. `http://` is required unless `schemeOptional` (environment
    /// variables such as `https_proxy=proxy:3128` often leave it out, as curl allows).
    /// The port defaults to 80. Errors never contain the password.
    public static func parse(_ text: String, schemeOptional: Bool = false) -> Result<ProxyEndpoint, ProxyURLError> {
        var rest = Substring(text.trimmingBlanks())
        if rest.isEmpty { return .failure(.empty) }
        if let range = rest.firstRange(ofBytes: "://") {
            let scheme = rest[..<range.lowerBound].lowercased()
            guard scheme == "http" else { return .failure(.unsupportedScheme(scheme)) }
            rest = rest[range.upperBound...]
        } else if !schemeOptional {
            return .failure(.missingScheme)
        }
        // Authority ends at the first "/", "?" or "#"; only an empty path or "/" may follow.
        if let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            guard rest[end...] == "/" else { return .failure(.unexpectedPath) }
            rest = rest[..<end]
        }
        var username: String?
        var password: Secret?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let user: Substring, pass: Substring?
            if let colon = userinfo.firstIndex(of: ":") {
                user = userinfo[..<colon]
                pass = userinfo[userinfo.index(after: colon)...]
            } else {
                user = userinfo
                pass = nil
            }
            guard let decodedUser = percentDecoded(user) else { return .failure(.badUserinfoEncoding) }
            username = decodedUser
            if let pass {
                guard let decodedPass = percentDecoded(pass) else { return .failure(.badUserinfoEncoding) }
                password = Secret(decodedPass)
            }
        }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return .failure(.invalidHost(String(rest))) }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return .failure(.invalidHost(String(rest))) }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty else { return .failure(.missingHost) }
        let hostString = String(host)
        let allowed: (Unicode.Scalar) -> Bool = { s in
            ("a"..."z").contains(s) || ("A"..."Z").contains(s) || ("0"..."9").contains(s) || ".-_:%".unicodeScalars.contains(s)
        }
        guard hostString.unicodeScalars.allSatisfy(allowed),
              !(hostString.contains(":") && !rest.hasPrefix("[")) else {
            return .failure(.invalidHost(hostString))
        }
        var port = 80
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value) else { return .failure(.badPort(String(portText))) }
            port = value
        }
        return .success(ProxyEndpoint(host: hostString.lowercased(), port: port, username: username, password: password))
    }
}

/// Why a proxy URL was refused. The descriptions never contain the password.
public enum ProxyURLError: Error, Sendable, Equatable, CustomStringConvertible {
    case empty
    case missingScheme
    case unsupportedScheme(String)
    case missingHost
    case invalidHost(String)
    case badPort(String)
    case unexpectedPath
    case badUserinfoEncoding

    public var description: String {
        switch self {
        case .empty: return "is empty"
        case .missingScheme: return "must start with http:// (the form is http://[user:pass@]host:port)"
        case .unsupportedScheme(let s):
            return "has the scheme \"\(s)\"; only http:// proxies (reached with HTTP CONNECT) are supported"
        case .missingHost: return "has no host (the form is http://[user:pass@]host:port)"
        case .invalidHost(let h): return "has an invalid host \(ConfigJSON.quoted(h))"
        case .badPort(let p): return "has an invalid port \(ConfigJSON.quoted(p)) (must be 1…65535)"
        case .unexpectedPath: return "must not have a path, query or fragment (the form is http://[user:pass@]host:port)"
        case .badUserinfoEncoding: return "has a user name or password with invalid %-encoding"
        }
    }
}

/// The value of `server.proxy`: the text as written (a ``Secret``, since it may carry a
/// password) and its parsed form. Invalid values are reported by ``DaemonConfig/validate()``.
public struct ProxyURL: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The URL as written in the configuration.
    public let text: Secret

    public init(_ text: String) { self.text = Secret(text) }

    /// The parsed proxy, or why it is invalid.
    public var endpoint: Result<ProxyEndpoint, ProxyURLError> { ProxyEndpoint.parse(text.exposedValue) }

    /// The endpoint with its password masked, or `(invalid proxy URL)`.
    public var description: String {
        switch endpoint {
        case .success(let e): return e.description
        case .failure: return "(invalid proxy URL)"
        }
    }

    public init(from decoder: any Decoder) throws {
        text = Secret(try decoder.singleValueContainer().decode(String.self))
    }

    /// Encodes the masked description, like every ``Secret``.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}

/// The proxy settings of the process environment: `https_proxy`, `http_proxy` and
/// `no_proxy`, each in lower or upper case (lower case wins when both are set).
///
/// - `wss://` and `https://` destinations use `https_proxy`; `ws://` and `http://` use `http_proxy`.
/// - `no_proxy` is a comma-separated list: `*` (no proxy at all), a host or domain
///   (`example.com` matches it and every subdomain), a leading dot or `*.` (`.example.com`
///   matches subdomains only), an IP literal (IPv6 in brackets when a port follows), each
///   optionally with `:port` to match that port only. Matching ignores case.
public struct ProxyEnvironment: Sendable, Equatable {
    /// A proxy variable: its value (a ``Secret``: it may carry a password) and its name.
    public struct Setting: Sendable, Equatable {
        public var value: Secret
        public var variable: String
    }

    /// `https_proxy` (or `HTTPS_PROXY`), when set and non-empty.
    public var httpsProxy: Setting?
    /// `http_proxy` (or `HTTP_PROXY`), when set and non-empty.
    public var httpProxy: Setting?
    /// The parsed `no_proxy` entries.
    public var noProxy: [NoProxyEntry]
    /// The variable `no_proxy` came from, if any.
    public var noProxyVariable: String?

    public init(environment: [String: String]) {
        func lookup(_ lower: String) -> (value: String, variable: String)? {
            for name in [lower, lower.uppercased()] {
                if let value = environment[name]?.trimmingBlanks(), !value.isEmpty {
                    return (value, name)
                }
            }
            return nil
        }
        httpsProxy = lookup("https_proxy").map { Setting(value: Secret($0.value), variable: $0.variable) }
        httpProxy = lookup("http_proxy").map { Setting(value: Secret($0.value), variable: $0.variable) }
        let no = lookup("no_proxy")
        noProxyVariable = no?.variable
        noProxy = (no?.value ?? "").split(separator: ",").compactMap { NoProxyEntry(String($0)) }
    }

    /// Whether `no_proxy` excludes `host:port`.
    public func bypasses(host: String, port: Int) -> Bool {
        noProxy.contains { $0.matches(host: host, port: port) }
    }

    /// The proxy for a destination, or nil to connect directly.
    /// - Parameters:
    ///   - secure: `wss://`/`https://` (true) or `ws://`/`http://` (false).
    /// - Returns: the endpoint and the variable it came from, or the variable's problem.
    public func proxy(secure: Bool, host: String, port: Int) -> Result<(ProxyEndpoint, String)?, ConfigProblem> {
        guard let setting = secure ? httpsProxy : httpProxy else { return .success(nil) }
        if bypasses(host: host, port: port) { return .success(nil) }
        switch ProxyEndpoint.parse(setting.value.exposedValue, schemeOptional: true) {
        case .success(let endpoint): return .success((endpoint, setting.variable))
        case .failure(let error): return .failure(ConfigProblem(key: setting.variable, message: "the proxy URL \(error)"))
        }
    }
}

/// One entry of `no_proxy`.
public struct NoProxyEntry: Sendable, Equatable {
    /// Lower-case host, domain or IP (no brackets); empty for `*`.
    public var host: String
    /// Matches subdomains only (`.example.com`, `*.example.com`).
    public var subdomainsOnly: Bool
    /// Only this port, when given.
    public var port: Int?
    /// `*`: everything.
    public var matchesAll: Bool

    /// Parses one comma-separated item; nil for an empty item.
    public init?(_ raw: String) {
        var text = Substring(raw.trimmingBlanks().lowercased())
        if text.isEmpty { return nil }
        port = nil
        subdomainsOnly = false
        matchesAll = false
        host = ""
        if text == "*" { matchesAll = true; return }
        if text.hasPrefix("[") {
            // [v6] or [v6]:port
            guard let close = text.firstIndex(of: "]") else { host = String(text); return }
            host = String(text[text.index(after: text.startIndex)..<close])
            let after = text[text.index(after: close)...]
            if after.hasPrefix(":"), let p = Int(after.dropFirst()) { port = p }
            return
        }
        let colons = text.filter { $0 == ":" }.count
        if colons == 1, let colon = text.firstIndex(of: ":") {
            if let p = Int(text[text.index(after: colon)...]) { port = p }
            text = text[..<colon]
        }
        if text.hasPrefix("*.") { text = text.dropFirst(2); subdomainsOnly = true }
        else if text.hasPrefix(".") { text = text.dropFirst(); subdomainsOnly = true }
        if text.hasSuffix(".") { text = text.dropLast() }
        host = String(text)
    }

    public func matches(host candidate: String, port candidatePort: Int) -> Bool {
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
