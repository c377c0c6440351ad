#if canImport(Glibc)
import Glibc
#endif
import COpenSSL

/// What was negotiated, for diagnostics.
public struct TLSConnectionInfo: Sendable, CustomStringConvertible {
    /// e.g. "TLSv1.3".
    public var version: String
    /// e.g. "TLS_AES_256_GCM_SHA384".
    public var cipher: String
    /// ALPN protocol chosen by the server, if any.
    public var alpnProtocol: String?
    /// Peer certificate subject/issuer (OpenSSL one-line form, e.g. "/CN=localhost"), notAfter (ISO 8601).
    public var peerSubject: String?
    public var peerIssuer: String?
    public var peerNotAfter: String?
    /// SPKI SHA-256 pins (base64) of the verified chain, leaf first (client side).
    public var chainSPKIPins: [String]
    /// Server side: the SNI host name the client sent (nil when it sent none, e.g. for IP literals).
    public var serverName: String?

    public var description: String {
        "\(version) \(cipher), peer \(peerSubject ?? "-") issued by \(peerIssuer ?? "-"), notAfter \(peerNotAfter ?? "-")"
    }
}

/// A sans-I/O TLS engine over OpenSSL memory BIOs: feed it ciphertext from the network, take the ciphertext
/// it wants sent, read and write plaintext. It performs no I/O and keeps no clock. One per connection;
/// not thread-safe (use it from one thread, e.g. the event loop). ``StreamConnection`` drives it.
public final class TLSEngine {
    public enum HandshakeResult: Equatable {
        case complete
        /// More ciphertext from the peer is needed (send ``pendingOutput`` first).
        case needsInput
        case failed(TLSError)
    }

    public enum ReadResult: Equatable {
        /// `n` plaintext bytes were written into the buffer.
        case bytes(Int)
        /// No plaintext available until more ciphertext is fed.
        case needsInput
        /// The peer sent close_notify: no more plaintext will come.
        case closed
        case failed(TLSError)
    }

    private let ssl: OpaquePointer
    private let readBIO: OpaquePointer
    private let writeBIO: OpaquePointer
    public let context: TLSContext
    /// The name used for verification and in errors (host, IP literal or peer address).
    public let peerName: String
    public private(set) var isHandshakeComplete = false
    public private(set) var info: TLSConnectionInfo?
    private var verifyFailure: TLSError?
    private var closeNotifySent = false

    /// A client engine verifying `serverName` (a host name gets SNI and hostname verification; an IP literal
    /// gets IP verification and no SNI).
    public convenience init(clientContext: TLSContext, serverName: String) throws(TLSError) {
        precondition(clientContext.role == .client)
        try self.init(context: clientContext, peerName: serverName)
        let param = SSL_get0_param(ssl)
        let literal = serverName.hasPrefix("[") && serverName.hasSuffix("]")
            ? String(serverName.dropFirst().dropLast()) : serverName
        if tlsIsIPLiteral(literal) {
            guard X509_VERIFY_PARAM_set1_ip_asc(param, literal) == 1 else {
                throw .configuration("invalid IP address \"\(literal)\"")
            }
        } else {
            X509_VERIFY_PARAM_set_hostflags(param, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
            guard X509_VERIFY_PARAM_set1_host(param, literal, 0) == 1,
                smartico_SSL_set_tlsext_host_name(ssl, literal) == 1
            else {
                throw .configuration("invalid host name \"\(literal)\": \(tlsErrorQueueText())")
            }
        }
        SSL_set_connect_state(ssl)
    }

    /// A server engine; `peerName` (e.g. the client's address) is used in errors only.
    public convenience init(serverContext: TLSContext, peerName: String) throws(TLSError) {
        precondition(serverContext.role == .server)
        try self.init(context: serverContext, peerName: peerName)
        SSL_set_accept_state(ssl)
    }

    private init(context: TLSContext, peerName: String) throws(TLSError) {
        ERR_clear_error()
        guard let ssl = SSL_new(context.ctx) else { throw .configuration("SSL_new failed: \(tlsErrorQueueText())") }
        guard let rbio = BIO_new(BIO_s_mem()), let wbio = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw .configuration("BIO_new failed: \(tlsErrorQueueText())")
        }
        // An empty read BIO means "retry later", not EOF.
        BIO_set_flags(rbio, BIO_FLAGS_READ | BIO_FLAGS_SHOULD_RETRY)
        _ = BIO_ctrl(rbio, BIO_C_SET_BUF_MEM_EOF_RETURN, -1, nil)
        _ = BIO_ctrl(wbio, BIO_C_SET_BUF_MEM_EOF_RETURN, -1, nil)
        SSL_set_bio(ssl, rbio, wbio)  // the SSL owns both BIOs now
        self.ssl = ssl
        self.readBIO = rbio
        self.writeBIO = wbio
        self.context = context
        self.peerName = peerName
        SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit { SSL_free(ssl) }

    // MARK: Ciphertext

    /// Hands ciphertext received from the network to the engine.
    public func feed(_ ciphertext: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < ciphertext.count {
            let chunk = min(ciphertext.count - offset, Int(Int32.max))
            let written = BIO_write(readBIO, ciphertext.baseAddress! + offset, Int32(chunk))
            if written <= 0 { break }  // memory BIO: only on allocation failure
            offset += Int(written)
        }
    }

    /// Number of ciphertext bytes waiting to be sent.
    public var pendingOutputCount: Int { Int(BIO_ctrl_pending(writeBIO)) }

    /// Lends the ciphertext waiting to be sent; the engine forgets it after `body` returns.
    public func withPendingOutput<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var pointer: UnsafeMutablePointer<CChar>? = nil
        let length = smartico_BIO_get_mem_data(writeBIO, &pointer)
        defer { if length > 0 { _ = BIO_ctrl(writeBIO, BIO_CTRL_RESET, 0, nil) } }
        return try body(UnsafeRawBufferPointer(start: pointer, count: length > 0 ? Int(length) : 0))
    }

