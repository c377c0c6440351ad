import SmarticoTestSupport
import Testing
@testable import Transport

@Suite struct WebSocketHandshakeTests {
    /// RFC 6455 §1.3. (The value "s3pPLMBiTxaQ9kWGzzZxwmbaOo=" that circulates is a typo: it has
    /// 27 characters, and the base64 of a 20-byte SHA-1 has 28.)
    @Test func acceptKeyMatchesRFC6455Example() {
        #expect(WebSocketHandshake.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    func client(_ options: WebSocketClientOptions = WebSocketClientOptions(host: "example.com", target: "/chat?room=1")) -> WebSocketClientHandshake {
        WebSocketClientHandshake(options: options, random: SplitMix64(seed: 11))
    }

    @Test func clientRequest() throws {
        var extra = HTTPHeaders()
        extra.add(name: "Origin", value: "https://example.com")
        let c = client(WebSocketClientOptions(
            host: "example.com", port: 8443, secure: true, target: "/chat?room=1", subprotocols: ["v2.smartico", "v1.smartico"],
            headers: extra, deflate: PerMessageDeflateOptions()))
        let text = String(decoding: c.request, as: UTF8.self)
        #expect(text.hasPrefix("GET /chat?room=1 HTTP/1.1\r\nHost: example.com:8443\r\n"))
        #expect(text.hasSuffix("\r\n\r\n"))
        var parser = HTTPHeadParser()
        let head = try #require(try parser.parseRequest(c.request))
        #expect(head.headers["upgrade"] == "websocket")
        #expect(head.headers["CONNECTION"] == "Upgrade")
        #expect(head.headers["Sec-WebSocket-Version"] == "13")
        #expect(Base64.decode(try #require(head.headers["Sec-WebSocket-Key"]))?.count == 16)
        #expect(head.headers["Sec-WebSocket-Protocol"] == "v2.smartico, v1.smartico")
        #expect(head.headers["Sec-WebSocket-Extensions"] == "permessage-deflate; client_max_window_bits")
        #expect(head.headers["Origin"] == "https://example.com")
        // Default ports are omitted; IPv6 literals get brackets.
        #expect(WebSocketClientOptions(host: "example.com", port: 443, secure: true).hostHeader == "example.com")
        #expect(WebSocketClientOptions(host: "example.com", port: 80).hostHeader == "example.com")
        #expect(WebSocketClientOptions(host: "::1", port: 9000).hostHeader == "[::1]:9000")
        // A fresh key per handshake.
        #expect(WebSocketClientHandshake(options: .init(host: "a")).key != WebSocketClientHandshake(options: .init(host: "a")).key)
    }

