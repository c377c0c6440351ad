import SmarticoProtocol
import SmarticoWrapperCore
import Testing

@Suite("WebOrigin: the origin of an http(s) URL")
struct WebOriginTests {
    @Test("default and explicit ports", arguments: [
        ("https://libs.smartico.ai/wrapper-popup.html?a=1", "https", "libs.smartico.ai", 443),
        ("http://libs.smartico.ai", "http", "libs.smartico.ai", 80),
        ("http://127.0.0.1:36807/wrapper-gf.html", "http", "127.0.0.1", 36807),
        ("https://libs.smartico.ai:8443", "https", "libs.smartico.ai", 8443),
        ("https://libs.smartico.ai:443/x", "https", "libs.smartico.ai", 443),
        ("http://libs.smartico.ai:443/x", "http", "libs.smartico.ai", 443),
        ("https://libs.smartico.ai:80/x", "https", "libs.smartico.ai", 80),
        ("https://h:65535", "https", "h", 65535),
        ("https://h:1", "https", "h", 1),
        ("https://h:/x", "https", "h", 443),  // an empty port is the default (WHATWG)
        ("https://h:00443/", "https", "h", 443),
        ("https://h?x=1:2", "https", "h", 443),
        ("https://h#frag:99", "https", "h", 443),
    ])
    func ports(_ url: String, _ scheme: String, _ host: String, _ port: Int) throws {
        let o = try WebOrigin(url: url)
        #expect(o == WebOrigin(scheme: scheme, host: host, port: port))
    }

    @Test("the default port, written or not, is the same origin; another port is not")
    func sameOrigin() throws {
        #expect(try WebOrigin(url: "https://a.example") == WebOrigin(url: "https://a.example:443/path?q#f"))
        #expect(try WebOrigin(url: "http://a.example") == WebOrigin(url: "http://a.example:80"))
        #expect(try WebOrigin(url: "https://a.example") != WebOrigin(url: "https://a.example:444"))
        #expect(try WebOrigin(url: "https://a.example") != WebOrigin(url: "http://a.example"))
        #expect(try WebOrigin(url: "https://a.example") != WebOrigin(url: "https://b.a.example"))
    }

    @Test("IPv6 hosts, without their brackets")
    func ipv6() throws {
        #expect(try WebOrigin(url: "http://[::1]:8080/x") == WebOrigin(scheme: "http", host: "::1", port: 8080))
        #expect(try WebOrigin(url: "https://[2001:DB8::1]/") == WebOrigin(scheme: "https", host: "2001:db8::1", port: 443))
        #expect(try WebOrigin(url: "http://[::1]") == WebOrigin(scheme: "http", host: "::1", port: 80))
        #expect(try WebOrigin(url: "http://[::1]:8080").description == "http://[::1]:8080")
        #expect(try WebOrigin(url: "https://[::1]").description == "https://[::1]")
        #expect(throws: WebOrigin.Problem.self) { try WebOrigin(url: "http://[::1/x") }
        #expect(throws: WebOrigin.Problem.self) { try WebOrigin(url: "http://[::1]x/") }
        #expect(throws: WebOrigin.Problem.self) { try WebOrigin(url: "http://[::1]:99999/") }
        #expect(throws: WebOrigin.Problem.self) { try WebOrigin(url: "http://[]/") }
        #expect(try WebOrigin(url: "http://[::ffff:127.0.0.1]:8080").description == "http://[::ffff:127.0.0.1]:8080")
    }

    /// What fuzz-wrapper found (2026-12-07): `[[\u{FFFD}1]` gave the host `[\u{FFFD}1`, written
    /// back without brackets, which then parsed to another origin. A bracketed host must be an
    /// IPv6 address, and no other host has a bracket.
    @Test("brackets hold only an IPv6 address", arguments: [
        "http://[[\u{FFFD}1]:808//le/", "http://[[::1]]/", "http://[example.com]/", "http://[1]/", "http://[::1%eth0]/",
        "http://a[b/", "http://a]b:80/", "http://]/",
    ])
    func bracketsOnlyForIPv6(_ url: String) {
        #expect(throws: WebOrigin.Problem.self) { try WebOrigin(url: url) }
    }

    @Test("userinfo is not part of the origin: what follows the last @ is the host", arguments: [
        ("https://libs.smartico.ai@evil.example/", "evil.example", 443),
        ("https://user:pass@evil.example:8443/x", "evil.example", 8443),
        ("https://libs.smartico.ai:443@evil.example/", "evil.example", 443),
        ("https://a@libs.smartico.ai@evil.example/", "evil.example", 443),
        ("https://evil.example/@libs.smartico.ai", "evil.example", 443),
        ("https://evil.example?@libs.smartico.ai", "evil.example", 443),
        ("https://evil.example#@libs.smartico.ai", "evil.example", 443),
    ])
    func userinfo(_ url: String, _ host: String, _ port: Int) throws {
        let o = try WebOrigin(url: url)
        #expect(o.host == host)
        #expect(o.port == port)
        #expect(o != WebOrigin(scheme: "https", host: "libs.smartico.ai", port: 443))
    }

