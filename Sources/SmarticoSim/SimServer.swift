import SmarticoProtocol

/// The whole simulator, sans I/O: one `SimServerSession` per connection, the shared context
/// (pending engagements, faults, pushes), the received log, scheduled pushes and the control
/// protocol. The I/O layer calls it on one thread (the event loop) and performs the actions.
///
/// ```swift
/// var sim = SimServer(config: config, now: nowMs)
/// let id = sim.connect(remote: "127.0.0.1:50312", now: nowMs)
/// for a in sim.receive(client: id, text: frameBytes, now: nowMs) { perform(a) }   // a.client, a.output, a.at
/// // when sim.nextDeadline() passes: sim.tick(now:); on close: sim.disconnected(client:now:)
/// ```
public struct SimServer {
    public var context: SimContext
    public private(set) var sessions: [String: SimServerSession] = [:]
    /// Client ids in connection order.
    public private(set) var order: [String] = []
    public private(set) var received: SimReceivedLog
    /// Called with every received entry (the `--record` file writer).
    public var onReceived: ((SimReceivedEntry) -> Void)?
    private var clientCounter = 0
    private var seq: Int64 = 0
    /// When the next scheduled push is due.
    public private(set) var nextEmitAt: Int64?
    private var emitIndex = 0

    public init(config: SimConfig, now: Int64, random: SimRandom = SimRandom()) {
        context = SimContext(config: config, random: random)
        received = SimReceivedLog(capacity: config.maxReceived, maxBytes: config.maxReceivedBytes)
        if let every = config.emitEveryMs, every > 0, !config.emitKinds.isEmpty { nextEmitAt = now + every }
    }

    public var config: SimConfig { context.config }

    // MARK: - Connections

    /// A new connection (after the WebSocket upgrade). Returns its client id. The server waits
    /// for INIT; keepalive starts now.
    public mutating func connect(remote: String, now: Int64) -> String {
        clientCounter += 1
        let id = "c\(clientCounter)"
        sessions[id] = SimServerSession(id: id, remote: remote, now: now, config: context.config)
        order.append(id)
        return id
    }

    /// The connection ended (either side). Its pending engagements stay with its user.
    public mutating func disconnected(client: String) {
        guard sessions.removeValue(forKey: client) != nil else { return }
        order.removeAll { $0 == client }
    }

    /// A text frame from `client`. Never throws: bad input becomes an answer or a close (see docs).
    public mutating func receive(client: String, text: [UInt8], now: Int64) -> [SimAction] {
        guard var session = sessions[client] else { return [] }
        defer { sessions[client] = session }
        let parsed: JSONValue
        do {
            parsed = try JSONValue(parsing: text)
        } catch {
            record(client: client, user: session.user, now: now, raw: text, size: text.count, error: "not JSON: \(error)")
            guard session.state != .closed, session.effectiveFaults(context).halfOpen != true else { return [] }
            session.markClosed()
            return [SimAction(client: client, output: .close(code: 1007, reason: "invalid JSON: \(error)".truncatedUTF8(123)), at: now)]
        }
        guard case .object(let object) = parsed else {
            record(client: client, user: session.user, now: now, raw: text, size: text.count, error: "not a JSON object: \(parsed.type)")
            return closePolicy(&session, "message is a JSON \(parsed.type), not an object", now: now)
        }
        guard let cid = object["cid"]?.int64Value else {
            let why = object["cid"] == nil ? "no cid" : "cid is not an integer"
            record(client: client, user: session.user, now: now, message: object, size: text.count, error: why)
            return closePolicy(&session, why, now: now)
        }
        // The simulator's own reading (never the daemon's message types): a refusal is the
        // entry's `error`, deviations a server lets pass are its `warnings`.
        let reading = SimValidator.read(object, cid: cid)
        record(client: client, user: session.user, now: now, message: object, size: text.count, error: reading.refusal,
               warnings: reading.warnings)
        return session.handle(object, cid: cid, reading: reading, now: now, context: &context)
    }

