#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Why a call to the daemon's socket failed: what failed, on which socket, and what to do.
///
/// `refused` is the daemon's own answer (`"ok": false`) with its error code (docs/socket-api.md,
/// "Error codes"); every other case is about reaching the daemon.
public enum ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `socket()` or `connect()` failed: `ENOENT` (no socket: the daemon is not running),
    /// `ECONNREFUSED` (a socket file nobody accepts on), `EACCES` (its mode keeps this user out), …
    /// An empty path or one with a NUL byte is `EINVAL`.
    case connectFailed(path: String, errno: Int32)
    /// The socket path does not fit in `sockaddr_un`.
    case socketPathTooLong(path: String, bytes: Int, limit: Int)
    /// Writing to or reading from the socket failed after connecting.
    case ioFailed(path: String, operation: String, errno: Int32)
    /// The daemon closed the connection (or the connection dropped) before what was waited for came.
    case closed(path: String, waitingFor: String)
    /// Nothing came within the time given.
    case timedOut(path: String, seconds: Double, waitingFor: String)
    /// The daemon sent a line longer than the client accepts (`maxLineBytes`).
    case lineTooLong(path: String, limit: Int)
    /// The daemon sent something that is not the expected JSON.
    case badAnswer(path: String, detail: String)
    /// The daemon answered `"ok": false`: its `code` (`bad_request`, `not_permitted`, `server_error`,
    /// …) and `message`; `errCode` and `errMsg` are the server's, for `server_error`.
    case refused(op: String, code: String, message: String, errCode: Int64?, errMsg: String?)
    /// A ``DaemonLink`` already holds its most requests waiting for an answer.
    case queueFull(path: String, limit: Int)
    /// The ``DaemonLink`` was stopped before the answer came, or before the request was made.
    case stopped(path: String)

    /// The daemon's error code for `.refused`, nil otherwise.
    public var code: String? {
        if case .refused(_, let code, _, _, _) = self { code } else { nil }
    }

    /// The errors of a daemon that stopped, restarts or has not created its socket yet: trying
    /// again later may succeed.
    public var daemonIsAway: Bool {
        switch self {
        case .connectFailed(_, let e): e == ENOENT || e == ECONNREFUSED || e == ECONNRESET || e == EAGAIN
        case .ioFailed, .closed: true
        default: false
        }
    }

    /// The words a description uses for the settings a person can change. A command-line tool
    /// names its options (`smarticoctl`: `--timeout`, …); a library's caller names its own.
    public struct Wording: Sendable {
        /// What to use instead of a too long path: "a shorter socket path".
        public var shorterSocketPath: String
        /// How to reach another socket, after "is smarticod running?"; nil: nothing said.
        public var otherSocket: String?
        /// The time limit to raise: "the timeout".
        public var timeout: String
        /// The line limit to raise: "maxLineBytes".
        public var maxLineBytes: String

        public init(shorterSocketPath: String, otherSocket: String?, timeout: String, maxLineBytes: String) {
            self.shorterSocketPath = shorterSocketPath
            self.otherSocket = otherSocket
            self.timeout = timeout
            self.maxLineBytes = maxLineBytes
        }

        /// The library's own words.
        public static let library = Wording(
            shorterSocketPath: "a shorter socket path", otherSocket: "SMARTICOD_SOCKET or the client's path for another socket",
            timeout: "the timeout", maxLineBytes: "maxLineBytes")
    }

    public var description: String { description(.library) }

    /// The description with `wording` for the settings it names.
    public func description(_ wording: Wording) -> String {
        switch self {
        case .socketPathTooLong(let path, let bytes, let limit):
            return "the socket path \(path) is \(bytes) bytes long; a Unix socket path has at most \(limit) (use \(wording.shorterSocketPath))"
        case .connectFailed(let path, let e):
            return "cannot connect to \(path): \(Self.errnoText(e))\(Self.connectHint(e, wording))"
        case .ioFailed(let path, let operation, let e):
            return "\(operation) on \(path) failed: \(Self.errnoText(e)); is smarticod restarting? (systemctl status smarticod)"
        case .closed(let path, let waitingFor):
            return "smarticod closed the connection on \(path) while \(waitingFor); is it restarting? (systemctl status smarticod)"
        case .timedOut(let path, let seconds, let waitingFor):
            return "no answer from smarticod on \(path) within \(Self.formatSeconds(seconds)) while \(waitingFor) (raise \(wording.timeout); check journalctl -u smarticod)"
        case .lineTooLong(let path, let limit):
            return "smarticod sent a line longer than \(limit) bytes on \(path) (raise \(wording.maxLineBytes))"
        case .badAnswer(let path, let detail):
            return "unusable answer from smarticod on \(path): \(detail)"
        case .refused(let op, let code, let message, let errCode, let errMsg):
            var text = "\(op) refused: \(code): \(message)"
            if let errCode {
                text += " (errCode \(errCode)"
                if let errMsg { text += ", errMsg \(errMsg)" }
                text += ")"
            }
            return text
        case .queueFull(let path, let limit):
            return "\(limit) requests to smarticod on \(path) already wait for their answer (the link's maxPendingRequests); wait for some to complete before sending more"
        case .stopped(let path):
            return "the link to smarticod on \(path) was stopped"
        }
    }

    private static func connectHint(_ e: Int32, _ wording: Wording) -> String {
        switch e {
        case ENOENT:
            return "; is smarticod running? (systemctl status smarticod.socket smarticod.service\(wording.otherSocket.map { "; " + $0 } ?? ""))"
        case ECONNREFUSED:
            return "; the socket file exists but nothing accepts on it (smarticod stopped and left it behind?); systemctl status smarticod"
        case EACCES, EPERM:
            return "; this user may not open the socket: join its group (SocketGroup= / socket.group) or run as a member of it"
        case EAGAIN:
            return "; the daemon's accept queue stayed full"
        case ENOTDIR, ENOTSOCK, EPROTOTYPE:
            return "; that path is not smarticod's stream socket"
        case EINVAL:
            return "; an empty path or a path with a NUL byte is not a socket path"
        default:
            return ""
        }
    }

    /// `"No such file or directory (ENOENT)"`.
    public static func errnoText(_ e: Int32) -> String {
        let text = strerror(e).map { String(cString: $0) } ?? "error \(e)"
        return "\(text) (\(errnoName(e)))"
    }

    /// The symbolic name of the errno values a Unix socket client meets (`"errno N"` for others).
    public static func errnoName(_ e: Int32) -> String {
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
        case EINVAL: "EINVAL"
        case EMFILE: "EMFILE"
        case ENFILE: "ENFILE"
        case ENAMETOOLONG: "ENAMETOOLONG"
        case ELOOP: "ELOOP"
        case ETIMEDOUT: "ETIMEDOUT"
        default: "errno \(e)"
        }
    }

    /// `"2.5 s"`, `"30 s"`.
    public static func formatSeconds(_ s: Double) -> String {
        if s == s.rounded() && s < 1e15 { return "\(Int64(s)) s" }
        return "\(s) s"
    }

    /// Text for one line of a message: control characters escaped (`\n`, `\u{1b}`), at most
    /// `limit` characters with `…`. Daemon and server text is shown through it.
    public static func oneLine(_ text: String, limit: Int = 300) -> String {
        var out = ""
        var count = 0
        for scalar in text.unicodeScalars {
            if count >= limit {
                out += "…"
                break
            }
            switch scalar.value {
            case 0x0A: out += "\\n"
            case 0x0D: out += "\\r"
            case 0x09: out += "\\t"
            case 0..<0x20, 0x7F, 0x80..<0xA0, 0x2028, 0x2029:
                out += "\\u{" + String(scalar.value, radix: 16) + "}"
            default: out.unicodeScalars.append(scalar)
            }
            count += 1
        }
        return out
    }
}
