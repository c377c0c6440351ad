import SmarticoProtocol

/// Fixed parameters of the machine that are not in the configuration.
public struct SessionEnvironment: Sendable {
    /// The device's time zone for `ua.tzoffset` (computed at each send); the system's by default.
    public var timeZone: UTCOffset
    /// The random source for uuids, `session_id` and backoff jitter.
    public var random: SessionRandom
    /// How long an `identify` request waits for cid 6 before `not_ready`.
    public var identifyReplyTimeoutMs: Int64 = 60_000
    /// Default `timeout_ms` of `request`.
    public var requestTimeoutMs: Int64 = 30_000
    /// Wait for cid 12 after LOGOUT.
    public var logoutWaitMs: Int64 = 2_000
    /// Wait for the server's close after our close 1000.
    public var closeWaitMs: Int64 = 2_000
    /// A ready session this long resets the backoff.
    public var healthyResetMs: Int64 = 60_000
    /// Outbox messages loaded per `.loadOutbox`.
    public var outboxBatch: Int = 64
    /// `request`s waiting at once; more → `queue_full`.
    public var maxPendingRequests: Int = 1_000
    /// Activity is persisted at most this often.
    public var activityPersistIntervalMs: Int64 = 60_000

    public init(timeZone: UTCOffset = .local, random: SessionRandom = .system) {
        self.timeZone = timeZone
        self.random = random
    }
}

/// The Smartico session as a pure state machine (docs/session.md).
///
/// No I/O, no clock, no randomness of its own: the driver feeds inputs with the current time
/// (`handle(_:now:)`, milliseconds since the epoch) and performs the returned actions in order.
/// A value type: one owner (the driver's actor or loop) holds it and mutates it.
public struct SessionMachine: Sendable {
    enum AfterClose: Equatable { case reconnect, stop }

    enum Phase: Equatable {
        case idle, connecting, initializing, hashing, identifying, ready, loggingOut
        case closing(AfterClose)
        case backoff, stopped
    }

    enum UserSource: Equatable { case config, op }

    struct UserState: Equatable {
        var extUserID: String
        var hash: String?
        var source: UserSource
    }

    struct PendingRequest {
        var id: SessionRequestID
        var message: OutgoingMessage
        var expectCid: Int64
        var deadlineMs: Int64
        var sentOn: ConnectionID?
    }

    struct StoreWaiter {
        var id: SessionRequestID?
        var entry: OutboxEntry
    }

    /// Counters of the status object.
    public struct Counters: Sendable, Equatable {
        /// Connection attempts after the first.
        public var reconnects = 0
        public var messagesIn = 0
        public var messagesOut = 0
        /// PINGs received from the server plus our own PINGs.
        public var pings = 0
        /// PONGs sent plus PONGs received.
        public var pongs = 0
    }

    // MARK: state

    public private(set) var config: ResolvedConfig
    var env: SessionEnvironment
    var backoff: Backoff
    var out: [SessionAction] = []

    var phase: Phase = .idle
    var publicState: SessionState = .disconnected
    var stateSinceMs: Int64 = 0
    var stopping = false

    var connectionCounter: UInt64 = 0
    var conn: ConnectionID?
    var connectedAtMs: Int64?
    var sessionID: String?
    var initResponse: InitSessionResponse?
    var attempt = 0
    var deadlines = SessionTimerSlots<Int64>()
    var lastPingMs: Int64?
    /// Rule 6 on this connection: when the server was last heard from (any message, or the
    /// connection's start), and its own PINGs — the last one and the gap before it.
    var heardAtMs: Int64?
    var serverPingAtMs: Int64?
    var serverPingEveryMs: Int64?
    public internal(set) var counters = Counters()

    var deviceID = ""
    var fingerprint: Int32 = 0

