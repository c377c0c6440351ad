/// A Smartico deep link: `dp:<action>[&key[=value]]*` (or a plain `http(s)://` URL).
///
/// Classification (see docs/protocol.md):
/// - `dummy`: `ok`, `cancel`, `close`, `action` (002) and `close_me`, `gf_close` (Smartico's
///   own clients treat them as no-ops too). The app ignores them. `dp:action&action=<name>` is not
///   a pure no-op: Smartico's SDK reports it as a `client_action` event (`clientAction`), which the
///   daemon sends itself.
/// - `gamification`: `gf` and every `gf_…` action except `gf_close`; opened in the gamification
///   wrapper (`native_app_gf_url` + `dp=`). Unknown `gf_…` actions count, so new widget
///   sections work without a release.
/// - `custom`: everything else, handled by the app: operator actions (`dp:cashier`,
///   `dp:deposit`), `dp:inbox` and `dp:ask_push_permissions` (002 excludes inbox from the
///   gamification family; both need the app), and plain `http(s)://` links (`isWebURL`).
public struct DeepLink: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        case dummy, gamification, custom
    }

    /// One `&key[=value]` parameter; `value` is `nil` when there is no `=`. Values are kept as written.
    public struct Parameter: Sendable, Equatable {
        public var name: String
        public var value: String?
        public init(name: String, value: String?) {
            self.name = name
            self.value = value
        }
    }

    /// The link as given (surrounding whitespace removed).
    public let raw: String
    /// The action after `dp:` (`gf_saw`, `cashier`), lowercased; empty for a link without `dp:`.
    public let action: String
    public let parameters: [Parameter]
    public let kind: Kind
    /// True for an `http://` or `https://` link (classified `custom`).
    public let isWebURL: Bool

    public static let dummyActions: Set<String> = ["ok", "cancel", "close", "action", "close_me", "gf_close"]
    /// The gamification actions listed by Smartico (any other `gf_…` is gamification too).
    public static let knownGamificationActions: Set<String> = [
        "gf", "gf_missions", "gf_badges", "gf_store", "gf_tournaments", "gf_board", "gf_bonuses", "gf_saw",
        "gf_section", "gf_levels", "gf_settings", "gf_jackpots", "gf_raffle", "gf_activity",
        "gf_change_avatar", "gf_change_nickname",
    ]

    /// Parses and classifies any string; never fails (an unrecognised string is `custom`).
    public init(_ string: String) {
        let trimmed = DeepLink.trim(string)
        raw = trimmed
        let lower = trimmed.lowercased()
        guard lower.hasPrefix("dp:") else {
            action = ""
            parameters = []
            kind = .custom
            isWebURL = lower.hasPrefix("http://") || lower.hasPrefix("https://")
            return
        }
        isWebURL = false
        var parts = trimmed.dropFirst(3).split(separator: "&", omittingEmptySubsequences: true)
        let act = parts.isEmpty ? "" : String(parts.removeFirst()).lowercased()
        action = act
        parameters = parts.map { p in
            if let eq = p.firstIndex(of: "=") {
                return Parameter(name: String(p[..<eq]), value: String(p[p.index(after: eq)...]))
            }
            return Parameter(name: String(p), value: nil)
        }
        if DeepLink.dummyActions.contains(act) {
            kind = .dummy
        } else if act == "gf" || act.hasPrefix("gf_") {
            kind = .gamification
        } else {
            kind = .custom
        }
    }

    /// For `dp:action&action=<name>`: `<name>`, percent-decoded (`+` is a space), as Smartico's SDK
    /// reports it in a `client_action` event; nil for any other link or without an `action`
    /// parameter. As the SDK's `parseDp`: the parameter's name is percent-decoded and matched
    /// case-insensitively, the last of several wins, a bare `&action` is `"true"` and an empty
    /// `action=` is `""` (reported as such).
    public var clientAction: String? {
        guard action == "action",
              let p = parameters.last(where: { WrapperURL.percentDecode($0.name, plusAsSpace: true).lowercased() == "action" })
        else { return nil }
        return p.value.map { WrapperURL.percentDecode($0, plusAsSpace: true) } ?? "true"
    }

    /// The value of the first parameter named `name` (`""` for a parameter without `=`).
    public subscript(parameter name: String) -> String? {
        parameters.first { $0.name == name }.map { $0.value ?? "" }
    }

    public var description: String { raw }

    /// For a gamification link: the wrapper page URL that opens it; `nil` for other kinds.
    public func gamificationURL(wrapper: String) -> String? {
        kind == .gamification ? WrapperURL.withDeepLink(wrapper, deepLink: raw) : nil
    }

    private static func trim(_ s: String) -> String {
        let u = Array(s.utf8)
        var a = 0, b = u.count
        while a < b, u[a] == 0x20 || u[a] == 0x09 || u[a] == 0x0A || u[a] == 0x0D { a += 1 }
        while b > a, u[b - 1] == 0x20 || u[b - 1] == 0x09 || u[b - 1] == 0x0A || u[b - 1] == 0x0D { b -= 1 }
        return a == 0 && b == u.count ? s : String(decoding: u[a..<b], as: UTF8.self)
    }
}

