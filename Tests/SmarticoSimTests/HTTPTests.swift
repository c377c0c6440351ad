import Foundation
import Synchronization
import Testing
import Transport
@testable import SmarticoProtocol  // the push registration and report builders (memberwise)
@testable import SmarticoSim

func parse(_ text: String) -> SimHTTPRequestParser.Outcome {
    var p = SimHTTPRequestParser()
    return p.feed(Array(text.utf8))
}

func request(_ target: String, method: String = "GET") -> SimHTTPRequest {
    guard case .request(let r) = parse("\(method) \(target) HTTP/1.1\r\nHost: x\r\n\r\n") else { fatalError("unparsable \(target)") }
    return r
}

func body(_ r: SimHTTPResponse) -> String { String(decoding: r.body, as: UTF8.self) }

@Suite struct HTTPRoutingTests {
    @Test func parserReadsTheHeadInPiecesAndRejectsJunk() {
        var p = SimHTTPRequestParser()
        #expect(p.feed(Array("GET /health HT".utf8)) == .needMore)
        #expect(p.feed(Array("TP/1.1\r\nHost: a\r\nX-Y:  z \r\n\r".utf8)) == .needMore)
        guard case .request(let r) = p.feed(Array("\n".utf8)) else { Issue.record("no request"); return }
        #expect(r.method == "GET" && r.path == "/health" && r.version == "HTTP/1.1")
        #expect(r.headers.map(\.name) == ["host", "x-y"] && r.headers.last?.value == "z")
        for junk in ["\r\n\r\n", "GET\r\n\r\n", "GET nope HTTP/1.1\r\n\r\n", "GET / SMTP\r\n\r\n", "GET / HTTP/1.1\r\nno colon\r\n\r\n"] {
            guard case .reject(let resp) = parse(junk) else { Issue.record("accepted \(junk.debugDescription)"); continue }
            #expect(resp.status == 400)
        }
        var big = SimHTTPRequestParser(maxHeadBytes: 100)
        guard case .reject(let r431) = big.feed(Array(("GET /" + String(repeating: "a", count: 200)).utf8)) else { Issue.record("no 431"); return }
        #expect(r431.status == 431)
    }

    @Test func queryParametersAreDecoded() {
        let r = request("/wrapper-gf.html?label_key=k-2&user_ext_id=a%20b%26c&dp=dp%3Agf_saw%26id%3D5&x")
        #expect(r.parameter("user_ext_id") == "a b&c")
        #expect(r.parameter("dp") == "dp:gf_saw&id=5")
        #expect(r.parameter("x") == "" && r.parameter("nope") == nil)
    }

    @Test func gamificationWrapperShowsUserLabelBrandAndDeepLinkEscaped() {
        let router = SimHTTPRouter()
        let resp = router.respond(to: request("/wrapper-gf.html?label_key=d78934f3-2&brand_key=c24a284e&user_ext_id=%3Cb%3Ebob&dp=dp%3Agf_missions"))
        #expect(resp.status == 200 && resp.contentType == "text/html; charset=utf-8")
        let html = body(resp)
        #expect(html.contains("<dd id=\"user\"><code>&lt;b&gt;bob</code></dd>"))
        #expect(html.contains("<code>d78934f3-2</code>") && html.contains("<code>c24a284e</code>"))
        #expect(html.contains("<dd id=\"dp\"><code>dp:gf_missions</code></dd>"))
        #expect(html.contains("gf_missions</code> (gamification deep link)"))
        #expect(html.contains("<b>bob") == false)
        #expect(html.contains("bcid:1"))
    }

