// The HTTP client's response parsing as the daemon's HTTP requests run it (ResponseExchange: the
// head parser, interim 1xx answers, the body framing, Content-Length, chunked and close-delimited
// bodies, the size limit, bytes past the body), and the proxy's answer to CONNECT
// (HTTPConnectHandshake), which the WebSocket and HTTP connects both go through with a proxy.
//
// Input: byte 0 picks the request, byte 1 how the rest is cut into reads, the rest is the answer.
//   bits 0-1: 0 GET, 1 HEAD, 2 POST (ResponseExchange, body limit 8 KiB), 3 CONNECT through a proxy
// Checks: fed whole and in pieces, the same response or an error in both (except the one
// difference a reader cannot avoid: bytes past the body in the same read are an error, in a later
// read they are not read); a Content-Length body has that length; no body past the limit; a
// reusable connection is HTTP/1.1 with a delimited body; the head re-serialized parses the same;
// the body, sent again chunked in pieces of other sizes, decodes to the same bytes.
import FuzzSupport
@testable import Transport

let limit = 8 << 10

enum Outcome {
    case done(ResponseExchange.Output, unread: Int)
    case failed(any Error)
}

func exchange(method: String, _ reads: [[UInt8]]) -> Outcome {
    let x = ResponseExchange(request: [], method: method, limits: HTTPHeadLimits(), maxBodySize: limit)
    for (i, read) in reads.enumerated() {
        do {
            if let out = try read.withUnsafeBytes({ try x.feed($0) }) {
                return .done(out, unread: reads[(i + 1)...].reduce(0) { $0 + $1.count })
            }
        } catch {
            return .failed(error)
        }
    }
    switch x.closed(.peerClosed) {
    case .success(let out): return .done(out, unread: 0)
    case .failure(let e): return .failed(e)
    }
}

func checkResponse(method: String, _ bytes: [UInt8], seed: UInt8) {
    let whole = exchange(method: method, [bytes])
    if seed != 0 {
        let split = exchange(method: method, pieces(of: bytes, seed: seed))
        switch (whole, split) {
        case let (.done(a, _), .done(b, _)):
            invariant(a.head == b.head && a.body == b.body && a.reusable == b.reusable, "whole and in pieces differ")
        case (.failed, .failed):
            break
        case let (.failed(e), .done(_, unread)):
            guard case HTTPClientError.bodyLongerThanAnnounced = e, unread > 0 else {
                invariant(false, "whole failed (\(e)), in pieces not")
                return
            }
        default:
            invariant(false, "whole and in pieces differ: \(whole) / \(split)")
        }
    }
    guard case let .done(out, _) = whole else { return }
    let head = out.head
    invariant(!(100..<200).contains(head.status) || head.status == 101, "an interim \(head.status) as the response")
    invariant(out.body.count <= limit, "a body of \(out.body.count) bytes past the limit")
    let framing = try? HTTPBodyFraming.forResponse(head, requestMethod: method)
    if case .contentLength(let n) = framing { invariant(out.body.count == n, "Content-Length \(n), body \(out.body.count)") }
    if case .some(.none) = framing { invariant(out.body.isEmpty, "a body where none is allowed") }
    if out.reusable {
        invariant(head.version == .http11, "reusable \(head.version)")
        if case .closeDelimited = framing { invariant(false, "reusable with a close-delimited body") }
    }
    var parser = HTTPHeadParser()
    let again = try? parser.parseResponse(head.serialized())
    invariant(again == head, "the head re-serialized parses as \(String(describing: again))")

    // The body again, chunked, in pieces of 1 to 300 bytes, through a fresh exchange.
    if method != "HEAD" {
        var wire = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        var rng = SeededGenerator(seed: UInt64(seed) &+ 3)
        var i = 0
        while i < out.body.count {
            let n = min(out.body.count - i, Int(rng.next() % 300) + 1)
            wire += Array(String(n, radix: 16).utf8) + [13, 10] + out.body[i ..< i + n] + [13, 10]
            i += n
        }
        wire += Array("0\r\n\r\n".utf8)
        guard case let .done(back, _) = exchange(method: "GET", pieces(of: wire, seed: seed)) else {
            invariant(false, "the body sent chunked was refused")
            return
        }
        invariant(back.body == out.body, "the body sent chunked came back different")
        invariant(back.reusable, "a chunked HTTP/1.1 answer not reusable")
    }
}

func checkConnect(_ bytes: [UInt8], seed: UInt8) {
    func run(_ reads: [[UInt8]]) -> (open: Bool, unread: Int, error: HTTPProxyError?) {
        var h = HTTPConnectHandshake(proxy: HTTPProxy(host: "proxy.example", port: 3128, username: "u", password: "p"),
                                     targetHost: "api.smartico.example", targetPort: 443, userAgent: "smarticod-fuzz")
        for (i, read) in reads.enumerated() {
            do {
                if try read.withUnsafeBytes({ try h.receive($0) }) {
                    return (true, reads[(i + 1)...].reduce(0) { $0 + $1.count }, nil)
                }
            } catch {
                invariant(error is HTTPProxyError, "not an HTTPProxyError: \(error)")
                return (false, 0, error as? HTTPProxyError)
            }
        }
        do throws(HTTPProxyError) {
            try h.transportClosed()
            invariant(false, "transportClosed did not throw")
        } catch {
            return (false, 0, error)
        }
        return (false, 0, nil)
    }
    let whole = run([bytes])
    invariant(whole.open || whole.error != nil, "neither open nor an error")
    guard seed != 0 else { return }
    let split = run(pieces(of: bytes, seed: seed))
    if whole.open != split.open {
        // Bytes after the 2xx in the same read are refused; in a later read they are the tunnel's.
        guard case .unexpectedData = whole.error, split.open, split.unread > 0 else {
            invariant(false, "whole and in pieces differ: \(whole) / \(split)")
            return
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTPResponse(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = input(data, size)
    guard bytes.count >= 2 else { return 0 }
    let answer = Array(bytes[2...])
    switch bytes[0] & 3 {
    case 0: checkResponse(method: "GET", answer, seed: bytes[1])
    case 1: checkResponse(method: "HEAD", answer, seed: bytes[1])
    case 2: checkResponse(method: "POST", answer, seed: bytes[1])
    default: checkConnect(answer, seed: bytes[1])
    }
    return 0
}

runFuzzer(fuzzHTTPResponse)
