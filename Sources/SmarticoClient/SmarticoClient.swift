#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SmarticoProtocol
import SmarticoSocketAPI

/// A blocking client of the daemon's local socket: one connection, one thread.
///
/// Every call waits in `poll`, bounded by its timeout; run it on a thread of your own (a
/// command-line tool's main thread, a worker), never on Swift concurrency's cooperative pool. For
/// a long-running app that must follow the daemon across restarts, use ``DaemonLink``.
///
/// Answers are matched by id. On a subscribed connection events and answers interleave: events
/// that arrive while a call waits for its answer are queued for ``nextEvent(deadline:waitingFor:)``.
///
/// ```swift
/// let client = try SmarticoClient()                    // $SMARTICOD_SOCKET or /run/smarticod/smarticod.sock
/// print(try client.hello().version)
/// _ = try client.subscribe(types: ["engagement"], durable: "kiosk")
/// while let event = try client.nextEvent(deadline: .after(seconds: 60)) {
///     try client.report(.impression, engagementUID: event.data["message"]?["engagement_uid"]?.stringValue ?? "")
///     _ = try client.ack(event.seq ?? 0)
/// }
/// ```
public final class SmarticoClient {
    /// The connection (for its descriptor and path).
    public let connection: DaemonConnection
    /// Seconds a call waits for its answer unless told otherwise.
    public var timeout: Double
    public var path: String { connection.path }

    private var nextID: Int64 = 1
    /// Events received while a call waited; `events[eventsHead...]` are not handed out yet.
    private var events: [SmarticoEvent] = []
    private var eventsHead = 0
    /// Requests sent with ``post(_:_:timeout:)`` whose answers have not come: id → op.
    private var posted: [Int64: String] = [:]
    /// The refusal of a posted request, thrown by the next ``nextEvent(deadline:waitingFor:)``.
    private var postedRefusal: ClientError?

    /// `$SMARTICOD_SOCKET` when set and not empty, else `/run/smarticod/smarticod.sock`.
    public static var defaultSocketPath: String {
        if let env = getenv("SMARTICOD_SOCKET").map({ String(cString: $0) }), !env.isEmpty { return env }
        return SocketAPIDefaults.socketPath
    }

    /// Connects to `path` (waiting at most `timeout` seconds). `timeout` is also how long each
    /// call waits for its answer; `maxLineBytes` the longest line accepted from the daemon.
    public convenience init(path: String = SmarticoClient.defaultSocketPath, timeout: Double = 30, maxLineBytes: Int = 16 << 20) throws(ClientError) {
        let connection = try DaemonConnection(path: path, maxLineBytes: maxLineBytes, deadline: .after(seconds: timeout))
        self.init(connection: connection, timeout: timeout)
    }

    /// A client on a connection made by the caller.
    public init(connection: DaemonConnection, timeout: Double = 30) {
        self.connection = connection
        self.timeout = timeout
    }

    // MARK: Requests

    /// Sends `op` and waits until `deadline` for its answer, ok or not (a refusal is not thrown:
    /// ``Answer/ok`` says). An `"id": null` error (the daemon refused the connection, or our
    /// line) counts as the answer too.
    public func answer(_ op: String, _ arguments: JSONObject = JSONObject(), deadline: Deadline) throws(ClientError) -> Answer {
        let id = nextID
        nextID += 1
        try connection.write(requestLine(id: id, op: op, arguments), deadline: deadline, what: op)
        return try waitForAnswer(id: id, op: op, deadline: deadline)
    }

    /// Sends `op` and returns its `result`; `ok: false` throws `.refused` with the daemon's code
    /// and message. Waits `timeout` seconds (default: the client's) for the answer.
    @discardableResult
    public func call(_ op: String, _ arguments: JSONObject = JSONObject(), timeout: Double? = nil) throws(ClientError) -> JSONValue {
        try answer(op, arguments, deadline: .after(seconds: timeout ?? self.timeout)).result(op: op)
    }

    /// ``call(_:_:timeout:)`` for a ``ClientRequest``; waits at least its ``ClientRequest/minimumWait``.
    @discardableResult
    public func call(_ request: ClientRequest, timeout: Double? = nil) throws(ClientError) -> JSONValue {
        try call(request.op, request.arguments, timeout: request.wait(timeout: timeout ?? self.timeout))
    }