    @Test func popupWrapperTakesTheEngagementFromTheBridgeAndReportsItself() {
        let html = body(SimHTTPRouter().respond(to: request("/wrapper-popup.html?user_ext_id=alice&label_key=k1")))
        #expect(html.contains("User <code>alice</code> · label <code>k1</code>"))
        #expect(html.contains("waiting for SHOW_ENGAGEMENT (bcid 3)"))
        // PAGE_READY first; on SHOW_ENGAGEMENT its own impression (103) through SEND_TO_SOCKET,
        // then READY_TO_BE_SHOWN; OK reports the click (104) and sends EXECUTE_DEEP_LINK.
        #expect(html.contains("bridgeSend({bcid:1});"))
        #expect(html.contains("bridgeSend({bcid:6,cid:103,"))
        #expect(html.contains("bridgeSend({bcid:5});"))
        #expect(html.contains("bridgeSend({bcid:6,cid:104,"))
        #expect(html.contains("bridgeSend({bcid:4,dp:dp});"))
        #expect(html.contains("<button id=\"ok\" autofocus>"))
        let noUser = body(SimHTTPRouter().respond(to: request("/wrapper-popup.html?user_ext_id=%3Cb%3Ebob")))
        #expect(noUser.contains("<b>bob") == false)
    }

    @Test func avatarIsAnSVGAndOtherRoutesAnswerProperly() {
        let router = SimHTTPRouter()
        let id = SimServerSession.avatarID(for: "alice")
        let avatar = router.respond(to: request("/avatar/\(id)"))
        #expect(avatar.status == 200 && avatar.contentType == "image/svg+xml")
        #expect(body(avatar).hasPrefix("<svg ") && body(avatar).contains(String(id.prefix(4))))
        #expect(router.respond(to: request("/avatar/")).status == 404)
        #expect(router.respond(to: request("/nope")).status == 404)
        #expect(router.respond(to: request("/health")).body == Array("ok\n".utf8))
        #expect(body(router.respond(to: request("/"))).contains("/wrapper-gf.html"))
        let post = router.respond(to: request("/health", method: "POST"))
        #expect(post.status == 405 && post.extraHeaders.first?.1 == "GET, HEAD")
        // HEAD: the same head, no body.
        let head = String(decoding: router.responseBytes(for: request("/health", method: "HEAD")), as: UTF8.self)
        #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n") && head.hasSuffix("\r\n\r\n") && head.contains("Content-Length: 3\r\n"))
    }

    @Test func urlsFromIdentifyResolveToPages() throws {
        var h = Harness(SimConfig(labelKey: "d78934f3-1d8b-461b-9e8f-287aae43c860-2", brandKey: "c24a284e"))
        let c = h.connect()
        _ = h.send(c, Msg.initSession(label: "d78934f3-1d8b-461b-9e8f-287aae43c860"))
        let r = try IdentifyUserResponse(json: try #require(h.send(c, Msg.identify("bob")).first?.json))
        let router = SimHTTPRouter()
        for url in [r.gamificationURL!, WrapperURL.withDeepLink(r.gamificationURL!, deepLink: "dp:gf_store"), r.popupURL!] {
            let target = String(url.dropFirst("http://127.0.0.1:8081".count))
            let html = body(router.respond(to: request(target)))
            #expect(html.contains("<code>bob</code>"))
        }
        let avatarTarget = String(r.avatarURL(imageDomain: "http://127.0.0.1:8081/")!.dropFirst("http://127.0.0.1:8081".count))
        #expect(router.respond(to: request(avatarTarget)).contentType == "image/svg+xml")
    }
}

/// Blocking loopback client for the I/O tests (run on a detached thread, bounded by SO_RCVTIMEO).
func blockingExchange(connect: (Int32) -> Bool, family: Int32, send: [UInt8], shutdownAfterSend: Bool = true) -> [UInt8] {
    let fd = socket(family, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var tv = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    guard connect(fd) else { return [] }
    _ = send.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    if shutdownAfterSend { shutdown(fd, Int32(SHUT_WR)) }
    var out: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 { out += buf[0..<n] } else if n < 0 && errno == EINTR { continue } else { break }
    }
    return out
}

func tcpExchange(port: Int, _ text: String) async -> String {
    await withCheckedContinuation { cont in
        Thread.detachNewThread {
            let bytes = blockingExchange(connect: { fd in
                var a = sockaddr_in()
                a.sin_family = sa_family_t(AF_INET)
                a.sin_port = UInt16(port).bigEndian
                a.sin_addr.s_addr = inet_addr("127.0.0.1")
                return withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 } }
            }, family: AF_INET, send: Array(text.utf8))
            cont.resume(returning: String(decoding: bytes, as: UTF8.self))
        }
    }
}

