import SmarticoTestSupport
import Testing
@testable import Transport

/// Sends the peer's bytes into `ws` and returns the output.
private func feed(_ ws: WebSocketProtocol, _ bytes: [UInt8], split: Bool = false) -> WebSocketOutput {
    if !split { return ws.receive(bytes) }
    var all = WebSocketOutput()
    for b in bytes {
        let o = ws.receive([b])
        all.events += o.events
        all.outbound += o.outbound
        all.actions += o.actions
    }
    return all
}

/// Parses what `ws` wrote (as the peer would).
private func written(_ out: WebSocketOutput, by role: WebSocketRole) throws -> [ParsedFrame] {
    var parser = WebSocketFrameParser(role: role == .client ? .server : .client, maxFrameSize: 1 << 24, maxMessageSize: 1 << 24, allowedRSV: 4)
    return try parseFrames(&parser, [out.outbound])
}

private func closeFrame(_ code: UInt16, _ reason: [UInt8] = [], peerIsClient: Bool) -> [UInt8] {
    peerFrame(8, [UInt8(code >> 8), UInt8(code & 0xFF)] + reason, peerIsClient: peerIsClient)
}

@Suite struct WebSocketProtocolTests {
    /// Runs a bad peer against both roles: the connection fails with `code`, a Close frame with
    /// that code is written, the transport is closed, and nothing crashes.
    func expectFailure(_ frames: (Bool) -> [UInt8], code: WebSocketCloseCode, deflate: PerMessageDeflateParameters? = nil,
                       configuration: WebSocketConfiguration = WebSocketConfiguration(), sourceLocation: SourceLocation = #_sourceLocation) throws -> WebSocketError? {
        var error: WebSocketError?
        for role in [WebSocketRole.client, .server] {
            for split in [false, true] {
                let ws = WebSocketProtocol(role: role, configuration: configuration, deflate: deflate, random: SplitMix64(seed: 9))
                let out = feed(ws, frames(role == .server), split: split)
                let failure = try #require(out.failure, "no failure for \(role)", sourceLocation: sourceLocation)
                #expect(failure.closeCode == code, "\(failure)", sourceLocation: sourceLocation)
                #expect(out.actions.contains(.closeTransport), sourceLocation: sourceLocation)
                #expect(out.events.last == .closed(code: code, reason: WebSocketProtocol.shortReason(failure)), sourceLocation: sourceLocation)
                let sent = try written(out, by: role)
                #expect(sent.last?.header.opcode == .close, sourceLocation: sourceLocation)
                #expect(sent.last.map { Array($0.payload.prefix(2)) } == [UInt8(code.rawValue >> 8), UInt8(code.rawValue & 0xFF)], sourceLocation: sourceLocation)
                #expect(ws.state == .closed, sourceLocation: sourceLocation)
                // Anything after the failure is ignored.
                #expect(ws.receive(peerFrame(1, Array("x".utf8), peerIsClient: role == .server)).events.isEmpty, sourceLocation: sourceLocation)
                error = failure
            }
        }
        return error
    }