    var user: UserState?
    var push: StoredPush?
    /// A hash given with the `identify` op, used by the next IDENTIFY before the hash command.
    var freshHash: String?
    /// The hash the server rejected with a fatal errCode (`.some(nil)`: IDENTIFY without hash).
    var rejectedHash: String??
    var rejection: (errCode: Int64?, errMsg: String?)?
    var identifySentOnConn = false
    var identifiedOnConn = false
    var usedHash: String?
    var hashToken: UInt64 = 0
    var forceLogin = false
    var lastActivityMs: Int64?
    var activityPersistedMs: Int64?
    var identity: IdentifyUserResponse? {
        didSet { popupURLJSON = EngagementJournal.popupURLJSON(identity?.popupURL) }
    }
    /// `popup_url` of every engagement event as JSON (`identity`'s `native_app_popup_url`, or
    /// `null`), serialized when the identity changes rather than for each engagement.
    var popupURLJSON: [UInt8] = EngagementJournal.popupURLJSON(nil)
    var props: JSONObject = [:]
    var languageOverride: String?
    var languageSentOnConn = false

    var pending: [PendingRequest] = []
    var identifyWaiters: [(id: SessionRequestID, deadlineMs: Int64)] = []
    var logoutWaiters: [SessionRequestID] = []
    var awaitingStore: [String: StoreWaiter] = [:]
    var flushing = false
    var flushAgain = false
    /// `.loadOutbox` actions not yet answered; only the answer to the last one is used.
    var outstandingLoads = 0

    /// - Parameters:
    ///   - config: the resolved configuration.
    ///   - environment: time zone, random source and fixed timings.
    public init(config: ResolvedConfig, environment: SessionEnvironment = SessionEnvironment()) {
        self.config = config
        self.env = environment
        self.backoff = Backoff(config.config.session.reconnect)
    }

    /// Feeds one input at time `now` (ms since the epoch, the clock of `.schedule`) and returns
    /// the actions to perform, in order.
    public mutating func handle(_ input: SessionInput, now: Int64) -> [SessionAction] {
        var actions: [SessionAction] = []
        handle(input, now: now, into: &actions)
        return actions
    }

    /// `handle(_:now:)` with the actions put into `actions` (emptied first, its storage kept): the
    /// driver hands the same array back for every input, so an engagement's actions (a timer, the
    /// journal) cost no allocation — a new array for each, grown as they were appended, was two
    /// allocations a server message.
    public mutating func handle(_ input: SessionInput, now: Int64, into actions: inout [SessionAction]) {
        actions.removeAll(keepingCapacity: true)
        swap(&out, &actions)
        defer { swap(&out, &actions) }
        switch input {
        case .start(let snapshot): start(snapshot, now: now)
        case .connected(let c): onConnected(c, now: now)
        case .connectFailed(let c, let reason, let message): onConnectFailed(c, reason: reason, message: message, now: now)
        case .received(let c, let bytes): onReceived(c, bytes, now: now)
        case .closed(let c, let code, let reason): onClosed(c, code: code, reason: reason, now: now)
        case .timerFired(let t): onTimer(t, now: now)
        case .hashResult(let token, let outcome): onHashResult(token, outcome, now: now)
        case .outboxStored(let uuid, let failure): onOutboxStored(uuid, failure, now: now)
        case .outboxLoaded(let entries): onOutboxLoaded(entries, now: now)
        case .request(let id, let request): onRequest(id, request, now: now)
        case .shutdown: onShutdown(now: now)
        case .reload(let newConfig): onReload(newConfig, now: now)
        }
    }

    // MARK: derived values

    var sessionConfig: DaemonConfig.Session { config.config.session }

    /// The public state for the status object.
    public var state: SessionState { publicState }

    static func publicState(of phase: Phase) -> SessionState {
        switch phase {
        case .idle, .stopped: .disconnected
        case .connecting, .closing(.reconnect): .connecting
        case .initializing: .initializing
        case .hashing, .identifying: .identifying
        case .ready, .loggingOut: .ready
        case .backoff: .backoff
        case .closing(.stop): .stopping
        }
    }

    /// True while a WebSocket is open and usable.
    var isOpen: Bool {
        switch phase {
        case .initializing, .hashing, .identifying, .ready, .loggingOut: true
        default: false
        }
    }

