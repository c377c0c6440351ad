#if canImport(Glibc)
import Glibc
#endif

/// DNS resolution with `getaddrinfo` on a ``BlockingPool`` (it blocks).
public enum Resolver {
    /// Resolves `host` for a TCP connection to `port`: IPv4 and IPv6 (`AF_UNSPEC`), in the order the
    /// resolver gives. IP literals ("127.0.0.1", "::1", "[::1]") are returned without a lookup.
    public static func resolve(host: String, port: Int, pool: BlockingPool = .shared) async throws(SocketError)
        -> [SocketAddress]
    {
        guard (0...65535).contains(port) else {
            throw .invalidArgument("port \(port) of \"\(host)\" is outside 0...65535")
        }
        if let literal = SocketAddress(ip: host, port: port) { return [literal] }
        return try await pool.run { () throws(SocketError) -> [SocketAddress] in
            try resolveBlocking(host: host, port: port)
        }
    }

    /// The blocking lookup. Never call it on the cooperative pool or an event loop.
    public static func resolveBlocking(host: String, port: Int) throws(SocketError) -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>? = nil
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0 else {
            let reason = rc == EAI_SYSTEM ? ioErrnoText(errno) : String(cString: gai_strerror(rc))
            throw .dns(host: host, port: port, reason: reason)
        }
        defer { freeaddrinfo(list) }
        var result: [SocketAddress] = []
        var cursor = list
        while let entry = cursor {
            if let sa = entry.pointee.ai_addr, let address = SocketAddress(sa, length: entry.pointee.ai_addrlen),
                !result.contains(address)
            {
                result.append(address)
            }
            cursor = entry.pointee.ai_next
        }
        if result.isEmpty { throw .dns(host: host, port: port, reason: "no IPv4 or IPv6 address") }
        return result
    }
}
