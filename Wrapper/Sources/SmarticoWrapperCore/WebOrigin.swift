import SmarticoProtocol

/// The origin of an `http(s)` URL: scheme, host and port (RFC 6454), the unit the wrapper's
/// allow-list and its bridge check are made of.
public struct WebOrigin: Hashable, Sendable, CustomStringConvertible {
    /// `http` or `https`.
    public let scheme: String
    /// Lowercased; an IPv6 address without its brackets.
    public let host: String
    /// The port, or the scheme's default (80, 443) when the URL gives none.
    public let port: Int

    /// Why a URL is not one the wrapper loads.
    public enum Problem: Error, Equatable, CustomStringConvertible {
        case empty
        case scheme(String)
        case malformed(String)

        public var description: String {
            switch self {
            case .empty: "an empty URL"
            case .scheme(let s): "a \(s.isEmpty ? "relative" : "\(s):") URL (only http and https are loaded)"
            case .malformed(let why): "a malformed URL (\(why))"
            }
        }
    }

    public init(scheme: String, host: String, port: Int) {
        self.scheme = scheme
        self.host = host
        self.port = port
    }

    /// The origin of `url`; throws for anything but an absolute `http(s)` URL with a host.
    /// `javascript:`, `file:`, `data:`, `blob:` and relative URLs are refused by their scheme.
    public init(url: String) throws(Problem) {
        guard !url.isEmpty else { throw .empty }
        let bytes = Array(url.utf8)
        for b in bytes where b <= 0x20 || b == 0x7F || b == 0x5C {
            throw .malformed(b == 0x5C ? "a backslash" : "a space or a control character")
        }
        guard let colon = bytes.firstIndex(of: 0x3A) else { throw .scheme("") }
        let scheme = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
        guard scheme == "http" || scheme == "https" else { throw .scheme(scheme) }
        let rest = bytes[(colon + 1)...]
        guard rest.starts(with: [0x2F, 0x2F]) else { throw .malformed("no // after \(scheme):") }
        let authorityStart = rest.startIndex + 2
        let authorityEnd = rest[authorityStart...].firstIndex { $0 == 0x2F || $0 == 0x3F || $0 == 0x23 } ?? rest.endIndex
        var authority = rest[authorityStart..<authorityEnd]
        if let at = authority.lastIndex(of: 0x40) {  // userinfo@ is not part of the origin
            authority = authority[(at + 1)...]
        }
        var host: Substring
        var portText: Substring?
        let text = String(decoding: authority, as: UTF8.self)[...]
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw .malformed("an IPv6 host without ]") }
            host = text[text.index(after: text.startIndex)..<close]
            // An IPv6 address (RFC 3986's IP-literal, with an IPv4 tail allowed): hex digits,
            // colons and dots only, so that it is written back in brackets and means one thing.
            guard host.contains(":"), host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw .malformed("an IPv6 host that is not an IPv6 address")
            }
            let after = text[text.index(after: close)...]
            if after.hasPrefix(":") { portText = after.dropFirst() } else if !after.isEmpty { throw .malformed("text after the IPv6 host") }
        } else if let c = text.lastIndex(of: ":") {
            host = text[..<c]
            portText = text[text.index(after: c)...]
            // `h:80:80` is no host and port (an IPv6 address is written in brackets).
            guard !host.contains(":") else { throw .malformed("a host with a colon outside brackets") }
        } else {
            host = text
        }
        guard !host.isEmpty else { throw .malformed("no host") }
        guard !host.contains("["), !host.contains("]") else { throw .malformed("a bracket outside an IPv6 host") }
        var port = scheme == "https" ? 443 : 80
        if let portText, !portText.isEmpty {
            guard portText.allSatisfy({ $0.isASCII && $0.isNumber }), let p = Int(portText), p > 0, p < 65536 else {
                throw .malformed("port \(portText)")
            }
            port = p
        }
        self.init(scheme: scheme, host: host.lowercased(), port: port)
    }

    public var description: String {
        let h = host.contains(":") ? "[\(host)]" : host
        let isDefault = (scheme == "https" && port == 443) || (scheme == "http" && port == 80)
        return isDefault ? "\(scheme)://\(h)" : "\(scheme)://\(h):\(port)"
    }
}

/// The origins the web views may load at the top level and take bridge messages from: those of
/// the URLs the daemon handed out (popup, gamification, mini-game and deep-link URLs), plus the
/// configured ones.
public struct OriginAllowList: Sendable, Equatable {
    public private(set) var configured: Set<WebOrigin>
    public private(set) var learned: Set<WebOrigin> = []
    /// `learned`, least recently handed out first: the one dropped when the set is full.
    private var learnedOrder: [WebOrigin] = []
    /// At most this many learned origins (a daemon that hands out many hosts does not grow the set without end).
    public static let maxLearned = 64

    public init(configured: Set<WebOrigin>) {
        self.configured = configured
    }

    /// Adds the origin of a URL the daemon handed out; false (and nothing added) when it is not
    /// an `http(s)` URL.
    @discardableResult
    public mutating func learn(fromDaemonURL url: String) -> Bool {
        guard let origin = try? WebOrigin(url: url) else { return false }
        if configured.contains(origin) { return true }
        if learned.contains(origin) {
            // Handed out again: the most recent one now.
            learnedOrder.removeAll { $0 == origin }
        } else {
            if learned.count >= OriginAllowList.maxLearned { learned.remove(learnedOrder.removeFirst()) }
            learned.insert(origin)
        }
        learnedOrder.append(origin)
        return true
    }

    public func allows(_ origin: WebOrigin) -> Bool {
        configured.contains(origin) || learned.contains(origin)
    }

    /// Whether `url` may be loaded at the top level: an `http(s)` URL of an allowed origin.
    public func allows(url: String) -> Bool {
        guard let origin = try? WebOrigin(url: url) else { return false }
        return allows(origin)
    }
}

/// URL adjustments the wrapper makes to Smartico's wrapper pages.
public enum WrapperPageURL {
    /// `url` with `force_mobile=true` added when it has no `force_mobile` parameter: the widget picks
    /// its layout from the user agent, and `SMTO-WRAPPER` matches no mobile token (Smartico's SDKs
    /// add it for that reason).
    public static func forcingMobile(_ url: String) -> String {
        if hasParameter(url, "force_mobile") { return url }
        return SmarticoProtocol.WrapperURL.withParameter(url, name: "force_mobile", value: "true")
    }

    static func hasParameter(_ url: String, _ name: String) -> Bool {
        let noFragment = url.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        guard let q = noFragment.firstIndex(of: "?") else { return false }
        return noFragment[noFragment.index(after: q)...].split(separator: "&").contains { item in
            (item.split(separator: "=", maxSplits: 1).first.map(String.init) ?? "") == name
        }
    }
}