    /// Messages that act for the user may go: the session is ready and either the user is
    /// identified on this connection or there is no user at all (an anonymous session).
    var gateOpen: Bool { phase == .ready && (identifiedOnConn || user == nil) }

    var page: String {
        if let p = config.config.client.page { return p }
        if let d = config.config.client.domain { return "https://\(d)/" }
        return ""
    }

    func userAgent(now: Int64) -> UserAgent {
        let c = config.config.client
        let tz = UserAgent.tzoffset(in: env.timeZone, atEpochMilliseconds: now)
        return UserAgent(fp: Int64(fingerprint), agent: c.agent, host: c.host, deviceType: c.deviceType, tzoffset: tz, os: c.os)
    }

    mutating func makeUUID() -> String { UUIDv4.random(using: &env.random).string }

    // MARK: phase and timers

    mutating func setPhase(_ p: Phase, reason: String, now: Int64, extra: JSONObject = [:]) {
        phase = p
        let s = Self.publicState(of: p)
        guard s != publicState else { return }
        publicState = s
        stateSinceMs = now
        out.append(.statusChanged(s))
        var data: JSONObject = ["state": .string(s.rawValue), "reason": .string(reason)]
        for (k, v) in extra { data[k] = v }
        emit("session", .object(data), journaled: false)
    }

    mutating func schedule(_ t: SessionTimer, at: Int64) {
        deadlines[t] = at
        out.append(.schedule(t, atMs: at))
    }

    mutating func cancel(_ t: SessionTimer) {
        if deadlines.removeValue(forKey: t) != nil { out.append(.cancel(t)) }
    }

    mutating func cancelConnectionTimers() {
        for t in [SessionTimer.connect, .response, .keepalive, .dead, .healthyReset, .logoutWait, .closeWait] { cancel(t) }
    }

    mutating func emit(_ name: String, _ data: JSONValue, journaled: Bool) {
        out.append(.emit(DaemonEvent(name: name, data: data, journaled: journaled)))
    }

    mutating func emitError(_ code: String, _ message: String, errCode: Int64? = nil, errMsg: String? = nil) {
        var d: JSONObject = ["code": .string(code), "message": .string(message)]
        if let errCode { d["errCode"] = .number(errCode) }
        if let errMsg { d["errMsg"] = .string(errMsg) }
        emit("error", .object(d), journaled: false)
    }

    mutating func reply(_ id: SessionRequestID, _ result: Result<JSONValue, SessionReplyError>) {
        out.append(.reply(id, result))
    }

    // MARK: start, connect

    mutating func start(_ snapshot: SessionSnapshot, now: Int64) {
        guard phase == .idle else { return }
        deviceID = config.config.client.deviceID ?? snapshot.deviceID
        fingerprint = snapshot.fingerprint
        if let stored = snapshot.user {
            user = UserState(extUserID: stored.extUserID, hash: stored.hash, source: .op)
            lastActivityMs = stored.lastActivityMs
            activityPersistedMs = stored.lastActivityMs
            if let bytes = stored.props, case .object(let o)? = try? JSONValue(parsing: bytes) { props = o }
        } else if let ext = config.config.user.extUserID {
            user = UserState(extUserID: ext, hash: config.config.user.hash?.exposedValue, source: .config)
        }
        push = snapshot.push ?? Self.configPush(config)
        connect(now: now, reason: "start")
    }

    static func configPush(_ config: ResolvedConfig) -> StoredPush? {
        let p = config.config.user.push
        guard let token = p.token else { return nil }
        return StoredPush(token: token.exposedValue, platform: p.platform, status: p.status, appPackageID: p.appPackageID)
    }

    mutating func connect(now: Int64, reason: String) {
        if connectionCounter > 0 { counters.reconnects += 1 }
        connectionCounter += 1
        let c = ConnectionID(connectionCounter)
        conn = c
        resetConnectionState()
        setPhase(.connecting, reason: reason, now: now)
        out.append(.connect(c, url: config.server.url))
        schedule(.connect, at: now + Int64(sessionConfig.connectTimeoutS) * 1000)
    }

