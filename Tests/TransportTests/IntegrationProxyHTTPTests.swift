import Foundation
import Testing
@testable import Transport

/// Through an HTTP CONNECT proxy (a Python one the test starts), and the HTTP client.
@Suite("Integration: proxy and HTTP client")
struct IntegrationProxyHTTPTests {
    @Test("wss through a CONNECT proxy, with and without credentials", arguments: [false, true])
    func throughProxy(credentials: Bool) async throws {
        try await withLoop { loop in
            let fixture = try await TLSFixture.make()
            defer { fixture.remove() }
            let server = try await startWebSocketEchoServer(on: loop, tls: fixture.serverContext)
            let proxy = try await PythonPeer.start("connect_proxy.py", credentials ? ["--user", "dev ice", "--password", "s3:cr@t"] : [])
            defer { proxy.stop() }
            var options = WebSocketConnectOptions()
            options.tls = fixture.clientConfiguration
            let url = credentials ? "http://dev%20ice:s3%3Acr%40t@127.0.0.1:\(proxy.port)" : "http://127.0.0.1:\(proxy.port)/"
            options.proxy = try HTTPProxy(url: url)
            let connection = try await WebSocketClient.connect(url: "wss://localhost:\(server.port)/", options: options, on: loop)
            #expect(connection.trace?.entries.map(\.step) == [.dns, .tcp, .proxy, .tls, .upgrade])
            #expect(connection.trace?.connectedAddress?.port == proxy.port)
            #expect(proxy.lines.value.contains("tunnel localhost:\(server.port)"))
            let inbox = EventInbox(connection)
            try await connection.sendAsync(text: "through the tunnel")
            #expect(try await inbox.nextMessage() == .text("through the tunnel"))
            try await connection.closeAsync()
            #expect(try await inbox.closed().code == .normalClosure)
            await server.closeAsync()
        }
    }

    @Test("a proxy answering 407: the error names the proxy and its status line", arguments: [false, true])
    func proxyRefuses(withCredentials: Bool) async throws {
        try await withLoop { loop in
            let proxy = try await PythonPeer.start("connect_proxy.py", withCredentials ? ["--refuse-all"] : ["--user", "u", "--password", "p"])
            defer { proxy.stop() }
            var options = WebSocketConnectOptions()
            options.proxy = try HTTPProxy(url: withCredentials ? "http://u:wrong@127.0.0.1:\(proxy.port)" : "http://127.0.0.1:\(proxy.port)")
            do throws(ConnectError) {
                _ = try await WebSocketClient.connect(url: "ws://example.invalid:80/", options: options, on: loop)
                Issue.record("connected through a refusing proxy")
            } catch {
                #expect(error.step == .proxy)
                guard case .proxy(.refused(let name, let target, let line, _)) = error.reason else {
                    Issue.record("unexpected \(error)")
                    return
                }
                #expect(name == "127.0.0.1:\(proxy.port)")
                #expect(target == "example.invalid:80")
                #expect(line == "HTTP/1.1 407 Proxy Authentication Required")
                #expect(error.description.contains("proxy 127.0.0.1:\(proxy.port)"))
                #expect(error.description.contains("407"))
                #expect(error.description.contains("proxy authentication required: check the user and password"))
                #expect(!error.description.contains("wrong"))  // the password never shows
            }
        }
    }

