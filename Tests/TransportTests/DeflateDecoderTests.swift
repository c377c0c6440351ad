import COpenSSL
import Testing
@testable import Transport

/// zlib as the reference: what it compresses, `DeflateDecoder` must give back byte for byte; what
/// `DeflateDecoder` accepts, zlib must decode to the same bytes.
private final class ZlibCompressor {
    private let strm = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)

    init(level: Int32, windowBits: Int32, strategy: Int32) {
        let rc = smartico_deflate_init_raw(strm, level, max(9, windowBits), 8)
        precondition(rc == Z_OK)
        if strategy != Z_DEFAULT_STRATEGY { precondition(deflateParams(strm, level, strategy) == Z_OK) }
    }

    deinit {
        deflateEnd(strm)
        strm.deallocate()
    }

    /// One message, sync-flushed, tail stripped (RFC 7692); `final`: a final block instead.
    func compress(_ message: [UInt8], final: Bool = false) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: message.count + message.count / 4 + 1024)
        var input = message
        let produced = input.withUnsafeMutableBufferPointer { i in
            out.withUnsafeMutableBufferPointer { o in
                strm.pointee.next_in = i.baseAddress
                strm.pointee.avail_in = UInt32(i.count)
                strm.pointee.next_out = o.baseAddress
                strm.pointee.avail_out = UInt32(o.count)
                let rc = deflate(strm, final ? Z_FINISH : Z_SYNC_FLUSH)
                // An empty message right after a flush: nothing to do (Z_BUF_ERROR), nothing produced.
                precondition(rc == (final ? Z_STREAM_END : Z_OK) || (rc == Z_BUF_ERROR && i.isEmpty))
                precondition(strm.pointee.avail_in == 0)
                return o.count - Int(strm.pointee.avail_out)
            }
        }
        out.removeSubrange(produced...)
        if !final && Array(out.suffix(4)) == [0, 0, 0xFF, 0xFF] { out.removeLast(4) }
        if out.isEmpty { out = [0] }  // RFC 7692 §7.2.3.6
        return out
    }
}

/// zlib's inflate of one message (tail appended): its output, or nil when it reports an error.
/// A stream it would wait on for more input counts as an error here.
private final class ZlibReference {
    private let strm = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)

    init(windowBits: Int32) { precondition(smartico_inflate_init_raw(strm, windowBits) == Z_OK) }

    deinit {
        inflateEnd(strm)
        strm.deallocate()
    }

    func inflate(_ message: [UInt8], limit: Int) -> [UInt8]? {
        var input = message + [0, 0, 0xFF, 0xFF]
        var out = [UInt8](repeating: 0, count: limit + 1)
        return input.withUnsafeMutableBufferPointer { i -> [UInt8]? in
            out.withUnsafeMutableBufferPointer { o -> [UInt8]? in
                strm.pointee.next_in = i.baseAddress
                strm.pointee.avail_in = UInt32(i.count)
                strm.pointee.next_out = o.baseAddress
                strm.pointee.avail_out = UInt32(o.count)
                let rc = COpenSSL.inflate(strm, Z_SYNC_FLUSH)
                guard rc == Z_OK || rc == Z_STREAM_END, strm.pointee.avail_out > 0 else { return nil }
                return Array(o[0 ..< o.count - Int(strm.pointee.avail_out)])
            }
        }
    }
}

/// Messages that exercise every part of a decoder: compressible text, random bytes (stored
/// blocks, long codes), runs (distance-1 matches), repeats near the window's edge, short ones.
extension MessageInflater {
    /// One whole message: `compressed` inflated and finished, within `limit`.
    func inflateWhole(_ compressed: [UInt8], limit: Int = 1 << 20) throws -> [UInt8] {
        var out: [UInt8] = []
        try compressed.withUnsafeBytes { try inflate($0, limit: limit, into: &out) }
        try finish(limit: limit, into: &out)
        return out
    }
}

private func mixedMessages(seed: UInt64, windowBits: Int) -> [[UInt8]] {
    var rng = SplitMix64(seed: seed)
    let words = ["spin", "the", "wheel", "and", "win", "bonus", "{\"cid\":110,", "\"engagement_uid\":", "ünï", "🙂", "\\u00e9"]
    var text: [UInt8] = []
    while text.count < 6_000 { text += Array((words.randomElement(using: &rng)! + " ").utf8) }
    let random = (0 ..< 3_000).map { _ in UInt8.random(in: 0 ... 255, using: &rng) }
    let run = [UInt8](repeating: UInt8(ascii: "x"), count: 1_651)
    // A block repeated at exactly the window's size, and at a few sizes around it.
    let window = 1 << windowBits
    let block = (0 ..< 200).map { _ in UInt8.random(in: 0 ... 255, using: &rng) }
    var edge: [UInt8] = block
    edge += (0 ..< window - 200).map { _ in UInt8.random(in: 0 ... 255, using: &rng) }
    edge += block
    return [text, random, run + text.prefix(100) + run, edge, [], [7], Array(text.reversed()), random + run + random.prefix(50)]
}

