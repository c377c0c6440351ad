import SmarticoTestSupport
@testable import Transport

extension RandomNumberGenerator {
    mutating func bytes(_ n: Int) -> [UInt8] {
        (0 ..< n).map { _ in UInt8.random(in: 0 ... 255, using: &self) }
    }
}

/// Splits `bytes` into pieces at random points (seeded).
func randomSplits(_ bytes: [UInt8], rng: inout SplitMix64, maxPiece: Int = 300) -> [[UInt8]] {
    var pieces: [[UInt8]] = []
    var i = 0
    while i < bytes.count {
        let n = Int.random(in: 1 ... maxPiece, using: &rng)
        let end = min(bytes.count, i + n)
        pieces.append(Array(bytes[i ..< end]))
        i = end
    }
    return pieces
}

struct ParsedFrame: Equatable {
    var header: WebSocketFrameHeader
    var payload: [UInt8]
}

/// Feeds `pieces` to `parser`, collecting complete frames.
func parseFrames(_ parser: inout WebSocketFrameParser, _ pieces: [[UInt8]]) throws -> [ParsedFrame] {
    var frames: [ParsedFrame] = []
    var current: ParsedFrame?
    for piece in pieces {
        var buf = piece
        try buf.withUnsafeMutableBytes { (raw) throws in
            var index = 0
            while let item = try parser.next(in: raw, at: &index) {
                switch item {
                case let .header(h, _): current = ParsedFrame(header: h, payload: [])
                case let .payload(r): current!.payload.append(contentsOf: raw[r])
                case .end: frames.append(current!); current = nil
                }
            }
        }
    }
    return frames
}

/// A peer's frame: masked with a fixed key when the peer is a client.
func peerFrame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0, peerIsClient: Bool) -> [UInt8] {
    var out: [UInt8] = []
    WebSocketFrameEncoder.writeFrame(
        fin: fin, rsv: rsv, opcode: WebSocketOpcode(rawValue: opcode) ?? .binary, payload: payload,
        maskKey: peerIsClient ? WebSocketMaskKey(0x12, 0x34, 0x56, 0x78) : nil, into: &out)
    // Allow reserved opcodes too (the encoder only takes valid ones).
    out[0] = (out[0] & 0xF0) | (opcode & 0x0F)
    return out
}

extension WebSocketOutput {
    var failure: WebSocketError? {
        for e in events { if case let .failed(err) = e { return err } }
        return nil
    }
}