    /// Takes the pending ciphertext as an array (convenience for tests).
    public func takePendingOutput() -> [UInt8] {
        withPendingOutput { Array($0) }
    }

    // MARK: Handshake

    /// Advances the handshake with what has been fed so far.
    public func handshake() -> HandshakeResult {
        if isHandshakeComplete { return .complete }
        ERR_clear_error()
        let rc = SSL_do_handshake(ssl)
        if rc == 1 {
            if let failure = checkPins() {
                return .failed(failure)
            }
            isHandshakeComplete = true
            info = makeInfo()
            return .complete
        }
        let code = SSL_get_error(ssl, rc)
        if code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE { return .needsInput }
        return .failed(handshakeError())
    }

    /// The error for a failed handshake, when the peer simply went away.
    public func handshakeInterrupted() -> TLSError {
        .handshakeFailed(name: peerName, reason: "connection closed by the peer during the handshake")
    }

    private func handshakeError() -> TLSError {
        let queue = tlsErrorQueueText()
        if let verifyFailure { return verifyFailure }
        let result = Int32(SSL_get_verify_result(ssl))
        if result != X509_V_OK {
            return verifyError(code: result, certificate: nil)
        }
        return .handshakeFailed(name: peerName, reason: queue)
    }

    func recordVerifyFailure(code: Int32, depth: Int32, certificate: OpaquePointer?) {
        if verifyFailure == nil {
            verifyFailure = verifyError(code: code, certificate: certificate)
        }
    }

    private func verifyError(code: Int32, certificate: OpaquePointer?) -> TLSError {
        let subject = certificate.flatMap { nameLine(X509_get_subject_name($0)) }
        switch code {
        case X509_V_ERR_HOSTNAME_MISMATCH:
            return .hostnameMismatch(name: peerName, subject: subject)
        case X509_V_ERR_IP_ADDRESS_MISMATCH:
            return .ipAddressMismatch(address: peerName, subject: subject)
        case X509_V_ERR_CERT_HAS_EXPIRED:
            let notAfter = certificate.flatMap { formatTime(X509_get0_notAfter($0)) } ?? "unknown"
            return .certificateExpired(name: peerName, notAfter: notAfter, subject: subject)
        case X509_V_ERR_CERT_NOT_YET_VALID:
            let notBefore = certificate.flatMap { formatTime(X509_get0_notBefore($0)) } ?? "unknown"
            return .certificateNotYetValid(name: peerName, notBefore: notBefore, subject: subject)
        default:
            let reason = X509_verify_cert_error_string(Int(code)).map { String(cString: $0) } ?? "error \(code)"
            return .certificateVerifyFailed(name: peerName, reason: reason, code: code, subject: subject)
        }
    }

    private func checkPins() -> TLSError? {
        let pins = context.spkiPins
        guard !pins.isEmpty else { return nil }
        let chain = verifiedChainPins()
        if chain.contains(where: { pins.contains($0) }) { return nil }
        return .pinMismatch(name: peerName, chain: chain, expected: pins)
    }

