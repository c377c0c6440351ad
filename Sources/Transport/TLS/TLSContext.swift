import COpenSSL

/// Lowest TLS version accepted.
public enum TLSVersion: Sendable {
    case tls12, tls13
    var openSSLValue: Int32 { self == .tls12 ? TLS1_2_VERSION : TLS1_3_VERSION }
}

/// Client settings. Verification is always on: the chain against the trust roots, then the host name
/// (or IP literal), then the SPKI pins if any.
public struct TLSClientConfiguration: Sendable {
    /// Where trusted CA certificates come from.
    public enum TrustRoots: Sendable {
        /// The system store (`SSL_CTX_set_default_verify_paths`).
        case system
        /// A PEM file of CA certificates (only these are trusted).
        case caFile(String)
    }
    public var trustRoots: TrustRoots
    /// Base64 of SHA-256 of the DER SubjectPublicKeyInfo. When non-empty, at least one certificate of the
    /// verified chain must match one pin.
    public var spkiPins: [String]
    /// Client certificate chain (PEM) and key, for servers that ask for one.
    public var certificateChainFile: String?
    public var privateKeyFile: String?
    public var minimumVersion: TLSVersion
    /// ALPN protocols to offer (e.g. ["http/1.1"]); empty for none.
    public var alpnProtocols: [String]

    public init(
        trustRoots: TrustRoots = .system, spkiPins: [String] = [], certificateChainFile: String? = nil,
        privateKeyFile: String? = nil, minimumVersion: TLSVersion = .tls12, alpnProtocols: [String] = []
    ) {
        self.trustRoots = trustRoots
        self.spkiPins = spkiPins
        self.certificateChainFile = certificateChainFile
        self.privateKeyFile = privateKeyFile
        self.minimumVersion = minimumVersion
        self.alpnProtocols = alpnProtocols
    }
}

/// Server settings: certificate chain and key from PEM files, TLS 1.2+.
public struct TLSServerConfiguration: Sendable {
    public var certificateChainFile: String
    public var privateKeyFile: String
    /// When set, clients must present a certificate issued by a CA in this PEM file.
    public var clientCAFile: String?
    public var minimumVersion: TLSVersion

    public init(
        certificateChainFile: String, privateKeyFile: String, clientCAFile: String? = nil,
        minimumVersion: TLSVersion = .tls12
    ) {
        self.certificateChainFile = certificateChainFile
        self.privateKeyFile = privateKeyFile
        self.clientCAFile = clientCAFile
        self.minimumVersion = minimumVersion
    }
}

