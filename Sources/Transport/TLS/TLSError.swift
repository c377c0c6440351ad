/// Why a TLS connection failed; each case names the peer (host name, IP or address) it concerns.
public enum TLSError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The context could not be built (bad CA file, certificate, key), e.g. `cannot load CA file "/x": …`.
    case configuration(String)
    /// Chain verification failed. `reason` is OpenSSL's text (`X509_verify_cert_error_string`);
    /// `code` the `X509_V_ERR_*` value; `subject` the certificate that failed, when known.
    case certificateVerifyFailed(name: String, reason: String, code: Int32, subject: String?)
    /// The certificate does not cover the host name we connected to.
    case hostnameMismatch(name: String, subject: String?)
    /// The certificate does not cover the IP literal we connected to.
    case ipAddressMismatch(address: String, subject: String?)
    /// A certificate of the chain has expired.
    case certificateExpired(name: String, notAfter: String, subject: String?)
    /// A certificate of the chain is not valid yet.
    case certificateNotYetValid(name: String, notBefore: String, subject: String?)
    /// SPKI pinning is on and no certificate of the verified chain matched.
    case pinMismatch(name: String, chain: [String], expected: [String])
    /// The handshake failed for another reason (OpenSSL error queue text, peer alerts).
    case handshakeFailed(name: String, reason: String)
    /// A TLS protocol error after the handshake.
    case protocolError(name: String, reason: String)
    /// The peer closed TCP without a TLS close_notify (possible truncation attack, or a sloppy peer).
    case truncated(name: String)

    public var description: String {
        switch self {
        case .configuration(let text):
            return "TLS configuration: \(text)"
        case .certificateVerifyFailed(let name, let reason, let code, let subject):
            var text = "certificate verify failed for \"\(name)\": \(reason)"
            if TLSError.unknownCACodes.contains(code) { text += " (unknown CA)" }
            if let subject { text += " [certificate \(subject)]" }
            return text
        case .hostnameMismatch(let name, let subject):
            return "hostname mismatch: certificate is not valid for \"\(name)\""
                + (subject.map { " (certificate subject \($0))" } ?? "")
        case .ipAddressMismatch(let address, let subject):
            return "IP address mismatch: certificate is not valid for \(address)"
                + (subject.map { " (certificate subject \($0))" } ?? "")
        case .certificateExpired(let name, let notAfter, let subject):
            return "certificate expired (notAfter \(notAfter)) for \"\(name)\""
                + (subject.map { " [certificate \($0)]" } ?? "")
        case .certificateNotYetValid(let name, let notBefore, let subject):
            return "certificate not yet valid (notBefore \(notBefore)) for \"\(name)\""
                + (subject.map { " [certificate \($0)]" } ?? "")
        case .pinMismatch(let name, let chain, let expected):
            return "SPKI pin mismatch for \"\(name)\": chain has [\(chain.joined(separator: ", "))], "
                + "expected one of [\(expected.joined(separator: ", "))]"
        case .handshakeFailed(let name, let reason):
            return "TLS handshake with \"\(name)\" failed: \(reason)"
        case .protocolError(let name, let reason):
            return "TLS error with \"\(name)\": \(reason)"
        case .truncated(let name):
            return "TLS connection with \"\(name)\" closed without close_notify (truncated)"
        }
    }

    /// X509_V_ERR codes meaning "the issuer is not trusted / not found".
    static let unknownCACodes: Set<Int32> = [
        2,  // X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT
        18,  // X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT
        19,  // X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN
        20,  // X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY
        21,  // X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE
    ]
}
