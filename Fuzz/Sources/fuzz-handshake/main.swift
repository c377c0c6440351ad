// The client's opening handshake as the daemon runs it (WebSocketClientHandshake: the HTTP head
// parser, the 101 checks, Sec-WebSocket-Accept, subprotocol and permessage-deflate acceptance, a
// refusal's body), then WebSocketProtocol on the bytes that followed the head.
//
// Input: byte 0 picks the offer, byte 1 how the rest is cut into reads, the rest is the server's answer.
//   bits 0-1: 0 no extension, 1 permessage-deflate as the daemon offers it (`server.compression`),
//             2 with both no_context_takeover and both window bits 10, 3 with server_max_window_bits 9
//   bit 2: subprotocols "smartico.v2", "smartico.v1" offered
// The key comes from a generator with seed 1: Sec-WebSocket-Key "wVwCiewtCpFn7I5loY3rvg==", so a
// valid answer carries Sec-WebSocket-Accept "N5nKR3YXrMAhPTm+l7izTUefAAo=" (Fuzz/Corpus/fuzz-handshake).
// Checks: fed whole and in pieces, the same result (the remainder plus the later pieces is the
// same bytes) or an error in both; a 101 re-serialized parses to the same head; the extension and
// subprotocol accepted are among those offered; an unfinished answer fails at the transport's
// end; what follows a 101 goes through the protocol with `.closed` once, last.
import FuzzSupport
// @testable: the client options are made with their internal memberwise initializer.
@testable import Transport

func options(_ flags: UInt8) -> WebSocketClientOptions {
    let deflate: PerMessageDeflateOptions?
    switch flags & 3 {
    case 0: deflate = nil
    case 1: deflate = PerMessageDeflateOptions()
    case 2: deflate = PerMessageDeflateOptions(serverNoContextTakeover: true, clientNoContextTakeover: true,
                                               serverMaxWindowBits: 10, clientMaxWindowBits: 10)
    default: deflate = PerMessageDeflateOptions(serverMaxWindowBits: 9)
    }
    return WebSocketClientOptions(
        host: "api.smartico.example", secure: true, target: "/websocket/services",
        subprotocols: flags & 4 != 0 ? ["smartico.v2", "smartico.v1"] : [],
        headers: ["User-Agent": "smarticod-fuzz"], deflate: deflate)
}

enum Outcome {
    case done(WebSocketClientHandshakeResult, unread: [UInt8])
    case failed(WebSocketHandshakeError)
}

func handshake(_ options: WebSocketClientOptions, _ reads: [[UInt8]]) -> Outcome {
    var h = WebSocketClientHandshake(options: options, random: SeededGenerator(seed: 1))
    for (i, read) in reads.enumerated() {
        do {
            if let result = try h.receive(read) {
                return .done(result, unread: reads[(i + 1)...].flatMap { $0 })
            }
        } catch {
            return .failed(error)
        }
    }
    do {
        try h.transportClosed()
        invariant(false, "transportClosed did not throw")
    } catch {
        return .failed(error)
    }
    return .failed(.connectionClosed(bytesReceived: -1))
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHandshake(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = input(data, size)
    guard bytes.count >= 2 else { return 0 }
    let opts = options(bytes[0])
    let answer = Array(bytes[2...])
    let whole = handshake(opts, [answer])
    if bytes[1] != 0 {
        let split = handshake(opts, pieces(of: answer, seed: bytes[1]))
        switch (whole, split) {
        case let (.done(a, _), .done(b, unread)):
            var b = b
            b.remainder += unread
            invariant(a == b, "whole and in pieces differ: \(a) / \(b)")
        case (.failed, .failed):
            break
        default:
            invariant(false, "whole and in pieces differ: \(whole) / \(split)")
        }
    }
    guard case let .done(result, _) = whole else { return 0 }
    invariant(result.response.status == 101, "a result for status \(result.response.status)")
    var parser = HTTPHeadParser()
    let again = try? parser.parseResponse(result.response.serialized())
    invariant(again == result.response, "the 101 head re-serialized parses as \(String(describing: again))")
    if let d = result.deflate {
        invariant(opts.deflate != nil, "permessage-deflate accepted without an offer")
        invariant((8...15).contains(d.serverMaxWindowBits) && (8...15).contains(d.clientMaxWindowBits), "window bits \(d)")
        if let offered = opts.deflate?.serverMaxWindowBits { invariant(d.serverMaxWindowBits <= offered, "server window \(d)") }
        if opts.deflate?.serverNoContextTakeover == true { invariant(d.serverNoContextTakeover, "no_context_takeover lost \(d)") }
    }
    if let p = result.subprotocol { invariant(opts.subprotocols.contains(p), "subprotocol \(p) not offered") }

    // The daemon's protocol on the bytes after the head.
    let ws = WebSocketProtocol(role: .client, configuration: WebSocketConfiguration(maxMessageSize: 256 << 10, textAsBytes: true),
                               deflate: result.deflate, random: SeededGenerator(seed: 2))
    var events = ws.receive(result.remainder).events
    events += ws.transportClosed().events
    let closes = events.filter { if case .closed = $0 { true } else { false } }.count
    invariant(closes == 1, "`.closed` \(closes) times")
    if case .closed = events.last {} else { invariant(false, "`.closed` not last") }
    return 0
}

runFuzzer(fuzzHandshake)
