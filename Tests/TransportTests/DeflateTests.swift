import SmarticoTestSupport
import Testing
@testable import Transport

private func elements(_ s: String) throws -> [WebSocketExtensionElement] {
    try WebSocketExtensionElement.parseList(s)
}

/// Compressible text: words from a small vocabulary.
private func corpus(_ n: Int, seed: UInt64) -> [UInt8] {
    var rng = SplitMix64(seed: seed)
    let words = ["alpha", "beta", "gamma", "delta", "smartico", "websocket", "frame", "deflate", "window", "context", "ünïcödé", "🙂"]
    var out: [UInt8] = []
    while out.count < n { out += Array((words.randomElement(using: &rng)! + " ").utf8) }
    return out
}

@Suite struct DeflateNegotiationTests {
    @Test func offerStrings() {
        #expect(PerMessageDeflateOptions().offerHeaderValue == "permessage-deflate; client_max_window_bits")
        let o = PerMessageDeflateOptions(serverNoContextTakeover: true, clientNoContextTakeover: true, serverMaxWindowBits: 10, clientMaxWindowBits: 12)
        #expect(o.offerHeaderValue == "permessage-deflate; client_no_context_takeover; server_no_context_takeover; server_max_window_bits=10; client_max_window_bits=12")
    }

    @Test func serverNegotiatesValidOffers() throws {
        let defaults = PerMessageDeflateOptions()
        var p = try #require(PerMessageDeflateParameters.negotiate(offers: elements("permessage-deflate"), options: defaults))
        #expect(p.responseHeaderValue == "permessage-deflate")
        p = try #require(PerMessageDeflateParameters.negotiate(offers: elements("permessage-deflate; client_max_window_bits; server_max_window_bits=\"10\""), options: defaults))
        #expect(p.serverMaxWindowBits == 10 && p.clientMaxWindowBits == 15)
        #expect(p.responseHeaderValue == "permessage-deflate; server_max_window_bits=10")
        // We limit the client only when it offered client_max_window_bits.
        let limiting = PerMessageDeflateOptions(clientNoContextTakeover: true, clientMaxWindowBits: 9)
        p = try #require(PerMessageDeflateParameters.negotiate(offers: elements("permessage-deflate; client_max_window_bits"), options: limiting))
        #expect(p.responseHeaderValue == "permessage-deflate; client_no_context_takeover; client_max_window_bits=9")
        p = try #require(PerMessageDeflateParameters.negotiate(offers: elements("permessage-deflate"), options: limiting))
        #expect(p.clientMaxWindowBits == 15)
        // The first acceptable offer wins; invalid ones are declined, unknown extensions skipped.
        p = try #require(PerMessageDeflateParameters.negotiate(
            offers: elements("x-foo, permessage-deflate; server_max_window_bits=16, permessage-deflate; server_no_context_takeover"), options: defaults))
        #expect(p.serverNoContextTakeover && p.responseHeaderValue == "permessage-deflate; server_no_context_takeover")
        p = try #require(PerMessageDeflateParameters.negotiate(offers: elements("permessage-deflate; server_max_window_bits=8"), options: defaults))
        #expect(p.serverMaxWindowBits == 8)
    }

    @Test func serverDeclinesInvalidOffers() throws {
        for offer in [
            "permessage-deflate; server_max_window_bits=7", "permessage-deflate; server_max_window_bits=16",
            "permessage-deflate; server_max_window_bits", "permessage-deflate; server_max_window_bits=010",
            "permessage-deflate; client_max_window_bits=abc", "permessage-deflate; server_no_context_takeover=1",
            "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
            "permessage-deflate; unknown_param", "x-webkit-deflate-frame",
        ] {
            #expect(PerMessageDeflateParameters.negotiate(offers: try elements(offer), options: PerMessageDeflateOptions()) == nil, "\(offer)")
        }
    }

    @Test func clientAcceptsValidResponses() throws {
        let offer = PerMessageDeflateOptions(serverMaxWindowBits: 12)
        let p = try #require(try PerMessageDeflateParameters.accept(
            response: elements("permessage-deflate; server_max_window_bits=10; client_max_window_bits=9; server_no_context_takeover"), offered: offer))
        #expect(p.serverMaxWindowBits == 10 && p.clientMaxWindowBits == 9 && p.serverNoContextTakeover && !p.clientNoContextTakeover)
        #expect(try PerMessageDeflateParameters.accept(response: [], offered: offer) == nil)
    }

    @Test func clientRejectsInvalidResponses() throws {
        let offer = PerMessageDeflateOptions(serverNoContextTakeover: false, serverMaxWindowBits: 12, clientMaxWindowBits: 10)
        let cases: [(String, PerMessageDeflateError)] = [
            ("permessage-deflate; server_max_window_bits=13", .windowLargerThanOffered(name: "server_max_window_bits", offered: 12, received: 13)),
            ("permessage-deflate", .missingParameter("server_max_window_bits")),
            ("permessage-deflate; server_max_window_bits=12; client_max_window_bits=11", .windowLargerThanOffered(name: "client_max_window_bits", offered: 10, received: 11)),
            ("permessage-deflate; server_max_window_bits=12; client_max_window_bits", .invalidParameterValue(name: "client_max_window_bits", value: nil)),
            ("permessage-deflate; server_max_window_bits=12; foo", .unknownParameter("foo")),
            ("permessage-deflate; server_max_window_bits=12; server_max_window_bits=12", .duplicateParameter("server_max_window_bits")),
            ("x-other", .notOffered("x-other")),
            ("permessage-deflate; server_max_window_bits=12, permessage-deflate; server_max_window_bits=12", .tooManyExtensions(["permessage-deflate", "permessage-deflate"])),
        ]
        for (response, expected) in cases {
            #expect(throws: expected, "\(response)") { try PerMessageDeflateParameters.accept(response: try elements(response), offered: offer) }
        }
        let wantsReset = PerMessageDeflateOptions(serverNoContextTakeover: true)
        #expect(throws: PerMessageDeflateError.missingParameter("server_no_context_takeover")) {
            try PerMessageDeflateParameters.accept(response: try elements("permessage-deflate"), offered: wantsReset)
        }
    }

    @Test func extensionHeaderSyntax() throws {
        let e = try elements("foo; a=1; b=\"x y\" , bar ,permessage-deflate;c")
        #expect(e.map(\.name) == ["foo", "bar", "permessage-deflate"])
        #expect(e[0].parameters == [.init("a", "1"), .init("b", "x y")])
        #expect(e[2].parameters == [.init("c")])
        #expect(throws: WebSocketExtensionParseError.self) { try elements("foo; =1") }
        #expect(throws: WebSocketExtensionParseError.self) { try elements("foo; a=\"unterminated") }
        #expect(throws: WebSocketExtensionParseError.self) { try elements("foo bar") }
    }
}