    @Test("proxy URLs: parsing, masking, the authorization header")
    func proxyParsing() throws {
        let p = try HTTPProxy(url: "http://user:p%40ss@Proxy.Example:3128/")
        #expect(p.host == "proxy.example" && p.port == 3128 && p.username == "user" && p.password == "p@ss")
        #expect(p.description == "http://user:(masked)@proxy.example:3128")
        #expect(p.authorizationHeaderValue == "Basic dXNlcjpwQHNz")
        #expect(try HTTPProxy(url: "http://us%40er:p%3Ass@h:1").username == "us@er")
        #expect(try HTTPProxy(url: "http://user@proxy:1").authorizationHeaderValue == "Basic dXNlcjo=")
        #expect(try HTTPProxy(url: "http://proxy:1").authorizationHeaderValue == nil)
        #expect(try HTTPProxy(url: "http://proxy").port == 80)
        #expect(try HTTPProxy(url: "http://[::1]:3128").authority == "[::1]:3128")
        #expect(try HTTPProxy(url: "proxy:3128", schemeOptional: true) == HTTPProxy(host: "proxy", port: 3128))
        for (text, problem) in [
            ("proxy:3128", "it must start with http://"),
            ("https://proxy:3128", "the scheme \"https\" is not supported"),
            ("socks5://proxy:1080", "the scheme \"socks5\" is not supported"),
            ("http://proxy:0", "invalid port \"0\""),
            ("http://proxy:99999", "invalid port \"99999\""),
            ("http://:3128", "the host is empty"),
            ("http://proxy:3128/path", "a proxy URL has no path"),
            ("http://pro xy:3128", "invalid host \"pro xy\""),
            ("", "it is empty"),
        ] {
            #expect {
                try HTTPProxy(url: text)
            } throws: { error in
                guard case .invalidURL(_, let message) = error as? HTTPProxyError else { return false }
                return message.hasPrefix(problem)
            }
        }
    }

    /// The password shows in no text made of a proxy or of its errors, and is encoded masked.
    @Test func proxyPasswordNeverShows() throws {
        let p = try HTTPProxy(url: "http://alice:Pr0xyPa55word@proxy.example:3128")
        #expect(p.password?.exposedValue == "Pr0xyPa55word")
        var dumped = ""
        dump(p, to: &dumped)
        let encoded = String(decoding: try JSONEncoder().encode([p]), as: UTF8.self)
        for text in ["\(p)", String(reflecting: p), String(reflecting: Optional(p)), dumped, encoded, "\([p])"] {
            #expect(!text.contains("Pr0xyPa55word"), "\(text)")
        }
        #expect(encoded == #"["http:\/\/alice:(masked)@proxy.example:3128"]"#)
        #expect(throws: HTTPProxyError.self) { try HTTPProxy(url: "socks5://alice:Pr0xyPa55word@p:1") }
        do {
            _ = try HTTPProxy(url: "socks5://alice:Pr0xyPa55word@p:1")
        } catch {
            #expect(!error.description.contains("Pr0xyPa55word"))
        }
        let decoded = try JSONDecoder().decode([HTTPProxy].self, from: Data(#"["http://alice:pw@p:1"]"#.utf8))
        #expect(decoded == [HTTPProxy(host: "p", port: 1, username: "alice", password: "pw")])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([HTTPProxy].self, from: Data(#"["ftp://p:1"]"#.utf8)) }
    }

    @Test("the environment's proxy: https_proxy, http_proxy, upper and lower case, no_proxy")
    func environmentProxy() throws {
        func proxy(_ env: [String: String], _ host: String = "api.smartico.ai", port: Int = 443, secure: Bool = true) throws -> HTTPProxy? {
            try HTTPProxy.Environment(env).proxy(secure: secure, host: host, port: port).get()?.0
        }
        let env = ["https_proxy": "proxy:8080", "http_proxy": "http://plain:3128", "no_proxy": "localhost,.internal.example"]
        #expect(try proxy(env) == HTTPProxy(host: "proxy", port: 8080))
        #expect(try proxy(env, secure: false) == HTTPProxy(host: "plain", port: 3128))
        #expect(try proxy(env, "a.internal.example") == nil)
        #expect(try proxy(env, "localhost") == nil)
        #expect(try proxy([:]) == nil)
        #expect(try proxy(["http_proxy": "http://plain:3128"]) == nil)
        // Upper case works, lower case wins, an empty value does not hide the other one.
        #expect(try proxy(["HTTPS_PROXY": "proxy-a:8080"]) == HTTPProxy(host: "proxy-a", port: 8080))
        #expect(try proxy(["HTTPS_PROXY": "proxy-a:8080", "https_proxy": "proxy-b:8081"]) == HTTPProxy(host: "proxy-b", port: 8081))
        let found = try HTTPProxy.Environment(["https_proxy": "", "HTTPS_PROXY": "proxy-a:8080"]).proxy(secure: true, host: "h", port: 1).get()
        #expect(found?.1 == "HTTPS_PROXY")
        // A bad value is an error naming its variable, only when it would be used.
        let bad = HTTPProxy.Environment(["HTTPS_PROXY": "proxy:http", "no_proxy": "skip.example"])
        guard case .failure(let e) = bad.proxy(secure: true, host: "h", port: 1) else { Issue.record("a bad proxy was accepted"); return }
        #expect(e.variable == "HTTPS_PROXY")
        #expect(e.error == .invalidURL(url: "proxy:http", problem: "invalid port \"http\" (must be 1…65535)"))
        #expect(try bad.proxy(secure: true, host: "skip.example", port: 1).get() == nil)
        #expect(try bad.proxy(secure: false, host: "h", port: 1).get() == nil)
    }

    @Test(arguments: [
        ("*", true), ("smartico.ai", true), ("SMARTICO.AI", true), (".smartico.ai", true), ("*.smartico.ai", true),
        ("api.smartico.ai", true), ("api.smartico.ai:443", true), ("api.smartico.ai:8443", false), ("i.smartico.ai", false),
        ("other.com, smartico.ai", true), (" other.com ,  .smartico.ai ", true), ("co.ai", false), ("ai", true), ("", false),
        ("localhost,127.0.0.1", false),
    ])
    func noProxyRules(noProxy: String, bypass: Bool) {
        #expect(HTTPProxy.Environment(["no_proxy": noProxy]).bypasses(host: "api.smartico.ai", port: 443) == bypass, "no_proxy=\(noProxy)")
    }

    @Test func noProxyEntriesForHostsAndIPs() {
        let env = HTTPProxy.Environment(["NO_PROXY": "localhost,127.0.0.1,[::1]:8080,.internal,example.org:81"])
        #expect(env.noProxyVariable == "NO_PROXY")
        #expect(env.bypasses(host: "localhost", port: 80))
        #expect(env.bypasses(host: "127.0.0.1", port: 9000))
        #expect(!env.bypasses(host: "127.0.0.10", port: 9000))
        #expect(env.bypasses(host: "::1", port: 8080))
        #expect(env.bypasses(host: "[::1]", port: 8080))
        #expect(!env.bypasses(host: "::1", port: 8081))
        #expect(env.bypasses(host: "svc.internal", port: 1))
        #expect(!env.bypasses(host: "internal", port: 1))
        #expect(env.bypasses(host: "www.example.org", port: 81))
        #expect(!env.bypasses(host: "www.example.org", port: 80))
        #expect(!env.bypasses(host: "notexample.org", port: 81))
        #expect(env.bypasses(host: "LOCALHOST.", port: 80))
    }

    @Test("HTTPClient: Content-Length, chunked and close-delimited responses, plain and TLS", arguments: [false, true])
    func httpClient(tls: Bool) async throws {
        try await withLoop { loop in
            let fixture = tls ? try await TLSFixture.make() : nil
            defer { fixture?.remove() }
            var args: [String] = []
            if let fixture { args = ["--cert", fixture.server.chainPath, "--key", fixture.server.keyPath] }
            let server = try await PythonPeer.start("http_server.py", args)
            defer { server.stop() }
            var options = HTTPClientOptions()
            options.timeout = .seconds(20)
            if let fixture { options.tls = fixture.clientConfiguration }
            let base = "\(tls ? "https" : "http")://localhost:\(server.port)"
            let length = try await HTTPClient.send(HTTPClientRequest(url: base + "/length"), options: options, on: loop)
            #expect(length.status == 200)
            #expect(length.text == "hello, length")
            #expect((length.trace.tls != nil) == tls)
            let chunked = try await HTTPClient.send(HTTPClientRequest(url: base + "/chunked"), options: options, on: loop)
            #expect(chunked.text == "hello, chunked")
            let closeDelimited = try await HTTPClient.send(HTTPClientRequest(url: base + "/close"), options: options, on: loop)
            #expect(closeDelimited.text == "hello, close")
            var headers = HTTPHeaders()
            headers.add(name: "X-Test", value: "42")
            let posted = try await HTTPClient.send(
                HTTPClientRequest(method: "POST", url: base + "/echo", headers: headers, body: Array("{\"a\":1}".utf8)),
                options: options, on: loop)
            #expect(posted.status == 201)
            #expect(posted.headers["X-Echo"] == "yes")
            #expect(posted.text == "POST 42 {\"a\":1}")
            var small = options
            small.maxResponseSize = 1000
            do throws(ConnectError) {
                _ = try await HTTPClient.send(HTTPClientRequest(url: base + "/big"), options: small, on: loop)
                Issue.record("a 1 MiB body passed a 1000-byte limit")
            } catch {
                #expect(error.step == .http)
                guard case .http(.responseTooLarge(limit: 1000)) = error.reason else {
                    Issue.record("unexpected \(error)")
                    return
                }
            }
        }
    }

    @Test("HTTPClient: keep-alive reuse of one connection, a refused redirect, a response timeout")
    func httpClientKeepAliveRedirectTimeout() async throws {
        try await withLoop { loop in
            let server = try await PythonPeer.start("http_server.py")
            defer { server.stop() }
            let base = "http://127.0.0.1:\(server.port)"
            let cache = HTTPConnectionCache()
            let a = try await HTTPClient.send(HTTPClientRequest(url: base + "/length"), connections: cache, on: loop)
            let b = try await HTTPClient.send(HTTPClientRequest(url: base + "/length"), connections: cache, on: loop)
            #expect(a.text == "hello, length" && b.text == "hello, length")
            #expect(a.headers["X-Connection"] != nil && a.headers["X-Connection"] == b.headers["X-Connection"], "\(a.headers) \(b.headers)")
            #expect(b.trace.entries.map(\.step) == [.tcp, .http], "the second request dialled again: \(b.trace)")
            // Without a cache every request has its own connection.
            let c = try await HTTPClient.send(HTTPClientRequest(url: base + "/length"), on: loop)
            #expect(c.headers["X-Connection"] != a.headers["X-Connection"])
            await cache.close(on: loop)

            do throws(ConnectError) {
                _ = try await HTTPClient.send(HTTPClientRequest(url: base + "/redirect"), on: loop)
                Issue.record("a redirect was returned as a response")
            } catch {
                #expect(error.step == .http)
                guard case .http(.redirectRefused(status: 302, location: "/length")) = error.reason else {
                    Issue.record("unexpected \(error)")
                    return
                }
                #expect(error.description.contains("redirects are not followed"), "\(error)")
            }

            var options = HTTPClientOptions()
            options.responseTimeout = .milliseconds(300)
            let started = ContinuousClock.now
            do throws(ConnectError) {
                _ = try await HTTPClient.send(HTTPClientRequest(url: base + "/slow"), options: options, on: loop)
                Issue.record("a 10 s answer beat a 300 ms response timeout")
            } catch {
                #expect(error.step == .http)
                guard case .timeout = error.reason else {
                    Issue.record("unexpected \(error)")
                    return
                }
                #expect(ContinuousClock.now - started < .seconds(8), "the timeout did not end the request")
            }
        }
    }

    /// Cancelling the task that awaits a response closes the connection and ends the request at
    /// once. Before, the request kept waiting (here 10 s); an owner stopping (the daemon's HTTP
    /// queue at SIGTERM) left it suspended, never freed (LeakSanitizer, docs/reliability.md).
    @Test("HTTPClient: cancelling the awaiting task ends a request in progress")
    func httpClientCancellation() async throws {
        try await withLoop { loop in
            let server = try await PythonPeer.start("http_server.py")
            defer { server.stop() }
            var options = HTTPClientOptions()
            options.responseTimeout = .seconds(30)
            let request = Task { () -> ConnectError? in
                do throws(ConnectError) {
                    _ = try await HTTPClient.send(HTTPClientRequest(url: "http://127.0.0.1:\(server.port)/slow"), options: options, on: loop)
                    return nil
                } catch {
                    return error
                }
            }
            try await Task.sleep(for: .milliseconds(300))  // connected, the request written, no answer yet
            let cancelled = ContinuousClock.now
            request.cancel()
            let error = try #require(await request.value, "the 10 s answer arrived despite the cancellation")
            #expect(ContinuousClock.now - cancelled < .seconds(5), "cancelling did not end the request")
            #expect(error.step == .http, "\(error)")
            guard case .cancelled = error.reason else {
                Issue.record("unexpected \(error)")
                return
            }
        }
    }

    @Test("HTTPClient through the proxy")
    func httpThroughProxy() async throws {
        try await withLoop { loop in
            let server = try await PythonPeer.start("http_server.py")
            defer { server.stop() }
            let proxy = try await PythonPeer.start("connect_proxy.py")
            defer { proxy.stop() }
            var options = HTTPClientOptions()
            options.proxy = HTTPProxy(host: "127.0.0.1", port: proxy.port)
            let r = try await HTTPClient.send(HTTPClientRequest(url: "http://127.0.0.1:\(server.port)/length"), options: options, on: loop)
            #expect(r.text == "hello, length")
            #expect(r.trace.entries.map(\.step) == [.dns, .tcp, .proxy, .http])
        }
    }
}

/// An idle open connection costs no wake-up.
@Suite("Integration: idle cost")
struct IntegrationIdleTests {
    @Test("an idle open WebSocket makes no loop wake-ups")
    func idle() async throws {
        let serverLoop = try EventLoop(name: "idle-server")
        defer { serverLoop.shutdownAndJoinDetached() }
        try await withLoop("idle-client") { loop in
            let server = try await startWebSocketEchoServer(on: serverLoop)
            let connection = try await WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/", on: loop)
            let inbox = EventInbox(connection)
            try await connection.sendAsync(text: "warm up")
            #expect(try await inbox.nextMessage() == .text("warm up"))
            let timers = try await loop.submit { loop.scheduledTimerCount }
            try await Task.sleep(for: .milliseconds(100))  // let the last wake-ups of the exchange pass
            let before = loop.wakeUpCount
            try await Task.sleep(for: .seconds(3))
            let after = loop.wakeUpCount
            #expect(timers == 0)
            #expect(after == before, "the client loop woke up \(after - before) times in 3 s while idle")
            try await connection.closeAsync()
            #expect(try await inbox.closed().code == .normalClosure)
            await server.closeAsync()
        }
    }
}

extension EventLoop {
    /// Shuts down without blocking the caller's (cooperative) thread.
    func shutdownAndJoinDetached() {
        let loop = self
        Thread { loop.shutdownAndJoin() }.start()
    }
}
