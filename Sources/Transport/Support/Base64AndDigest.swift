// Base64 and the SHA digests, from libcrypto: the TLS pins, the WebSocket accept key, the proxy's
// `Proxy-Authorization`, the daemon's configuration.
import COpenSSL

/// Base64 (RFC 4648 §4: the standard alphabet, padded, no line breaks).
public enum Base64 {
    /// `bytes` as padded base64.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        let input = Array(bytes)
        var out = [UInt8](repeating: 0, count: (input.count + 2) / 3 * 4 + 1)  // + the NUL it writes
        let count = EVP_EncodeBlock(&out, input, Int32(input.count))
        return String(decoding: out[..<Int(count)], as: UTF8.self)
    }

    /// The bytes of strict base64: the standard alphabet, a multiple of 4 characters, at most two
    /// `=` and only at the end, no whitespace, zero bits under the padding (the one canonical
    /// spelling of the bytes). Nil for anything else.
    public static func decode(_ text: String) -> [UInt8]? {
        let input = Array(text.utf8)
        guard input.count % 4 == 0, input.count < Int32.max else { return nil }
        var out = [UInt8](repeating: 0, count: input.count / 4 * 3)
        // EVP_DecodeBlock skips whitespace at either end, reads `=` as zero bits anywhere and counts
        // the bytes under the padding: the length is corrected, and anything but the canonical
        // spelling is refused by encoding the result again.
        let decoded = Int(EVP_DecodeBlock(&out, input, Int32(input.count)))
        let padding = input.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard decoded >= padding, decoded - padding <= out.count else { return nil }
        out.removeLast(out.count - (decoded - padding))
        return Array(encode(out).utf8) == input ? out : nil
    }
}

/// SHA digests (libcrypto's one-shot functions).
public enum Digest {
    /// SHA-256 of `bytes` (32 bytes).
    public static func sha256(_ bytes: some Collection<UInt8>) -> [UInt8] {
        oneShot(bytes, length: SHA256_DIGEST_LENGTH, SHA256)
    }

    /// SHA-1 of `bytes` (20 bytes): only for `Sec-WebSocket-Accept` (RFC 6455 §4.2.2).
    public static func sha1(_ bytes: some Collection<UInt8>) -> [UInt8] {
        oneShot(bytes, length: SHA_DIGEST_LENGTH, SHA1)
    }

    /// `bytes` through one of libcrypto's one-shot digest functions, whose output is `length` bytes.
    private static func oneShot(
        _ bytes: some Collection<UInt8>, length: Int32,
        _ function: (UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<UInt8>?) -> UnsafeMutablePointer<UInt8>?
    ) -> [UInt8] {
        OpenSSLLibrary.initialize()
        let input = Array(bytes)
        var digest = [UInt8](repeating: 0, count: Int(length))
        _ = function(input, input.count, &digest)
        return digest
    }
}
