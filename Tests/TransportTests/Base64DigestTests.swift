import Foundation
import SmarticoTestSupport
import Testing
import Transport

/// Base64 and the SHA digests from libcrypto: the RFCs' test vectors, Foundation as a second
/// reference, and the strictness the configuration's pins rely on.
@Suite struct Base64DigestTests {
    /// RFC 4648 §10.
    static let rfc4648: [(String, String)] = [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
    ]

    @Test func rfc4648Vectors() {
        for (raw, encoded) in Self.rfc4648 {
            #expect(Base64.encode(raw.utf8) == encoded, "\(raw)")
            #expect(Base64.decode(encoded) == Array(raw.utf8), "\(encoded)")
        }
        #expect(Base64.encode("the sample nonce".utf8) == "dGhlIHNhbXBsZSBub25jZQ==")
        #expect(Base64.decode("/+8=") == [0xFF, 0xEF])
        #expect(Base64.decode("AA==") == [0])
    }

    @Test func roundTripsAndMatchesFoundation() {
        var rng = SplitMix64(seed: 64)
        for length in 0 ..< 70 {
            let bytes = rng.bytes(length)
            let encoded = Base64.encode(bytes)
            #expect(encoded == Data(bytes).base64EncodedString(), "\(bytes)")
            #expect(Base64.decode(encoded) == bytes, "\(encoded)")
        }
    }

    /// Not base64, a wrong length, padding in the middle, whitespace at either end or inside, too
    /// much padding, non-zero bits under the padding (not the canonical spelling), the URL-safe
    /// alphabet: all refused (libcrypto alone would accept some of them).
    @Test func decodingIsStrict() {
        for bad in [
            "not base64!", "AAA", "Zg=", "AA=A", "Zg=a", "Zg==Zg==", "AAAA====", " AAAA", "AAAA ", "AAAA\n", "AA\nAA", "A===", "====",
            "AB==", "AAB=", "AA-_", "Zm9v!", "Zm9vYg==\r\n",
        ] {
            #expect(Base64.decode(bad) == nil, "\(bad.debugDescription)")
        }
        #expect(Base64.decode("") == [])
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// FIPS 180-2 examples.
    @Test func sha256Vectors() {
        #expect(Self.hex(Digest.sha256("".utf8)) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Self.hex(Digest.sha256("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Self.hex(Digest.sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(Self.hex(Digest.sha256([UInt8](repeating: UInt8(ascii: "a"), count: 1000)))
            == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
    }

    @Test func sha1Vectors() {
        #expect(Self.hex(Digest.sha1("abc".utf8)) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(Self.hex(Digest.sha1("".utf8)) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
    }

    /// RFC 6455 §1.3's example: the key "dGhlIHNhbXBsZSBub25jZQ==" is answered with
    /// base64(SHA-1(key + GUID)). (The value "s3pPLMBiTxaQ9kWGzzZxwmbaOo=" that circulates is a
    /// typo: 27 characters, where the base64 of a 20-byte digest has 28.)
    @Test func webSocketAcceptKey() {
        let key = "dGhlIHNhbXBsZSBub25jZQ=="
        #expect(Base64.encode(Digest.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)) == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        #expect(WebSocketHandshake.acceptValue(forKey: key) == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }
}