@Suite struct DeflateDecoderTests {
    /// Every zlib level and strategy, several windows, context taken over across eight messages.
    @Test(arguments: [9, 12, 15])
    func givesBackWhatZlibCompressed(windowBits: Int) throws {
        let strategies: [Int32] = [Z_DEFAULT_STRATEGY, Z_FILTERED, Z_HUFFMAN_ONLY, Z_RLE, Z_FIXED]
        for level: Int32 in [0, 1, 6, 9] {
            for strategy in strategies {
                let messages = mixedMessages(seed: UInt64(windowBits) << 8 | UInt64(level) << 4 | UInt64(strategy),
                                             windowBits: windowBits)
                let compressor = ZlibCompressor(level: level, windowBits: Int32(windowBits), strategy: strategy)
                let inflater = MessageInflater(windowBits: windowBits, noContextTakeover: false)
                for (i, message) in messages.enumerated() {
                    let compressed = compressor.compress(message)
                    let out = try inflater.inflateWhole(compressed)
                    #expect(out == message, "level \(level), strategy \(strategy), window \(windowBits), message \(i)")
                }
            }
        }
    }

    /// Codes of 15 bits, the longest DEFLATE has: symbol counts on a Fibonacci scale make zlib's
    /// Huffman trees as deep as its length limit allows, so second-level tables are as large as
    /// they get (literal/length codes here; the distance code too with Z_DEFAULT matches).
    @Test func theLongestCodesDecode() throws {
        var counts = [1, 1]
        while counts.count < 27 { counts.append(counts[counts.count - 1] + counts[counts.count - 2]) }
        var rng = SplitMix64(seed: 15)
        var message: [UInt8] = []
        for (symbol, count) in counts.enumerated() { message += [UInt8](repeating: UInt8(symbol * 9), count: min(count, 120_000)) }
        message.shuffle(using: &rng)
        for strategy in [Z_HUFFMAN_ONLY, Z_DEFAULT_STRATEGY] {
            let compressed = ZlibCompressor(level: 9, windowBits: 15, strategy: strategy).compress(message)
            let inflater = MessageInflater(windowBits: 15, noContextTakeover: false)
            #expect(try inflater.inflateWhole(compressed, limit: 1 << 22) == message, "strategy \(strategy)")
        }
    }