    /// A binary frame from `client`: the protocol is text only, so the connection is closed with 1003.
    public mutating func receiveBinary(client: String, byteCount: Int, now: Int64) -> [SimAction] {
        guard var session = sessions[client] else { return [] }
        defer { sessions[client] = session }
        record(client: client, user: session.user, now: now, raw: [], size: 0, error: "binary frame of \(byteCount) bytes")
        guard session.state != .closed, session.effectiveFaults(context).halfOpen != true else { return [] }
        session.markClosed()
        return [SimAction(client: client, output: .close(code: 1003, reason: "binary frames are not supported"), at: now)]
    }

    private func closePolicy(_ session: inout SimServerSession, _ why: String, now: Int64) -> [SimAction] {
        guard session.state != .closed, session.effectiveFaults(context).halfOpen != true else { return [] }
        session.markClosed()
        return [SimAction(client: session.id, output: .close(code: 1008, reason: why.truncatedUTF8(123)), at: now)]
    }

    private mutating func record(client: String, user: String?, now: Int64, message: JSONObject? = nil, raw: [UInt8]? = nil,
                                 size: Int, error: String?, warnings: [String] = []) {
        append(SimReceivedEntry(seq: 0, at: now, client: client, user: user, message: message,
                                raw: raw.map { String(decoding: $0.prefix(65536), as: UTF8.self) }, error: error,
                                warnings: warnings), size: size)
    }

    private mutating func append(_ e: SimReceivedEntry, size: Int) {
        var entry = e
        seq += 1
        entry.seq = seq
        received.append(entry, size: size)
        onReceived?(entry)
    }

    /// Records a public API call received over HTTP (client id `http`).
    public mutating func recordHTTP(_ r: SimHTTPRouter.Record, now: Int64) {
        let user = r.message?["user_ext_id"]?.stringValue ?? r.message?["ext_user_id"]?.stringValue
        let size = r.message.map { $0.serialized().count } ?? r.raw?.utf8.count ?? 0
        append(SimReceivedEntry(seq: 0, at: now, client: "http", user: user, message: r.message,
                                raw: r.message == nil ? (r.raw ?? "") : nil, error: r.error, http: r.http), size: size)
    }

    // MARK: - Time

    /// Keepalive of every connection and the scheduled pushes.
    public mutating func tick(now: Int64) -> [SimAction] {
        var actions: [SimAction] = []
        for id in order {
            guard var s = sessions[id], let d = s.nextDeadline(context), d <= now else { continue }
            actions += s.tick(now: now, context: &context)
            sessions[id] = s
        }
        if let due = nextEmitAt, due <= now, let every = config.emitEveryMs, !config.emitKinds.isEmpty {
            let kind = config.emitKinds[emitIndex % config.emitKinds.count]
            emitIndex += 1
            nextEmitAt = now + every
            actions += (try? emit(kind: kind, to: .identified, now: now).actions) ?? []
        }
        return actions
    }

    /// The earliest time `tick` has work (nil: none).
    public func nextDeadline() -> Int64? {
        var best = nextEmitAt
        for s in sessions.values {
            if let d = s.nextDeadline(context), best.map({ d < $0 }) ?? true { best = d }
        }
        return best
    }

    // MARK: - Pushes

    /// Whom a push or a fault is for.
    public enum Target: Sendable, Equatable {
        /// Every identified client (the default of `emit`).
        case identified
        /// Every connected client.
        case all
        case client(String)
        /// Every client identified as this user (a 110 becomes pending even when none is connected).
        case user(String)
    }

    /// The result of an emit: what went to whom, and whether a 110 was kept for an offline user.
    public struct EmitResult {
        public var actions: [SimAction] = []
        /// (client id, the message as sent), parsed back from `actions` when asked (the control
        /// socket's answer); bulk emits that only send never pay for it.
        public var deliveries: [(client: String, message: JSONObject)] {
            actions.compactMap { a in a.json.map { (a.client, $0) } }
        }
        /// A 110 kept pending for a user with no connected client.
        public var queuedForUser: JSONObject?
    }

    /// Generated pushes of `kind`, one per target client.
    public mutating func emit(kind: SimPushKind, to target: Target, now: Int64) throws(SimControlError) -> EmitResult {
        let ids = try resolve(target)
        var result = EmitResult()
        for id in ids {
            let message = context.pushes.make(kind, random: &context.random)
            deliver(message, to: id, now: now, into: &result)
        }
        if ids.isEmpty, case .user(let user) = target, kind == .engagement {
            result.queuedForUser = queue(context.pushes.make(kind, random: &context.random), user: user, now: now)
        }
        return result
    }

