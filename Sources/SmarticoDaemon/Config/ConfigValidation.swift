import Transport

extension DaemonConfig {
    /// Every semantic problem of this configuration, in key order; empty when it is valid.
    ///
    /// This is the one place where values are judged (decoding only checks JSON types and
    /// keys): the bounds of the table (``DaemonConfig/keys``), then what no bound says: URLs
    /// and their schemes, the socket mode, absolute paths, the label key's format, the user
    /// hash's dependency on a user, keys bounded by other keys.
    /// It does not touch the file system or the network.
    public func validate() -> [ConfigProblem] {
        var v = Validator()
        for key in DaemonConfig.keys { if let message = key.check(self) { v.add(key.path, message) } }

        if let url = server.url, case .failure(let problem) = WebSocketEndpoint.parse(url) { v.add("server.url", problem.message) }
        do { _ = try LabelKey(parsing: server.labelKey) } catch { v.add("server.label_key", error.description) }
        v.nonEmpty("server.brand_key", server.brandKey, orNull: true)
        for name in server.headers.keys.sorted() {
            let key = "server.headers." + keyComponent(name)
            if name.isEmpty || !name.unicodeScalars.allSatisfy(Validator.isTokenScalar) {
                v.add(key, "is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only)")
            } else if Validator.handshakeHeaders.contains(name.lowercased()) {
                v.add(key, "is set by the WebSocket handshake itself and cannot be overridden")
            }
            if let value = server.headers[name], value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) {
                v.add(key, "the value must not contain CR, LF or NUL")
            }
        }
        if let ca = server.tls.caFile { v.absolutePath("server.tls.ca_file", ca) }
        for (i, pin) in server.tls.pinnedSPKISHA256.enumerated() {
            let key = "server.tls.pinned_spki_sha256[\(i)]"
            guard let bytes = Base64.decode(pin) else {
                v.add(key, "must be the base64 of a SHA-256 digest (44 characters ending in \"=\"), got \(ConfigJSON.quoted(pin))")
                continue
            }
            if bytes.count != 32 { v.add(key, "must decode to 32 bytes (a SHA-256 digest), got \(bytes.count) bytes") }
        }

        if let version = client.trackerVersion, !Validator.isVersion(version) {
            v.add("client.tracker_version", "must be a version X.Y.Z (three numbers separated by dots), got \(ConfigJSON.quoted(version))")
        }
        if let domain = client.domain, domain.isEmpty || domain.contains(where: { $0.isWhitespace || "/?#&".contains($0) }) {
            v.add("client.domain", "must be a non-empty application id without spaces, '/', '?', '#' or '&', got \(ConfigJSON.quoted(domain))")
        }
        v.nonEmpty("client.device_id", client.deviceID)
        v.nonEmpty("client.device_type", client.deviceType)
        v.nonEmpty("client.os", client.os)
        if let page = client.page, !page.isEmpty, AbsoluteURL.parse(page) == nil {
            v.add("client.page", "must be an absolute URL such as \"https://example.com/\", got \(ConfigJSON.quoted(page))")
        }
        if let language = client.language, !Validator.isLanguage(language) {
            v.add("client.language", "must be an ISO 639-1 code such as \"en\" or a custom code such as \"pt-br\", got \(ConfigJSON.quoted(language))")
        }

        if let id = user.extUserID, let problem = ExtUserID.problem(id) { v.add("user.ext_user_id", problem) }
        if let hash = user.hash {
            v.nonEmpty("user.hash", hash.exposedValue, orNull: true)
            if user.extUserID == nil { v.add("user.hash", "is set but user.ext_user_id is not; a hash only makes sense for a user") }
        }
        if let command = user.hashCommand {
            if command.isEmpty {
                v.add("user.hash_command", "must be a non-empty array of strings (program and arguments), got []")
            } else if command[0].isEmpty {
                v.add("user.hash_command[0]", "the program must be a non-empty string")
            }
            for (i, arg) in command.enumerated() where arg.contains("\0") { v.add("user.hash_command[\(i)]", "must not contain NUL") }
        }
        for (i, name) in user.hashCommandEnv.enumerated() where !Validator.isEnvironmentName(name) {
            v.add("user.hash_command_env[\(i)]", "must be an environment variable name (a letter or _, then letters, digits or _), got \(ConfigJSON.quoted(name))")
        }
        v.nonEmpty("user.push.token", user.push.token?.exposedValue, orNull: true)
        v.nonEmpty("user.push.app_package_id", user.push.appPackageID)