func unixExchange(path: String, _ text: String) async -> String {
    await withCheckedContinuation { cont in
        Thread.detachNewThread {
            let bytes = blockingExchange(connect: { fd in
                var a = sockaddr_un()
                a.sun_family = sa_family_t(AF_UNIX)
                withUnsafeMutableBytes(of: &a.sun_path) { p in
                    let u = Array(path.utf8)
                    for (i, b) in u.enumerated() where i < p.count - 1 { p[i] = b }
                }
                return withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 } }
            }, family: AF_UNIX, send: Array(text.utf8))
            cont.resume(returning: String(decoding: bytes, as: UTF8.self))
        }
    }
}

func withLoop<R>(_ body: (EventLoop) async throws -> R) async throws -> R {
    let loop = try EventLoop(name: "sim-test")
    do {
        let r = try await body(loop)
        await loop.shutdown()
        return r
    } catch {
        await loop.shutdown()
        throw error
    }
}

@Suite struct HTTPServerTests {
    @Test func servesPagesOverARealLoopbackSocket() async throws {
        try await withLoop { loop in
            let server = try await SimHTTPServer.start(host: "127.0.0.1", port: 0, on: loop)
            #expect(server.port > 0)
            let page = await tcpExchange(port: server.port, "GET /wrapper-gf.html?user_ext_id=alice&dp=dp%3Agf_levels HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(page.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(page.contains("Content-Type: text/html; charset=utf-8\r\n") && page.contains("Connection: close\r\n"))
            #expect(page.contains("<code>alice</code>") && page.contains("<code>dp:gf_levels</code>"))
            let parts = page.components(separatedBy: "\r\n\r\n")
            let length = parts[0].components(separatedBy: "\r\n").first { $0.hasPrefix("Content-Length: ") }.map { Int($0.dropFirst(16)) }
            #expect(length == parts.dropFirst().joined(separator: "\r\n\r\n").utf8.count)
            let avatar = await tcpExchange(port: server.port, "GET /avatar/123 HTTP/1.1\r\n\r\n")
            #expect(avatar.contains("Content-Type: image/svg+xml") && avatar.contains("<svg "))
            let bad = await tcpExchange(port: server.port, "BLAH\r\n\r\n")
            #expect(bad.hasPrefix("HTTP/1.1 400 Bad Request"))
            // A client that sends half a head and hangs up gets nothing and costs nothing.
            #expect(await tcpExchange(port: server.port, "GET /hea") == "")
            await server.close()
        }
    }
}

@Suite struct ControlServerTests {
    @Test func answersEachLineInOrderOverAUnixSocket() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try await withLoop { loop in
            let path = dir.path + "/control.sock"
            let server = try await SimControlServer.start(path: path, on: loop) { line in
                Array("{\"echo\":\(line.count)}\n".utf8)
            }
            var mode = stat()
            #expect(stat(path, &mode) == 0 && mode.st_mode & 0o777 == 0o600)
            let answer = await unixExchange(path: path, "{\"op\":\"a\"}\r\n\n{\"op\":\"bb\"}\n{\"unterminated")
            #expect(answer == "{\"echo\":10}\n{\"echo\":11}\n")
            await server.close()
            #expect(access(path, F_OK) != 0)
        }
    }
}