    /// Sends `op` without waiting for its answer (e.g. an `ack` per batch of events); returns its
    /// id. The answer is read later, among the events: ok, it is dropped; refused, the next
    /// ``nextEvent(deadline:waitingFor:)`` throws the refusal.
    @discardableResult
    public func post(_ op: String, _ arguments: JSONObject = JSONObject(), timeout: Double? = nil) throws(ClientError) -> Int64 {
        let id = nextID
        nextID += 1
        try connection.write(requestLine(id: id, op: op, arguments), deadline: .after(seconds: timeout ?? self.timeout), what: op)
        posted[id] = op
        return id
    }

    /// Reads until the answer with `id` comes; events are queued, answers to posted requests
    /// checked.
    private func waitForAnswer(id: Int64, op: String, deadline: Deadline) throws(ClientError) -> Answer {
        let waiting = "waiting for the answer to \(op)"
        while true {
            guard let line = try connection.readLine(deadline: deadline, waitingFor: waiting) else {
                throw .closed(path: path, waitingFor: waiting)
            }
            switch try DaemonLine.parse(line, path: path) {
            case .event(let event)?:
                events.append(event)
            case .answer(let answer)?:
                if answer.id.int64Value == id || answer.id.isNull { return answer }
                settlePosted(answer)
            case nil:
                continue
            }
        }
    }

    private func settlePosted(_ answer: Answer) {
        guard let id = answer.id.int64Value, let op = posted.removeValue(forKey: id) else { return }
        if !answer.ok && postedRefusal == nil { postedRefusal = answer.refusal(op: op) }
    }

    // MARK: Events

    /// `subscribe` on this connection (one subscription per connection): `types` (default all),
    /// replay the journaled events after `since` first, a `durable` name (resume after what it
    /// acknowledged), the `journal` `since` counts in. Then read events with
    /// ``nextEvent(deadline:waitingFor:)``.
    @discardableResult
    public func subscribe(types: [String]? = nil, since: Int64? = nil, durable: String? = nil, journal: String? = nil,
                          timeout: Double? = nil) throws(ClientError) -> SubscribeAnswer {
        let result = try call(.subscribe(types: types, since: since, durable: durable, journal: journal), timeout: timeout)
        return try SubscribeAnswer(result: result, path: path)
    }

    /// The next event: one queued while a call waited, or the next to arrive before `deadline`
    /// (nil when it passes). Throws `.closed` when the daemon closes the connection, and the
    /// refusal of a request sent with ``post(_:_:timeout:)``. `waitingFor` names the wait in errors.
    public func nextEvent(deadline: Deadline, waitingFor: String = "waiting for events") throws(ClientError) -> SmarticoEvent? {
        while true {
            if let refusal = postedRefusal {
                postedRefusal = nil
                throw refusal
            }
            if eventsHead < events.count {
                let event = events[eventsHead]
                eventsHead += 1
                if eventsHead == events.count {
                    events.removeAll(keepingCapacity: true)
                    eventsHead = 0
                }
                return event
            }
            let line: [UInt8]?
            do {
                line = try connection.readLine(deadline: deadline, waitingFor: waitingFor)
            } catch .timedOut where deadline.ns != nil {
                return nil
            }
            guard let line else { throw .closed(path: path, waitingFor: waitingFor) }
            switch try DaemonLine.parse(line, path: path) {
            case .event(let event)?:
                return event
            case .answer(let answer)?:
                if answer.id.isNull && !answer.ok { throw answer.refusal(op: "(this connection)") }
                settlePosted(answer)
            case nil:
                continue
            }
        }
    }

    /// Whether ``nextEvent(deadline:waitingFor:)`` has something without reading the socket: an
    /// event queued or a complete line buffered (a reader acknowledges once per batch of lines
    /// that arrived together).
    public var hasPendingInput: Bool { eventsHead < events.count || connection.hasBufferedLine }

    // MARK: Ops

    /// `hello`: the daemon's version, socket API version and session state.
    public func hello() throws(ClientError) -> DaemonHello {
        try DaemonHello(result: call(.hello), path: path)
    }