    /// A given message to every target client (stamped with `ts`/`uuid` unless it has them).
    public mutating func emit(message: JSONObject, to target: Target, now: Int64) throws(SimControlError) -> EmitResult {
        // A string cid is sent as given: a client must read `"110"` as the SDK does, and deliver
        // what it cannot read (`"abc"`) without ending the connection.
        guard let c = message["cid"], c.int64Value != nil || c.stringValue != nil else {
            throw .invalid("\"message\" must be an object with an integer \"cid\" (or a string, sent as given)")
        }
        let ids = try resolve(target)
        var result = EmitResult()
        for id in ids { deliver(message, to: id, now: now, into: &result) }
        if ids.isEmpty, case .user(let user) = target, message["cid"]?.lenientInt64 == 110 {
            guard message["engagement_uid"]?.stringValue != nil else {
                throw .invalid("a 110 for an offline user needs an \"engagement_uid\" to be kept pending")
            }
            result.queuedForUser = queue(message, user: user, now: now)
        }
        return result
    }

    private mutating func deliver(_ message: JSONObject, to id: String, now: Int64, into result: inout EmitResult) {
        guard var s = sessions[id] else { return }
        let actions = s.push(message, now: now, context: &context)
        sessions[id] = s
        result.actions += actions
    }

    private mutating func queue(_ message: JSONObject, user: String, now: Int64) -> JSONObject {
        var o = message
        if o["ts"] == nil { o["ts"] = .number(now) }
        if o["uuid"] == nil { o["uuid"] = .string(context.random.uuid()) }
        context.pending.add(o, user: user)
        return o
    }

    /// Client ids for a target, in connection order (closed ones excluded).
    public func resolve(_ target: Target) throws(SimControlError) -> [String] {
        let open = order.filter { sessions[$0]?.state != .closed }
        switch target {
        case .all: return open
        case .identified: return open.filter { sessions[$0]?.user != nil }
        case .client(let id):
            guard sessions[id] != nil else {
                throw .unknownClient(id, known: order)
            }
            return open.contains(id) ? [id] : []
        case .user(let user): return open.filter { sessions[$0]?.user == user }
        }
    }

    // MARK: - Faults

    /// Sets persistent modes on a client (or globally when `client` is nil).
    public mutating func setFaults(_ change: (inout SimFaultModes) -> Void, client: String?) throws(SimControlError) {
        if let client {
            guard var s = sessions[client] else { throw .unknownClient(client, known: order) }
            change(&s.faults)
            sessions[client] = s
        } else {
            change(&context.globalFaults)
        }
    }

    /// Performs a fault action now on the target clients; returns the actions.
    public mutating func perform(_ action: SimFaultAction, on ids: [String], now: Int64) -> [SimAction] {
        var actions: [SimAction] = []
        for id in ids {
            guard var s = sessions[id] else { continue }
            actions += s.perform(action, now: now)
            sessions[id] = s
        }
        return actions
    }

    /// Arms a fault action for the next message with `cid` from `client` (or from any client).
    public mutating func arm(_ action: SimFaultAction, onCID cid: Int64, client: String?) throws(SimControlError) {
        let armed = SimArmedFault(cid: cid, action: action)
        if let client {
            guard var s = sessions[client] else { throw .unknownClient(client, known: order) }
            s.armed.append(armed)
            sessions[client] = s
        } else {
            context.armed.append(armed)
        }
    }

    /// Clears modes and armed actions of one client, or every fault (global and per client).
    public mutating func clearFaults(client: String?) throws(SimControlError) {
        if let client {
            guard var s = sessions[client] else { throw .unknownClient(client, known: order) }
            s.faults = SimFaultModes()
            s.armed = []
            sessions[client] = s
            return
        }
        context.globalFaults = SimFaultModes()
        context.armed = []
        for id in order {
            sessions[id]?.faults = SimFaultModes()
            sessions[id]?.armed = []
        }
    }
}
