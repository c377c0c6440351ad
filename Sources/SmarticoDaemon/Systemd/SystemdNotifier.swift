#if canImport(Glibc)
import Glibc
#endif

/// Why a notification could not be sent (never fatal: log it and carry on).
public enum SystemdNotifyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `NOTIFY_SOCKET` is neither an absolute path nor an abstract `@name`, or is too long.
    case invalidSocketAddress(String)
    /// `socket` or `sendto` failed (`EAGAIN`: systemd's queue is full; the message is dropped).
    case system(operation: String, target: String, errno: Int32)

    public var description: String {
        switch self {
        case .invalidSocketAddress(let value):
            "NOTIFY_SOCKET=\"\(value)\" is not an absolute path or an abstract @name of at most 107 bytes"
        case .system(let operation, let target, let e):
            "\(operation) \(target): \(String(cString: strerror(e)))"
        }
    }
}

/// `sd_notify` without libsystemd: one datagram per call to the `AF_UNIX` socket named by
/// `NOTIFY_SOCKET` (a path, or an abstract name written `@name`), sent with `MSG_DONTWAIT` so it never
/// blocks; safe on any thread. Without `NOTIFY_SOCKET` (not run by systemd, or `Type=simple`) every
/// call does nothing.
public struct SystemdNotifier: Sendable {
    /// The socket address from `NOTIFY_SOCKET`, or nil.
    public let socketPath: String?
    /// `WATCHDOG_USEC` when `WATCHDOG_PID` is unset or this process: send ``watchdog()`` at least
    /// this often (half of it is a good period). Nil: no watchdog.
    public let watchdogInterval: Duration?

    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID`. `environment` and `pid` are
    /// parameters for tests.
    public init(
        environment: (String) -> String? = { name in getenv(name).map { String(cString: $0) } },
        pid: Int32 = getpid()
    ) {
        let path = environment("NOTIFY_SOCKET")
        socketPath = (path?.isEmpty ?? true) ? nil : path
        if let usec = environment("WATCHDOG_USEC").flatMap({ UInt64($0) }), usec > 0,
           environment("WATCHDOG_PID").map({ Int32($0) == pid }) ?? true {
            watchdogInterval = .microseconds(Int64(clamping: usec))
        } else {
            watchdogInterval = nil
        }
    }

    /// True when a notification socket is known.
    public var isEnabled: Bool { socketPath != nil }

    /// `READY=1` (plus a `STATUS=` line when given): the socket listens.
    public func ready(status: String? = nil) throws(SystemdNotifyError) {
        try notify(["READY=1"] + (status.map { ["STATUS=" + Self.oneLine($0)] } ?? []))
    }

    /// `STATUS=…`: free text shown by `systemctl status` (newlines are replaced by spaces).
    public func status(_ text: String) throws(SystemdNotifyError) {
        try notify(["STATUS=" + Self.oneLine(text)])
    }

    /// `STOPPING=1`.
    public func stopping(status: String? = nil) throws(SystemdNotifyError) {
        try notify(["STOPPING=1"] + (status.map { ["STATUS=" + Self.oneLine($0)] } ?? []))
    }

    /// `RELOADING=1` (with `MONOTONIC_USEC`, as `Type=notify-reload` wants).
    public func reloading() throws(SystemdNotifyError) {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let usec = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        try notify(["RELOADING=1", "MONOTONIC_USEC=\(usec)"])
    }

    /// `WATCHDOG=1`: keep-alive for `WatchdogSec=`.
    public func watchdog() throws(SystemdNotifyError) {
        try notify(["WATCHDOG=1"])
    }

    /// Sends `assignments` (`KEY=value`, one per line) in one datagram. Does nothing without
    /// `NOTIFY_SOCKET`.
    public func notify(_ assignments: [String]) throws(SystemdNotifyError) {
        guard let socketPath else { return }
        try Self.send(assignments.joined(separator: "\n"), to: socketPath)
    }

    private static func oneLine(_ text: String) -> String {
        String(text.map { $0 == "\n" || $0 == "\r" ? " " : $0 })
    }

    /// Sends one datagram to `path` (`@name`: abstract namespace).
    static func send(_ message: String, to path: String) throws(SystemdNotifyError) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        guard abstract || bytes.first == UInt8(ascii: "/") else { throw .invalidSocketAddress(path) }
        if abstract { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count > 1, bytes.count < capacity else { throw .invalidSocketAddress(path) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        // Abstract names are not NUL-terminated: the length says where they end.
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .system(operation: "socket(AF_UNIX, SOCK_DGRAM) for", target: path, errno: errno) }
        defer { close(fd) }
        var payload = Array(message.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                payload.withUnsafeMutableBytes { buffer in
                    sendto(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL), sa, length)
                }
            }
        }
        guard sent >= 0 else { throw .system(operation: "sendto", target: "NOTIFY_SOCKET \(path)", errno: errno) }
    }
}