    mutating func resetConnectionState() {
        identifySentOnConn = false
        identifiedOnConn = false
        usedHash = nil
        sessionID = nil
        initResponse = nil
        connectedAtMs = nil
        flushing = false
        flushAgain = false
        languageSentOnConn = false
        heardAtMs = nil
        serverPingAtMs = nil
        serverPingEveryMs = nil
        hashToken &+= 1
        for k in pending.indices { pending[k].sentOn = nil }
    }

    mutating func onConnected(_ c: ConnectionID, now: Int64) {
        guard c == conn, phase == .connecting else { return }
        cancel(.connect)
        connectedAtMs = now
        let sid = makeUUID()
        sessionID = sid
        let cfg = config.config
        let initMessage = InitSessionRequest(
            labelKey: config.labelKey.key.exposedValue, brandKey: cfg.server.brandKey, deviceID: deviceID,
            page: page, trackerVersion: cfg.client.effectiveTrackerVersion, sessionID: sid, ua: userAgent(now: now))
        send(initMessage.json, now: now)
        setPhase(.initializing, reason: "connected", now: now)
        schedule(.response, at: now + Int64(sessionConfig.responseTimeoutS) * 1000)
        heardAtMs = now
        restartSilenceTimer(now: now)
    }

    mutating func onConnectFailed(_ c: ConnectionID, reason: String, message: String, now: Int64) {
        guard c == conn else { return }
        if case .closing = phase {
            afterClose(now: now, reason: phase == .closing(.stop) ? "shutdown" : "reconnect")
        } else if phase == .connecting {
            fail(reason: reason, message: message, now: now, transportGone: true)
        }
    }

    /// Stamps (`ts`, `uuid` when absent) and writes a message on the current connection.
    @discardableResult
    mutating func send(_ json: JSONObject, now: Int64) -> OutgoingMessage? {
        guard let c = conn else { return nil }
        let m = stamp(json, now: now)
        write(m, on: c, now: now)
        return m
    }

    mutating func write(_ m: OutgoingMessage, on c: ConnectionID, now: Int64) {
        counters.messagesOut += 1
        out.append(.send(c, m))
        // Keepalive is not activity: an idle but connected device still starts a new logical
        // session after login_after_inactivity_min.
        if identifiedOnConn, m.cid != 1, m.cid != 2 { noteActivity(now: now) }
    }

    mutating func stamp(_ json: JSONObject, now: Int64) -> OutgoingMessage {
        var o = json
        if o["ts"] == nil || o["ts"]?.isNull == true { o["ts"] = .number(now) }
        if o["uuid"] == nil || o["uuid"]?.isNull == true { o["uuid"] = .string(makeUUID()) }
        return OutgoingMessage(bytes: o.serialized(), cid: o["cid"]?.int64Value ?? 0, uuid: o["uuid"]?.stringValue ?? "")
    }

    mutating func noteActivity(now: Int64) {
        lastActivityMs = now
        if let p = activityPersistedMs, now - p < env.activityPersistIntervalMs { return }
        activityPersistedMs = now
        out.append(.recordActivity(atMs: now))
    }

    // MARK: failure, backoff, graceful close

    /// Any failure: tell subscribers why, drop the connection, back off, reconnect.
    mutating func fail(reason: String, message: String, now: Int64, transportGone: Bool = false,
                       closeCode: Int? = nil) {
        if let c = conn, !transportGone {
            if let code = closeCode { out.append(.close(c, code: code, reason: reason)) } else { out.append(.abort(c)) }
        }
        conn = nil
        cancelConnectionTimers()
        resetConnectionState()
        if stopping {
            finish(now: now)
            return
        }
        let delay = backoff.delayMs(attempt: attempt, using: &env.random)
        attempt += 1
        schedule(.backoff, at: now + delay)
        setPhase(.backoff, reason: reason, now: now, extra: [
            "message": .string(message), "attempt": .number(attempt), "retry_in_ms": .number(delay),
        ])
    }

