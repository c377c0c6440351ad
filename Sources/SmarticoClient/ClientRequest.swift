import SmarticoProtocol
import SmarticoSocketAPI

/// One request to the daemon: its op and arguments (docs/socket-api.md, "Ops"), built by the
/// typed constructors below or given as is. ``SmarticoClient/call(_:timeout:)`` and
/// ``DaemonLink/send(_:timeout:completion:)`` take it. An optional argument left nil is not
/// sent, so the daemon uses its default.
public struct ClientRequest: Sendable, Equatable {
    public var op: String
    public var arguments: JSONObject
    /// The least a caller should wait for the answer, in seconds, when the op itself waits for
    /// the server (`request`: its `timeout_ms` + 5 s; `api`: its calls' timeouts + 5 s).
    public var minimumWait: Double?

    public init(op: String, arguments: JSONObject = JSONObject(), minimumWait: Double? = nil) {
        self.op = op
        self.arguments = arguments
        self.minimumWait = minimumWait
    }

    /// `op` with the members of `arguments` that are not nil, in their order (a nil one is not
    /// sent, so the daemon uses its default): what the typed constructors below build.
    init(op: String, _ arguments: KeyValuePairs<String, JSONValue?>, minimumWait: Double? = nil) {
        var object = JSONObject()
        for case let (key, value?) in arguments { object.append(key: key, value: value) }
        self.init(op: op, arguments: object, minimumWait: minimumWait)
    }

    /// The time to wait for the answer: `timeout`, or ``minimumWait`` when that is longer.
    public func wait(timeout: Double) -> Double { max(timeout, minimumWait ?? 0) }

    /// What `report` says about an engagement (cid 103, 104, 106).
    public enum ReportKind: String, Sendable, Equatable, CaseIterable {
        case impression, action, failed
    }

    /// What `push_report` says about a push notification.
    public enum PushReportKind: String, Sendable, Equatable, CaseIterable {
        case delivered, impression, action, failed
    }

    public static let hello = ClientRequest(op: "hello")
    public static let status = ClientRequest(op: "status")
    public static let metrics = ClientRequest(op: "metrics")
    public static let unsubscribe = ClientRequest(op: "unsubscribe")
    public static let logout = ClientRequest(op: "logout")
    public static let login = ClientRequest(op: "login")

    /// `subscribe`: `types` (default all), replay after `since`, a `durable` name, and the
    /// `journal` that `since` (or the durable cursor) counts in, from an earlier answer.
    public static func subscribe(types: [String]? = nil, since: Int64? = nil, durable: String? = nil, journal: String? = nil) -> ClientRequest {
        ClientRequest(op: "subscribe", [
            "types": types.map { .array($0.map(JSONValue.string)) }, "since": since.map { .number($0) },
            "durable": durable.map(JSONValue.string), "journal": journal.map(JSONValue.string),
        ])
    }

    /// `ack`: everything up to `seq` is handled (a durable subscription on this connection).
    public static func ack(_ seq: Int64) -> ClientRequest {
        ClientRequest(op: "ack", arguments: ["seq": .number(seq)])
    }

    /// `forget`: delete a durable name of this uid.
    public static func forget(_ durable: String) -> ClientRequest {
        ClientRequest(op: "forget", arguments: ["durable": .string(durable)])
    }

    /// `identify`: act for this user (`hash` optional when the daemon has `user.hash_command`).
    public static func identify(extUserID: String, hash: String? = nil) -> ClientRequest {
        ClientRequest(op: "identify", ["ext_user_id": .string(extUserID), "hash": hash.map(JSONValue.string)])
    }

    /// `push_token`: `status` 0…4; `platform` defaults to the daemon's `user.push.platform`.
    public static func pushToken(_ token: String, status: Int, platform: Int? = nil, appPackageID: String? = nil) -> ClientRequest {
        ClientRequest(op: "push_token", [
            "token": .string(token), "platform": platform.map { .number($0) }, "status": .number(status),
            "app_package_id": appPackageID.map(JSONValue.string),
        ])
    }

    /// `language`: an ISO 639-1 code or a custom one (`pt-br`).
    public static func language(_ code: String) -> ClientRequest {
        ClientRequest(op: "language", arguments: ["language": .string(code)])
    }

    /// `event`: a client event (cid 9) with an optional payload.
    public static func event(_ eventType: String, payload: JSONObject? = nil) -> ClientRequest {
        ClientRequest(op: "event", ["event_type": .string(eventType), "payload": payload.map(JSONValue.object)])
    }

    /// `report`: an engagement was shown (`impression`), tapped (`action`, with what was tapped)
    /// or could not be shown (`failed`). `activityType` defaults to 30 (a popup).
    public static func report(_ kind: ReportKind, engagementUID: String, activityType: Int64? = nil, action: String? = nil) -> ClientRequest {
        ClientRequest(op: "report", [
            "kind": .string(kind.rawValue), "engagement_uid": .string(engagementUID),
            "activity_type": activityType.map { .number($0) }, "action": action.map(JSONValue.string),
        ])
    }