@Suite struct DeflateCodecTests {
    func pair(_ params: PerMessageDeflateParameters, config: WebSocketConfiguration = WebSocketConfiguration()) -> (WebSocketProtocol, WebSocketProtocol) {
        (WebSocketProtocol(role: .client, configuration: config, deflate: params, random: SplitMix64(seed: 5)),
         WebSocketProtocol(role: .server, configuration: config, deflate: params))
    }

    /// Sends `messages` from `a` to `b`; returns the wire size of each.
    func exchange(_ a: WebSocketProtocol, _ b: WebSocketProtocol, _ messages: [[UInt8]], text: Bool = false) throws -> [Int] {
        var sizes: [Int] = []
        for m in messages {
            let out = text ? try a.send(text: String(decoding: m, as: UTF8.self)) : try a.send(binary: m)
            var parser = WebSocketFrameParser(role: a.role == .client ? .server : .client, maxFrameSize: 1 << 24, maxMessageSize: 1 << 24, allowedRSV: 4)
            let frames = try parseFrames(&parser, [out.outbound])
            #expect(frames.first?.header.rsv1 == true)  // compressed
            sizes.append(frames.reduce(0) { $0 + $1.payload.count })
            let got = b.receive(out.outbound)
            #expect(got.events == [text ? .text(String(decoding: m, as: UTF8.self)) : .binary(m)])
        }
        return sizes
    }

    @Test func roundTripWithContextTakeover() throws {
        let (c, s) = pair(PerMessageDeflateParameters())
        let m = corpus(5000, seed: 1)
        let up = try exchange(c, s, [m, m, m], text: true)
        #expect(up[0] < m.count / 2)
        #expect(up[1] < up[0] / 4)  // the second copy is a back-reference into the kept window
        let down = try exchange(s, c, [m, m])
        #expect(down[1] < down[0] / 4)
    }