    /// Close 1000 and wait ≤ `closeWaitMs` for the server's close, then reconnect or stop.
    mutating func closeGracefully(then next: AfterClose, reason: String, now: Int64) {
        guard let c = conn, phase != .connecting else {
            // Nothing open yet: drop the attempt, no close handshake to wait for.
            if let c = conn { out.append(.abort(c)) }
            conn = nil
            cancelConnectionTimers()
            if next == .stop { finish(now: now) } else { connect(now: now, reason: reason) }
            return
        }
        cancelConnectionTimers()
        out.append(.close(c, code: 1000, reason: reason))
        setPhase(.closing(next), reason: reason, now: now)
        schedule(.closeWait, at: now + env.closeWaitMs)
    }

    mutating func afterClose(now: Int64, reason: String) {
        guard case .closing(let next) = phase else { return }
        cancel(.closeWait)
        conn = nil
        resetConnectionState()
        if next == .stop || stopping { finish(now: now) } else { connect(now: now, reason: reason) }
    }

    mutating func onClosed(_ c: ConnectionID, code: Int?, reason: String, now: Int64) {
        guard c == conn else { return }
        if case .closing = phase {
            afterClose(now: now, reason: phase == .closing(.stop) ? "shutdown" : "reconnect")
            return
        }
        let detail = code.map { "code \($0)" } ?? "no close code"
        fail(reason: "server_closed", message: "the connection closed (\(detail)\(reason.isEmpty ? "" : ": \(reason)"))",
             now: now, transportGone: true)
    }

    mutating func finish(now: Int64) {
        for t in SessionTimer.allCases { cancel(t) }
        if let c = conn { out.append(.abort(c)) }
        conn = nil
        if identifiedOnConn || lastActivityMs != nil, let a = lastActivityMs, a != activityPersistedMs {
            activityPersistedMs = a
            out.append(.recordActivity(atMs: a))
        }
        failAllWaiters(SessionReplyError(.notReady, "the daemon is stopping"))
        setPhase(.stopped, reason: "shutdown", now: now)
        out.append(.stopped)
    }

    mutating func failAllWaiters(_ error: SessionReplyError) {
        for p in pending { reply(p.id, .failure(error)) }
        pending.removeAll()
        for w in identifyWaiters { reply(w.id, .failure(error)) }
        identifyWaiters.removeAll()
        for w in logoutWaiters { reply(w, .failure(error)) }
        logoutWaiters.removeAll()
        cancel(.requests)
    }

    // MARK: timers

    mutating func onTimer(_ t: SessionTimer, now: Int64) {
        guard let at = deadlines[t], now >= at else { return }
        deadlines[t] = nil
        switch t {
        case .connect:
            if phase == .connecting {
                fail(reason: "connect_timeout", message: "no WebSocket within \(sessionConfig.connectTimeoutS) s (session.connect_timeout_s)", now: now)
            }
        case .response:
            if phase == .initializing {
                fail(reason: "response_timeout", message: "no INIT_SESSION_RESPONSE (cid 4) within \(sessionConfig.responseTimeoutS) s (session.response_timeout_s)", now: now, closeCode: 1000)
            } else if phase == .identifying {
                fail(reason: "response_timeout", message: "no IDENTIFY_USER_RESPONSE (cid 6) within \(sessionConfig.responseTimeoutS) s (session.response_timeout_s)", now: now, closeCode: 1000)
            }
        case .keepalive:
            guard isOpen else { return }
            counters.pings += 1
            send(Ping().json, now: now)
            if deadlines[.dead] == nil { schedule(.dead, at: deadDeadline(pingAt: now)) }
            schedule(.keepalive, at: now + Int64(sessionConfig.keepaliveS) * 1000)
        case .dead:
            guard isOpen else { return }
            let silentS = (now - (heardAtMs ?? now)) / 1000
            fail(reason: "heartbeat_timeout", message: "nothing from the server for \(silentS) s, and no answer to our PING (session.keepalive_s \(sessionConfig.keepaliveS) + session.dead_after_s \(sessionConfig.deadAfterS))", now: now)
        case .backoff:
            if phase == .backoff { connect(now: now, reason: "retry") }
        case .healthyReset:
            attempt = 0
        case .logoutWait:
            if phase == .loggingOut { finishLogout(now: now) }
        case .closeWait:
            if case .closing = phase, let c = conn {
                out.append(.abort(c))
                afterClose(now: now, reason: phase == .closing(.stop) ? "shutdown" : "reconnect")
            }
        case .requests:
            expireRequests(now: now)
        }
    }

