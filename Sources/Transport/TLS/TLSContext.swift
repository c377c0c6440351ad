#if canImport(Glibc)
import Glibc
#endif
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
    public convenience init(client config: TLSClientConfiguration) throws(TLSError) {
        try self.init(client: config, systemTrust: nil)
    }

    /// A client context; `systemTrust` overrides the choice ``systemTrustSource()`` makes for `.system` (tests).
    init(client config: TLSClientConfiguration, systemTrust: SystemTrustSource?) throws(TLSError) {
        OpenSSLLibrary.initialize()
        guard let ctx = SSL_CTX_new(TLS_client_method()) else {
            throw .configuration("SSL_CTX_new failed: \(tlsErrorQueueText())")
        }
        self.ctx = ctx
        self.role = .client
        self.spkiPins = config.spkiPins
        try setCommon(minimum: config.minimumVersion)
        switch config.trustRoots {
        case .system:
            switch systemTrust ?? Self.systemTrustSource() {
            case .defaultPaths:
                guard SSL_CTX_set_default_verify_paths(ctx) == 1 else {
                    throw .configuration("cannot load the system CA store: \(tlsErrorQueueText())")
                }
            case .hashedDirectories(let directories):
                guard let store = SSL_CTX_get_cert_store(ctx),
                    let lookup = X509_STORE_add_lookup(store, X509_LOOKUP_hash_dir()),
                    smartico_X509_LOOKUP_add_dir(lookup, directories) == 1
                else {
                    throw .configuration("cannot use the system CA directory \"\(directories)\": \(tlsErrorQueueText())")
                }
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
        OpenSSLLibrary.initialize()
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

    /// Where `.system` trust roots come from.
    enum SystemTrustSource: Equatable {
        /// OpenSSL's defaults (`SSL_CTX_set_default_verify_paths`): its default CA file, parsed whole into the
        /// context, and its default directory.
        case defaultPaths
        /// Only the hashed directory (or `:`-separated directories): a CA is read when a chain names it.
        case hashedDirectories(String)
    }

    /// Chooses how to load the system store. OpenSSL's defaults parse every certificate of the default CA file
    /// (on Debian `/usr/lib/ssl/cert.pem` → `ca-certificates.crt`, ~140 CAs) into the context at once and hold
    /// them as long as the context lives, a large share of an idle daemon's heap for a session that needs one or
    /// two of them. The system's hashed directory (`update-ca-certificates`/`c_rehash`
    /// builds it from the same CAs as the bundle) holds the same roots, read on demand. So: the directory
    /// (`SSL_CERT_DIR` or OpenSSL's default) when it holds hashed names (`1a2b3c4d.0`); OpenSSL's defaults
    /// when `SSL_CERT_FILE` names a file (the operator chose it) or no directory is hashed (a distribution
    /// that ships only a bundle).
    static func systemTrustSource(
        environment: (String) -> String? = { name in getenv(name).map { String(cString: $0) } },
        defaultDirectory: String = String(cString: X509_get_default_cert_dir()),
        hasHashedEntry: (String) -> Bool = directoryHasHashedEntry
    ) -> SystemTrustSource {
        if let file = environment(String(cString: X509_get_default_cert_file_env())), !file.isEmpty {
            return .defaultPaths
        }
        let configured = environment(String(cString: X509_get_default_cert_dir_env())) ?? ""
        let directories = configured.isEmpty ? defaultDirectory : configured
        let hashed = directories.split(separator: ":").contains { hasHashedEntry(String($0)) }
        return hashed ? .hashedDirectories(directories) : .defaultPaths
    }

    /// Whether `path` is a directory holding a certificate under a hashed name (8 hex digits, `.`, digits).
    static func directoryHasHashedEntry(_ path: String) -> Bool {
        guard let dir = opendir(path) else { return false }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let found = withUnsafeBytes(of: entry.pointee.d_name) { raw -> Bool in
                let name = raw.prefix { $0 != 0 }
                return isHashedCertificateName(name)
            }
            if found { return true }
        }
        return false
    }

    /// `1a2b3c4d.0`: a certificate's subject-name hash and a collision counter (`.r0` names a CRL: not counted).
    static func isHashedCertificateName(_ name: some Collection<UInt8>) -> Bool {
        let bytes = Array(name)
        guard bytes.count >= 10, bytes[8] == UInt8(ascii: ".") else { return false }
        let isHex = { (b: UInt8) in (b >= 48 && b <= 57) || (b >= 97 && b <= 102) || (b >= 65 && b <= 70) }
        let isDigit = { (b: UInt8) in b >= 48 && b <= 57 }
        return bytes[..<8].allSatisfy(isHex) && bytes[9...].allSatisfy(isDigit)
    }

    /// How many certificates (and CRLs) the context's store holds in memory now.
    var storedTrustObjectCount: Int {
        guard let store = SSL_CTX_get_cert_store(ctx) else { return 0 }
        return Int(smartico_X509_STORE_object_count(store))
    }

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