    @Test func roundTripWithoutContextTakeover() throws {
        let (c, s) = pair(PerMessageDeflateParameters(serverNoContextTakeover: true, clientNoContextTakeover: true))
        let m = corpus(5000, seed: 2)
        let up = try exchange(c, s, [m, m, m])
        #expect(up[0] == up[1] && up[1] == up[2])
        let down = try exchange(s, c, [m, m])
        #expect(down[0] == down[1])
        // Mixed: only the client resets.
        let (c2, s2) = pair(PerMessageDeflateParameters(clientNoContextTakeover: true))
        let up2 = try exchange(c2, s2, [m, m])
        #expect(up2[0] == up2[1])
        let down2 = try exchange(s2, c2, [m, m])
        #expect(down2[1] < down2[0] / 4)
    }

    @Test(arguments: Array(8 ... 15))
    func everyWindowSize(bits: Int) throws {
        let params = PerMessageDeflateParameters(serverMaxWindowBits: bits, clientMaxWindowBits: bits)
        let (c, s) = pair(params)
        var rng = SplitMix64(seed: UInt64(bits))
        // Repeats at distances around the window size, plus random noise.
        var m = corpus(20_000, seed: UInt64(bits))
        let block = rng.bytes(300)
        for _ in 0 ..< 20 { m += block + rng.bytes(Int.random(in: 0 ... 600, using: &rng)) }
        _ = try exchange(c, s, [m, m, Array(m.reversed())])
        _ = try exchange(s, c, [m, Array(m.reversed()), m])
        // The raw codec: a window of 8 compresses with 9, whose output a 2^8 inflater accepts.
        let deflater = MessageDeflater(windowBits: bits, noContextTakeover: false, level: 9, memoryLevel: 9)
        let inflater = MessageInflater(windowBits: bits, noContextTakeover: false)
        for _ in 0 ..< 3 {
            var compressed: [UInt8] = []
            m.withUnsafeBytes { deflater.compress($0, into: &compressed) }
            var back: [UInt8] = []
            try compressed.withUnsafeBytes { raw in try inflater.inflate(raw, limit: 1 << 24, into: &back) }
            try inflater.finish(limit: 1 << 24, into: &back)
            #expect(back == m)
        }
    }

    @Test func emptyMessages() throws {
        let (c, s) = pair(PerMessageDeflateParameters())
        _ = try exchange(c, s, [[], [1], []])
        _ = try exchange(s, c, [[], []], text: true)
    }

    @Test func decompressionBombIsCapped() throws {
        let limit = 1 << 20
        let config = WebSocketConfiguration(maxMessageSize: limit)
        let deflater = MessageDeflater(windowBits: 15, noContextTakeover: false, level: 9, memoryLevel: 9)
        let zeros = [UInt8](repeating: 0, count: 64 << 20)  // 64 MiB of zeros → ~64 KiB compressed
        var compressed: [UInt8] = []
        zeros.withUnsafeBytes { deflater.compress($0, into: &compressed) }
        #expect(compressed.count < 100_000)
        for role in [WebSocketRole.client, .server] {
            let ws = WebSocketProtocol(role: role, configuration: config, deflate: PerMessageDeflateParameters())
            let frame = peerFrame(2, compressed, rsv: 4, peerIsClient: role == .server)
            let out = ws.receive(frame)
            // Inflation stopped at the first byte past the cap.
            #expect(out.failure == .messageTooLarge(size: limit + 1, limit: limit, at: .init(frame: 1, frameOffset: 0)))
            #expect(out.failure?.closeCode == .messageTooBig)
            #expect(out.actions == [.closeTransport])
        }
    }

    @Test func compressedTextAsBytesWithContextTakeover() throws {
        let messages = [corpus(10_000, seed: 4), corpus(300, seed: 5), corpus(10_000, seed: 4)]
        for role in [WebSocketRole.client, .server] {
            let c = role == .server
            let deflater = MessageDeflater(windowBits: 15, noContextTakeover: false, level: 6, memoryLevel: 8)
            var wire: [UInt8] = []
            for m in messages {
                var compressed: [UInt8] = []
                m.withUnsafeBytes { deflater.compress($0, into: &compressed) }
                wire += peerFrame(1, compressed, rsv: 4, peerIsClient: c)
            }
            let ws = WebSocketProtocol(role: role, configuration: WebSocketConfiguration(textAsBytes: true),
                                       deflate: PerMessageDeflateParameters(), random: SplitMix64(seed: 1))
            let out = ws.receive(wire)
            #expect(out.failure == nil)
            // The third message is mostly a back-reference into the first one's window.
            #expect(out.events == messages.map { .textBytes($0) })
        }
    }