    @Test func clientServerRoundTrip() throws {
        var c = client(WebSocketClientOptions(host: "example.com", target: "/chat?room=1", subprotocols: ["v1", "v2"],
                                              deflate: PerMessageDeflateOptions(clientNoContextTakeover: true, serverMaxWindowBits: 11)))
        var server = WebSocketServerHandshake(options: WebSocketServerOptions(subprotocols: ["v2", "v1"], deflate: PerMessageDeflateOptions()))
        var request: WebSocketUpgradeRequest?
        for b in c.request { request = try server.receive([b]) ?? request }  // byte by byte
        let req = try #require(request)
        #expect(req.path == "/chat" && req.query == "room=1")
        #expect(req.subprotocols == ["v1", "v2"])
        #expect(req.headers["host"] == "example.com")
        let acceptance = server.accept(req)
        #expect(acceptance.subprotocol == "v2")
        let serverDeflate = try #require(acceptance.deflate)
        #expect(serverDeflate.serverMaxWindowBits == 11 && serverDeflate.clientNoContextTakeover)
        // The server's first frame arrives in the same read as the 101.
        let serverWS = WebSocketProtocol(role: .server, deflate: serverDeflate)
        let hello = try serverWS.send(text: "hello")
        var result: WebSocketClientHandshakeResult?
        for (i, b) in (acceptance.response + hello.outbound).enumerated() {
            result = try c.receive([b]) ?? result
            if result != nil { #expect(i == acceptance.response.count - 1); break }
        }
        var r = try #require(result)
        r.remainder += hello.outbound[(r.remainder.count)...]  // the bytes we did not feed yet
        #expect(r.subprotocol == "v2")
        #expect(r.deflate == serverDeflate)
        let clientWS = WebSocketProtocol(role: .client, deflate: r.deflate, random: SplitMix64(seed: 1))
        #expect(clientWS.receive(r.remainder).events == [.text("hello")])
        #expect(serverWS.receive(try clientWS.send(text: "hi back").outbound).events == [.text("hi back")])
    }

    /// Our client and our server agree on every combination of deflate options.
    @Test func deflateOptionsInterop() throws {
        let variants: [PerMessageDeflateOptions] = [
            PerMessageDeflateOptions(), PerMessageDeflateOptions(serverMaxWindowBits: 15),
            PerMessageDeflateOptions(serverNoContextTakeover: true, clientNoContextTakeover: true, serverMaxWindowBits: 8, clientMaxWindowBits: 8),
            PerMessageDeflateOptions(serverMaxWindowBits: 12, clientMaxWindowBits: 15), PerMessageDeflateOptions(clientMaxWindowBits: 9),
        ]
        for clientOptions in variants {
            for serverOptions in variants {
                var c = WebSocketClientHandshake(options: .init(host: "h", deflate: clientOptions), random: SplitMix64(seed: 1))
                var s = WebSocketServerHandshake(options: .init(deflate: serverOptions))
                let a = s.accept(try #require(try s.receive(c.request)))
                let r = try #require(try c.receive(a.response), "\(clientOptions) / \(serverOptions)")
                let params = try #require(r.deflate)
                #expect(params == a.deflate)
                if let limit = clientOptions.serverMaxWindowBits { #expect(params.serverMaxWindowBits <= limit) }
                if let limit = clientOptions.clientMaxWindowBits { #expect(params.clientMaxWindowBits <= limit) }
                let client = WebSocketProtocol(role: .client, deflate: r.deflate, random: SplitMix64(seed: 2))
                let server = WebSocketProtocol(role: .server, deflate: a.deflate)
                let text = String(repeating: "interop ", count: 200)
                #expect(server.receive(try client.send(text: text).outbound).events == [.text(text)])
                #expect(client.receive(try server.send(text: text).outbound).events == [.text(text)])
            }
        }
    }

    @Test func remainderAfterResponseHead() throws {
        var c = client()
        var s = WebSocketServerHandshake()
        let req = try #require(try s.receive(c.request))
        let bytes = s.accept(req).response + [0x81, 0x02, 0x68, 0x69]
        let r = try #require(try c.receive(bytes))
        #expect(r.remainder == [0x81, 0x02, 0x68, 0x69])
        #expect(r.subprotocol == nil && r.deflate == nil)
    }

    func response(_ c: WebSocketClientHandshake, accept: String? = nil, extra: String = "", upgrade: String = "Upgrade: websocket\r\n", connection: String = "Connection: Upgrade\r\n") -> [UInt8] {
        let a = accept ?? WebSocketHandshake.acceptValue(forKey: c.key)
        return Array("HTTP/1.1 101 Switching Protocols\r\n\(upgrade)\(connection)Sec-WebSocket-Accept: \(a)\r\n\(extra)\r\n".utf8)
    }

    @Test func tokenListsAndCaseInsensitivity() throws {
        var c = client()
        let r = try c.receive(response(c, upgrade: "upgrade: WebSocket\r\n", connection: "connection: keep-alive, UPGRADE\r\n"))
        #expect(r != nil)
    }

    @Test func wrongAcceptKey() {
        var c = client()
        let expected = WebSocketHandshake.acceptValue(forKey: c.key)
        #expect(throws: WebSocketHandshakeError.wrongAcceptKey(expected: expected, received: "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")) {
            try c.receive(response(c, accept: "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="))
        }
    }

    @Test func missingUpgrade() {
        var c = client()
        #expect(throws: WebSocketHandshakeError.missingUpgradeHeader(found: nil)) { try c.receive(response(c, upgrade: "")) }
        var c2 = client()
        #expect(throws: WebSocketHandshakeError.missingConnectionUpgrade(found: "close")) { try c2.receive(response(c2, connection: "Connection: close\r\n")) }
    }

    @Test func subprotocolAndExtensionsNotOffered() {
        var c = client(WebSocketClientOptions(host: "h", subprotocols: ["a"]))
        #expect(throws: WebSocketHandshakeError.subprotocolNotOffered("b", offered: ["a"])) {
            try c.receive(response(c, extra: "Sec-WebSocket-Protocol: b\r\n"))
        }
        var c2 = client()
        #expect(throws: WebSocketHandshakeError.extensionNotOffered("permessage-deflate")) {
            try c2.receive(response(c2, extra: "Sec-WebSocket-Extensions: permessage-deflate\r\n"))
        }
        var c3 = client(WebSocketClientOptions(host: "h", deflate: PerMessageDeflateOptions()))
        #expect(throws: WebSocketHandshakeError.extensionRejected(.unknownParameter("x"))) {
            try c3.receive(response(c3, extra: "Sec-WebSocket-Extensions: permessage-deflate; x\r\n"))
        }
    }

    @Test func forbiddenWithBody() throws {
        let body = "{\"error\":\"token expired\"}"
        var c = client()
        let head = Array("HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n".utf8)
        #expect(try c.receive(head) == nil)  // waits for the body
        var caught: WebSocketHandshakeError?
        do { _ = try c.receive(Array(body.utf8)) } catch { caught = error }
        guard case let .unexpectedStatus(line, headers, prefix) = caught else { Issue.record("got \(String(describing: caught))"); return }
        #expect(line == "HTTP/1.1 403 Forbidden")
        #expect(headers["content-type"] == "application/json")
        #expect(String(decoding: prefix, as: UTF8.self) == body)
        #expect(caught!.description.contains("403 Forbidden") && caught!.description.contains("token expired"))
    }

