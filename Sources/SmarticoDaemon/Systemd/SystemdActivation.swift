#if canImport(Glibc)
import Glibc
#endif
import Transport

/// Socket activation (`sd_listen_fds` semantics) on top of ``StreamListener/systemdListenFDs(environment:pid:)``.
public enum SystemdActivation {
    /// One descriptor passed by systemd, with its name from `LISTEN_FDNAMES` (`FileDescriptorName=`,
    /// default the socket unit's name), when given.
    public struct PassedSocket: Sendable, Equatable {
        public var fd: Int32
        public var name: String?
    }

    /// The descriptors passed to this process (`LISTEN_PID` must be this process). With
    /// `unsetEnvironment` (the default, as `sd_listen_fds(1)`), `LISTEN_PID`, `LISTEN_FDS` and
    /// `LISTEN_FDNAMES` are removed so child processes (the hash command) do not inherit them.
    public static func passedSockets(
        unsetEnvironment: Bool = true,
        environment: (String) -> String? = { name in getenv(name).map { String(cString: $0) } },
        pid: Int32 = getpid()
    ) -> [PassedSocket] {
        let fds = StreamListener.systemdListenFDs(environment: environment, pid: pid)
        let names = environment("LISTEN_FDNAMES")?.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        if unsetEnvironment {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        return fds.enumerated().map { index, fd in
            let name = names.flatMap { index < $0.count && !$0[index].isEmpty ? $0[index] : nil }
            return PassedSocket(fd: fd, name: name)
        }
    }

    /// The descriptor the socket server should adopt: the first passed stream socket that is
    /// listening (``SocketAPIServer/Endpoint/adopted(fd:)``), or nil when none was passed. Other
    /// passed descriptors are left alone.
    public static func listeningSocket(in passed: [PassedSocket]) -> Int32? {
        for socket in passed {
            var type: Int32 = 0
            var accepting: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(socket.fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0,
                  type == Int32(SOCK_STREAM.rawValue) else { continue }
            length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(socket.fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) == 0, accepting == 1 else { continue }
            return socket.fd
        }
        return nil
    }
}