/// Which URLs from the server the daemon hands to apps as URLs to open: only `http` and `https`
/// URLs with a host. A `javascript:`, `file:` or `data:` URL, a relative one, one without a host
/// or with a space or control character in it is not handed out: the field is null and the
/// `problem` says why (docs/security.md, "Untrusted text").
public enum WebURL {
    /// `url` when it may be handed out (``problem(_:field:)`` is nil), else nil.
    public static func checked(_ url: String) -> String? {
        reason(url) == nil ? url : nil
    }

    /// Why `url` (the field `field`) is not an `http` or `https` URL with a host, or nil when it is.
    /// The text names the field and shows the start of the value (at most 60 characters).
    public static func problem(_ url: String, field: String) -> String? {
        guard let why = reason(url) else { return nil }
        let head = url.unicodeScalars.prefix(60)
        let shown = head.count < url.unicodeScalars.count ? String(String.UnicodeScalarView(head)) + "…" : url
        return "\"\(field)\" is not an http or https URL with a host (\(why)): \(JSONValue.string(shown).serializedString())"
    }

    /// What is wrong with `url`, or nil.
    static func reason(_ url: String) -> String? {
        if url.isEmpty { return "it is empty" }
        // Browsers drop tabs and newlines from a URL and trim controls: `java\nscript:` would run.
        if url.unicodeScalars.contains(where: { $0.value <= 0x20 || (0x7F...0x9F).contains($0.value) || $0 == "\u{2028}" || $0 == "\u{2029}" }) {
            return "it contains a space or control character"
        }
        let bytes = Array(url.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return "it has no scheme" }
        let scheme = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
        guard scheme == "http" || scheme == "https" else {
            let valid = !scheme.isEmpty && scheme.utf8.count <= 32 && scheme.utf8.allSatisfy {
                (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".")
            }
            return valid ? "the scheme is \(scheme)" : "it has no scheme"
        }
        var i = colon + 1
        guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "/"), bytes[i + 1] == UInt8(ascii: "/") else { return "it has no host" }
        i += 2
        // The authority ends at the path, query or fragment (a backslash too: browsers read it as `/`).
        var end = i
        while end < bytes.count, ![UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: "\\")].contains(bytes[end]) { end += 1 }
        var start = i
        if let at = bytes[i..<end].lastIndex(of: UInt8(ascii: "@")) { start = at + 1 }
        let hostPort = bytes[start..<end]
        let host: ArraySlice<UInt8>
        if hostPort.first == UInt8(ascii: "[") {
            host = hostPort.dropFirst().prefix { $0 != UInt8(ascii: "]") }
        } else {
            host = hostPort.prefix { $0 != UInt8(ascii: ":") }
        }
        return host.isEmpty ? "it has no host" : nil
    }
}

/// Building wrapper-page URLs (`native_app_gf_url`) and query strings.
public enum WrapperURL {
    /// `base` with `dp=<percent-encoded deepLink>` as its query parameter: an existing `dp`
    /// parameter is replaced, other parameters and a `#fragment` are kept, a URL without a
    /// query gets `?dp=…`.
    public static func withDeepLink(_ base: String, deepLink: String) -> String {
        withParameter(base, name: "dp", value: deepLink)
    }

    /// `url` with `force_mobile=true` added, unless it has a `force_mobile` parameter already
    /// (whatever its value), as Smartico's SDK builds every wrapper URL: the widget picks its layout
    /// from the user agent, and `SMTO-WRAPPER` matches no mobile token, so without it the page
    /// renders its desktop layout. Every wrapper URL the daemon hands out goes through this.
    public static func forcingMobile(_ url: String) -> String {
        hasParameter(url, name: "force_mobile") ? url : withParameter(url, name: "force_mobile", value: "true")
    }