        let r = session.reconnect
        if r.initialMs >= 1, r.maxMs >= 1, r.initialMs > r.maxMs {
            v.add("session.reconnect.max_ms", "must be ≥ session.reconnect.initial_ms (\(r.initialMs)), got \(r.maxMs)")
        }
        if !(r.multiplier.isFinite && r.multiplier >= 1) {
            v.add("session.reconnect.multiplier", "must be a number ≥ 1, got \(r.multiplier)")
        }

        if v.absolutePath("socket.path", socket.path), socket.path.utf8.count > Validator.maxSocketPathBytes {
            v.add("socket.path", "is \(socket.path.utf8.count) bytes long; a Unix socket path may have at most \(Validator.maxSocketPathBytes)")
        }
        if socket.modeBits == nil {
            v.add("socket.mode", "must be an octal permission string such as \"0660\" (3 or 4 digits 0-7, at most 0777), got \(ConfigJSON.quoted(socket.mode))")
        }
        if let group = socket.group, group.isEmpty || group.contains(where: { $0.isWhitespace || $0 == ":" }) {
            v.add("socket.group", "must be a group name or numeric id, got \(ConfigJSON.quoted(group))")
        }
        if socket.maxTotalQueueBytes < socket.maxQueueBytes {
            v.add("socket.max_total_queue_bytes", "must be ≥ socket.max_queue_bytes (\(socket.maxQueueBytes)), got \(socket.maxTotalQueueBytes)")
        }
        if socket.maxPeerMemoryBytes < max(Socket.minPeerMemoryBytes, 4 * socket.maxLineBytes) {
            v.add("socket.max_peer_memory_bytes", "must be ≥ \(Socket.minPeerMemoryBytes) and ≥ 4 × socket.max_line_bytes (\(4 * socket.maxLineBytes)): one uid's quarter must hold a whole line; got \(socket.maxPeerMemoryBytes)")
        }

        v.absolutePath("state_dir", stateDir)
        if http.retryInitialMs >= 1, http.retryMaxMs >= 1, http.retryInitialMs > http.retryMaxMs {
            v.add("http.retry_max_ms", "must be ≥ http.retry_initial_ms (\(http.retryInitialMs)), got \(http.retryMaxMs)")
        }
        if let url = http.publicURL, case .failure(let problem) = HTTPEndpoint.parse(url) { v.add("http.public_url", problem.message) }
        if let textfile = metrics.textfile, v.absolutePath("metrics.textfile", textfile), textfile.hasSuffix("/") {
            v.add("metrics.textfile", "must name a file, not a directory, got \(ConfigJSON.quoted(textfile)); e.g. \"/var/lib/node_exporter/textfile_collector/smarticod.prom\"")
        }
        return ConfigLoader.inSchemaOrder(v.problems)
    }

    /// This configuration if ``validate()`` finds nothing, else a ``ConfigError`` with every problem.
    public func validated(source: String = "<memory>") throws(ConfigError) -> DaemonConfig {
        let problems = validate()
        if !problems.isEmpty { throw ConfigError(source: source, problems: problems) }
        return self
    }
}

private struct Validator {
    var problems: [ConfigProblem] = []

    /// `sizeof(sockaddr_un.sun_path) - 1` on Linux.
    static let maxSocketPathBytes = 107

    static let handshakeHeaders: Set<String> = [
        "host", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version",
        "sec-websocket-extensions", "sec-websocket-accept", "sec-websocket-protocol",
        "content-length", "transfer-encoding",
    ]

    mutating func add(_ key: String, _ message: String) { problems.append(ConfigProblem(key: key, message: message)) }

