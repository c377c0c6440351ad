// DEFLATE (RFC 1951) decoding of whole permessage-deflate messages (RFC 7692), with the sliding
// window kept from one message to the next. docs/transport.md, "Inflate".
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Decodes raw DEFLATE data one complete message at a time (the payload with `00 00 FF FF`
/// appended), keeping the last `2^windowBits` bytes of output for the messages after it to refer
/// back to (context takeover).
///
/// Why not zlib's `inflate`, which this replaced (2026-11-26): for the small messages a session
/// carries, zlib spends most of its time where a message-at-a-time decoder need not. A 2 KB
/// engagement arrives as a ~100-byte dynamic block: zlib rebuilt its three Huffman tables with a
/// general routine (36 % of its time on the simulator's stream) and copied every match a byte at a
/// time (44 %; the 110's padding is one long run). Here a table is built by filling whole runs of
/// entries, and a match is copied eight bytes at a time (a run of one byte as a broadcast word),
/// into a buffer that holds the history and the new message together. Compression stays zlib's.
///
/// The input must be a whole message: a block cut off at its end is an error (zlib would wait for
/// more input and go on with the next message; RFC 7692 senders end every message on a block
/// boundary, with an empty stored block). After a final block (BFINAL), the rest of the message is
/// ignored and the next message starts a new stream with an empty window, as zlib's reset did.
///
/// Not thread-safe: one owner (the connection's protocol state).
final class DeflateDecoder {
    /// Why decoding failed.
    enum Failure: Error, Equatable {
        /// The message's output passed `limit` (decoding stopped at `limit + 1` bytes).
        case tooLarge
        /// The data is not valid DEFLATE: what was wrong.
        case invalid(String)
    }

    /// The sender's window: the farthest a match may reach back.
    let windowSize: Int
    /// The history and the message being decoded: `buffer[0 ..< end]`, `slack` bytes more behind
    /// `capacity` (a match is copied in 8- or 16-byte pieces that may run up to 15 bytes past its end).
    private var buffer: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private var end = 0
    /// Where the message being decoded starts in `buffer`, and the position one past its limit
    /// (reaching it means the message passed its limit). Both move when the history slides.
    private var messageStart = 0
    private var messageEnd = 0
    /// Decode tables (`build`), rebuilt for every dynamic block; the fixed code's, once.
    private let litlen: UnsafeMutablePointer<UInt32>
    private let dist: UnsafeMutablePointer<UInt32>
    private let codelen: UnsafeMutablePointer<UInt32>
    private let fixedLitlen: UnsafeMutablePointer<UInt32>
    private let fixedDist: UnsafeMutablePointer<UInt32>
    /// The root bits of each table: its longest code's length, at most the `…RootBits` above.
    private var litlenBits = 1
    private var distBits = 1
    private var fixedLitlenBits = 1
    private var fixedDistBits = 1
    /// Code lengths of a dynamic block: 286 literal/length + 30 distance codes at most (plus room
    /// for a repeat that runs past the end, which is refused).
    private let lengths: UnsafeMutablePointer<UInt8>
    /// How many codes of each length (0...15) a table has: the literal/length code's at 0, the
    /// distance code's at 16, the code length code's at 32. Counted as the lengths are read.
    private let counts: UnsafeMutablePointer<UInt16>
    /// `build`'s work space: symbols in canonical order, and their codes.
    private let sorted: UnsafeMutablePointer<UInt16>
    private let codes: UnsafeMutablePointer<UInt16>
    /// Each symbol's table entry but for its bit count (``Entry``): literal/length, distance, code
    /// length symbols.
    private let litlenEntries: UnsafeMutablePointer<UInt32>
    private let distEntries: UnsafeMutablePointer<UInt32>
    private let codelenEntries: UnsafeMutablePointer<UInt32>

    static let slack = 16
    /// The buffer's size when idle; it grows for a bigger message and shrinks back after it. With
    /// 32 KiB of history kept, the history moves to the front once per ~64 KiB of messages.
    static let initialCapacity = 128 << 10
    /// Root table bits at most: codes up to this long decode with one lookup, longer ones with two.
    /// A code whose longest code is shorter gets a root table of its longest code's bits (`build`).
    static let litlenRootBits = 9
    static let distRootBits = 7
    static let codelenRootBits = 7
    /// Table sizes: the root table and the second-level tables of any valid code fit. A 9-bit
    /// root over 286 literal/length codes needs 852 entries at most (zlib's `enough` count for the
    /// same layout); a 7-bit root over 30 distance codes under 900 (three chains of 15-bit codes
    /// with a 256-entry table each take 27 of the 30). `build` refuses a code that would not fit
    /// rather than write past them.
    static let litlenTableSize = 2048
    static let distTableSize = 1024

    /// - Parameter windowBits: the sender's window, 8...15.
    init(windowBits: Int) {
        windowSize = 1 << max(8, min(15, windowBits))
        capacity = Self.initialCapacity
        buffer = .allocate(capacity: capacity + Self.slack)
        litlen = .allocate(capacity: Self.litlenTableSize)
        dist = .allocate(capacity: Self.distTableSize)
        codelen = .allocate(capacity: 1 << Self.codelenRootBits)
        fixedLitlen = .allocate(capacity: Self.litlenTableSize)
        fixedDist = .allocate(capacity: Self.distTableSize)
        lengths = .allocate(capacity: 320 + 140)
        counts = .allocate(capacity: 48)
        sorted = .allocate(capacity: 320)
        codes = .allocate(capacity: 320)
        litlenEntries = .allocate(capacity: 288)
        distEntries = .allocate(capacity: 32)
        codelenEntries = .allocate(capacity: 19)
        for s in 0 ..< 288 { litlenEntries[s] = Self.symbolEntry(s, kind: .litlen) }
        for s in 0 ..< 32 { distEntries[s] = Self.symbolEntry(s, kind: .distance) }
        for s in 0 ..< 19 { codelenEntries[s] = Self.symbolEntry(s, kind: .codeLength) }
        // The fixed code (RFC 1951 §3.2.6): 288 literal/length codes of 7 to 9 bits, 30 (32) of 5.
        for s in 0 ..< 144 { lengths[s] = 8 }
        for s in 144 ..< 256 { lengths[s] = 9 }
        for s in 256 ..< 280 { lengths[s] = 7 }
        for s in 280 ..< 288 { lengths[s] = 8 }
        let fixedLitlenBits = build(lengths, count: 288, counts: Self.count(lengths, 288, into: counts), entries: litlenEntries,
                                    rootBits: Self.litlenRootBits, into: fixedLitlen, capacity: Self.litlenTableSize)
        for s in 0 ..< 32 { lengths[s] = 5 }
        let fixedDistBits = build(lengths, count: 32, counts: Self.count(lengths, 32, into: counts + 16), entries: distEntries,
                                  rootBits: Self.distRootBits, into: fixedDist, capacity: Self.distTableSize)
        guard let fixedLitlenBits, let fixedDistBits else { preconditionFailure("the fixed Huffman code did not build") }
        self.fixedLitlenBits = fixedLitlenBits
        self.fixedDistBits = fixedDistBits
    }

    /// Counts `lengths[0 ..< n]` by value into `counts[0 ... 15]`; returns `counts`.
    private static func count(_ lengths: UnsafePointer<UInt8>, _ n: Int, into counts: UnsafeMutablePointer<UInt16>)
        -> UnsafeMutablePointer<UInt16>
    {
        counts.update(repeating: 0, count: 16)
        for s in 0 ..< n { counts[Int(lengths[s])] &+= 1 }
        return counts
    }

    deinit {
        buffer.deallocate()
        litlen.deallocate()
        dist.deallocate()
        codelen.deallocate()
        fixedLitlen.deallocate()
        fixedDist.deallocate()
        lengths.deallocate()
        counts.deallocate()
        sorted.deallocate()
        codes.deallocate()
        litlenEntries.deallocate()
        distEntries.deallocate()
        codelenEntries.deallocate()
    }

    /// Forgets the history: the next message refers to nothing before it.
    func reset() { end = 0 }

    /// Decodes one whole message, appending its bytes to `out`; the history then holds it (unless a
    /// final block ended the stream: then it is emptied). At most `limit` bytes of output.
    /// - Returns: true when the message ended the stream with a final block.
    @discardableResult
    func decodeMessage(_ input: UnsafeRawBufferPointer, limit: Int, into out: inout [UInt8]) throws(Failure) -> Bool {
        messageStart = end
        // The message may produce `limit` bytes; one more shows it passed.
        messageEnd = end &+ min(limit, Int.max / 2) &+ 1
        var final = false
        do {
            final = try decodeBlocks(input)
        } catch {
            end = messageStart  // the message's partial output is not history
            throw error
        }
        if end > messageStart { out.append(contentsOf: UnsafeBufferPointer(start: buffer + messageStart, count: end - messageStart)) }
        if final { end = 0 } else { compact() }
        return final
    }

    // MARK: blocks

    private func decodeBlocks(_ input: UnsafeRawBufferPointer) throws(Failure) -> Bool {
        guard let base = input.baseAddress?.assumingMemoryBound(to: UInt8.self), !input.isEmpty else {
            throw .invalid("empty compressed message")
        }
        var bits = BitReader(base, count: input.count)
        while true {
            bits.refill()
            let header = bits.take(3)
            let isFinal = header & 1 == 1
            switch header >> 1 {
            case 0:
                try stored(&bits)
            case 1:
                try huffman(&bits, litlen: fixedLitlen, litlenBits: fixedLitlenBits, dist: fixedDist, distBits: fixedDistBits)
            case 2:
                try dynamicTables(&bits)
                try huffman(&bits, litlen: litlen, litlenBits: litlenBits, dist: dist, distBits: distBits)
            default:
                throw .invalid("invalid block type 3")
            }
            if bits.overran { throw .invalid("the compressed message ends inside a block") }
            if isFinal { return true }
            if bits.remainingBits == 0 { return false }
            // A message ends with the empty stored block RFC 7692 makes it end with; bits left over
            // after a block that cannot hold another block's header are a cut-off message.
            if bits.remainingBits < 3 { throw .invalid("the compressed message ends inside a block header") }
        }
    }

    /// A stored block: LEN, NLEN, then LEN bytes as they are.
    private func stored(_ bits: inout BitReader) throws(Failure) {
        bits.alignToByte()
        guard let (length, check) = bits.takeBytes16x2() else { throw .invalid("the compressed message ends inside a stored block header") }
        guard length == ~check & 0xFFFF else { throw .invalid("invalid stored block lengths") }
        guard bits.bytesLeft >= length else { throw .invalid("the compressed message ends inside a stored block") }
        if end &+ length >= messageEnd { throw .tooLarge }
        makeRoom(length)
        bits.copyBytes(length, to: buffer + end)
        end &+= length
    }

    /// Reads a dynamic block's code lengths and builds `litlen` and `dist` from them. The lengths
    /// are counted as they are read: a run adds its length once (counting the ~300 lengths one by
    /// one afterwards was a chain of increments of the same counter, most lengths being 0).
    private func dynamicTables(_ bits: inout BitReader) throws(Failure) {
        bits.refill()
        let nlen = bits.take(5) &+ 257
        let ndist = bits.take(5) &+ 1
        let ncode = bits.take(4) &+ 4
        guard nlen <= 286, ndist <= 30 else { throw .invalid("too many length or distance symbols") }
        // The code length code's lengths, 3 bits each, in RFC 1951's order.
        for i in 0 ..< 19 { lengths[i] = 0 }
        counts.update(repeating: 0, count: 48)
        let codelenCounts = counts + 32
        for i in 0 ..< ncode {
            if i == 8 { bits.refill() }  // 14 + 19 × 3 bits: two refills cover them
            let length = bits.take(3)
            lengths[Int(Self.codeLengthOrder[i])] = UInt8(truncatingIfNeeded: length)
            codelenCounts[length] &+= 1
        }
        guard let codelenBits = build(lengths, count: 19, counts: codelenCounts, entries: codelenEntries,
                                      rootBits: Self.codelenRootBits, into: codelen, capacity: 1 << Self.codelenRootBits,
                                      codeLengthCode: true)
        else { throw .invalid("invalid code lengths set") }
        let codelenMask = (1 << codelenBits) - 1
        // The literal/length and distance code lengths, run-length coded (a run may cross from one
        // to the other).
        let total = nlen &+ ndist
        let litlenCounts = counts, distCounts = counts + 16
        var i = 0
        while i < total {
            bits.refill()
            let entry = codelen[bits.peek(codelenMask)]
            bits.drop(Entry.used(entry))
            let symbol = Entry.value(entry)
            if symbol < 16 {
                lengths[i] = UInt8(truncatingIfNeeded: symbol)
                if i < nlen { litlenCounts[symbol] &+= 1 } else { distCounts[symbol] &+= 1 }
                i &+= 1
                continue
            }
            let value: UInt8
            let repeatCount: Int
            switch symbol {
            case 16:
                guard i > 0 else { throw .invalid("invalid bit length repeat") }
                value = lengths[i &- 1]
                repeatCount = 3 &+ bits.take(2)
            case 17:
                value = 0
                repeatCount = 3 &+ bits.take(3)
            default:
                value = 0
                repeatCount = 11 &+ bits.take(7)
            }
            guard i &+ repeatCount <= total else { throw .invalid("invalid bit length repeat") }
            (lengths + i).update(repeating: value, count: repeatCount)
            let inLitlen = max(0, min(repeatCount, nlen &- i))
            litlenCounts[Int(value)] &+= UInt16(truncatingIfNeeded: inLitlen)
            distCounts[Int(value)] &+= UInt16(truncatingIfNeeded: repeatCount &- inLitlen)
            i &+= repeatCount
        }
        if bits.overran { throw .invalid("the compressed message ends inside a block header") }
        guard lengths[256] != 0 else { throw .invalid("invalid code -- missing end-of-block") }
        guard let builtLitlenBits = build(lengths, count: nlen, counts: litlenCounts, entries: litlenEntries,
                                          rootBits: Self.litlenRootBits, into: litlen, capacity: Self.litlenTableSize)
        else { throw .invalid("invalid literal/lengths set") }
        guard let builtDistBits = build(lengths + nlen, count: ndist, counts: distCounts, entries: distEntries,
                                        rootBits: Self.distRootBits, into: dist, capacity: Self.distTableSize, mayBeEmpty: true)
        else { throw .invalid("invalid distances set") }
        litlenBits = builtLitlenBits
        distBits = builtDistBits
    }

    /// The order in which a dynamic block lists the code length code's lengths.
    static let codeLengthOrder: [UInt8] = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]

    /// A block coded with `litlen` and `dist`, up to its end-of-block code.
    private func huffman(_ bits: inout BitReader, litlen: UnsafeMutablePointer<UInt32>, litlenBits: Int,
                         dist: UnsafeMutablePointer<UInt32>, distBits: Int) throws(Failure)
    {
        let litlenMask = (1 << litlenBits) - 1
        let distMask = (1 << distBits) - 1
        var out = end
        var room = capacity
        var buffer = self.buffer
        var messageEnd = self.messageEnd
        defer { end = out }
        while true {
            // One refill leaves ≥ 56 bits: a length code (≤ 15), its extra bits (≤ 5), a distance
            // code (≤ 15) and its extra bits (≤ 13).
            bits.refill()
            var entry = litlen[bits.peek(litlenMask)]
            if Entry.kind(entry) == Entry.subtable {
                bits.drop(litlenBits)
                entry = litlen[Entry.value(entry) &+ bits.peek((1 << Entry.extra(entry)) - 1)]
            }
            bits.drop(Entry.used(entry))
            // Zeros shifted in past the input would decode as symbols: a cut-off block stops here.
            if bits.overran { throw .invalid("the compressed message ends inside a block") }
            let kind = Entry.kind(entry)
            if kind == Entry.literal {
                if out >= room {
                    end = out
                    makeRoom(1)
                    (buffer, room, out, messageEnd) = (self.buffer, capacity, end, self.messageEnd)
                }
                buffer[out] = UInt8(truncatingIfNeeded: Entry.value(entry))
                out &+= 1
                if out >= messageEnd { throw .tooLarge }
                continue
            }
            if kind == Entry.endOfBlock { return }
            guard kind == Entry.length else { throw .invalid("invalid literal/length code") }
            let length = Entry.value(entry) &+ bits.take(Entry.extra(entry))
            var d = dist[bits.peek(distMask)]
            if Entry.kind(d) == Entry.subtable {
                bits.drop(distBits)
                d = dist[Entry.value(d) &+ bits.peek((1 << Entry.extra(d)) - 1)]
            }
            bits.drop(Entry.used(d))
            guard Entry.kind(d) == Entry.distance else { throw .invalid("invalid distance code") }
            let distance = Entry.value(d) &+ bits.take(Entry.extra(d))
            if bits.overran { throw .invalid("the compressed message ends inside a block") }
            guard distance <= out, distance <= windowSize else { throw .invalid("invalid distance too far back") }
            if out &+ length > room {
                end = out
                makeRoom(length)
                (buffer, room, out, messageEnd) = (self.buffer, capacity, end, self.messageEnd)
            }
            Self.copyMatch(buffer + out, distance: distance, length: length)
            out &+= length
            if out >= messageEnd { throw .tooLarge }
        }
    }

    /// Copies `length` bytes from `distance` back to `to`, the regions overlapping when the
    /// distance is shorter than the length (each byte is then one written earlier in the copy).
    /// Writes up to 15 bytes past the end (`slack`).
    @inline(__always)
    private static func copyMatch(_ to: UnsafeMutablePointer<UInt8>, distance: Int, length: Int) {
        let from = UnsafeRawPointer(to - distance)
        let dst = UnsafeMutableRawPointer(to)
        if distance >= 16 {
            // 16 bytes at a time (one SSE2/NEON load and store): the long matches of a message that
            // repeats the one before it (a 110's template) are most of its bytes.
            var i = 0
            repeat {
                dst.storeBytes(of: from.loadUnaligned(fromByteOffset: i, as: SIMD16<UInt8>.self), toByteOffset: i,
                               as: SIMD16<UInt8>.self)
                i &+= 16
            } while i < length
        } else if distance >= 8 {
            // Every 8-byte word read lies before the word written: already final.
            var i = 0
            repeat {
                dst.storeBytes(of: from.loadUnaligned(fromByteOffset: i, as: UInt64.self), toByteOffset: i, as: UInt64.self)
                i &+= 8
            } while i < length
        } else if distance == 1 {
            let word = UInt64(from.load(as: UInt8.self)) &* 0x0101_0101_0101_0101
            var i = 0
            repeat {
                dst.storeBytes(of: word, toByteOffset: i, as: UInt64.self)
                i &+= 8
            } while i < length
        } else {
            for i in 0 ..< length { to[i] = to[i &- distance] }
        }
    }

    // MARK: the buffer

    /// Makes room for `count` more bytes at `end` (and the slack after them): first by dropping the
    /// history no match can reach any more (before both the message's start and the last window),
    /// when that frees a quarter of the buffer; else the buffer grows (never far past the message's
    /// limit: decoding stops there).
    private func makeRoom(_ count: Int) {
        if end &+ count <= capacity { return }
        let unused = min(messageStart, end - windowSize)
        if unused >= capacity / 4 {
            memmove(buffer, buffer + unused, end - unused)  // the regions may overlap
            end -= unused
            messageStart -= unused
            messageEnd -= unused
            if end &+ count <= capacity { return }
        }
        let newCapacity = max(capacity * 2, end &+ count)
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity + Self.slack)
        grown.update(from: buffer, count: end)
        buffer.deallocate()
        buffer = grown
        capacity = newCapacity
    }

    /// After a message: keeps the last window of history at the front when little room is left,
    /// and lets a buffer a big message grew go back to its idle size.
    private func compact() {
        let keep = min(end, windowSize)
        if capacity > Self.initialCapacity && capacity > 4 * windowSize {
            let small = UnsafeMutablePointer<UInt8>.allocate(capacity: Self.initialCapacity + Self.slack)
            small.update(from: buffer + (end - keep), count: keep)
            buffer.deallocate()
            buffer = small
            capacity = Self.initialCapacity
            end = keep
        } else if capacity - end < capacity / 4 {
            memmove(buffer, buffer + (end - keep), keep)  // the regions may overlap
            end = keep
        }
    }

    // MARK: decode tables

    /// A table entry, packed in 32 bits: bits 0–7 the bits it consumes, 8–11 its kind, 12–15 the
    /// extra bits after it (a subtable's index bits), 16–31 its value (a literal byte, a base length
    /// or distance, the code-length symbol, a subtable's offset).
    enum Entry {
        static let literal: UInt32 = 0
        static let length: UInt32 = 1
        static let distance: UInt32 = 2
        static let endOfBlock: UInt32 = 3
        static let subtable: UInt32 = 4
        static let invalid: UInt32 = 5

        @inline(__always) static func make(used: Int, kind: UInt32, extra: Int = 0, value: Int) -> UInt32 {
            UInt32(truncatingIfNeeded: used) | kind << 8 | UInt32(truncatingIfNeeded: extra) << 12
                | UInt32(truncatingIfNeeded: value) << 16
        }
        @inline(__always) static func used(_ e: UInt32) -> Int { Int(truncatingIfNeeded: e & 0xFF) }
        @inline(__always) static func kind(_ e: UInt32) -> UInt32 { (e >> 8) & 0xF }
        @inline(__always) static func extra(_ e: UInt32) -> Int { Int(truncatingIfNeeded: (e >> 12) & 0xF) }
        @inline(__always) static func value(_ e: UInt32) -> Int { Int(truncatingIfNeeded: e >> 16) }
    }

    enum TableKind { case litlen, distance, codeLength }

    static let lengthBase: [UInt16] = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115,
                                       131, 163, 195, 227, 258]
    static let lengthExtra: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]
    static let distanceBase: [UInt16] = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
                                         2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577]
    static let distanceExtra: [UInt8] = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12,
                                         13, 13]

    /// What `symbol` decodes to: its ``Entry`` with no bit count yet.
    static func symbolEntry(_ symbol: Int, kind: TableKind) -> UInt32 {
        switch kind {
        case .codeLength:
            return Entry.make(used: 0, kind: Entry.literal, value: symbol)
        case .litlen:
            if symbol < 256 { return Entry.make(used: 0, kind: Entry.literal, value: symbol) }
            if symbol == 256 { return Entry.make(used: 0, kind: Entry.endOfBlock, value: 0) }
            let i = symbol - 257
            guard i < 29 else { return Entry.make(used: 0, kind: Entry.invalid, value: 0) }
            return Entry.make(used: 0, kind: Entry.length, extra: Int(lengthExtra[i]), value: Int(lengthBase[i]))
        case .distance:
            guard symbol < 30 else { return Entry.make(used: 0, kind: Entry.invalid, value: 0) }
            return Entry.make(used: 0, kind: Entry.distance, extra: Int(distanceExtra[symbol]), value: Int(distanceBase[symbol]))
        }
    }

    /// Builds the decode table of the canonical Huffman code with `lengths[0 ..< count]` (RFC 1951
    /// §3.2.2), of which `counts[l]` have length `l`: a root table of `2^root` entries indexed
    /// by the next bits of input (least significant first, so by each code's bits reversed), and,
    /// for codes longer than `root`, a second-level table per root entry they start with, as
    /// large as the longest of them needs. `root` is `rootBits`, or the longest code's length when
    /// that is shorter: a small message's dynamic block has a literal/length code of ~26 symbols no
    /// longer than 6 bits (the simulator's 110s: 296 blocks of 300) and a distance code of ≤ 4
    /// bits, so its tables are 64 and 16 entries instead of 512 and 128 — filling (by doubling)
    /// the entries no code of the block could reach was most of the table's cost.
    ///
    /// The root table grows by doubling: the table for the codes up to `len` bits is the one for
    /// `len − 1` bits written twice (a shorter code does not look at the extra bit), plus one entry
    /// per code of `len` bits — instead of writing each short code's `2^(rootBits − len)` entries
    /// one by one. Symbols are taken in canonical order (by length, then symbol) from a counting sort.
    ///
    /// False for lengths that are no code: over-subscribed, or incomplete — which RFC 1951 allows
    /// only for a code of a single symbol, and not for the code length code (as zlib does).
    /// `mayBeEmpty`: no codes at all is valid (the distance code of a literals-only block); every
    /// lookup is then invalid. Returns the root bits (nil: no code).
    private func build(_ lengths: UnsafePointer<UInt8>, count: Int, counts: UnsafeMutablePointer<UInt16>,
                       entries: UnsafePointer<UInt32>, rootBits maxRootBits: Int, into table: UnsafeMutablePointer<UInt32>,
                       capacity: Int, mayBeEmpty: Bool = false, codeLengthCode: Bool = false) -> Int? {
        let invalid = Entry.make(used: 1, kind: Entry.invalid, value: 0)
        var maxLength = 15
        while maxLength > 0 && counts[maxLength] == 0 { maxLength &-= 1 }
        if maxLength == 0 {
            guard mayBeEmpty else { return nil }
            table.update(repeating: invalid, count: 2)
            return 1
        }
        let rootBits = min(maxRootBits, maxLength)
        let rootSize = 1 &<< rootBits
        var left = 1
        for l in 1 ... 15 {
            left = left &<< 1 &- Int(counts[l])
            if left < 0 { return nil }  // over-subscribed
        }
        if left > 0 && (codeLengthCode || maxLength != 1) { return nil }  // incomplete
        // Canonical order: a counting sort by length (symbols of one length stay in order).
        var offsets = (UInt16(0), UInt16(0), UInt16(0), UInt16(0), UInt16(0), UInt16(0), UInt16(0), UInt16(0),
                       UInt16(0), UInt16(0), UInt16(0), UInt16(0), UInt16(0), UInt16(0), UInt16(0), UInt16(0))
        let codeCount: Int = withUnsafeMutableBytes(of: &offsets) { raw in
            let offset = raw.baseAddress!.assumingMemoryBound(to: UInt16.self)
            var sum: UInt16 = 0
            for l in 1 ... 15 {
                offset[l] = sum
                sum &+= counts[l]
            }
            // Eight lengths at a time past runs of zeros: a small message's block uses ~26 of the
            // 257+ literal/length symbols, and looking at each length was a third of the build.
            var s = 0
            let raw = UnsafeRawPointer(lengths)
            while s < count {
                if s &+ 8 <= count, raw.loadUnaligned(fromByteOffset: s, as: UInt64.self) == 0 {
                    s &+= 8
                    continue
                }
                let end = min(s &+ 8, count)
                while s < end {
                    let l = Int(lengths[s])
                    if l != 0 {
                        sorted[Int(offset[l])] = UInt16(truncatingIfNeeded: s)
                        offset[l] &+= 1
                    }
                    s &+= 1
                }
            }
            return Int(sum)
        }
        // The root table, by doubling; `code` is the canonical code (most significant bit first).
        table[0] = invalid
        var size = 1
        var code = 0
        var k = 0
        let shortest = min(rootBits, maxLength)
        for len in 1 ... shortest {
            (table + size).update(from: table, count: size)
            size &<<= 1
            for _ in 0 ..< Int(counts[len]) {
                table[Self.reverse(code, bits: len)] = entries[Int(sorted[k])] | UInt32(truncatingIfNeeded: len)
                k &+= 1
                code &+= 1
            }
            code &<<= 1
        }
        while size < rootSize {
            (table + size).update(from: table, count: size)
            size &<<= 1
        }
        guard k < codeCount else { return rootBits }
        // Longer codes, in canonical order: the codes that start with the same `rootBits` bits are
        // consecutive; each such group gets a second-level table of `2^(longest − rootBits)` entries.
        let firstLong = k
        var len = rootBits &+ 1
        var inLength = Int(counts[len])
        for i in firstLong ..< codeCount {
            while inLength == 0 {
                len &+= 1
                code &<<= 1
                inLength = Int(counts[len])
            }
            codes[i] = UInt16(truncatingIfNeeded: code)
            sorted[i] = UInt16(truncatingIfNeeded: Int(sorted[i]) | len &<< 12)  // symbol < 4096: its length above it
            code &+= 1
            inLength &-= 1
        }
        var used = rootSize
        var i = firstLong
        while i < codeCount {
            let groupLength = Int(sorted[i] >> 12)
            let prefix = Int(codes[i]) &>> (groupLength &- rootBits)
            var j = i &+ 1
            while j < codeCount {
                let l = Int(sorted[j] >> 12)
                if Int(codes[j]) &>> (l &- rootBits) != prefix { break }
                j &+= 1
            }
            let subBits = Int(sorted[j &- 1] >> 12) &- rootBits
            guard used &+ (1 &<< subBits) <= capacity, used < 1 << 16 else { return nil }
            table[Self.reverse(prefix, bits: rootBits)] = Entry.make(used: rootBits, kind: Entry.subtable, extra: subBits, value: used)
            let sub = table + used
            sub.update(repeating: invalid, count: 1 &<< subBits)
            for t in i ..< j {
                let l = Int(sorted[t] >> 12)
                let entry = entries[Int(sorted[t] & 0xFFF)] | UInt32(truncatingIfNeeded: l &- rootBits)
                var index = Self.reverse(Int(codes[t]), bits: l) &>> rootBits
                while index < 1 &<< subBits {
                    sub[index] = entry
                    index &+= 1 &<< (l &- rootBits)
                }
            }
            used &+= 1 &<< subBits
            i = j
        }
        return rootBits
    }

    /// The low `bits` bits of `code`, in reverse order: two byte lookups (a network of shifts and
    /// masks was ~20 % of the build).
    @inline(__always)
    static func reverse(_ code: Int, bits: Int) -> Int {
        reversedBytes.withUnsafeBufferPointer { r in
            let v = Int(r[code & 0xFF]) &<< 8 | Int(r[(code &>> 8) & 0xFF])
            return v &>> (16 &- bits)
        }
    }

    /// Each byte with its bits in reverse order.
    private static let reversedBytes: [UInt8] = (0 ..< 256).map { b in
        var v = 0
        for i in 0 ..< 8 where b & (1 << i) != 0 { v |= 0x80 >> i }
        return UInt8(v)
    }
}

