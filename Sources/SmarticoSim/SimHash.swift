import COpenSSL
import Transport

/// Smartico's user hash (notes): `md5(lower(ext_user_id + ':' + salt + ':' + validity_ms)) + ':' + validity_ms`,
/// valid while `validity_ms >= now`.
public enum SimHash {
    /// Why a hash was refused (the `errMsg` of the errCode 100000 answer).
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// No `hash` (or null) while the simulator checks hashes.
        case missing
        /// Not `<32 hex digits>:<validity_ms>`.
        case malformed(String)
        /// `validity_ms` is in the past.
        case expired(validityMs: Int64, now: Int64)
        /// The md5 part does not match.
        case mismatch

        public var description: String {
            switch self {
            case .missing: "no hash: this server checks user hashes (md5(lower(ext_user_id:salt:validity_ms)):validity_ms)"
            case .malformed(let why): "malformed hash: \(why); expected <32 hex digits>:<validity_ms>"
            case .expired(let v, let now): "hash expired at \(v) ms (now \(now) ms, \(now - v) ms ago): get a fresh one"
            case .mismatch: "hash does not match ext_user_id, salt and validity"
            }
        }
    }

    /// Lowercase hex MD5 of the UTF-8 bytes of `text` (OpenSSL's EVP MD5).
    public static func md5Hex(_ text: String) -> String {
        OpenSSLLibrary.initialize()
        var digest = [UInt8](repeating: 0, count: 16)
        var size: UInt32 = 0
        let bytes = Array(text.utf8)
        let ok = bytes.withUnsafeBytes { buf in
            digest.withUnsafeMutableBufferPointer { out in
                EVP_Digest(buf.baseAddress, buf.count, out.baseAddress, &size, EVP_md5(), nil)
            }
        }
        precondition(ok == 1 && size == 16, "EVP_Digest(MD5) failed")
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for b in digest {
            out.append(hex[Int(b >> 4)])
            out.append(hex[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The hash an operator's backend would hand out for `extUserID`, valid until `validityMs`.
    public static func make(extUserID: String, salt: String, validityMs: Int64) -> String {
        md5Hex("\(extUserID):\(salt):\(validityMs)".lowercased()) + ":\(validityMs)"
    }

    /// Checks `hash` for `extUserID` at `now`.
    public static func check(_ hash: String?, extUserID: String, salt: String, now: Int64) -> Result<Void, Failure> {
        guard let hash, !hash.isEmpty else { return .failure(.missing) }
        guard let colon = hash.lastIndex(of: ":") else { return .failure(.malformed("no ':' before validity_ms")) }
        let digest = hash[..<colon].lowercased()
        let validityText = hash[hash.index(after: colon)...]
        guard let validity = Int64(validityText) else {
            return .failure(.malformed("validity_ms \"\(String(validityText).truncatedUTF8(40))\" is not an integer"))
        }
        guard digest.utf8.count == 32, digest.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else {
            return .failure(.malformed("the digest is not 32 hex digits"))
        }
        if validity < now { return .failure(.expired(validityMs: validity, now: now)) }
        let expected = md5Hex("\(extUserID):\(salt):\(validity)".lowercased())
        return expected == digest ? .success(()) : .failure(.mismatch)
    }
}