    /// `report` for an `engagement` event: its `engagement_uid` and `activityType`; nil when the
    /// event carries no engagement uid.
    public static func report(_ kind: ReportKind, for event: SmarticoEvent, action: String? = nil) -> ClientRequest? {
        let message = event.data["message"]
        guard let uid = message?["engagement_uid"]?.stringValue ?? event.data["engagement_uid"]?.stringValue else { return nil }
        return report(kind, engagementUID: uid, activityType: message?["activityType"]?.int64Value, action: action)
    }

    /// `minigame_ack`: a 707 was handled (cid 711).
    public static func minigameAck(sawTemplateID: Int64, pendingMessageID: Int64? = nil) -> ClientRequest {
        ClientRequest(op: "minigame_ack", [
            "saw_template_id": .number(sawTemplateID), "pending_message_id": pendingMessageID.map { .number($0) },
        ])
    }

    /// `push_report`: a push notification's lifecycle, over Smartico's public HTTP API.
    public static func pushReport(_ kind: PushReportKind, engagementUID: String, messageID: String? = nil, action: String? = nil,
                                  userExtID: String? = nil) -> ClientRequest {
        ClientRequest(op: "push_report", [
            "kind": .string(kind.rawValue), "engagement_uid": .string(engagementUID), "message_id": messageID.map(JSONValue.string),
            "action": action.map(JSONValue.string), "user_ext_id": userExtID.map(JSONValue.string),
        ])
    }

    /// `send`: a message with an integer `cid` for the server, fire-and-forget (stored while offline).
    public static func send(_ message: JSONObject) -> ClientRequest {
        ClientRequest(op: "send", arguments: ["message": .object(message)])
    }

    /// `request`: send and wait for the server's answer (`expect_cid` defaults to the cid's
    /// answer, `timeout_ms` to 30000). Wait at least `timeout_ms` + 5 s for it.
    public static func request(_ message: JSONObject, expectCid: Int64? = nil, timeoutMs: Int? = nil) -> ClientRequest {
        ClientRequest(op: "request", [
            "message": .object(message), "expect_cid": expectCid.map { .number($0) }, "timeout_ms": timeoutMs.map { .number($0) },
        ], minimumWait: Double(timeoutMs ?? 30_000) / 1000 + 5)
    }

    /// `bridge`: a Native Bridge message from a Smartico page (an integer `bcid`), relayed as is.
    public static func bridge(_ message: JSONObject) -> ClientRequest {
        ClientRequest(op: "bridge", arguments: ["message": .object(message)])
    }

    /// `api`: Smartico's data API by name (`missions.list`, docs/api.md); `raw`: the server's answer
    /// unchanged. Wait at least the call's timeout for each of its server requests, + 5 s.
    public static func api(_ call: String, args: JSONObject = JSONObject(), raw: Bool = false, timeoutMs: Int? = nil) -> ClientRequest {
        let spec = DataAPICatalog.call(named: call)
        let each = timeoutMs ?? spec?.timeoutMs ?? DataAPICatalog.defaultTimeoutMs
        return ClientRequest(op: "api", [
            "call": .string(call), "args": .object(args), "raw": raw ? true : nil, "timeout_ms": timeoutMs.map { .number($0) },
        ], minimumWait: Double(each) / 1000 * Double(max(1, spec?.cids.count ?? 1)) + 5)
    }

    /// `log_level`: `trace` … `critical`, until the daemon's next restart or reload.
    public static func logLevel(_ level: String) -> ClientRequest {
        ClientRequest(op: "log_level", arguments: ["level": .string(level)])
    }
}

/// The `hello` answer.
public struct DaemonHello: Sendable, Equatable {
    /// The socket API version (1).
    public var api: Int64
    /// The daemon's version.
    public var version: String
    /// The session state (`ready`, `backoff`, …).
    public var state: String

    /// From a `hello` result; `.badAnswer` when a member is missing.
    public init(result: JSONValue, path: String) throws(ClientError) {
        guard let api = result["api"]?.int64Value, let version = result["version"]?.stringValue else {
            throw .badAnswer(path: path, detail: "the hello answer lacks api or version: \(ClientError.oneLine(result.serializedString()))")
        }
        self.api = api
        self.version = version
        self.state = result["state"]?.stringValue ?? "unknown"
    }
}

/// The `subscribe` answer: where the subscription starts.
public struct SubscribeAnswer: Sendable, Equatable {
    /// The last journaled seq when it subscribed.
    public var lastSeq: Int64
    /// The daemon's journal the seqs count in (send it back with `since` when resuming).
    public var journal: String?

    public init(result: JSONValue, path: String) throws(ClientError) {
        guard let lastSeq = result["last_seq"]?.int64Value else {
            throw .badAnswer(path: path, detail: "the subscribe answer has no last_seq: \(ClientError.oneLine(result.serializedString()))")
        }
        self.lastSeq = lastSeq
        self.journal = result["journal"]?.stringValue
    }
}