/// Reads a DEFLATE bit stream, least significant bit first, from a whole message in memory.
/// `refill` tops the buffer up to at least 56 bits; past the input's end it shifts in zeros and
/// counts them (`overran`): the caller checks before it trusts what it decoded.
struct BitReader {
    private let base: UnsafePointer<UInt8>
    private let count: Int
    private var position = 0
    private var buffer: UInt64 = 0
    private var available = 0
    /// Zero bytes shifted in past the end of the input.
    private var padding = 0

    init(_ base: UnsafePointer<UInt8>, count: Int) {
        self.base = base
        self.count = count
    }

    /// True once more bits were taken than the input holds.
    var overran: Bool { padding > 0 && available < padding * 8 }

    /// The input's bits not yet taken.
    var remainingBits: Int { (count - position) * 8 + available - padding * 8 }

    /// Whole input bytes not yet taken (after `alignToByte`).
    var bytesLeft: Int { count - position + (available >> 3) - padding }

    @inline(__always)
    mutating func refill() {
        if position &+ 8 <= count {
            let word = UnsafeRawPointer(base + position).loadUnaligned(as: UInt64.self).littleEndian
            buffer |= word &<< UInt64(available)
            position &+= (63 &- available) &>> 3
            available |= 56
        } else {
            while available <= 56 {
                if position < count {
                    buffer |= UInt64(base[position]) &<< UInt64(available)
                    position &+= 1
                } else {
                    padding &+= 1
                }
                available &+= 8
            }
        }
    }

