#if canImport(Glibc)
import Glibc
#endif

/// An IPv4, IPv6 or Unix-domain socket address.
public enum SocketAddress: Sendable, CustomStringConvertible, Equatable {
    case ipv4(sockaddr_in)
    case ipv6(sockaddr_in6)
    case unix(path: String)

    /// Parses an IP literal ("127.0.0.1", "::1", "[::1]") and a port.
    public init?(ip: String, port: Int) {
        let literal = ip.hasPrefix("[") && ip.hasSuffix("]") ? String(ip.dropFirst().dropLast()) : ip
        guard (0...65535).contains(port) else { return nil }
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, literal, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = in_port_t(UInt16(port).bigEndian)
            self = .ipv4(v4)
            return
        }
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET6, literal, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = in_port_t(UInt16(port).bigEndian)
            self = .ipv6(v6)
            return
        }
        return nil
    }

    /// Builds an address from a kernel `sockaddr` (getaddrinfo, accept, getsockname).
    init?(_ address: UnsafePointer<sockaddr>, length: socklen_t) {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            self = .ipv4(UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in.self))
        case AF_INET6:
            self = .ipv6(UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in6.self))
        case AF_UNIX:
            let pathOffset = MemoryLayout<sa_family_t>.size
            let maxLength = Int(length) - pathOffset
            guard maxLength > 0 else { self = .unix(path: ""); return }
            let bytes = UnsafeRawBufferPointer(start: UnsafeRawPointer(address) + pathOffset, count: maxLength)
            let end = bytes.firstIndex(of: 0) ?? bytes.count
            self = .unix(path: String(decoding: bytes[0..<end], as: UTF8.self))
        default:
            return nil
        }
    }

    /// Address family (AF_INET, AF_INET6, AF_UNIX).
    public var family: Int32 {
        switch self {
        case .ipv4: return AF_INET
        case .ipv6: return AF_INET6
        case .unix: return AF_UNIX
        }
    }

    /// The port of an IP address.
    public var port: Int? {
        switch self {
        case .ipv4(let a): return Int(UInt16(bigEndian: a.sin_port))
        case .ipv6(let a): return Int(UInt16(bigEndian: a.sin6_port))
        case .unix: return nil
        }
    }

    /// The IP in text form ("127.0.0.1", "::1"), or the Unix path.
    public var host: String {
        switch self {
        case .ipv4(var a):
            var buffer = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            inet_ntop(AF_INET, &a.sin_addr, &buffer, socklen_t(buffer.count))
            return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        case .ipv6(var a):
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            inet_ntop(AF_INET6, &a.sin6_addr, &buffer, socklen_t(buffer.count))
            return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        case .unix(let path):
            return path
        }
    }

    /// "127.0.0.1:8080", "[::1]:8080" or "unix:/run/x.sock".
    public var description: String {
        switch self {
        case .ipv4: return "\(host):\(port!)"
        case .ipv6: return "[\(host)]:\(port!)"
        case .unix(let path): return "unix:\(path)"
        }
    }

    public static func == (lhs: SocketAddress, rhs: SocketAddress) -> Bool {
        lhs.description == rhs.description
    }

    /// Calls `body` with a kernel `sockaddr` for this address. Throws for a Unix path that is too long.
    func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws(SocketError) -> R) throws(SocketError) -> R {
        switch self {
        case .ipv4(var a):
            return try withUnsafePointer(to: &a) { p throws(SocketError) in
                try body(UnsafeRawPointer(p).assumingMemoryBound(to: sockaddr.self), socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        case .ipv6(var a):
            return try withUnsafePointer(to: &a) { p throws(SocketError) in
                try body(UnsafeRawPointer(p).assumingMemoryBound(to: sockaddr.self), socklen_t(MemoryLayout<sockaddr_in6>.size))
            }
        case .unix(let path):
            var a = sockaddr_un()
            a.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(path.utf8)
            let capacity = MemoryLayout.size(ofValue: a.sun_path)
            guard bytes.count < capacity else {
                throw .invalidArgument("Unix socket path is \(bytes.count) bytes, the limit is \(capacity - 1): \(path)")
            }
            withUnsafeMutableBytes(of: &a.sun_path) { raw in
                raw.copyBytes(from: bytes)
                raw[bytes.count] = 0
            }
            let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1)
            return try withUnsafePointer(to: &a) { p throws(SocketError) in
                try body(UnsafeRawPointer(p).assumingMemoryBound(to: sockaddr.self), length)
            }
        }
    }
}

/// Credentials of a Unix-socket peer (`SO_PEERCRED`), as they were when it connected.
public struct PeerCredentials: Sendable, Equatable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    public var description: String { "pid \(pid) uid \(uid) gid \(gid)" }
}