    @Test("scheme and host are compared lowercased")
    func uppercase() throws {
        let o = try WebOrigin(url: "HTTPS://LIBS.Smartico.AI:8443/Wrapper-Popup.html")
        #expect(o == WebOrigin(scheme: "https", host: "libs.smartico.ai", port: 8443))
        #expect(o.description == "https://libs.smartico.ai:8443")
        #expect(try WebOrigin(url: "Http://X.Example").description == "http://x.example")
    }

    @Test("other schemes are refused by their scheme", arguments: [
        ("javascript:alert(1)", "javascript"),
        ("JavaScript://%0aalert(1)", "javascript"),
        ("file:///etc/passwd", "file"),
        ("data:text/html,<script>alert(1)</script>", "data"),
        ("blob:https://libs.smartico.ai/2b1f0d6e", "blob"),
        ("ftp://libs.smartico.ai/", "ftp"),
        ("about:blank", "about"),
        ("ws://libs.smartico.ai/", "ws"),
        ("httpx://libs.smartico.ai/", "httpx"),
    ])
    func refusedSchemes(_ url: String, _ scheme: String) {
        #expect(throws: WebOrigin.Problem.scheme(scheme)) { try WebOrigin(url: url) }
    }

    @Test("relative URLs are refused", arguments: ["/wrapper-popup.html", "//evil.example/x", "wrapper.html", "?a=b", "#x"])
    func relative(_ url: String) {
        #expect(throws: WebOrigin.Problem.scheme("")) { try WebOrigin(url: url) }
        #expect(WebOrigin.Problem.scheme("").description.contains("relative"))
    }

    @Test("malformed http(s) URLs are refused", arguments: [
        "http:/x", "http:x", "https:", "https:/", "https://", "https:///path", "https://:443/", "https://@/",
        "https://user@", "https://evil.example\\@libs.smartico.ai/", "https:\\\\evil.example", "https://a b.example/",
        " https://libs.smartico.ai/", "https://libs.smartico.ai/ ", "https://libs.smartico.ai/\n", "https://libs.\tsmartico.ai/",
        "https://h\u{7F}/", "https://h\u{0}/",
        "https://h:0/", "https://h:65536/", "https://h:99999999999999999999/", "https://h:abc/", "https://h:-1/",
        "https://h:+80/", "https://h:8 0/", "https://h:٨٠/", "https://h:80:80/", "http://a:b:c/",
    ])
    func malformed(_ url: String) {
        #expect {
            try WebOrigin(url: url)
        } throws: { error in
            guard case .malformed(let why) = error as? WebOrigin.Problem else { return false }
            return !why.isEmpty
        }
    }

    @Test("an empty URL")
    func empty() {
        #expect(throws: WebOrigin.Problem.empty) { try WebOrigin(url: "") }
        #expect(WebOrigin.Problem.empty.description == "an empty URL")
        #expect(WebOrigin.Problem.scheme("file").description.contains("file:"))
    }
}

@Suite("OriginAllowList")
struct OriginAllowListTests {
    let configured = WebOrigin(scheme: "https", host: "static.operator.example", port: 443)