    /// `[A-Za-z_][A-Za-z0-9_]*`
    static func isEnvironmentName(_ name: String) -> Bool {
        guard let first = name.utf8.first, first == UInt8(ascii: "_") || isASCIILetter(first) else { return false }
        return name.utf8.allSatisfy { $0 == UInt8(ascii: "_") || isASCIILetter($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    static func isASCIILetter(_ b: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
    }

    mutating func nonEmpty(_ key: String, _ value: String?, orNull: Bool = false) {
        if let value, value.isEmpty { add(key, "must be a non-empty string" + (orNull ? " or null" : "")) }
    }

    @discardableResult
    mutating func absolutePath(_ key: String, _ path: String) -> Bool {
        guard path.hasPrefix("/") else {
            add(key, "must be an absolute path (starting with \"/\"), got \(ConfigJSON.quoted(path))")
            return false
        }
        if path.contains("\0") { add(key, "must not contain NUL"); return false }
        return true
    }

    static func isTokenScalar(_ s: Unicode.Scalar) -> Bool {
        s.isASCII && (s.properties.isAlphabetic || ("0"..."9").contains(s) || "!#$%&'*+-.^_`|~".unicodeScalars.contains(s))
    }

    static func isVersion(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 3 && parts.allSatisfy { !$0.isEmpty && $0.count <= 9 && $0.allSatisfy { ("0"..."9").contains($0) } }
    }

    /// `en`, `pt-br`, `zh_Hans`: 2–3 letters, then optional `-`/`_` subtags of 1–8 letters or digits.
    static func isLanguage(_ text: String) -> Bool {
        let parts = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "-" || $0 == "_" })
        guard let first = parts.first, (2...3).contains(first.count), first.allSatisfy({ $0.isASCII && $0.isLetter }) else { return false }
        return parts.dropFirst().allSatisfy { (1...8).contains($0.count) && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } }
    }
}

/// What tells the WebSocket server's URL and the public HTTP API's apart, for ``ServerEndpoint``.
public protocol ServerEndpointKind: Sendable {
    /// The schemes accepted, in the order messages name them.
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
        "must not contain user:password@ (got \(ConfigJSON.quoted(redactedURL(url)))); put credentials in server.headers"
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
    /// `wss` or `https` (TLS).
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

    /// Parses and checks a URL; the failure is a message for a ``ConfigProblem``. The checks, in
    /// this order: a URL, a scheme of `Kind`, no user info, a host, no fragment (nor query where
    /// `Kind` allows none), the port.
    public static func parse(_ url: String) -> Result<ServerEndpoint, URLProblem> {
        guard let c = AbsoluteURL.parse(url) else { return .failure(URLProblem("\(Kind.form), got \(ConfigJSON.quoted(redactedURL(url)))")) }
        guard Kind.schemes.contains(c.scheme) else {
            return .failure(URLProblem("\(Kind.form); the scheme \(ConfigJSON.quoted(c.scheme)) is not \(Kind.schemes.joined(separator: " or "))"))
        }
        guard !c.hasUserinfo else { return .failure(URLProblem(Kind.userinfoProblem(url))) }
        guard let host = c.host, !host.isEmpty else { return .failure(URLProblem("\(Kind.form); the URL has no host")) }
        guard !c.hasFragment, Kind.allowsQuery || c.percentEncodedQuery == nil else { return .failure(URLProblem(Kind.queryOrFragmentProblem)) }
        let secure = c.scheme == Kind.secureScheme
        let port = c.port ?? (secure ? 443 : 80)
        guard (1...65535).contains(port) else { return .failure(URLProblem("has an invalid port \(port)")) }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let target = (c.percentEncodedPath.isEmpty ? "/" : c.percentEncodedPath) + (c.percentEncodedQuery.map { "?" + $0 } ?? "")
        return .success(ServerEndpoint(url: url, secure: secure, host: bare.lowercased(), port: port, requestTarget: target))
    }
}

/// `url` with any `user:password@` replaced by `(masked)@`, for messages.
func redactedURL(_ url: String) -> String {
    guard let schemeEnd = url.firstRange(ofBytes: "://") else { return url }
    let afterScheme = url[schemeEnd.upperBound...]
    let authorityEnd = afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? afterScheme.endIndex
    guard let at = afterScheme[..<authorityEnd].lastIndex(of: "@") else { return url }
    return String(url[..<schemeEnd.upperBound]) + "(masked)" + String(afterScheme[at...])
}

