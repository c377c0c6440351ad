import COpenSSL

/// The default random source for masking keys and `Sec-WebSocket-Key`: OpenSSL's CSPRNG
/// (`RAND_bytes`), read 256 bytes at a time so a frame does not cost a system call.
/// Tests inject a seeded `RandomNumberGenerator` instead.
public struct WebSocketRandomSource: RandomNumberGenerator, Sendable {
    private var pool = [UInt64](repeating: 0, count: 32)
    private var used = 32

    public init() {}

    public mutating func next() -> UInt64 {
        if used == pool.count {
            OpenSSLLibrary.initialize()
            let ok = pool.withUnsafeMutableBytes { RAND_bytes($0.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32($0.count)) }
            if ok != 1 {
                // OpenSSL could not seed itself; fall back to the kernel (getrandom), one call per word.
                var system = SystemRandomNumberGenerator()
                for i in pool.indices { pool[i] = system.next() }
            }
            used = 0
        }
        defer { used += 1 }
        return pool[used]
    }
}