    @Test func peerCompressedInOnePieceSentInFragments() throws {
        let message = corpus(10_000, seed: 3)
        let deflater = MessageDeflater(windowBits: 15, noContextTakeover: false, level: 6, memoryLevel: 8)
        var compressed: [UInt8] = []
        message.withUnsafeBytes { deflater.compress($0, into: &compressed) }
        for role in [WebSocketRole.client, .server] {
            let c = role == .server
            let ws = WebSocketProtocol(role: role, deflate: PerMessageDeflateParameters(), random: SplitMix64(seed: 1))
            var rng = SplitMix64(seed: 8)
            let pieces = randomSplits(compressed, rng: &rng, maxPiece: 500)
            var wire: [UInt8] = []
            for (i, piece) in pieces.enumerated() {
                wire += peerFrame(i == 0 ? 1 : 0, piece, fin: i == pieces.count - 1, rsv: i == 0 ? 4 : 0, peerIsClient: c)
                if i == 1 { wire += peerFrame(9, [7], peerIsClient: c) }  // a ping in between
            }
            let out = ws.receive(wire)
            #expect(out.events == [.ping([7]), .text(String(decoding: message, as: UTF8.self))])
            // And byte by byte.
            let ws2 = WebSocketProtocol(role: role, deflate: PerMessageDeflateParameters(), random: SplitMix64(seed: 1))
            var events: [WebSocketEvent] = []
            for b in wire { events += ws2.receive([b]).events }
            #expect(events == out.events)
        }
    }