    @Test func textAsBytesDeliversEachTextMessageAsItsOwnBytes() throws {
        for role in [WebSocketRole.client, .server] {
            let c = role == .server
            let ws = WebSocketProtocol(role: role, configuration: WebSocketConfiguration(textAsBytes: true), random: SplitMix64(seed: 1))
            var bytes = peerFrame(1, Array("Hel".utf8), fin: false, peerIsClient: c)
            bytes += peerFrame(9, [1, 2, 3], peerIsClient: c)
            bytes += peerFrame(0, Array("lo wörld".utf8), peerIsClient: c)
            bytes += peerFrame(1, Array("second".utf8), peerIsClient: c)
            bytes += peerFrame(2, [0, 255], peerIsClient: c)
            bytes += peerFrame(1, [], peerIsClient: c)
            for split in [false, true] {
                let out = feed(ws, bytes, split: split)
                // The first message's bytes are not touched by the ones after it (the buffer went with the event).
                #expect(out.events == [.ping([1, 2, 3]), .textBytes(Array("Hello wörld".utf8)), .textBytes(Array("second".utf8)),
                                       .binary([0, 255]), .textBytes([])])
            }
            // Still validated: bad UTF-8 fails the connection as it does for `.text`.
            let bad = WebSocketProtocol(role: role, configuration: WebSocketConfiguration(textAsBytes: true), random: SplitMix64(seed: 1))
            let out = bad.receive(peerFrame(1, [0x61, 0xC3, 0x28], peerIsClient: c))
            #expect(out.events.contains { if case .textBytes = $0 { true } else { false } } == false)
            guard case .invalidUTF8InText? = out.failure else {
                Issue.record("expected invalidUTF8InText, got \(String(describing: out.failure))")
                continue
            }
        }
    }

    @Test func textBinaryAndInterleavedControlFrames() throws {
        for role in [WebSocketRole.client, .server] {
            let c = role == .server
            let ws = WebSocketProtocol(role: role, random: SplitMix64(seed: 1))
            var bytes = peerFrame(1, Array("Hel".utf8), fin: false, peerIsClient: c)
            bytes += peerFrame(9, [1, 2, 3], peerIsClient: c)
            bytes += peerFrame(0, Array("lo ".utf8), fin: false, peerIsClient: c)
            bytes += peerFrame(10, [4], peerIsClient: c)
            bytes += peerFrame(0, Array("wörld".utf8), peerIsClient: c)
            bytes += peerFrame(2, [0, 255], peerIsClient: c)
            bytes += peerFrame(2, [], peerIsClient: c)
            for split in [false, true] {
                let out = feed(ws, bytes, split: split)
                #expect(out.events == [.ping([1, 2, 3]), .pong([4]), .text("Hello wörld"), .binary([0, 255]), .binary([])])
                let sent = try written(out, by: role)
                #expect(sent.map(\.header.opcode) == [.pong])
                #expect(sent.first?.payload == [1, 2, 3])
                #expect(sent.first?.header.maskKey != nil || role == .server)
            }
        }
    }

    @Test func sendingFramesAndFragments() throws {
        let config = WebSocketConfiguration(outboundFragmentSize: 4)
        let ws = WebSocketProtocol(role: .client, configuration: config, random: SplitMix64(seed: 1))
        let out = try ws.send(text: "0123456789")
        let frames = try written(out, by: .client)
        #expect(frames.map(\.payload.count) == [4, 4, 2])
        #expect(frames.map(\.header.opcode) == [.text, .continuation, .continuation])
        #expect(Set(frames.compactMap(\.header.maskKey)).count == 3)  // a fresh key per frame
        // The server side reassembles them.
        let server = WebSocketProtocol(role: .server)
        #expect(server.receive(out.outbound).events == [.text("0123456789")])
        let b = try server.send(binary: [1, 2, 3])
        #expect(try written(b, by: .server).first?.header.maskKey == nil)
        #expect(ws.receive(b.outbound).events == [.binary([1, 2, 3])])
        #expect(throws: WebSocketSendError.controlPayloadTooLong(length: 126)) { try ws.ping([UInt8](repeating: 0, count: 126)) }
    }

    @Test func closeInitiatedByPeerServerRole() throws {
        let ws = WebSocketProtocol(role: .server)
        let out = ws.receive(closeFrame(1001, Array("bye".utf8), peerIsClient: true))
        #expect(out.events == [.closing(code: .goingAway, reason: "bye"), .closed(code: .goingAway, reason: "bye")])
        #expect(out.actions == [.closeTransport])  // the server closes TCP first
        let sent = try written(out, by: .server)
        #expect(sent.map(\.header.opcode) == [.close])
        #expect(sent.first?.payload == [0x03, 0xE9])  // the code is echoed
        #expect(throws: WebSocketSendError.notOpen) { try ws.send(text: "late") }
    }

    @Test func closeInitiatedByPeerClientRoleWaitsForServer() throws {
        let ws = WebSocketProtocol(role: .client, configuration: WebSocketConfiguration(closeTimeout: .seconds(3)), random: SplitMix64(seed: 2))
        let out = ws.receive(closeFrame(1000, peerIsClient: false))
        #expect(out.events == [.closing(code: .normalClosure, reason: "")])
        #expect(out.actions == [.startCloseTimer(.seconds(3))])
        #expect(try written(out, by: .client).first?.payload == [0x03, 0xE8])
        #expect(ws.state == .awaitingTransportClose)
        #expect(ws.transportClosed().events == [.closed(code: .normalClosure, reason: "")])
        #expect(ws.transportClosed().events.isEmpty)
    }

    @Test func clientTimesOutWaitingForServerToCloseTCP() {
        let ws = WebSocketProtocol(role: .client, random: SplitMix64(seed: 2))
        _ = ws.receive(closeFrame(4000, peerIsClient: false))
        let out = ws.closeTimeoutElapsed()
        #expect(out.actions == [.closeTransport])
        #expect(out.events == [.closed(code: WebSocketCloseCode(4000), reason: "")])
    }

    @Test func closeInitiatedByUs() throws {
        for role in [WebSocketRole.client, .server] {
            let ws = WebSocketProtocol(role: role, random: SplitMix64(seed: 3))
            let out = try ws.close(code: .normalClosure, reason: "done")
            #expect(out.actions == [.startCloseTimer(.seconds(5))])
            #expect(try written(out, by: role).first?.payload == [0x03, 0xE8] + Array("done".utf8))
            // Data after our Close is ignored; a ping is not answered.
            let c = role == .server
            let ignored = ws.receive(peerFrame(1, Array("ignored".utf8), peerIsClient: c) + peerFrame(9, [], peerIsClient: c))
            #expect(ignored.events == [.ping([])])
            #expect(ignored.outbound.isEmpty)
            let reply = ws.receive(closeFrame(1000, peerIsClient: c))
            #expect(reply.outbound.isEmpty)  // no second Close
            if role == .server {
                #expect(reply.actions == [.closeTransport])
                #expect(reply.events == [.closing(code: .normalClosure, reason: ""), .closed(code: .normalClosure, reason: "")])
            } else {
                #expect(reply.actions.isEmpty)  // the timer from close() keeps running
                #expect(reply.events == [.closing(code: .normalClosure, reason: "")])
                #expect(ws.transportClosed().events == [.closed(code: .normalClosure, reason: "")])
            }
        }
    }

    @Test func closeWithoutReplyTimesOut() throws {
        let ws = WebSocketProtocol(role: .server)
        _ = try ws.close()
        let out = ws.closeTimeoutElapsed()
        #expect(out.events == [.closed(code: .abnormalClosure, reason: "")])
        #expect(out.actions == [.closeTransport])
    }

    @Test func emptyCloseIsAnsweredWithEmptyClose() throws {
        let ws = WebSocketProtocol(role: .server)
        let out = ws.receive(peerFrame(8, [], peerIsClient: true))
        #expect(out.events.first == .closing(code: .noStatusReceived, reason: ""))
        #expect(try written(out, by: .server).first?.payload == [])
    }

    @Test func transportLostIsAbnormal() {
        let ws = WebSocketProtocol(role: .client)
        #expect(ws.transportClosed().events == [.closed(code: .abnormalClosure, reason: "")])
    }

    @Test func validCloseCodesAreAccepted() {
        for code: UInt16 in [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999] {
            let ws = WebSocketProtocol(role: .server)
            let out = ws.receive(closeFrame(code, peerIsClient: true))
            #expect(out.failure == nil, "code \(code)")
            #expect(out.events.first == .closing(code: WebSocketCloseCode(code), reason: ""))
        }
    }

    // MARK: bad peers

    @Test func maskedFrameFromServer() throws {
        let ws = WebSocketProtocol(role: .client, random: SplitMix64(seed: 1))
        let out = ws.receive(peerFrame(1, Array("hi".utf8), peerIsClient: true))
        #expect(out.failure == .maskedFrameFromServer(at: .init(frame: 1, frameOffset: 0)))
        #expect(out.failure?.closeCode == .protocolError)
        let unmasked = WebSocketProtocol(role: .server).receive(peerFrame(1, Array("hi".utf8), peerIsClient: false))
        #expect(unmasked.failure == .unmaskedFrameFromClient(at: .init(frame: 1, frameOffset: 0)))
    }

    @Test func rsvBitsWithoutExtension() throws {
        _ = try expectFailure({ peerFrame(1, Array("x".utf8), rsv: 4, peerIsClient: $0) }, code: .protocolError)
        _ = try expectFailure({ peerFrame(2, [1], rsv: 1, peerIsClient: $0) }, code: .protocolError)
    }

    @Test(arguments: [3, 4, 5, 6, 7, 11, 12, 13, 14, 15] as [UInt8])
    func reservedOpcode(op: UInt8) throws {
        let e = try expectFailure({ peerFrame(op, [], peerIsClient: $0) }, code: .protocolError)
        #expect(e == .reservedOpcode(op, at: .init(frame: 1, frameOffset: 0)))
    }

    @Test func fragmentedControlFrame() throws {
        _ = try expectFailure({ peerFrame(9, [1], fin: false, peerIsClient: $0) }, code: .protocolError)
    }

    @Test func pingOf126Bytes() throws {
        let e = try expectFailure({ peerFrame(9, [UInt8](repeating: 7, count: 126), peerIsClient: $0) }, code: .protocolError)
        #expect(e == .controlFrameTooLong(opcode: 9, length: 126, at: .init(frame: 1, frameOffset: 0)))
    }

    @Test func frameAnnouncing2To63Bytes() throws {
        let e = try expectFailure({ c in c ? [0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4] : [0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0] }, code: .protocolError)
        #expect(e == .lengthHighBitSet(at: .init(frame: 1, frameOffset: 0)))
    }

    @Test func continuationWithNoMessage() throws {
        _ = try expectFailure({ peerFrame(0, Array("x".utf8), peerIsClient: $0) }, code: .protocolError)
    }

    @Test func newDataFrameInsideFragmentedMessage() throws {
        let e = try expectFailure({ peerFrame(1, Array("a".utf8), fin: false, peerIsClient: $0) + peerFrame(2, [1], peerIsClient: $0) }, code: .protocolError)
        #expect(e == .expectedContinuation(opcode: 2, at: .init(frame: 2, frameOffset: 7)))
    }

    @Test func invalidUTF8Whole() throws {
        let e = try expectFailure({ peerFrame(1, [0x41, 0xC0, 0x80], peerIsClient: $0) }, code: .invalidPayloadData)
        #expect(e == .invalidUTF8InText(messageOffset: 1, at: .init(frame: 1, frameOffset: 0)))
    }

    @Test func invalidUTF8SplitAcrossFragments() throws {
        // 𝄞 is F0 9D 84 9E; cut after F0 9D and continue with a non-continuation byte.
        let e = try expectFailure({ peerFrame(1, [0x41, 0xF0, 0x9D], fin: false, peerIsClient: $0) + peerFrame(0, [0x41], peerIsClient: $0) }, code: .invalidPayloadData)
        #expect(e == .invalidUTF8InText(messageOffset: 3, at: .init(frame: 2, frameOffset: 9)))
        // Truncated at the end of the message.
        _ = try expectFailure({ peerFrame(1, [0x41, 0xF0], fin: false, peerIsClient: $0) + peerFrame(0, [0x9D], peerIsClient: $0) }, code: .invalidPayloadData)
    }

    @Test func invalidUTF8FailsFastBeforeTheMessageEnds() throws {
        for role in [WebSocketRole.client, .server] {
            let c = role == .server
            let ws = WebSocketProtocol(role: role, random: SplitMix64(seed: 4))
            // First fragment is fine; the second has a surrogate; no FIN ever arrives.
            #expect(ws.receive(peerFrame(1, Array("fine".utf8), fin: false, peerIsClient: c)).events.isEmpty)
            var second = peerFrame(0, [0x41, 0xED, 0xA0, 0x80] + [UInt8](repeating: 0x41, count: 100), fin: false, peerIsClient: c)
            // Deliver only the header and the first 3 payload bytes: the failure comes at the A0 byte.
            let headerLength = c ? 6 : 2
            second = Array(second.prefix(headerLength + 3))
            let out = ws.receive(second)
            #expect(out.failure == .invalidUTF8InText(messageOffset: 6, at: .init(frame: 2, frameOffset: c ? 10 : 6)))
        }
    }

    @Test func closeCodesThatAreNotAllowed() throws {
        for code: UInt16 in [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535] {
            let e = try expectFailure({ closeFrame(code, peerIsClient: $0) }, code: .protocolError)
            #expect(e == .invalidCloseCode(code, at: .init(frame: 1, frameOffset: 0)))
        }
    }

    @Test func onePayloadByteClose() throws {
        let e = try expectFailure({ peerFrame(8, [0x03], peerIsClient: $0) }, code: .protocolError)
        #expect(e == .closePayloadTooShort(at: .init(frame: 1, frameOffset: 0)))
    }

    @Test func closeReasonNotUTF8() throws {
        _ = try expectFailure({ closeFrame(1000, [0xFF], peerIsClient: $0) }, code: .invalidPayloadData)
    }

    @Test func messageTooBig() throws {
        let config = WebSocketConfiguration(maxFrameSize: 100, maxMessageSize: 150)
        _ = try expectFailure({ peerFrame(2, [UInt8](repeating: 0, count: 101), peerIsClient: $0) }, code: .messageTooBig, configuration: config)
        _ = try expectFailure({ peerFrame(2, [UInt8](repeating: 0, count: 100), fin: false, peerIsClient: $0) + peerFrame(0, [UInt8](repeating: 0, count: 51), peerIsClient: $0) },
                              code: .messageTooBig, configuration: config)
    }

    @Test func errorsExplainThemselves() {
        let e = WebSocketError.invalidCloseCode(1005, at: .init(frame: 3, frameOffset: 120))
        #expect(e.description.contains("1005"))
        #expect(e.description.contains("frame #3"))
        #expect(e.description.contains("offset 120"))
    }

    /// Found by fuzz-frames (kept as Fuzz/Corpus/fuzz-frames/regression-window-beyond-negotiated):
    /// a client that negotiated client_max_window_bits=8 and client_no_context_takeover, whose
    /// message refers back further than 256 bytes. Inflated with the negotiated 256-byte window the
    /// message passed when it came in one read and failed (1007, "invalid distance too far back")
    /// when it came in several, since zlib lets a distance reach into what it wrote in the same
    /// call. The fuzzer's input: byte 0 the setting (server, permessage-deflate, client no context
    /// takeover, window 8), byte 1 how it was cut, then the client's masked frames.
    @Test func aCompressedMessageIsTakenTheSameHoweverTheReadsCutIt() throws {
        let hex = [
            "0bf3419e37fa213ddb6a6ab7f4ca3179d8284af47f94dca14436fff565c102b508d2531daf2680fe00c937fa213d4a6e",
            "682b6936243b851087971ea4f6330365dca411606a820100000051ee0027fcd395b71c58a032348f1d9d59c1536bd612",
            "a0bc38dffc6f8e85fc6ab5e92b4b7b8027885faa3ad6a7bb7fabe501471badf9dca71f7f500c08f5eed34223d366e4b4",
            "c07c8d03bd417e305d0d3cb7caf820109ef64353dd70e43a609063938fb9a53bcb8ea85451e728f6ffbc54a4c32b693a",
            "d4b8c76673eb9a2e1a548717058b61c1f53181ad1e4c63e42d4cd7b882dc1de2e686b7d7367cf13bb3e8edc359d1a898",
            "1ef8c951434237",
        ].joined()
        var input: [UInt8] = []
        var i = hex.startIndex
        while i < hex.endIndex {
            let j = hex.index(i, offsetBy: 2)
            input.append(UInt8(hex[i..<j], radix: 16)!)
            i = j
        }
        let stream = Array(input.dropFirst(2))
        let deflate = PerMessageDeflateParameters(clientNoContextTakeover: true, clientMaxWindowBits: 8)
        func events(split: Bool) -> [WebSocketEvent] {
            let ws = WebSocketProtocol(role: .server, deflate: deflate, random: SplitMix64(seed: 1))
            return feed(ws, stream, split: split).events
        }
        let whole = events(split: false)
        let bytewise = events(split: true)
        #expect(whole == bytewise)
        #expect(!whole.contains { if case .failed = $0 { true } else { false } }, "\(whole)")
        guard case .text(let text)? = whole.first else {
            Issue.record("no text message: \(whole)")
            return
        }
        #expect(text.hasPrefix(#"{"engagement_"#))
    }
}