    // MARK: INIT → IDENTIFY → LOGIN → ready

    mutating func onInitResponse(_ r: InitSessionResponse, now: Int64) {
        guard phase == .initializing else { return }
        cancel(.response)
        guard r.isSuccess else {
            let code = r.errCode ?? 0
            let msg = "the server rejected INIT_SESSION_REQUEST: errCode \(code)\(r.errMsg.map { " (\($0))" } ?? "")"
            emitError("init_rejected", msg, errCode: code, errMsg: r.errMsg)
            fail(reason: "init_rejected", message: msg, now: now, closeCode: 1000)
            return
        }
        initResponse = r
        if user != nil { beginIdentify(now: now) } else { becomeReady(reason: "anonymous", now: now) }
    }

    mutating func beginIdentify(now: Int64) {
        guard let u = user else { becomeReady(reason: "anonymous", now: now); return }
        if let h = freshHash {
            freshHash = nil
            sendIdentify(hash: h, now: now)
        } else if let argv = config.config.user.hashCommand, !argv.isEmpty {
            hashToken &+= 1
            cancel(.response)
            setPhase(.hashing, reason: "hash_command", now: now)
            out.append(.runHashCommand(token: hashToken, argv: argv, user: u.extUserID))
        } else {
            sendIdentify(hash: u.hash, now: now)
        }
    }

    mutating func onHashResult(_ token: UInt64, _ outcome: HashCommandOutcome, now: Int64) {
        guard token == hashToken, phase == .hashing else { return }
        switch outcome {
        case .hash(let secret): sendIdentify(hash: secret.exposedValue, now: now)
        case .failed(let error):
            let msg = "user.hash_command failed: \(error)"
            emitError("hash_command_failed", msg)
            fail(reason: "hash_command_failed", message: msg, now: now, closeCode: 1000)
        }
    }

    mutating func sendIdentify(hash: String?, now: Int64) {
        guard let u = user else { becomeReady(reason: "anonymous", now: now); return }
        if let rejected = rejectedHash, rejected == hash {
            // Never IDENTIFY again with a hash the server called invalid: stay anonymous.
            let msg = "not identifying \(u.extUserID): the server rejected this hash (errCode \(rejection?.errCode.map(String.init) ?? "?")); identify again with a new hash"
            for w in identifyWaiters {
                reply(w.id, .failure(SessionReplyError(.serverError, msg, errCode: rejection?.errCode, errMsg: rejection?.errMsg)))
            }
            identifyWaiters.removeAll()
            becomeReady(reason: "identify_rejected", now: now)
            return
        }
        let p = push
        let request = IdentifyUserRequest(
            extUserID: u.extUserID, hash: hash, ua: userAgent(now: now), page: page,
            pushNotificationUserStatus: p.flatMap { PushNotificationUserStatus(rawValue: Int64($0.status)) },
            token: p?.token, trackerVersion: config.config.client.effectiveTrackerVersion,
            platform: p.flatMap { PushClientPlatform(rawValue: Int64($0.platform)) })
        identifySentOnConn = true
        usedHash = hash
        send(request.json, now: now)
        setPhase(.identifying, reason: "identify", now: now)
        schedule(.response, at: now + Int64(sessionConfig.responseTimeoutS) * 1000)
    }

