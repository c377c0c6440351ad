// The event log's record checksum against the reference implementation's digests.
import Testing
@testable import SmarticoDaemon

@Suite struct XXH64Tests {
    /// Byte i of the test inputs.
    static func pattern(_ count: Int) -> [UInt8] { (0 ..< count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) } }

    /// Digests from the reference implementation (Python's `xxhash` 3.x, `xxh64(bytes).intdigest()`,
    /// seed 0) of `pattern(n)`: every length through the 32-byte stripes and the 8-, 4- and 1-byte
    /// tails, and an engagement record's size.
    static let reference: [(Int, UInt64)] = [
        (0, 0xEF46DB3751D8E999), (1, 0xA96C7F0CE858BBB7), (2, 0xAC378C5993CD5F9A), (3, 0x56E6957632A487F9),
        (4, 0xC60D15B1E3FF8F04), (5, 0x808815858624DD4E), (7, 0xAFBEFC3D6C6F9A8E), (8, 0x3DA5C7AA269683E0),
        (9, 0x4B17A9BA9E215C09), (12, 0x8FE8AB1C1FD0666E), (15, 0xAE2A37EB9357CAA7), (16, 0xA19AD429B02BC413),
        (31, 0x4A74F3A1A39AD4A1), (32, 0x8D57D6A4671CC43D), (33, 0x62C9FD21ED857664), (36, 0xA4475C606B0ABC3C),
        (39, 0x1789542489E59CC4), (40, 0x49B45332E280F187), (44, 0xA6B69C7CEE5D5B54), (47, 0x05E3AB06C6BB0A6B),
        (63, 0x5C320A0D2707057F), (64, 0x7BBABBC45729D17E), (65, 0xF3980C34BAE65DC1), (71, 0x31BF591B718974D1),
        (2050, 0xCE073CC586317646), (4096, 0xE21174BE82DC78D9),
    ]

    @Test func matchesTheReferenceDigests() {
        for (count, digest) in Self.reference {
            let got = Self.pattern(count).withUnsafeBytes { XXH64.hash($0) }
            #expect(got == digest, "length \(count): \(String(got, radix: 16)) against \(String(digest, radix: 16))")
        }
        // The specification's own examples.
        #expect(Array("a".utf8).withUnsafeBytes { XXH64.hash($0) } == 0xD24EC4F1A98C6E5B)
        #expect(Array("abc".utf8).withUnsafeBytes { XXH64.hash($0) } == 0x44BC2CF5AD770999)
    }

    /// Every single-bit change of a record-sized input changes the 32 bits the event log keeps.
    @Test func everyBitFlipOfARecordChangesTheKeptBits() {
        var bytes = Self.pattern(300)
        let clean = UInt32(truncatingIfNeeded: bytes.withUnsafeBytes { XXH64.hash($0) })
        var missed = 0
        for i in bytes.indices {
            for bit in 0 ..< 8 {
                bytes[i] ^= 1 << bit
                if UInt32(truncatingIfNeeded: bytes.withUnsafeBytes { XXH64.hash($0) }) == clean { missed += 1 }
                bytes[i] ^= 1 << bit
            }
        }
        #expect(missed == 0)
    }
}