@Suite struct PublicAPITests {
    @Test func parserReadsAContentLengthBodyInPieces() {
        var p = SimHTTPRequestParser()
        #expect(p.feed(Array("POST /services/public HTTP/1.1\r\nContent-Length: 5\r\n\r\nab".utf8)) == .needMore)
        guard case .request(let r) = p.feed(Array("cdeEXTRA".utf8)) else { Issue.record("no request"); return }
        #expect(r.body == Array("abcde".utf8) && r.method == "POST")
        for (text, status) in [("POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400),
                               ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
                               ("POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n", 413)] {
            guard case .reject(let resp) = parse(text) else { Issue.record("accepted \(text.debugDescription)"); continue }
            #expect(resp.status == status)
        }
    }

    @Test func pushReportsAndTokenRegistrationsAreAnsweredAndRecorded() throws {
        let router = SimHTTPRouter()
        let report = PushEngagementReport(kind: .impression, userExtID: "alice", engagementUID: "e-1", messageID: 77)
        let query = report.query(apiKey: "label", brandKey: "brand", uuid: "u-1", ts: 5)
        let (resp, record) = router.handle(request("/services/public?\(query)"))
        #expect(resp.status == 200 && resp.body == SimHTTPRouter.publicAPIOK && resp.contentType == "application/json")
        let r = try #require(record)
        #expect(r.error == nil && r.http.str("api_key") == "label" && r.http.str("brand_key") == "brand" && r.http.str("version") == "1.2.25")
        #expect(r.message?.str("event_type") == "engagement_impression")
        #expect(r.message?["payload"]?.objectValue?.str("engagement_uid") == "e-1")

        let registration = PushTokenRegistration(apiKey: "label", brandKey: "brand", extUserID: "alice", token: "tok",
                                                 platform: .nativeAndroid, appPackageID: "a.b", status: .allowed)
        var post = SimHTTPRequestParser()
        let body = registration.postBody()
        guard case .request(let postRequest) = post.feed(Array("POST /services/public HTTP/1.1\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body) else {
            Issue.record("no POST request"); return
        }
        let (postResponse, postRecord) = router.handle(postRequest)
        #expect(postResponse.status == 200 && postRecord?.message?.int("cid") == 1003 && postRecord?.http.str("method") == "POST")

        // A POST body the simulator's own reading refuses: 400, recorded with the field.
        let mistyped = Array(#"{"api_key":"k","brand_key":"b","ext_user_id":"u","token":"t","platform":"7"}"#.utf8)
        var badPost = SimHTTPRequestParser()
        if case .request(let r2) = badPost.feed(Array("POST /services/public HTTP/1.1\r\nContent-Length: \(mistyped.count)\r\n\r\n".utf8) + mistyped) {
            let (refused, refusedRecord) = router.handle(r2)
            #expect(refused.status == 400 && refusedRecord?.error?.contains(#""platform" must be an integer"#) == true)
        } else {
            Issue.record("no POST request")
        }

        // Bad calls: 400 with errCode 1, recorded with the reason.
        let (bad, badRecord) = router.handle(request("/services/public?api_key=x"))
        #expect(bad.status == 400 && String(decoding: bad.body, as: UTF8.self).contains("\"errCode\":1"))
        #expect(badRecord?.error?.contains("event") == true)

        // Recorded into the received log with client "http" and the user.
        var h = Harness()
        h.sim.recordHTTP(r, now: t0)
        let e = try #require(h.sim.received.entries.last)
        #expect(e.client == "http" && e.user == "alice" && e.http?.str("path") == "/services/public")
        #expect(String(decoding: e.recordLine, as: UTF8.self).hasPrefix(#"{"seq":1,"at":1800000000000,"client":"http","user":"alice","http":{"method":"GET""#))
    }

    @Test func publicAPIOverTheHTTPServerReachesTheRecorder() async throws {
        let got = Mutex<[SimHTTPRouter.Record]>([])
        try await withLoop { loop in
            let server = try await SimHTTPServer.start(host: "127.0.0.1", port: 0, on: loop) { r in got.withLock { $0.append(r) } }
            let registration = PushTokenRegistration(apiKey: "k", brandKey: "b", extUserID: 12345, token: "tok",
                                                     platform: .nativeIOS, appPackageID: nil, status: .allowed)
            let body = String(decoding: registration.postBody(), as: UTF8.self)
            let answer = await tcpExchange(port: server.port, "POST /services/public HTTP/1.1\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
            #expect(answer.hasPrefix("HTTP/1.1 200 OK") && answer.hasSuffix(String(decoding: SimHTTPRouter.publicAPIOK, as: UTF8.self)))
            #expect(got.withLock { $0.count } == 1)
            #expect(got.withLock { $0.first?.message?.str("token") } == "tok")
            await server.close()
        }
    }
}
