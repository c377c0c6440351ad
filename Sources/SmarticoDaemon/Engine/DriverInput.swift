import Synchronization
import SmarticoProtocol
import Transport

/// One item of the driver's single FIFO (docs/session.md, "The driver"): everything that
/// reaches the session — transport results, timer firings, hash results, socket requests,
/// signals — goes through it, so every `SessionMachine.handle` sees the results of the one
/// before it.
enum DriverInput: Sendable {
    /// An input for the machine as it is.
    case session(SessionInput)
    /// A timer armed for `atMs` fired; stale when the timer was re-armed or cancelled since.
    case timer(SessionTimer, atMs: Int64)
    /// The WebSocket of `.connect(conn, …)` is open (the driver attaches its handler).
    case opened(ConnectionID, WebSocketConnection)
    /// The transport of `conn` ended (the last event of a connection). `clean`: a close
    /// handshake completed (no error, not 1006).
    case transportClosed(ConnectionID, code: Int?, reason: String, clean: Bool)
    /// A socket API call that needs the session (`status` and the session ops).
    case call(SocketAPICall, SocketAPIReply)
    /// SIGTERM or SIGINT.
    case terminate(signal: Int32)
    /// SIGHUP: the configuration file was re-read (on the blocking pool).
    case reloaded(Result<ResolvedConfig, ConfigError>)
    /// Hourly: journal retention by age (appends apply it too, but an idle journal has none).
    case maintenance
}

/// The daemon's ``SocketAPIHandler``: `hello` and `push_report` are answered at once on the
/// server's loop thread; every other call is queued, in arrival order, into the driver's FIFO.
final class DriverSocketHandler: SocketAPIHandler {
    private let continuation: AsyncStream<DriverInput>.Continuation
    /// The public session state as last reported by the machine (`hello`).
    let state = Mutex<SessionState>(.disconnected)

    init(continuation: AsyncStream<DriverInput>.Continuation) {
        self.continuation = continuation
    }

    func handle(_ call: SocketAPICall, from peer: SocketPeer, reply: SocketAPIReply) {
        switch call {
        case .hello:
            reply.succeed(SocketAPIServer.helloResult(version: SmarticoVersion.string, state: state.withLock { $0 }))
        case .pushReport:
            reply.fail(SocketAPIError(
                .notImplemented,
                "push_report is not implemented in this version of smarticod (Smartico's public HTTP API client is not built yet); nothing was stored"))
        case .status, .session:
            if case .terminated = continuation.yield(.call(call, reply)) {
                reply.fail(SocketAPIError(.notReady, "the daemon is stopping"))
            }
        }
    }
}