    private func verifiedChainPins() -> [String] {
        guard let chain = SSL_get0_verified_chain(ssl) else { return [] }
        var pins: [String] = []
        for index in 0..<smartico_sk_X509_num(chain) {
            if let cert = smartico_sk_X509_value(chain, index), let pin = TLSEngine.spkiPin(of: cert) {
                pins.append(pin)
            }
        }
        return pins
    }

    /// Base64 SHA-256 of the DER SubjectPublicKeyInfo of an `X509*`.
    static func spkiPin(of certificate: OpaquePointer) -> String? {
        guard let publicKey = X509_get_X509_PUBKEY(certificate) else { return nil }
        let length = i2d_X509_PUBKEY(publicKey, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_X509_PUBKEY(publicKey, &cursor)
        }
        guard written == length else { return nil }
        return Base64.encode(Digest.sha256(der))
    }

    private func makeInfo() -> TLSConnectionInfo {
        let version = SSL_get_version(ssl).map { String(cString: $0) } ?? "unknown"
        let cipher = SSL_CIPHER_get_name(SSL_get_current_cipher(ssl)).map { String(cString: $0) } ?? "unknown"
        var alpnPointer: UnsafePointer<UInt8>? = nil
        var alpnLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &alpnPointer, &alpnLength)
        let alpn = alpnPointer.flatMap { alpnLength > 0 ? String(decoding: UnsafeBufferPointer(start: $0, count: Int(alpnLength)), as: UTF8.self) : nil }
        var info = TLSConnectionInfo(
            version: version, cipher: cipher, alpnProtocol: alpn, peerSubject: nil, peerIssuer: nil,
            peerNotAfter: nil, chainSPKIPins: [], serverName: nil)
        if let peer = SSL_get1_peer_certificate(ssl) {
            info.peerSubject = nameLine(X509_get_subject_name(peer))
            info.peerIssuer = nameLine(X509_get_issuer_name(peer))
            info.peerNotAfter = formatTime(X509_get0_notAfter(peer))
            X509_free(peer)
        }
        if context.role == .client { info.chainSPKIPins = verifiedChainPins() }
        if context.role == .server {
            info.serverName = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name).map { String(cString: $0) }
        }
        return info
    }

    // MARK: Plaintext

    /// Decrypts into `buffer` as much as is available.
    public func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
        ERR_clear_error()
        let rc = SSL_read(ssl, buffer.baseAddress, Int32(min(buffer.count, Int(Int32.max))))
        if rc > 0 { return .bytes(Int(rc)) }
        switch SSL_get_error(ssl, rc) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return .needsInput
        case SSL_ERROR_ZERO_RETURN: return .closed
        default: return .failed(.protocolError(name: peerName, reason: tlsErrorQueueText()))
        }
    }

    /// Encrypts all of `plaintext` into the pending output. Only after the handshake.
    public func write(_ plaintext: UnsafeRawBufferPointer) -> TLSError? {
        precondition(isHandshakeComplete, "TLSEngine.write before the handshake completed")
        var offset = 0
        while offset < plaintext.count {
            ERR_clear_error()
            let chunk = min(plaintext.count - offset, 1 << 30)
            let rc = SSL_write(ssl, plaintext.baseAddress! + offset, Int32(chunk))
            if rc <= 0 {
                return .protocolError(name: peerName, reason: "SSL_write: \(tlsErrorQueueText())")
            }
            offset += Int(rc)
        }
        return nil
    }

    /// Queues a close_notify alert into the pending output (once).
    public func close() {
        guard !closeNotifySent else { return }
        closeNotifySent = true
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    /// True once the peer's close_notify was read.
    public var receivedCloseNotify: Bool {
        SSL_get_shutdown(ssl) & SSL_RECEIVED_SHUTDOWN != 0
    }
}

/// "/CN=…/O=…" form of an X509_NAME.
private func nameLine(_ name: OpaquePointer?) -> String? {
    guard let name else { return nil }
    var buffer = [CChar](repeating: 0, count: 512)
    guard X509_NAME_oneline(name, &buffer, Int32(buffer.count)) != nil else { return nil }
    return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}

/// ISO 8601 UTC form of an ASN1_TIME, e.g. "2020-01-01T00:00:00Z".
private func formatTime(_ time: UnsafePointer<ASN1_TIME>?) -> String? {
    guard let time else { return nil }
    var parts = tm()
    guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
    func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
    return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
        + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
}

/// True for IPv4/IPv6 literals (no brackets).
func tlsIsIPLiteral(_ text: String) -> Bool {
    var v4 = in_addr()
    var v6 = in6_addr()
    return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
}