    /// True when `url`'s query (before any `#fragment`) has a parameter named `name` (the name
    /// percent-decoded, as ``withParameter(_:name:value:)`` reads it).
    public static func hasParameter(_ url: String, name: String) -> Bool {
        let noFragment = url.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        guard let q = noFragment.firstIndex(of: "?") else { return false }
        return noFragment[noFragment.index(after: q)...].split(separator: "&").contains { item in
            percentDecode(String(item.firstIndex(of: "=").map { item[..<$0] } ?? item)) == name
        }
    }

    /// The gamification wrapper URL that opens the mini-game of a SAW_SHOW_SPIN_PUSH (707); nil
    /// when the push has no `saw_template_id`.
    public static func miniGame(_ base: String, push: SawShowSpinPush) -> String? {
        push.deepLink.map { withDeepLink(base, deepLink: $0) }
    }

    /// `base` with query parameter `name` set to `value` (percent-encoded), replacing any
    /// existing parameter of that name.
    public static func withParameter(_ base: String, name: String, value: String) -> String {
        var url = Substring(base)
        var fragment: Substring = ""
        if let hash = url.firstIndex(of: "#") {
            fragment = url[hash...]
            url = url[..<hash]
        }
        var path = url
        var kept: [Substring] = []
        if let q = url.firstIndex(of: "?") {
            path = url[..<q]
            for item in url[url.index(after: q)...].split(separator: "&", omittingEmptySubsequences: true) {
                let key = item.firstIndex(of: "=").map { item[..<$0] } ?? item
                if percentDecode(String(key)) != name { kept.append(item) }
            }
        }
        var result = String(path) + "?"
        for item in kept { result += item + "&" }
        result += percentEncode(name) + "=" + percentEncode(value)
        return result + fragment
    }

    /// Percent-encodes every byte except the RFC 3986 unreserved characters `A-Z a-z 0-9 - . _ ~`
    /// (so `:`, `&`, `=`, `/`, `?`, spaces and non-ASCII are all encoded).
    public static func percentEncode(_ s: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(b)
            default:
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `s` as one URL path segment (RFC 3986 §3.3), for server- or peer-supplied text put into a
    /// path (an inbox guid, an avatar id): ``percentEncode(_:)``, so `/`, `?`, `#` and `%` cannot
    /// end the segment or start a query or fragment. Nil for "", `.` and `..`: those would name the
    /// directory or its parent, and encoding does not help (`%2E%2E` is `..` to a server that
    /// normalizes, RFC 3986 §6.2.2.2), so the caller refuses them or has no URL.
    public static func pathSegment(_ s: String) -> String? {
        if s.isEmpty || s == "." || s == ".." { return nil }
        return percentEncode(s)
    }

    /// Decodes `%XX` sequences (and `+` as a space when `plusAsSpace`); malformed `%` sequences
    /// are kept as they are. Invalid UTF-8 after decoding becomes U+FFFD.
    public static func percentDecode(_ s: String, plusAsSpace: Bool = false) -> String {
        let u = Array(s.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(u.count)
        func hexValue(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: c - 0x30
            case 0x41...0x46: c - 0x41 + 10
            case 0x61...0x66: c - 0x61 + 10
            default: nil
            }
        }
        var k = 0
        while k < u.count {
            let c = u[k]
            if c == UInt8(ascii: "%"), k + 2 < u.count, let h = hexValue(u[k + 1]), let l = hexValue(u[k + 2]) {
                out.append(h << 4 | l)
                k += 3
            } else {
                out.append(plusAsSpace && c == UInt8(ascii: "+") ? 0x20 : c)
                k += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Splits a query string (`a=1&b=x%20y`) into decoded name/value pairs, in order.
    public static func queryItems(_ query: String) -> [(name: String, value: String)] {
        var q = Substring(query)
        if q.first == "?" { q = q.dropFirst() }
        return q.split(separator: "&", omittingEmptySubsequences: true).map { item in
            if let eq = item.firstIndex(of: "=") {
                return (percentDecode(String(item[..<eq]), plusAsSpace: true),
                        percentDecode(String(item[item.index(after: eq)...]), plusAsSpace: true))
            }
            return (percentDecode(String(item), plusAsSpace: true), "")
        }
    }
}