    /// The next bits under `mask` (2^n − 1), not taken.
    @inline(__always)
    func peek(_ mask: Int) -> Int { Int(truncatingIfNeeded: buffer) & mask }

    @inline(__always)
    mutating func drop(_ n: Int) {
        buffer &>>= UInt64(n)
        available &-= n
    }

    /// Takes the next `n` bits (n ≤ 32; the buffer must hold them).
    @inline(__always)
    mutating func take(_ n: Int) -> Int {
        let v = Int(truncatingIfNeeded: buffer) & ((1 << n) &- 1)
        drop(n)
        return v
    }

    /// Drops the bits up to the next byte boundary and gives the whole bytes still buffered back to
    /// the input (a stored block's bytes are read from there).
    mutating func alignToByte() {
        drop(available & 7)
        let buffered = available >> 3
        let real = buffered - padding
        if real >= 0 {
            position -= real
            padding = 0
        } else {
            padding -= buffered
        }
        buffer = 0
        available = 0
    }

    /// Two little-endian 16-bit values from the input (after `alignToByte`).
    mutating func takeBytes16x2() -> (Int, Int)? {
        guard padding == 0, count - position >= 4 else { return nil }
        let a = Int(base[position]) | Int(base[position + 1]) << 8
        let b = Int(base[position + 2]) | Int(base[position + 3]) << 8
        position += 4
        return (a, b)
    }

    /// Copies `n` input bytes to `to` (after `alignToByte`; `bytesLeft ≥ n`).
    mutating func copyBytes(_ n: Int, to: UnsafeMutablePointer<UInt8>) {
        to.update(from: base + position, count: n)
        position += n
    }
}
