import Logging
import SmarticoProtocol

/// The error codes of the local socket API (socket-api.md). `not_implemented` is only used by
/// `push_report` until the HTTP API exists.
public enum SocketAPIErrorCode: String, Sendable, Equatable, CaseIterable {
    case badJSON = "bad_json"
    case badRequest = "bad_request"
    case unknownOp = "unknown_op"
    case lineTooLong = "line_too_long"
    case notPermitted = "not_permitted"
    case notReady = "not_ready"
    case serverError = "server_error"
    case timeout
    case queueFull = "queue_full"
    /// The state directory is full, read-only or failing: a durable op's message was not stored.
    case storageUnavailable = "storage_unavailable"
    /// `identify`: `user.hash_command` failed for the user (it could not start, exited non-zero,
    /// was killed, timed out or printed nothing); the daemon retries after its backoff.
    case hashCommandFailed = "hash_command_failed"
    case `internal`
    case notImplemented = "not_implemented"
    /// The connection was refused at accept: its uid holds `socket.max_peers_per_uid` connections,
    /// or all peers together hold the daemon's descriptor budget. The only line it gets.
    case tooManyConnections = "too_many_connections"
    /// The connection's uid (or all peers together) held more than its share of
    /// `socket.max_peer_memory_bytes` in unfinished lines and unread output; closed right after.
    case memoryLimit = "memory_limit"
    /// A line was left unfinished for `socket.partial_line_timeout_s`; closed right after.
    case lineTimeout = "line_timeout"
}

/// An error answer, the one type for every reply's error: the session machine's and the socket
/// layer's. Written as `{"code", "message"}` plus `errCode`/`errMsg` when set (`server_error`).
public struct SocketAPIError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: SocketAPIErrorCode
    /// Human text that names the field and what is wrong with it.
    public var message: String
    public var errCode: Int64?
    public var errMsg: String?

    public init(_ code: SocketAPIErrorCode, _ message: String, errCode: Int64? = nil, errMsg: String? = nil) {
        self.code = code
        self.message = message
        self.errCode = errCode
        self.errMsg = errMsg
    }

    public var description: String { "\(code.rawValue): \(message)" }

    /// The `error` object of a response.
    public var json: JSONValue {
        var object: JSONObject = ["code": .string(code.rawValue), "message": .string(message)]
        if let errCode { object.append(key: "errCode", value: .number(errCode)) }
        if let errMsg { object.append(key: "errMsg", value: .string(errMsg)) }
        return .object(object)
    }

    static func badRequest(_ message: String) -> SocketAPIError { SocketAPIError(.badRequest, message) }
}

/// The ops of socket-api.md.
public enum SocketOp: String, Sendable, Equatable, CaseIterable {
    case hello, status, subscribe, unsubscribe, ack, forget, identify, logout, login
    case pushToken = "push_token"
    case language, event, report
    case minigameAck = "minigame_ack"
    case pushReport = "push_report"
    case send, request, bridge
    /// Sets the daemon's log level until the next restart or reload (control role).
    case logLevel = "log_level"
    /// The daemon's metrics in the Prometheus text format (read role).
    case metrics
    /// A call of Smartico's data API by name (docs/api.md); its role is the call's.
    case api

    /// Ops of the read role, which any peer may use; the others (the control role) need root, the
    /// daemon's uid, or a peer listed in `socket.control_uids`/`control_gids`.
    public var isReadOnly: Bool {
        switch self {
        case .hello, .status, .metrics, .subscribe, .unsubscribe, .ack, .forget: true
        default: false
        }
    }
}

/// `subscribe` arguments.
public struct SubscribeRequest: Sendable, Equatable {
    /// Event names to deliver; nil: all.
    public var types: Set<String>?
    /// Replay journaled events with a larger seq first.
    public var since: JournalSeq?
    /// Durable subscription name: resume after its acknowledged cursor; `ack` moves it.
    public var durable: String?
    /// The journal `since` (or the durable name) was a position in: the `journal` of an earlier
    /// subscribe answer. Another journal's positions mean nothing here: the replay starts at the beginning.
    public var journal: String?
}

/// `push_report` arguments (Smartico's public HTTP API, 002 §5).
public struct PushReportRequest: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable { case delivered, impression, action, failed }
    public var kind: Kind
    public var engagementUID: String
    /// The push's `message_id` (sent as a string, as Smartico's SDK does); nil: not sent.
    public var messageID: String?
    public var action: String?
    /// nil: the identified user.
    public var userExtID: String?
}

/// A parsed, validated request (what a line becomes).
public enum SocketRequest: Sendable, Equatable {
    case hello
    case status
    case subscribe(SubscribeRequest)
    case unsubscribe
    case ack(seq: JournalSeq)
    /// Deletes the durable subscription name (its owner's uid or root).
    case forget(durable: String)
    case pushReport(PushReportRequest)
    /// `log_level`: the daemon's new level.
    case logLevel(Logger.Level)
    case metrics
    /// `api`: a data API call, its arguments checked against the catalog.
    case api(DataAPIRequest)
    /// `identify`, `logout`, `login`, `push_token`, `language`, `event`, `report`, `minigame_ack`,
    /// `send`, `request`, `bridge`: handed to the session as they are.
    case session(SessionRequest)

    public var op: SocketOp {
        switch self {
        case .hello: .hello
        case .status: .status
        case .subscribe: .subscribe
        case .unsubscribe: .unsubscribe
        case .ack: .ack
        case .forget: .forget
        case .pushReport: .pushReport
        case .logLevel: .logLevel
        case .metrics: .metrics
        case .api: .api
        case .session(let request):
            switch request {
            case .identify: .identify
            case .logout: .logout
            case .login: .login
            case .pushToken: .pushToken
            case .language: .language
            case .event: .event
            case .report: .report
            case .minigameAck: .minigameAck
            case .send: .send
            case .request: .request
            case .bridge: .bridge
            }
        }
    }

    /// Whether a peer of the read role may make it: the op's role, or for `api` the call's.
    public var isReadOnly: Bool {
        if case .api(let r) = self { return r.spec?.role == .read }
        return op.isReadOnly
    }
}

/// What the server hands to its ``SocketAPIHandler``: every op except `subscribe`, `unsubscribe`,
/// `ack` and `forget`, which the server handles itself.
public enum SocketAPICall: Sendable, Equatable {
    /// Answer `{"api": 1, "version", "state"}`.
    case hello
    /// Answer the status object (``SocketAPIServer/subscriberCount`` gives `subscribers`).
    case status
    case session(SessionRequest)
    case pushReport(PushReportRequest)
    /// Set the daemon's log level; answer `{"level", "previous"}`.
    case logLevel(Logger.Level)
    /// Answer `{"content_type", "text"}`: the metrics in the Prometheus text format (``DaemonMetrics``).
    case metrics
    /// Run a data API call (docs/api.md) and answer its result.
    case api(DataAPIRequest)
}

/// Who sent a request.
public struct SocketPeer: Sendable, Equatable, CustomStringConvertible {
    /// Unique per server lifetime.
    public var connectionNumber: UInt64
    public var pid: Int32?
    public var uid: UInt32?
    public var gid: UInt32?
    /// The control role (socket-api.md, "Permissions"): root, the daemon's uid, a uid in
    /// `socket.control_uids`, or a primary or supplementary group in `socket.control_gids`.
    public var mayControl: Bool

    public var description: String {
        "peer#\(connectionNumber)" + (pid.map { " pid \($0)" } ?? "") + (uid.map { " uid \($0)" } ?? "")
    }
}