    @Test("learns the origins of the daemon's http(s) URLs, nothing else")
    func learn() throws {
        var list = OriginAllowList(configured: [configured])
        #expect(list.allows(configured))
        #expect(list.allows(url: "https://static.operator.example/x"))
        #expect(!list.allows(url: "https://libs.smartico.ai/wrapper-popup.html"))

        do { let learned = list.learn(fromDaemonURL: "https://libs.smartico.ai/wrapper-popup.html?label_key=k"); #expect(learned) }
        #expect(list.allows(url: "https://libs.smartico.ai/other.html"))
        #expect(list.allows(url: "https://LIBS.smartico.ai:443/"))
        #expect(list.allows(try WebOrigin(url: "https://libs.smartico.ai")))
        #expect(!list.allows(url: "http://libs.smartico.ai/"), "another scheme is another origin")
        #expect(!list.allows(url: "https://libs.smartico.ai:8443/"), "another port is another origin")
        #expect(!list.allows(url: "https://evil.libs.smartico.ai/"), "a subdomain is another origin")
        #expect(!list.allows(url: "https://libs.smartico.ai@evil.example/"))
        #expect(!list.allows(url: "javascript:alert(1)"))
        #expect(!list.allows(url: "blob:https://libs.smartico.ai/uuid"))
        #expect(!list.allows(url: ""))

        do { let learned = list.learn(fromDaemonURL: "javascript:alert(1)"); #expect(!learned) }
        do { let learned = list.learn(fromDaemonURL: "file:///etc/passwd"); #expect(!learned) }
        do { let learned = list.learn(fromDaemonURL: "/relative"); #expect(!learned) }
        do { let learned = list.learn(fromDaemonURL: ""); #expect(!learned) }
        #expect(list.learned == [try WebOrigin(url: "https://libs.smartico.ai")])

        // An already known origin (configured or learned) is not learned twice.
        do { let learned = list.learn(fromDaemonURL: "https://static.operator.example/y"); #expect(learned) }
        do { let learned = list.learn(fromDaemonURL: "https://libs.smartico.ai/again"); #expect(learned) }
        #expect(list.learned.count == 1)
        #expect(list.configured == [configured])
    }

    @Test("at most maxLearned learned origins; the configured ones are never dropped")
    func cap() throws {
        var list = OriginAllowList(configured: [configured])
        let n = OriginAllowList.maxLearned + 40
        for k in 0..<n {
            do { let learned = list.learn(fromDaemonURL: "https://h\(k).example/page"); #expect(learned) }
            #expect(list.learned.count == min(k + 1, OriginAllowList.maxLearned))
            #expect(list.allows(url: "https://h\(k).example/"), "the origin just learned is allowed")
            #expect(list.allows(configured))
        }
        #expect(list.learned.count == OriginAllowList.maxLearned)
        let allowed = (0..<n).filter { list.allows(url: "https://h\($0).example/") }
        #expect(allowed.count == OriginAllowList.maxLearned)
    }

    @Test("the oldest learned origin goes first; one learned again is kept as recent")
    func evictionOrder() throws {
        var list = OriginAllowList(configured: [])
        let cap = OriginAllowList.maxLearned
        do { let learned = list.learn(fromDaemonURL: "https://libs.smartico.ai/wrapper-popup.html"); #expect(learned) }
        for k in 0..<(cap - 1) { list.learn(fromDaemonURL: "https://h\(k).example/") }
        #expect(list.learned.count == cap)
        // The popup page's origin is handed out again (each engagement carries it): it stays.
        list.learn(fromDaemonURL: "https://libs.smartico.ai/wrapper-popup.html?fresh")
        list.learn(fromDaemonURL: "https://new1.example/")
        #expect(list.allows(url: "https://libs.smartico.ai/"))
        #expect(!list.allows(url: "https://h0.example/"), "the least recently learned is dropped")
        #expect(list.allows(url: "https://h1.example/"))
        list.learn(fromDaemonURL: "https://new2.example/")
        #expect(!list.allows(url: "https://h1.example/"))
        #expect(list.allows(url: "https://h2.example/"))
        #expect(list.allows(url: "https://new1.example/"))
        #expect(list.allows(url: "https://new2.example/"))
        #expect(list.learned.count == cap)
    }
}

@Suite("WrapperPageURL.forcingMobile")
struct ForcingMobileTests {
    @Test("adds force_mobile=true once", arguments: [
        ("https://libs.smartico.ai/wrapper-gf.html", "https://libs.smartico.ai/wrapper-gf.html?force_mobile=true"),
        ("https://libs.smartico.ai/wrapper-gf.html?label_key=k&user_ext_id=alice",
         "https://libs.smartico.ai/wrapper-gf.html?label_key=k&user_ext_id=alice&force_mobile=true"),
        ("https://libs.smartico.ai/wrapper-gf.html?dp=dp%3Agf_missions#section",
         "https://libs.smartico.ai/wrapper-gf.html?dp=dp%3Agf_missions&force_mobile=true#section"),
        ("https://libs.smartico.ai/w.html#frag?force_mobile=false",
         "https://libs.smartico.ai/w.html?force_mobile=true#frag?force_mobile=false"),
        ("https://libs.smartico.ai/w.html?not_force_mobile=1&force_mobilex=2",
         "https://libs.smartico.ai/w.html?not_force_mobile=1&force_mobilex=2&force_mobile=true"),
    ])
    func adds(_ url: String, _ expected: String) {
        let once = WrapperPageURL.forcingMobile(url)
        #expect(once == expected)
        #expect(WrapperPageURL.forcingMobile(once) == once, "a second call adds nothing")
    }

    @Test("keeps an existing force_mobile, whatever its value", arguments: [
        "https://libs.smartico.ai/w.html?force_mobile=false",
        "https://libs.smartico.ai/w.html?a=1&force_mobile=0#x",
        "https://libs.smartico.ai/w.html?force_mobile",
        "https://libs.smartico.ai/w.html?force_mobile=true&dp=dp%3Agf",
    ])
    func keeps(_ url: String) {
        #expect(WrapperPageURL.forcingMobile(url) == url)
    }
}