    @Test func corruptCompressedDataFails() throws {
        let ws = WebSocketProtocol(role: .client, deflate: PerMessageDeflateParameters(), random: SplitMix64(seed: 1))
        // 0xFF: a final block of type 3, which does not exist.
        let out = ws.receive(peerFrame(2, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF], rsv: 4, peerIsClient: false))
        #expect(out.failure == .inflateFailed(reason: "invalid block type", at: .init(frame: 1, frameOffset: 0)))
        #expect(out.failure?.closeCode == .invalidPayloadData)
        #expect(out.events.last == .closed(code: .invalidPayloadData, reason: WebSocketProtocol.shortReason(out.failure!)))
    }

    /// A message cut off inside a block (its tail is read as more of the block) fails with 1007;
    /// it is not carried on into the next message.
    @Test func aMessageEndingInsideABlockFails() throws {
        let deflater = MessageDeflater(windowBits: 15, noContextTakeover: false, level: 6, memoryLevel: 8)
        var compressed: [UInt8] = []
        corpus(10_000, seed: 9).withUnsafeBytes { deflater.compress($0, into: &compressed) }
        let ws = WebSocketProtocol(role: .client, deflate: PerMessageDeflateParameters(), random: SplitMix64(seed: 1))
        let out = ws.receive(peerFrame(2, Array(compressed.prefix(compressed.count / 2)), rsv: 4, peerIsClient: false))
        guard case .inflateFailed = out.failure else { Issue.record("expected inflateFailed, got \(String(describing: out.failure))"); return }
        #expect(out.failure?.closeCode == .invalidPayloadData)
    }

    /// A message whose compressed bytes pass `maxMessageSize * 1.25 + 1 KiB` (more than DEFLATE
    /// needs for any message within the limit) is refused with 1009 as they arrive, although
    /// they inflate to nothing: empty stored blocks, then the header of the one whose `00 00 FF FF`
    /// the sender stripped.
    @Test func compressedBytesPastTheirBoundFailWith1009() throws {
        let limit = 1_000
        #expect(MessageInflater.compressedLimit(limit) == 2_274)
        func emptyBlocks(_ n: Int) -> [UInt8] { Array([[UInt8]](repeating: [0x00, 0x00, 0x00, 0xFF, 0xFF], count: n).joined()) + [0x00] }
        let ws = WebSocketProtocol(role: .client, configuration: WebSocketConfiguration(maxMessageSize: limit),
                                   deflate: PerMessageDeflateParameters(), random: SplitMix64(seed: 1))
        let out = ws.receive(peerFrame(2, emptyBlocks(600), rsv: 4, peerIsClient: false))
        #expect(out.failure == .messageTooLarge(size: 3_001, limit: limit, at: .init(frame: 1, frameOffset: 0)))
        #expect(out.failure?.closeCode == .messageTooBig)
        // Within the bound, the same blocks are an empty message.
        let fine = WebSocketProtocol(role: .client, configuration: WebSocketConfiguration(maxMessageSize: limit),
                                     deflate: PerMessageDeflateParameters(), random: SplitMix64(seed: 1))
        #expect(fine.receive(peerFrame(2, emptyBlocks(400), rsv: 4, peerIsClient: false)).events == [.binary([])])
    }

    /// The inflater alone: output stops one byte past the limit however much more the input holds
    /// (64 MiB of zeros against a 64 KiB limit), and the next message starts afresh.
    @Test func inflationStopsOneBytePastTheLimit() throws {
        let deflater = MessageDeflater(windowBits: 15, noContextTakeover: false, level: 9, memoryLevel: 9)
        var bomb: [UInt8] = []
        [UInt8](repeating: 0, count: 64 << 20).withUnsafeBytes { deflater.compress($0, into: &bomb) }
        let inflater = MessageInflater(windowBits: 15, noContextTakeover: false)
        var out: [UInt8] = []
        #expect(throws: InflateFailure.tooLarge(produced: 65_537)) {
            try bomb.withUnsafeBytes { try inflater.inflate($0, limit: 65_536, into: &out) }
        }
        #expect(out.count == 65_537)
        let fresh = MessageDeflater(windowBits: 15, noContextTakeover: false, level: 6, memoryLevel: 8)
        var small: [UInt8] = []
        Array("after the bomb".utf8).withUnsafeBytes { fresh.compress($0, into: &small) }
        var back: [UInt8] = []
        try small.withUnsafeBytes { try inflater.inflate($0, limit: 65_536, into: &back) }
        try inflater.finish(limit: 65_536, into: &back)
        #expect(back == Array("after the bomb".utf8))
    }

    /// Context takeover: a second message that refers back into the first inflates only with the
    /// window kept; an inflater that resets per message (`no_context_takeover` negotiated for the
    /// peer) refuses it, since the peer promised not to refer back.
    @Test func contextTakeoverKeepsTheWindowAndNoContextTakeoverResetsIt() throws {
        let message = corpus(3_000, seed: 12)
        let deflater = MessageDeflater(windowBits: 15, noContextTakeover: false, level: 6, memoryLevel: 8)
        var first: [UInt8] = [], second: [UInt8] = []
        message.withUnsafeBytes { deflater.compress($0, into: &first) }
        message.withUnsafeBytes { deflater.compress($0, into: &second) }
        #expect(second.count < first.count / 4)
        for reset in [false, true] {
            let inflater = MessageInflater(windowBits: 15, noContextTakeover: reset)
            var a: [UInt8] = [], b: [UInt8] = []
            try first.withUnsafeBytes { try inflater.inflate($0, limit: 1 << 20, into: &a) }
            try inflater.finish(limit: 1 << 20, into: &a)
            #expect(a == message)
            if reset {
                #expect(throws: InflateFailure.invalidData("invalid distance too far back")) {
                    try second.withUnsafeBytes { try inflater.inflate($0, limit: 1 << 20, into: &b) }
                    try inflater.finish(limit: 1 << 20, into: &b)
                }
            } else {
                try second.withUnsafeBytes { try inflater.inflate($0, limit: 1 << 20, into: &b) }
                try inflater.finish(limit: 1 << 20, into: &b)
                #expect(b == message)
            }
        }
    }

    @Test func compressedInvalidUTF8FailsWith1007() throws {
        let deflater = MessageDeflater(windowBits: 15, noContextTakeover: false, level: 6, memoryLevel: 8)
        var compressed: [UInt8] = []
        ([0x41, 0x42, 0xED, 0xA0, 0x80] as [UInt8]).withUnsafeBytes { deflater.compress($0, into: &compressed) }
        let ws = WebSocketProtocol(role: .client, deflate: PerMessageDeflateParameters(), random: SplitMix64(seed: 1))
        let out = ws.receive(peerFrame(1, compressed, rsv: 4, peerIsClient: false))
        #expect(out.failure == .invalidUTF8InText(messageOffset: 3, at: .init(frame: 1, frameOffset: 0)))
    }

    @Test func compressionThresholdSendsSmallMessagesPlain() throws {
        let config = WebSocketConfiguration(compressionThreshold: 100)
        let (c, s) = pair(PerMessageDeflateParameters(), config: config)
        let small = try c.send(binary: [1, 2, 3])
        #expect(small.outbound[0] & 0x40 == 0)
        #expect(s.receive(small.outbound).events == [.binary([1, 2, 3])])
    }
}
