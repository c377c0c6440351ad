import COpenSSL

/// OpenSSL's one-time initialisation, without its exit handler.
///
/// By default libcrypto registers `OPENSSL_cleanup` with `atexit` at its first use. At exit that
/// frees OpenSSL's global state and deletes its thread-local keys while other threads may still
/// be running: a thread still inside OpenSSL then works on freed state, and a thread that ends
/// afterwards never frees its per-thread random generator (LeakSanitizer reported that one:
/// docs/reliability.md, "AddressSanitizer"; Tests/sanitizers/lsan-openssl-thread-exit-repro.c).
/// A daemon gains nothing from that clean-up, since the process's memory goes back to the system
/// anyway. So every function of this package that reaches libcrypto's initialisation (TLS
/// contexts, `RAND_bytes`, the digests; base64 does not) calls ``initialize()`` first.
public enum OpenSSLLibrary {
    /// Initialises OpenSSL once with `OPENSSL_INIT_NO_ATEXIT`. It only takes effect as the
    /// process's first OpenSSL call; later calls cost one atomic load.
    public static func initialize() {
        _ = initialized
    }

    private static let initialized: Bool = {
        let options = UInt64(OPENSSL_INIT_NO_ATEXIT) | UInt64(OPENSSL_INIT_LOAD_SSL_STRINGS)
            | UInt64(OPENSSL_INIT_LOAD_CRYPTO_STRINGS)
        // 0 only when OpenSSL cannot set itself up (out of memory): every later call reports its
        // own error then, as without this call.
        return OPENSSL_init_ssl(options, nil) == 1
    }()
}
