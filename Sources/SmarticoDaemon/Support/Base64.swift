/// Base64 (RFC 4648 §4, the standard alphabet, padded), for TLS pins and the proxy's
/// `Proxy-Authorization`. Configuration-time only, not a hot path; no Foundation.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// The value of each alphabet byte, 0xFF for anything else.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in alphabet.enumerated() { table[Int(c)] = UInt8(i) }
        return table
    }()

    /// `bytes` as padded base64.
    static func encode<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
        let input = Array(bytes)
        var out: [UInt8] = []
        out.reserveCapacity((input.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= input.count {
            let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            i += 3
        }
        switch input.count - i {
        case 1:
            let n = UInt32(input[i]) << 16
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        case 2:
            let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], UInt8(ascii: "=")]
        default:
            break
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of strict base64: a multiple of 4 characters of the standard alphabet, at most
    /// two `=` and only at the end, no whitespace, and zero bits where the padding is (the one
    /// canonical spelling of the bytes). Nil for anything else.
    static func decode(_ text: String) -> [UInt8]? {
        let input = Array(text.utf8)
        guard input.count % 4 == 0 else { return nil }
        var padding = 0
        if input.last == UInt8(ascii: "=") {
            padding = input[input.count - 2] == UInt8(ascii: "=") ? 2 : 1
        }
        var out: [UInt8] = []
        out.reserveCapacity(input.count / 4 * 3)
        var i = 0
        while i < input.count {
            let last = i + 4 == input.count
            var n: UInt32 = 0
            for k in 0..<4 {
                let c = input[i + k]
                if last, k >= 4 - padding {
                    n <<= 6  // a padding position
                    continue
                }
                let v = values[Int(c)]
                guard v != 0xFF else { return nil }
                n = n << 6 | UInt32(v)
            }
            let produced = last ? 3 - padding : 3
            // Non-zero bits under the padding: not the canonical spelling.
            if last, padding == 1, n & 0xFF != 0 { return nil }
            if last, padding == 2, n & 0xFFFF != 0 { return nil }
            for k in 0..<produced { out.append(UInt8(truncatingIfNeeded: n >> UInt32(16 - 8 * k))) }
            i += 4
        }
        return out
    }
}