    /// `status`: the status object (docs/socket-api.md, "Status object").
    public func status() throws(ClientError) -> JSONValue { try call(.status) }

    /// `metrics`: `{"content_type", "text"}`, the Prometheus text.
    public func metrics() throws(ClientError) -> JSONValue { try call(.metrics) }

    /// `identify`: act for `extUserID`; the `identified` data.
    @discardableResult
    public func identify(extUserID: String, hash: String? = nil) throws(ClientError) -> JSONValue {
        try call(.identify(extUserID: extUserID, hash: hash))
    }

    @discardableResult
    public func logout() throws(ClientError) -> JSONValue { try call(.logout) }

    @discardableResult
    public func login() throws(ClientError) -> JSONValue { try call(.login) }

    @discardableResult
    public func pushToken(_ token: String, status: Int, platform: Int? = nil, appPackageID: String? = nil) throws(ClientError) -> JSONValue {
        try call(.pushToken(token, status: status, platform: platform, appPackageID: appPackageID))
    }

    @discardableResult
    public func language(_ code: String) throws(ClientError) -> JSONValue { try call(.language(code)) }

    @discardableResult
    public func event(_ eventType: String, payload: JSONObject? = nil) throws(ClientError) -> JSONValue {
        try call(.event(eventType, payload: payload))
    }

    @discardableResult
    public func report(_ kind: ClientRequest.ReportKind, engagementUID: String, activityType: Int64? = nil, action: String? = nil) throws(ClientError) -> JSONValue {
        try call(.report(kind, engagementUID: engagementUID, activityType: activityType, action: action))
    }

    @discardableResult
    public func minigameAck(sawTemplateID: Int64, pendingMessageID: Int64? = nil) throws(ClientError) -> JSONValue {
        try call(.minigameAck(sawTemplateID: sawTemplateID, pendingMessageID: pendingMessageID))
    }

    @discardableResult
    public func pushReport(_ kind: ClientRequest.PushReportKind, engagementUID: String, messageID: String? = nil, action: String? = nil,
                           userExtID: String? = nil) throws(ClientError) -> JSONValue {
        try call(.pushReport(kind, engagementUID: engagementUID, messageID: messageID, action: action, userExtID: userExtID))
    }

    /// `send`: `{"uuid", "queued"}`.
    @discardableResult
    public func send(_ message: JSONObject) throws(ClientError) -> JSONValue { try call(.send(message)) }

    /// `request`: the server's answer message.
    public func request(_ message: JSONObject, expectCid: Int64? = nil, timeoutMs: Int? = nil) throws(ClientError) -> JSONValue {
        let result = try call(.request(message, expectCid: expectCid, timeoutMs: timeoutMs))
        return result["message"] ?? result
    }

    @discardableResult
    public func bridge(_ message: JSONObject) throws(ClientError) -> JSONValue { try call(.bridge(message)) }

    /// `ack`: the durable name's cursor after it.
    @discardableResult
    public func ack(_ seq: Int64) throws(ClientError) -> Int64 {
        let result = try call(.ack(seq))
        guard let cursor = result["cursor"]?.int64Value else {
            throw .badAnswer(path: path, detail: "the ack answer has no cursor: \(ClientError.oneLine(result.serializedString()))")
        }
        return cursor
    }

    @discardableResult
    public func forget(_ durable: String) throws(ClientError) -> JSONValue { try call(.forget(durable)) }

    @discardableResult
    public func unsubscribe() throws(ClientError) -> JSONValue { try call(.unsubscribe) }

    /// `api`: the call's result (docs/api.md).
    public func api(_ call: String, args: JSONObject = JSONObject(), raw: Bool = false, timeoutMs: Int? = nil) throws(ClientError) -> JSONValue {
        try self.call(.api(call, args: args, raw: raw, timeoutMs: timeoutMs))
    }

    @discardableResult
    public func logLevel(_ level: String) throws(ClientError) -> JSONValue { try call(.logLevel(level)) }
}

@available(*, unavailable, message: "a SmarticoClient belongs to one thread; DaemonLink is the thread-safe client")
extension SmarticoClient: Sendable {}