    /// Blocks whose codes are all shorter than the root tables' bits get tables of their longest
    /// code's bits (`build`): small messages on one stream, like the 110s a server sends (each
    /// block with Huffman tables of its own, a literal/length code of ~26 symbols no longer than
    /// 6 bits), and blocks with one literal (a 1-bit code) and no distance code at all.
    @Test func blocksWithShortCodesDecode() throws {
        var rng = SplitMix64(seed: 110)
        let compressor = ZlibCompressor(level: 6, windowBits: 15, strategy: Z_DEFAULT_STRATEGY)
        let inflater = MessageInflater(windowBits: 15, noContextTakeover: false)
        let hex = Array("0123456789abcdef".utf8)
        for i in 0 ..< 300 {
            let uid = (0 ..< 32).map { _ in hex[Int.random(in: 0 ..< 16, using: &rng)] }
            var message = Array(#"{"engagement_uid":""#.utf8) + uid + Array(#"","engagement_id":"#.utf8)
            message += Array("\(1_000 + i)".utf8) + Array(#","template_html":"<div>"#.utf8)
            message += [UInt8](repeating: UInt8(ascii: "x"), count: 1_750) + Array(#"</div>","cid":110}"#.utf8)
            #expect(try inflater.inflateWhole(compressor.compress(message)) == message, "message \(i)")
        }
        // Huffman-only: one distinct byte gives a literal/length code of two 1-bit codes (the
        // literal and end-of-block) and an empty distance code.
        for length in [1, 2, 100] {
            let message = [UInt8](repeating: UInt8(ascii: "a"), count: length)
            let compressed = ZlibCompressor(level: 6, windowBits: 15, strategy: Z_HUFFMAN_ONLY).compress(message)
            let fresh = MessageInflater(windowBits: 15, noContextTakeover: false)
            #expect(try fresh.inflateWhole(compressed) == message, "\(length) × 'a', Huffman only")
        }
    }

    /// A message may arrive in any number of pieces (frames, reads): the same bytes come out.
    @Test func piecesAreGatheredIntoTheMessage() throws {
        let messages = mixedMessages(seed: 3, windowBits: 15)
        let compressor = ZlibCompressor(level: 6, windowBits: 15, strategy: Z_DEFAULT_STRATEGY)
        let inflater = MessageInflater(windowBits: 15, noContextTakeover: false)
        var rng = SplitMix64(seed: 4)
        for message in messages {
            let compressed = compressor.compress(message)
            var out: [UInt8] = []
            var at = 0
            while at < compressed.count {
                let n = min(compressed.count - at, Int.random(in: 1 ... 97, using: &rng))
                try compressed[at ..< at + n].withUnsafeBytes { try inflater.inflate($0, limit: 1 << 20, into: &out) }
                at += n
            }
            try inflater.finish(limit: 1 << 20, into: &out)
            #expect(out == message)
        }
    }

    /// A message ending in a final block ends the stream: the next starts afresh, with no history.
    @Test func aFinalBlockStartsANewStream() throws {
        let inflater = MessageInflater(windowBits: 15, noContextTakeover: false)
        let first = Array("hello hello hello hello".utf8)
        var out: [UInt8] = []
        let finished = ZlibCompressor(level: 6, windowBits: 15, strategy: Z_DEFAULT_STRATEGY).compress(first, final: true)
        try finished.withUnsafeBytes { try inflater.inflate($0, limit: 1 << 20, into: &out) }
        try inflater.finish(limit: 1 << 20, into: &out)
        #expect(out == first)
        // A fresh compressor's stream decodes; one referring back into the first message does not.
        let second = Array("world".utf8)
        out = []
        try ZlibCompressor(level: 6, windowBits: 15, strategy: Z_DEFAULT_STRATEGY).compress(second).withUnsafeBytes {
            try inflater.inflate($0, limit: 1 << 20, into: &out)
        }
        try inflater.finish(limit: 1 << 20, into: &out)
        #expect(out == second)
    }

    /// The output cap holds for every block type: decoding stops one byte past it.
    @Test func theLimitHoldsForEveryBlockType() throws {
        let message = [UInt8](repeating: 0x41, count: 10_000) + (0 ..< 10_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        for (level, strategy) in [(Int32(0), Z_DEFAULT_STRATEGY), (6, Z_FIXED), (6, Z_DEFAULT_STRATEGY)] {
            let compressed = ZlibCompressor(level: level, windowBits: 15, strategy: strategy).compress(message)
            let inflater = MessageInflater(windowBits: 15, noContextTakeover: false)
            var out: [UInt8] = []
            if level == 0 {
                // Stored: the compressed bytes alone are past what a 5,000-byte message could take.
                #expect(throws: InflateFailure.compressedTooLarge(bytes: compressed.count)) {
                    try compressed.withUnsafeBytes { try inflater.inflate($0, limit: 5_000, into: &out) }
                }
                // A stored message under that bound but over the limit stops at the limit too.
                let smaller = ZlibCompressor(level: 0, windowBits: 15, strategy: strategy).compress(Array(message.prefix(6_000)))
                let fresh = MessageInflater(windowBits: 15, noContextTakeover: false)
                try smaller.withUnsafeBytes { try fresh.inflate($0, limit: 5_000, into: &out) }
                #expect(throws: InflateFailure.tooLarge(produced: 5_001)) { try fresh.finish(limit: 5_000, into: &out) }
            } else {
                try compressed.withUnsafeBytes { try inflater.inflate($0, limit: 5_000, into: &out) }
                #expect(throws: InflateFailure.tooLarge(produced: 5_001)) { try inflater.finish(limit: 5_000, into: &out) }
            }
            #expect(out.count <= 5_001)
            // Exactly at the limit is fine.
            let exact = MessageInflater(windowBits: 15, noContextTakeover: false)
            var all: [UInt8] = []
            try compressed.withUnsafeBytes { try exact.inflate($0, limit: message.count, into: &all) }
            try exact.finish(limit: message.count, into: &all)
            #expect(all == message)
        }
        // Compressed bytes past what any message of the limit could take are refused as they come.
        let inflater = MessageInflater(windowBits: 15, noContextTakeover: false)
        var out: [UInt8] = []
        let piece = [UInt8](repeating: 0, count: 700)
        try piece.withUnsafeBytes { try inflater.inflate($0, limit: 100, into: &out) }
        #expect(throws: InflateFailure.compressedTooLarge(bytes: 1_400)) {
            try piece.withUnsafeBytes { try inflater.inflate($0, limit: 100, into: &out) }
        }
    }

    /// Data that is not DEFLATE fails with what was wrong, never a crash or a wrong message.
    @Test(arguments: [
        ([0x07], "invalid block type 3"),  // BFINAL, BTYPE 11
        ([0x00, 0x05, 0x00, 0x00, 0x00, 1, 2, 3, 4, 5], "invalid stored block lengths"),  // NLEN not ~LEN
        ([0x01, 0x10, 0x00, 0xEF, 0xFF, 1, 2], "the compressed message ends inside a stored block"),  // 16 bytes said, 6 there
        ([0x03, 0x02], "invalid distance too far back"),  // fixed block: length 3 at distance 1 first
        ([0x05, 0xE0, 0xFF, 0xFF, 0xFF, 0xFF], "invalid code lengths set"),  // over-subscribed
        ([0x04, 0x00, 0x24, 0x49, 0x92, 0x24, 0x49, 0x02], "invalid bit length repeat"),  // repeat first
    ] as [([UInt8], String)])
    func invalidDataFailsWithItsReason(data: [UInt8], reason: String) throws {
        let inflater = MessageInflater(windowBits: 15, noContextTakeover: false)
        var out: [UInt8] = []
        try data.withUnsafeBytes { try inflater.inflate($0, limit: 1 << 20, into: &out) }
        #expect(throws: InflateFailure.invalidData(reason)) { try inflater.finish(limit: 1 << 20, into: &out) }
    }

    /// A message cut off inside a block (its tail appended) is refused, not decoded as far as it goes.
    @Test func aBlockCutOffIsRefused() throws {
        let text = Array(String(repeating: "spin the wheel and win ", count: 40).utf8)
        for strategy in [Z_FIXED, Z_DEFAULT_STRATEGY] {
            let compressed = ZlibCompressor(level: 6, windowBits: 15, strategy: strategy).compress(text)
            let cut = Array(compressed.prefix(compressed.count / 2))
            let inflater = MessageInflater(windowBits: 15, noContextTakeover: false)
            var out: [UInt8] = []
            try cut.withUnsafeBytes { try inflater.inflate($0, limit: 1 << 20, into: &out) }
            do {
                try inflater.finish(limit: 1 << 20, into: &out)
                Issue.record("a message cut off in a block decoded (strategy \(strategy))")
            } catch {
                guard case .invalidData = error else { Issue.record("\(error)"); continue }
            }
            #expect(out.isEmpty, "nothing of a refused message is handed on")
        }
    }

    /// Mutated streams: whatever the decoder accepts, zlib decodes to the same bytes; nothing
    /// crashes or passes the limit. (A longer run with libFuzzer is in docs/transport.md.)
    @Test func mutatedStreamsNeverDisagreeWithZlib() throws {
        var rng = SplitMix64(seed: 0xF022)
        let messages = mixedMessages(seed: 9, windowBits: 15).filter { !$0.isEmpty }
        var accepted = 0
        for round in 0 ..< 2_000 {
            let message = messages[round % messages.count]
            let strategy = [Z_DEFAULT_STRATEGY, Z_FIXED, Z_HUFFMAN_ONLY][round % 3]
            var compressed = ZlibCompressor(level: 6, windowBits: 15, strategy: strategy).compress(message)
            for _ in 0 ..< Int.random(in: 1 ... 3, using: &rng) {
                let i = Int.random(in: 0 ..< compressed.count, using: &rng)
                compressed[i] ^= UInt8(1) << UInt8.random(in: 0 ... 7, using: &rng)
            }
            if Bool.random(using: &rng) { compressed.removeLast(Int.random(in: 0 ... min(3, compressed.count - 1), using: &rng)) }
            let limit = 40_000
            let inflater = MessageInflater(windowBits: 15, noContextTakeover: false)
            var out: [UInt8] = []
            do {
                try compressed.withUnsafeBytes { try inflater.inflate($0, limit: limit, into: &out) }
                try inflater.finish(limit: limit, into: &out)
            } catch {
                #expect(out.count <= limit + 1)
                continue
            }
            accepted += 1
            #expect(out.count <= limit)
            #expect(ZlibReference(windowBits: 15).inflate(compressed, limit: limit) == out, "round \(round)")
        }
        #expect(accepted > 0, "some mutations (in stored bytes, literals) still decode")
    }
}