/// A configured `SSL_CTX`, shared by many connections. Build once (it reads files: do it at startup or on
/// the blocking pool), then create a ``TLSEngine`` per connection.
public final class TLSContext:
    // SSL_CTX is internally locked/reference-counted and we never mutate it after init; OpenSSL documents
    // SSL_new from several threads on one configured SSL_CTX as safe.
    @unchecked Sendable
{
    public enum Role: Sendable { case client, server }
    let ctx: OpaquePointer
    public let role: Role
    /// Client pins (empty: no pinning).
    public let spkiPins: [String]

    /// A client context.
    public init(client config: TLSClientConfiguration) throws(TLSError) {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else {
            throw .configuration("SSL_CTX_new failed: \(tlsErrorQueueText())")
        }
        self.ctx = ctx
        self.role = .client
        self.spkiPins = config.spkiPins
        try setCommon(minimum: config.minimumVersion)
        switch config.trustRoots {
        case .system:
            guard SSL_CTX_set_default_verify_paths(ctx) == 1 else {
                throw .configuration("cannot load the system CA store: \(tlsErrorQueueText())")
            }
        case .caFile(let path):
            guard SSL_CTX_load_verify_locations(ctx, path, nil) == 1 else {
                throw .configuration("cannot load CA file \"\(path)\": \(tlsErrorQueueText())")
            }
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, tlsVerifyCallback)
        if let chain = config.certificateChainFile {
            try loadIdentity(chain: chain, key: config.privateKeyFile ?? chain)
        }
        if !config.alpnProtocols.isEmpty {
            var wire: [UInt8] = []
            for proto in config.alpnProtocols {
                let bytes = Array(proto.utf8)
                guard !bytes.isEmpty && bytes.count < 256 else {
                    throw .configuration("invalid ALPN protocol name \"\(proto)\"")
                }
                wire.append(UInt8(bytes.count))
                wire += bytes
            }
            // Returns 0 on success (sic).
            guard SSL_CTX_set_alpn_protos(ctx, wire, UInt32(wire.count)) == 0 else {
                throw .configuration("cannot set ALPN protocols: \(tlsErrorQueueText())")
            }
        }
    }

    /// A server context.
    public init(server config: TLSServerConfiguration) throws(TLSError) {
        guard let ctx = SSL_CTX_new(TLS_server_method()) else {
            throw .configuration("SSL_CTX_new failed: \(tlsErrorQueueText())")
        }
        self.ctx = ctx
        self.role = .server
        self.spkiPins = []
        try setCommon(minimum: config.minimumVersion)
        try loadIdentity(chain: config.certificateChainFile, key: config.privateKeyFile)
        if let caFile = config.clientCAFile {
            guard SSL_CTX_load_verify_locations(ctx, caFile, nil) == 1 else {
                throw .configuration("cannot load client CA file \"\(caFile)\": \(tlsErrorQueueText())")
            }
            if let names = SSL_load_client_CA_file(caFile) {
                SSL_CTX_set_client_CA_list(ctx, names)
            }
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, tlsVerifyCallback)
        } else {
            SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
        }
    }

    /// Builds a client context on `pool` (it reads the CA file or the system store: blocking file I/O).
    public static func load(client config: TLSClientConfiguration, pool: BlockingPool = .shared) async throws(TLSError)
        -> TLSContext
    {
        try await pool.run { () throws(TLSError) -> TLSContext in try TLSContext(client: config) }
    }

    /// Builds a server context on `pool` (it reads the certificate and key files).
    public static func load(server config: TLSServerConfiguration, pool: BlockingPool = .shared) async throws(TLSError)
        -> TLSContext
    {
        try await pool.run { () throws(TLSError) -> TLSContext in try TLSContext(server: config) }
    }

    deinit { SSL_CTX_free(ctx) }

    private func setCommon(minimum: TLSVersion) throws(TLSError) {
        guard smartico_SSL_CTX_set_min_proto_version(ctx, minimum.openSSLValue) == 1 else {
            throw .configuration("cannot set minimum TLS version: \(tlsErrorQueueText())")
        }
        // Memory BIOs never block, so partial writes are not needed; release idle buffers (many connections).
        _ = smartico_SSL_CTX_set_mode(ctx, Int(SSL_MODE_RELEASE_BUFFERS))
    }

    private func loadIdentity(chain: String, key: String) throws(TLSError) {
        guard SSL_CTX_use_certificate_chain_file(ctx, chain) == 1 else {
            throw .configuration("cannot load certificate chain \"\(chain)\": \(tlsErrorQueueText())")
        }
        guard SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) == 1 else {
            throw .configuration("cannot load private key \"\(key)\": \(tlsErrorQueueText())")
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            throw .configuration("private key \"\(key)\" does not match certificate \"\(chain)\": \(tlsErrorQueueText())")
        }
    }
}

/// Drains the thread's OpenSSL error queue into one line ("none" when empty).
func tlsErrorQueueText() -> String {
    var parts: [String] = []
    var buffer = [CChar](repeating: 0, count: 256)
    while true {
        let code = ERR_get_error()
        if code == 0 { break }
        ERR_error_string_n(code, &buffer, buffer.count)
        let text = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        if parts.count < 4 { parts.append(text) }
    }
    return parts.isEmpty ? "no OpenSSL error reported" : parts.joined(separator: "; ")
}

/// Records the first verification failure on the engine, then lets OpenSSL decide (returns `ok`).
let tlsVerifyCallback: @convention(c) (Int32, OpaquePointer?) -> Int32 = { ok, store in
    if ok == 1 { return 1 }
    guard let store,
        let sslPointer = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()),
        let enginePointer = SSL_get_ex_data(OpaquePointer(sslPointer), 0)
    else { return ok }
    let engine = Unmanaged<TLSEngine>.fromOpaque(enginePointer).takeUnretainedValue()
    engine.recordVerifyFailure(
        code: X509_STORE_CTX_get_error(store),
        depth: X509_STORE_CTX_get_error_depth(store),
        certificate: X509_STORE_CTX_get_current_cert(store))
    return ok
}
