#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Why a `smarticoctl` command failed, with the exit code daemon.md gives it:
/// 1 the daemon answered with an error (or an answer that cannot be used), 2 usage error,
/// 69 the daemon's socket is unreachable (not there, refused, closed, silent).
enum CtlError: Error, CustomStringConvertible {
    /// A command-line value that cannot be used (exit 2). The text names the argument.
    case usage(String)
    /// The socket path does not fit in `sockaddr_un` (exit 2).
    case socketPathTooLong(path: String, bytes: Int, limit: Int)
    /// `socket()` or `connect()` failed (exit 69).
    case connectFailed(path: String, errno: Int32)
    /// Writing to or reading from the socket failed after connecting (exit 69).
    case ioFailed(path: String, operation: String, errno: Int32)
    /// The daemon closed the connection before the answer came (exit 69).
    case closed(path: String, waitingFor: String)
    /// No answer within `--timeout` (exit 69).
    case timedOut(path: String, seconds: Double, waitingFor: String)
    /// The daemon sent a line longer than `--max-line-bytes` (exit 1).
    case lineTooLong(path: String, limit: Int)
    /// The daemon sent something that is not the expected JSON (exit 1).
    case badAnswer(path: String, detail: String)
    /// The daemon answered `ok: false` (exit 1). Printed by the command itself.
    case refused(op: String, code: String, message: String)

    var exitCode: Int32 {
        switch self {
        case .usage, .socketPathTooLong: 2
        case .connectFailed, .ioFailed, .closed, .timedOut: 69
        case .lineTooLong, .badAnswer, .refused: 1
        }
    }

    var description: String {
        switch self {
        case .usage(let text):
            return text
        case .socketPathTooLong(let path, let bytes, let limit):
            return "the socket path \(path) is \(bytes) bytes long; a Unix socket path has at most \(limit) (use a shorter --socket)"
        case .connectFailed(let path, let e):
            return "cannot connect to \(path): \(errnoText(e))\(Self.connectHint(e))"
        case .ioFailed(let path, let operation, let e):
            return "\(operation) on \(path) failed: \(errnoText(e)); is smarticod restarting? (systemctl status smarticod)"
        case .closed(let path, let waitingFor):
            return "smarticod closed the connection on \(path) while \(waitingFor); is it restarting? (systemctl status smarticod)"
        case .timedOut(let path, let seconds, let waitingFor):
            return "no answer from smarticod on \(path) within \(formatSeconds(seconds)) while \(waitingFor) (raise --timeout; check journalctl -u smarticod)"
        case .lineTooLong(let path, let limit):
            return "smarticod sent a line longer than \(limit) bytes on \(path) (raise --max-line-bytes)"
        case .badAnswer(let path, let detail):
            return "unusable answer from smarticod on \(path): \(detail)"
        case .refused(let op, let code, let message):
            return "\(op) refused: \(code): \(message)"
        }
    }

    private static func connectHint(_ e: Int32) -> String {
        switch e {
        case ENOENT:
            return "; is smarticod running? (systemctl status smarticod.socket smarticod.service; --socket PATH or SMARTICOD_SOCKET for another socket)"
        case ECONNREFUSED:
            return "; the socket file exists but nothing accepts on it (smarticod stopped and left it behind?); systemctl status smarticod"
        case EACCES, EPERM:
            return "; this user may not open the socket: join its group (SocketGroup= / socket.group) or run as a member of it"
        case EAGAIN:
            return "; the daemon's accept queue stayed full"
        case ENOTDIR, ENOTSOCK, EPROTOTYPE:
            return "; that path is not smarticod's stream socket"
        default:
            return ""
        }
    }
}

/// `"No such file or directory (ENOENT)"`.
func errnoText(_ e: Int32) -> String {
    let text = strerror(e).map { String(cString: $0) } ?? "error \(e)"
    return "\(text) (\(errnoName(e)))"
}

/// The symbolic name of the errno values a Unix socket client meets.
func errnoName(_ e: Int32) -> String {
    switch e {
    case ENOENT: "ENOENT"
    case ECONNREFUSED: "ECONNREFUSED"
    case EACCES: "EACCES"
    case EPERM: "EPERM"
    case ENOTDIR: "ENOTDIR"
    case ENOTSOCK: "ENOTSOCK"
    case EPROTOTYPE: "EPROTOTYPE"
    case ECONNRESET: "ECONNRESET"
    case EPIPE: "EPIPE"
    case EAGAIN: "EAGAIN"
    case EINTR: "EINTR"
    case EMFILE: "EMFILE"
    case ENFILE: "ENFILE"
    case ENAMETOOLONG: "ENAMETOOLONG"
    case ELOOP: "ELOOP"
    case ETIMEDOUT: "ETIMEDOUT"
    default: "errno \(e)"
    }
}

/// `"2.5 s"`, `"30 s"`.
func formatSeconds(_ s: Double) -> String {
    if s == s.rounded() && s < 1e15 { return "\(Int64(s)) s" }
    return "\(s) s"
}