    mutating func onIdentifyResponse(_ r: IdentifyUserResponse, now: Int64) {
        guard phase == .identifying, let u = user else { return }
        cancel(.response)
        if r.isSuccess {
            identifiedOnConn = true
            rejectedHash = nil
            rejection = nil
            props = r.props ?? props
            identity = r
            out.append(.persistProfile(publicUsername: r.publicUsername, props: props.serialized()))
            let data = identifiedData(r, user: u)
            emit("identified", data, journaled: false)
            for w in identifyWaiters { reply(w.id, .success(data)) }
            identifyWaiters.removeAll()
            let inactive = lastActivityMs.map { now - $0 >= Int64(sessionConfig.loginAfterInactivityMin) * 60_000 } ?? true
            if sessionConfig.loginPolicy == .everyIdentify || forceLogin || inactive {
                forceLogin = false
                send(Login(ua: userAgent(now: now)).json, now: now)
            }
            noteActivity(now: now)
            becomeReady(reason: "identified", now: now)
        } else if r.isFatalError {
            let code = r.errCode ?? 0
            rejectedHash = .some(usedHash)
            rejection = (code, r.errMsg)
            let msg = "the server rejected IDENTIFY for \(u.extUserID): errCode \(code)\(r.errMsg.map { " (\($0))" } ?? ""); staying anonymous until a new hash arrives"
            emitError("identify_rejected", msg, errCode: code, errMsg: r.errMsg)
            for w in identifyWaiters { reply(w.id, .failure(SessionReplyError(.serverError, msg, errCode: code, errMsg: r.errMsg))) }
            identifyWaiters.removeAll()
            becomeReady(reason: "identify_rejected", now: now)
        } else {
            let code = r.errCode ?? 0
            let msg = "IDENTIFY for \(u.extUserID) failed: errCode \(code)\(r.errMsg.map { " (\($0))" } ?? "")"
            emitError("identify_failed", msg, errCode: code, errMsg: r.errMsg)
            fail(reason: "identify_failed", message: msg, now: now, closeCode: 1000)
        }
    }

    func identifiedData(_ r: IdentifyUserResponse, user u: UserState) -> JSONValue {
        var domain = initResponse?.dynamicImageDomain ?? config.imageDomain
        if !domain.contains(bytes: "://") { domain = "https://" + domain }
        let avatar = r.avatarURL(imageDomain: domain)
        return .object([
            "ext_user_id": .string(u.extUserID),
            "public_username": r.publicUsername.map(JSONValue.string) ?? .null,
            "avatar_id": r.avatarID.map(JSONValue.string) ?? .null,
            "avatar_url": avatar.map(JSONValue.string) ?? .null,
            "gf_url": r.gamificationURL.map(JSONValue.string) ?? .null,
            "popup_url": r.popupURL.map(JSONValue.string) ?? .null,
            "props": .object(props),
        ])
    }

    mutating func becomeReady(reason: String, now: Int64) {
        setPhase(.ready, reason: reason, now: now)
        if deadlines[.healthyReset] == nil { schedule(.healthyReset, at: now + env.healthyResetMs) }
        if gateOpen { onGateOpen(now: now) }
    }

    /// The identify gate opened: send waiting requests, the configured language, the outbox.
    mutating func onGateOpen(now: Int64) {
        guard let c = conn else { return }
        for k in pending.indices where pending[k].sentOn != c {
            pending[k].sentOn = c
            write(pending[k].message, on: c, now: now)
        }
        if !languageSentOnConn, languageOverride == nil, let lang = config.config.client.language {
            languageSentOnConn = true
            send(ClientEvent.languageChanged(lang).json, now: now)
        }
        startFlush()
    }

    mutating func startFlush() {
        if flushing { flushAgain = true; return }
        flushing = true
        flushAgain = false
        outstandingLoads += 1
        out.append(.loadOutbox(limit: env.outboxBatch))
    }