    @Test func errorBodyIsCappedChunkedAndCloseDelimited() throws {
        // A large body: only the first 512 bytes are kept, and the error comes as soon as they are in.
        var c = client()
        let big = [UInt8](repeating: UInt8(ascii: "x"), count: 5000)
        var caught: WebSocketHandshakeError?
        do { _ = try c.receive(Array("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5000\r\n\r\n".utf8) + big.prefix(600)) } catch { caught = error }
        guard case let .unexpectedStatus(_, _, prefix) = caught else { Issue.record("got \(String(describing: caught))"); return }
        #expect(prefix.count == 512)
        // Chunked.
        var c2 = client()
        do { _ = try c2.receive(Array("HTTP/1.1 401 Unauthorized\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n".utf8)) } catch { caught = error }
        guard case let .unexpectedStatus(_, _, p2) = caught else { Issue.record("got \(String(describing: caught))"); return }
        #expect(String(decoding: p2, as: UTF8.self) == "hello world")
        // Close-delimited: the error comes when the transport closes.
        var c3 = client()
        #expect(try c3.receive(Array("HTTP/1.0 404 Not Found\r\n\r\nno such".utf8)) == nil)
        do { try c3.transportClosed() } catch { caught = error }
        guard case let .unexpectedStatus(line, _, p3) = caught else { Issue.record("got \(String(describing: caught))"); return }
        #expect(line == "HTTP/1.0 404 Not Found" && p3 == Array("no such".utf8))
        // Nothing at all.
        var c4 = client()
        #expect(throws: WebSocketHandshakeError.connectionClosed(bytesReceived: 0)) { try c4.transportClosed() }
    }

    func serverError(_ request: String) -> WebSocketHandshakeError? {
        var s = WebSocketServerHandshake()
        do { _ = try s.receive(Array(request.utf8)); return nil } catch { return error }
    }

    static let good = "Host: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"

    @Test func serverValidatesRequests() throws {
        #expect(serverError("GET / HTTP/1.1\r\n\(Self.good)Sec-WebSocket-Version: 13\r\n\r\n") == nil)
        #expect(serverError("POST / HTTP/1.1\r\n\(Self.good)Sec-WebSocket-Version: 13\r\n\r\n") == .methodNotAllowed("POST"))
        #expect(serverError("GET / HTTP/1.0\r\n\(Self.good)Sec-WebSocket-Version: 13\r\n\r\n") == .httpVersionTooOld(.http10))
        #expect(serverError("GET / HTTP/1.1\r\n\(Self.good)Sec-WebSocket-Version: 8\r\n\r\n") == .unsupportedVersion("8"))
        #expect(serverError("GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: c2hvcnQ=\r\nSec-WebSocket-Version: 13\r\n\r\n") == .invalidKey("c2hvcnQ="))
        #expect(serverError("GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n") == .missingUpgradeHeader(found: nil))
        #expect(serverError("GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n") == .missingHost)
        let rejection = String(decoding: WebSocketServerHandshake.rejectionResponse(for: .unsupportedVersion("8")), as: UTF8.self)
        #expect(rejection.hasPrefix("HTTP/1.1 426 Upgrade Required\r\n"))
        #expect(rejection.contains("Sec-WebSocket-Version: 13\r\n"))
        let bad = WebSocketServerHandshake.rejectionResponse(for: .invalidKey(nil))
        var parser = HTTPHeadParser()
        let head = try #require(try parser.parseResponse(bad))
        #expect(head.status == 400)
        #expect(Int(head.headers["Content-Length"] ?? "") == parser.remainder.count)
    }

    @Test func serverRejectsOversizedHead() {
        var s = WebSocketServerHandshake(options: WebSocketServerOptions(limits: HTTPHeadLimits(maxHeadSize: 200)))
        #expect(throws: WebSocketHandshakeError.http(.headTooLarge(limit: 200))) {
            try s.receive(Array("GET / HTTP/1.1\r\nX: \(String(repeating: "a", count: 300))".utf8))
        }
    }
}

@Suite struct WebSocketURLTests {
    @Test func parsesURLs() throws {
        var u = try WebSocketURL("wss://api.example.com/ws?token=abc")
        #expect(u.secure && u.host == "api.example.com" && u.port == 443 && u.target == "/ws?token=abc")
        u = try WebSocketURL("WS://127.0.0.1:8080")
        #expect(!u.secure && u.host == "127.0.0.1" && u.port == 8080 && u.target == "/")
        u = try WebSocketURL("ws://[::1]:9000?x=1")
        #expect(u.host == "::1" && u.port == 9000 && u.target == "/?x=1")
        #expect(u.description == "ws://[::1]:9000/?x=1")
        let options = WebSocketClientOptions(url: try WebSocketURL("wss://h:8443/p"))
        #expect(options.hostHeader == "h:8443" && options.target == "/p" && options.secure)
    }

    @Test func rejectsBadURLs() {
        for bad in ["http://h/", "ws://", "ws://h:0", "ws://h:70000", "ws://h:8x", "ws://h/#frag", "ws://u:p@h/", "ws://[::1/", "ws://h/a b"] {
            #expect(throws: WebSocketURLError.self, "\(bad)") { try WebSocketURL(bad) }
        }
    }
}
