// The event log's record checksum (docs/store.md, "The event log").

/// XXH64 (Yann Collet's xxHash, 64-bit variant, seed 0), written from its specification
/// (`doc/xxhash_spec.md` of the xxHash project): four lanes of 64-bit multiply–rotate rounds over
/// 32-byte stripes, then the tail and an avalanche. Checked against the reference implementation's
/// digests in `XXH64Tests`.
///
/// Why not CRC-32: zlib's `crc32` was 4.9 % of the daemon's perf samples at its maximum rate
/// (~1 µs for an engagement's 2 KB record; docs/benchmarks.md, 2026-11-26), XXH64 in its place
/// 1.3 %. A CRC as fast needs carry-less multiplication (PCLMULQDQ / PMULL), which Swift cannot
/// reach without C; these rounds are plain 64-bit arithmetic. A record's checksum guards against torn writes and damage, not an adversary (who
/// could rewrite any checksum): a 32-bit cut of a well-mixed 64-bit hash misses a change with
/// probability 2⁻³², as CRC-32 does for changes beyond its burst guarantees.
enum XXH64 {
    static let prime1: UInt64 = 0x9E37_79B1_85EB_CA87
    static let prime2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    static let prime3: UInt64 = 0x1656_67B1_9E37_79F9
    static let prime4: UInt64 = 0x85EB_CA77_C2B2_AE63
    static let prime5: UInt64 = 0x27D4_EB2F_1656_67C5

    /// The 64-bit digest of `bytes` with seed 0.
    static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let count = bytes.count
        guard let base = bytes.baseAddress else { return avalanche(prime5) }
        var at = 0
        var acc: UInt64
        if count >= 32 {
            var v1 = prime1 &+ prime2
            var v2 = prime2
            var v3: UInt64 = 0
            var v4: UInt64 = 0 &- prime1
            let stripes = count / 32
            for _ in 0 ..< stripes {
                v1 = round(v1, load64(base, at))
                v2 = round(v2, load64(base, at + 8))
                v3 = round(v3, load64(base, at + 16))
                v4 = round(v4, load64(base, at + 24))
                at += 32
            }
            acc = rotl(v1, 1) &+ rotl(v2, 7) &+ rotl(v3, 12) &+ rotl(v4, 18)
            acc = merge(acc, v1)
            acc = merge(acc, v2)
            acc = merge(acc, v3)
            acc = merge(acc, v4)
        } else {
            acc = prime5
        }
        acc &+= UInt64(count)
        while count - at >= 8 {
            acc ^= round(0, load64(base, at))
            acc = rotl(acc, 27) &* prime1 &+ prime4
            at += 8
        }
        if count - at >= 4 {
            acc ^= UInt64(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt32.self))) &* prime1
            acc = rotl(acc, 23) &* prime2 &+ prime3
            at += 4
        }
        while at < count {
            acc ^= UInt64(base.load(fromByteOffset: at, as: UInt8.self)) &* prime5
            acc = rotl(acc, 11) &* prime1
            at += 1
        }
        return avalanche(acc)
    }

    @inline(__always) private static func load64(_ base: UnsafeRawPointer, _ offset: Int) -> UInt64 {
        UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    @inline(__always) private static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 {
        (x &<< r) | (x &>> (64 &- r))
    }

    @inline(__always) private static func round(_ acc: UInt64, _ lane: UInt64) -> UInt64 {
        rotl(acc &+ lane &* prime2, 31) &* prime1
    }

    @inline(__always) private static func merge(_ acc: UInt64, _ lane: UInt64) -> UInt64 {
        (acc ^ round(0, lane)) &* prime1 &+ prime4
    }

    @inline(__always) private static func avalanche(_ h: UInt64) -> UInt64 {
        var h = h
        h ^= h &>> 33
        h &*= prime2
        h ^= h &>> 29
        h &*= prime3
        h ^= h &>> 32
        return h
    }
}
