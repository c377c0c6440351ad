import SmarticoClient

/// Why a `smarticoctl` command failed, with the exit code daemon.md gives it:
/// 1 the daemon answered with an error (or an answer that cannot be used), 2 usage error,
/// 69 the daemon's socket is unreachable (not there, refused, closed, silent).
enum CtlError: Error, CustomStringConvertible {
    /// A command-line value that cannot be used (exit 2). The text names the argument.
    case usage(String)
    /// Talking to the daemon failed (SmarticoClient): exit 2 for a socket path too long, 69 for an
    /// unreachable, closed or silent daemon, 1 for a refusal or an answer that cannot be used.
    case client(ClientError)

    /// The library's descriptions in smarticoctl's words: its options name the settings.
    static let wording = ClientError.Wording(
        shorterSocketPath: "a shorter --socket", otherSocket: "--socket PATH or SMARTICOD_SOCKET for another socket",
        timeout: "--timeout", maxLineBytes: "--max-line-bytes")

    var exitCode: Int32 {
        switch self {
        case .usage, .client(.socketPathTooLong): 2
        case .client(.connectFailed), .client(.ioFailed), .client(.closed), .client(.timedOut), .client(.stopped): 69
        case .client(.lineTooLong), .client(.badAnswer), .client(.refused), .client(.queueFull): 1
        }
    }

    var description: String {
        switch self {
        case .usage(let text):
            return text
        case .client(.refused(let op, let code, let message, let errCode, let errMsg)):
            // The daemon's and the server's text on one line, bounded.
            var text = "\(op) refused: \(code): \(message.isEmpty ? "—" : oneLine(message, limit: 2000))"
            if let errCode {
                text += " (errCode \(errCode)"
                if let errMsg { text += ", errMsg \(oneLine(errMsg))" }
                text += ")"
            }
            return text
        case .client(let error):
            return error.description(Self.wording)
        }
    }
}
