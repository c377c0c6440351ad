import SmarticoTestSupport
import Testing
@testable import Transport

/// Seeded random garbage and mutated valid input: every parser must terminate, never crash, and
/// keep memory bounded by its limits.
@Suite struct WebSocketFuzzTests {
    /// Valid traffic with a few bytes flipped.
    func mutated(_ base: [UInt8], _ rng: inout SplitMix64) -> [UInt8] {
        var b = base
        for _ in 0 ..< Int.random(in: 1 ... 4, using: &rng) where !b.isEmpty {
            b[Int.random(in: 0 ..< b.count, using: &rng)] = UInt8.random(in: 0 ... 255, using: &rng)
        }
        return b
    }

    @Test func protocolSurvivesGarbage() throws {
        var rng = SplitMix64(seed: 77)
        let config = WebSocketConfiguration(maxFrameSize: 4096, maxMessageSize: 8192)
        // A valid stream to mutate: fragments, control frames, a compressed message.
        let deflater = MessageDeflater(windowBits: 15, noContextTakeover: false, level: 6, memoryLevel: 8)
        var compressed: [UInt8] = []
        Array("compressed text compressed text".utf8).withUnsafeBytes { deflater.compress($0, into: &compressed) }
        for iteration in 0 ..< 1500 {
            let role: WebSocketRole = iteration % 2 == 0 ? .client : .server
            let c = role == .server
            var valid = peerFrame(1, Array("hé".utf8), fin: false, peerIsClient: c) + peerFrame(9, [1], peerIsClient: c)
            valid += peerFrame(0, Array("llo".utf8), peerIsClient: c) + peerFrame(1, compressed, rsv: 4, peerIsClient: c)
            valid += peerFrame(8, [0x03, 0xE8], peerIsClient: c)
            let input = iteration % 3 == 0 ? rng.bytes(Int.random(in: 0 ... 300, using: &rng)) : mutated(valid, &rng)
            let ws = WebSocketProtocol(role: role, configuration: config, deflate: PerMessageDeflateParameters(), random: SplitMix64(seed: 1))
            var events: [WebSocketEvent] = []
            for piece in randomSplits(input, rng: &rng, maxPiece: 64) {
                let out = ws.receive(piece)
                events += out.events
                // Every failure closes the transport; nothing is larger than the limits.
                if out.failure != nil { #expect(out.actions.contains(.closeTransport)) }
                for e in out.events {
                    if case let .binary(b) = e { #expect(b.count <= 8192) }
                    if case let .text(t) = e { #expect(t.utf8.count <= 8192) }
                }
            }
            _ = ws.transportClosed()
            #expect(ws.state == .closed)
            #expect(events.filter { if case .failed = $0 { return true } else { return false } }.count <= 1)
        }
    }

    @Test func httpParsersSurviveGarbage() throws {
        var rng = SplitMix64(seed: 78)
        let validResponse = Array("HTTP/1.1 403 Forbidden\r\nContent-Length: 5\r\nX: y\r\n\r\nhello".utf8)
        let validChunked = Array("5;x\r\nhello\r\n0\r\nT: 1\r\n\r\n".utf8)
        let validRequest = Array("GET /a?b HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n".utf8)
        for iteration in 0 ..< 1500 {
            let garbage = iteration % 4 == 0
            // Response heads via the client handshake.
            var client = WebSocketClientHandshake(options: .init(host: "h", deflate: PerMessageDeflateOptions()), random: SplitMix64(seed: 1))
            let response = garbage ? rng.bytes(200) : mutated(validResponse, &rng)
            do {
                for piece in randomSplits(response, rng: &rng, maxPiece: 16) { _ = try client.receive(piece) }
                try client.transportClosed()
            } catch {}
            // Requests via the server handshake.
            var server = WebSocketServerHandshake(options: .init(deflate: PerMessageDeflateOptions()))
            let request = garbage ? rng.bytes(200) : mutated(validRequest, &rng)
            do {
                for piece in randomSplits(request, rng: &rng, maxPiece: 16) {
                    if let r = try server.receive(piece) { _ = server.accept(r) }
                }
            } catch {
                _ = WebSocketServerHandshake.rejectionResponse(for: error)
            }
            // Chunked bodies.
            var decoder = HTTPBodyDecoder(framing: .chunked, maxBodySize: 1000)
            var body: [UInt8] = []
            let chunked = garbage ? rng.bytes(100) : mutated(validChunked, &rng)
            do {
                for piece in randomSplits(chunked, rng: &rng, maxPiece: 8) { try piece.withUnsafeBytes { try decoder.decode($0, into: &body) } }
            } catch {}
            #expect(body.count <= 1000)
            // Extension headers.
            _ = try? WebSocketExtensionElement.parseList(String(decoding: garbage ? rng.bytes(40) : mutated(Array("permessage-deflate; a=\"b\", x".utf8), &rng), as: UTF8.self))
        }
    }
}
