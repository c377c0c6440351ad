import Testing
@testable import Transport

@Suite struct HTTPHeadTests {
    @Test func parsesResponseIncrementally() throws {
        let bytes = Array("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-A: 1\r\nx-a:  2 \r\nConnection: keep-alive, Upgrade\r\n\r\nBODY".utf8)
        var parser = HTTPHeadParser()
        var head: HTTPResponseHead?
        for b in bytes { if head == nil { head = try parser.parseResponse([b]) } }
        // The parser stops at the end of the head; the remainder holds what followed in the same call.
        var whole = HTTPHeadParser()
        let h = try #require(try whole.parseResponse(bytes))
        #expect(h.status == 200 && h.reason == "OK" && h.version == .http11)
        #expect(h.headers["content-type"] == "text/plain")
        #expect(h.headers.values(for: "X-A") == ["1", "2"])
        #expect(h.headers.combinedValue(for: "x-a") == "1, 2")
        #expect(h.headers.containsToken("upgrade", in: "connection"))
        #expect(!h.headers.containsToken("close", in: "connection"))
        #expect(whole.remainder == Array("BODY".utf8))
        #expect(head == h)
    }

    @Test func parsesRequestAndBareLF() throws {
        var parser = HTTPHeadParser()
        let r = try #require(try parser.parseRequest(Array("CONNECT example.com:443 HTTP/1.1\nHost: example.com:443\n\n".utf8)))
        #expect(r.method == "CONNECT" && r.target == "example.com:443")
        #expect(r.headers["host"] == "example.com:443")
    }

    @Test func rejectsMalformedHeads() {
        let cases: [String] = [
            "HTTP/2.0 200 OK\r\n\r\n", "HTTP/1.1 20 OK\r\n\r\n", "HTTX/1.1 200 OK\r\n\r\n",
            "HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
            "HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n", "HTTP/1.1 200 OK\r\nA: b\u{01}c\r\n\r\n",
        ]
        for c in cases {
            var p = HTTPHeadParser()
            #expect(throws: HTTPParseError.self, "\(c)") { try p.parseResponse(Array(c.utf8)) }
        }
        var p = HTTPHeadParser()
        #expect(throws: HTTPParseError.self) { try p.parseRequest(Array("GET  / HTTP/1.1\r\n\r\n".utf8)) }
    }

    @Test func limits() {
        var p = HTTPHeadParser(limits: HTTPHeadLimits(maxHeadSize: 64, maxHeaderCount: 2))
        #expect(throws: HTTPParseError.headTooLarge(limit: 64)) {
            for _ in 0 ..< 100 { _ = try p.parseResponse(Array("X-Long: aaaaaaaa".utf8)) }
        }
        var q = HTTPHeadParser(limits: HTTPHeadLimits(maxHeadSize: 1000, maxHeaderCount: 2))
        #expect(throws: HTTPParseError.tooManyHeaders(limit: 2)) { try q.parseResponse(Array("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n".utf8)) }
    }

    @Test func serializesRequests() throws {
        let head = HTTPRequestHead(method: "CONNECT", target: "h:443", headers: ["Host": "h:443", "Proxy-Authorization": "Basic eA=="])
        #expect(String(decoding: head.serialized(), as: UTF8.self) == "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\nProxy-Authorization: Basic eA==\r\n\r\n")
        var p = HTTPHeadParser()
        #expect(try p.parseRequest(head.serialized()) == head)
    }
}

@Suite struct HTTPBodyTests {
    func decode(_ framing: HTTPBodyFraming, _ wire: String, byteByByte: Bool) throws -> (body: String, complete: Bool, rest: [UInt8]) {
        var d = HTTPBodyDecoder(framing: framing)
        var body: [UInt8] = []
        let bytes = Array(wire.utf8)
        if byteByByte {
            for b in bytes { try [b].withUnsafeBytes { try d.decode($0, into: &body) } }
        } else {
            try bytes.withUnsafeBytes { try d.decode($0, into: &body) }
        }
        return (String(decoding: body, as: UTF8.self), d.isComplete, d.remainder)
    }

    @Test func framingSelection() throws {
        func resp(_ status: Int, _ h: HTTPHeaders) -> HTTPResponseHead { HTTPResponseHead(status: status, reason: "", headers: h) }
        #expect(try HTTPBodyFraming.forResponse(resp(200, ["Content-Length": "12"])) == .contentLength(12))
        #expect(try HTTPBodyFraming.forResponse(resp(200, ["Transfer-Encoding": "gzip, chunked", "Content-Length": "3"])) == .chunked)
        #expect(try HTTPBodyFraming.forResponse(resp(200, [:])) == .closeDelimited)
        #expect(try HTTPBodyFraming.forResponse(resp(204, ["Content-Length": "12"])) == HTTPBodyFraming.none)
        #expect(try HTTPBodyFraming.forResponse(resp(200, ["Content-Length": "5"]), requestMethod: "HEAD") == HTTPBodyFraming.none)
        #expect(try HTTPBodyFraming.forResponse(resp(200, [:]), requestMethod: "CONNECT") == HTTPBodyFraming.none)
        #expect(throws: HTTPParseError.self) { try HTTPBodyFraming.forResponse(resp(200, ["Content-Length": "-1"])) }
        #expect(throws: HTTPParseError.self) { try HTTPBodyFraming.forResponse(resp(200, ["Content-Length": "1", "content-length": "2"])) }
    }

    @Test func bodies() throws {
        for split in [false, true] {
            var r = try decode(.contentLength(5), "helloEXTRA", byteByByte: split)
            #expect(r.body == "hello" && r.complete && r.rest == Array("EXTRA".utf8))
            r = try decode(.chunked, "4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nTrailer: x\r\n\r\nNEXT", byteByByte: split)
            #expect(r.body == "Wikipedia in\r\n\r\nchunks." && r.complete && r.rest == Array("NEXT".utf8))
            r = try decode(.closeDelimited, "all of it", byteByByte: split)
            #expect(r.body == "all of it" && !r.complete)
        }
        #expect(throws: HTTPParseError.self) { try decode(.chunked, "zz\r\n", byteByByte: false) }
        #expect(throws: HTTPParseError.self) { try decode(.chunked, "3\r\nabcX", byteByByte: false) }
        var d = HTTPBodyDecoder(framing: .contentLength(10))
        #expect(throws: HTTPParseError.truncatedBody(expected: 10, received: 0)) { try d.finish() }
        var limited = HTTPBodyDecoder(framing: .closeDelimited, maxBodySize: 3)
        var sink: [UInt8] = []
        #expect(throws: HTTPParseError.bodyTooLarge(limit: 3)) { try [1, 2, 3, 4].withUnsafeBytes { try limited.decode($0, into: &sink) } }
    }
}