    mutating func onOutboxLoaded(_ entries: [OutboxEntry], now: Int64) {
        outstandingLoads = max(0, outstandingLoads - 1)
        // A load asked for by an earlier connection: a newer one follows, use that.
        guard flushing, outstandingLoads == 0 else { return }
        guard gateOpen, let c = conn else { flushing = false; return }
        for e in entries {
            write(OutgoingMessage(bytes: e.bytes, cid: Int64(e.cid), uuid: e.uuid), on: c, now: now)
        }
        if !entries.isEmpty { out.append(.markSent(entries.map(\.uuid))) }
        flushing = false
        if entries.count >= env.outboxBatch || flushAgain { startFlush() }
    }

    // MARK: logout, shutdown, reload

    mutating func finishLogout(now: Int64) {
        cancel(.logoutWait)
        forgetUser()
        for w in logoutWaiters { reply(w, .success(.object([:]))) }
        logoutWaiters.removeAll()
        closeGracefully(then: .reconnect, reason: "logout", now: now)
    }

    mutating func forgetUser() {
        user = nil
        identity = nil
        props = [:]
        rejectedHash = nil
        rejection = nil
        freshHash = nil
        forceLogin = false
        lastActivityMs = nil
        activityPersistedMs = nil
        out.append(.clearUser)
        for w in identifyWaiters { reply(w.id, .failure(SessionReplyError(.notReady, "the user logged out before the server answered IDENTIFY"))) }
        identifyWaiters.removeAll()
    }

    mutating func onShutdown(now: Int64) {
        guard !stopping, phase != .stopped else { return }
        stopping = true
        failAllWaiters(SessionReplyError(.notReady, "the daemon is stopping"))
        switch phase {
        case .idle, .backoff, .stopped: finish(now: now)
        case .connecting:
            finish(now: now)
        case .closing:
            setPhase(.closing(.stop), reason: "shutdown", now: now)
        default:
            closeGracefully(then: .stop, reason: "shutdown", now: now)
        }
    }

    mutating func onReload(_ newConfig: ResolvedConfig, now: Int64) {
        guard !stopping else { return }
        let old = config
        config = newConfig
        backoff = Backoff(newConfig.config.session.reconnect)
        let oldUser = old.config.user, newUser = newConfig.config.user
        if oldUser != newUser, user == nil || user?.source == .config {
            if let ext = newUser.extUserID {
                if user?.extUserID != ext {
                    supersedeIdentifyWaiters(by: ext)
                    switchUser(to: UserState(extUserID: ext, hash: newUser.hash?.exposedValue, source: .config), now: now, persist: false)
                    return
                } else if newUser.hash != oldUser.hash {
                    user?.hash = newUser.hash?.exposedValue
                    rejectedHash = nil
                    rejection = nil
                }
            }
        }
        if push == Self.configPush(old), let p = Self.configPush(newConfig) { push = p }
        if newConfig.requiresReconnect(from: old), isOpen || phase == .connecting {
            closeGracefully(then: .reconnect, reason: "reload", now: now)
        }
    }

    /// Another user: persist (op), reconnect when this connection already sent IDENTIFY.
    mutating func switchUser(to newUser: UserState, now: Int64, persist: Bool) {
        let changed = user?.extUserID != newUser.extUserID
        user = newUser
        freshHash = newUser.hash
        rejectedHash = nil
        rejection = nil
        if changed {
            identity = nil
            props = [:]
            forceLogin = true
        }
        if persist { out.append(.persistUser(StoredUser(extUserID: newUser.extUserID, hash: newUser.hash))) }
        switch phase {
        case .ready where !identifySentOnConn:
            beginIdentify(now: now)
        case .ready, .identifying, .hashing, .loggingOut:
            if phase == .hashing && !identifySentOnConn {
                hashToken &+= 1
                beginIdentify(now: now)
            } else {
                closeGracefully(then: .reconnect, reason: "user_switch", now: now)
            }
        default:
            break // connecting / initializing / backoff / closing: the next INIT leads to IDENTIFY
        }
    }
}