/// Why a URL of the configuration was refused: a message for a ``ConfigProblem``.
public struct URLProblem: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
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
        var hasFragment = false
        if let hash = rest.firstIndex(of: "#") {
            hasFragment = true
            rest = rest[..<hash]
        }
        guard let colon = rest.firstIndex(of: ":") else { return nil }
        let scheme = rest[..<colon]
        guard let first = scheme.unicodeScalars.first, isASCIILetter(first),
              scheme.unicodeScalars.allSatisfy({ isASCIILetter($0) || ("0"..."9").contains($0) || "+-.".unicodeScalars.contains($0) })
        else { return nil }
        var url = AbsoluteURL(scheme: scheme.lowercased())
        url.hasFragment = hasFragment
        rest = rest[rest.index(after: colon)...]

        if rest.hasPrefix("//") {
            rest = rest.dropFirst(2)
            let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
            var authority = rest[..<end]
            rest = rest[end...]
            if let at = authority.lastIndex(of: "@") {
                url.hasUserinfo = true
                authority = authority[authority.index(after: at)...]
            }
            var portText: Substring?
            if authority.hasPrefix("[") {
                guard let close = authority.firstIndex(of: "]") else { return nil }
                let literal = authority[authority.index(after: authority.startIndex)..<close]
                guard isIPLiteral(literal) else { return nil }
                url.host = String(authority[...close])
                let after = authority[authority.index(after: close)...]
                if !after.isEmpty {
                    guard after.hasPrefix(":") else { return nil }
                    portText = after.dropFirst()
                }
            } else {
                var hostText = authority
                if let c = authority.firstIndex(of: ":") {
                    hostText = authority[..<c]
                    portText = authority[authority.index(after: c)...]
                }
                guard hostText.unicodeScalars.allSatisfy(isRegNameScalar), let decoded = percentDecoded(hostText) else { return nil }
                url.host = decoded
            }
            if let portText, !portText.isEmpty {
                guard portText.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let port = Int(portText) else { return nil }
                url.port = port
            }
        }

        if let q = rest.firstIndex(of: "?") {
            url.percentEncodedPath = percentEncodingInvalid(rest[..<q], alsoAllowed: [])
            url.percentEncodedQuery = percentEncodingInvalid(rest[rest.index(after: q)...], alsoAllowed: [UInt8(ascii: "?")])
        } else {
            url.percentEncodedPath = percentEncodingInvalid(rest, alsoAllowed: [])
        }
        return url
    }

    private static func isASCIILetter(_ s: Unicode.Scalar) -> Bool { ("a"..."z").contains(s) || ("A"..."Z").contains(s) }

    /// unreserved, sub-delims, `%` (escapes are checked when decoding) and non-ASCII (an IDN, as
    /// Foundation lets through).
    private static func isRegNameScalar(_ s: Unicode.Scalar) -> Bool {
        !s.isASCII || isASCIILetter(s) || ("0"..."9").contains(s) || "-._~!$&'()*+,;=%".unicodeScalars.contains(s)
    }

    /// The inside of `[…]`: an IPv6 address (hex digits, `:`, `.` for an embedded IPv4) or an
    /// IPvFuture (`v1.x`).
    private static func isIPLiteral(_ text: Substring) -> Bool {
        guard !text.isEmpty else { return false }
        if text.hasPrefix("v") || text.hasPrefix("V") {
            return text.unicodeScalars.allSatisfy { $0.isASCII && ($0 == ":" || ($0 != "%" && isRegNameScalar($0))) }
        }
        return text.utf8.allSatisfy { hexValue($0) != nil || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }
    }

    /// `text` with every byte that may not appear in a path (or, with `?`, a query) as `%XX`:
    /// unreserved, sub-delims, `:`, `@`, `/` and well-formed `%XX` escapes stay.
    private static func percentEncodingInvalid(_ text: Substring, alsoAllowed: [UInt8]) -> String {
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for (i, b) in bytes.enumerated() {
            let keep: Bool
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                keep = true
            case UInt8(ascii: "%"):
                keep = i + 2 < bytes.count && hexValue(bytes[i + 1]) != nil && hexValue(bytes[i + 2]) != nil
            default:
                keep = "-._~!$&'()*+,;=:@/".utf8.contains(b) || alsoAllowed.contains(b)
            }
            if keep {
                out.append(b)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
