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
///
/// Its data is grouped by lifetime, each group replaced whole when its lifetime ends: `current`,
/// a ``State`` whose cases carry their data (one WebSocket's in a ``ConnectionState``, whose
/// ``ConnectionState/Phase`` carries its own); the user acted for in an ``Account``, replaced at
/// a switch, a logout or a refusal; every op that waits in the ``RequestBook``.
public struct SessionMachine: Sendable {
    /// What a close we started leads to.
    enum AfterClose: Equatable { case reconnect, stop }

    /// Where the session is.
    enum State {
        /// Not started.
        case idle
        /// A WebSocket is being opened.
        case connecting(ConnectionID)
        /// A WebSocket is open.
        case connected(ConnectionState)
        /// We sent close 1000 on the connection (its data still shows in `status`) and wait for the
        /// server's close.
        case closing(ConnectionState, then: AfterClose)
        /// Waiting to reconnect.
        case backoff(retryAtMs: Int64)
        /// Shut down; nothing more happens.
        case stopped
    }

    /// One open WebSocket: everything here belongs to it and goes with it.
    struct ConnectionState {
        /// `initializing`: INIT sent. `sorting`: INIT answered; the outbox is read from its oldest
        /// message to learn whom this connection must speak for first (session rule 5): the
        /// anonymous messages at its head are written, and the first user's message decides whom
        /// to identify. `hashing`: the hash command runs for that user. `identifying`: IDENTIFY sent.
        /// `ready`: identified as the daemon's user (nil: anonymous, with no user). `draining`:
        /// identified as an earlier user only to send their queued messages, then left.
        /// `loggingOut`: LOGOUT sent, waiting for cid 12.
        enum Phase: Equatable {
            case initializing, sorting
            case hashing(for: String)
            case identifying(as: Speaker)
            case ready(Speaker?)
            case draining(Speaker)
            case loggingOut(Speaker)
        }

        /// The user the server accepted on this connection (or is asked to), with the hash of its
        /// IDENTIFY. `logoutPending`: they logged out; LOGOUT goes after their last queued message.
        struct Speaker: Equatable {
            let user: String
            let hash: String?
            var logoutPending = false
        }

        let id: ConnectionID
        var phase: Phase = .initializing
        let connectedAtMs: Int64
        /// The `session_id` of this connection's INIT.
        let sessionID: String
        var initResponse: InitSessionResponse?
        /// Rule 6: when the server was last heard from (any message, or the connection's start),
        /// and its own PINGs — the last one and the gap before it.
        var heardAtMs: Int64
        var serverPingAtMs: Int64?
        var serverPingEveryMs: Int64?
        /// 1003s written on this connection whose answer (2003, or a 10 refusing it) has not come.
        var pushTokensUnanswered = 0
        /// An outbox load is under way (it may span phases: an anonymous `ready` that starts
        /// sorting for a new user); `flushAgain`: load once more when it is done.
        var flushing = false
        var flushAgain = false
        var receipts = Receipts()

        /// The user the server accepted on this connection (nil: anonymous).
        var speaking: Speaker? {
            switch phase {
            case .ready(let s): s
            case .draining(let s), .loggingOut(let s): s
            case .initializing, .sorting, .hashing, .identifying: nil
            }
        }

        var speaker: String? { speaking?.user }

        /// Whom the connection speaks for, or is about to: the hash command or IDENTIFY under way.
        var boundUser: String? {
            switch phase {
            case .hashing(let u): u
            case .identifying(let s): s.user
            default: speaker
            }
        }

        /// The user it speaks for (or identifies) logged out: LOGOUT follows their last message.
        mutating func markLogoutPending() {
            switch phase {
            case .identifying(var s): s.logoutPending = true; phase = .identifying(as: s)
            case .ready(var s?): s.logoutPending = true; phase = .ready(s)
            case .draining(var s): s.logoutPending = true; phase = .draining(s)
            default: break
            }
        }
    }

    /// Proof of receipt for the outbox messages written on one connection (docs/session.md,
    /// "Proof of receipt"): a message leaves the outbox only when the server proved it read it, or
    /// completed the close handshake we started. The proof is cumulative and counted: the k-th PONG
    /// on a connection means the server read at least k of our PINGs, and so everything written
    /// before our k-th PING. A skipped PONG only delays confirmation, never confirms the unread.
    struct Receipts {
        /// For each PING not yet answered by the count, oldest first: how many outbox messages
        /// had been written on the connection before it.
        private var unansweredPings: [Int] = []
        /// Outbox messages written on the connection and not yet confirmed, in write order.
        private(set) var written: [String] = []
        /// Messages written on the connection in all; `written` holds the last of them.
        private var writtenTotal = 0
        /// How many messages had been written before our last PING.
        private var coveredByLastPing = 0
        /// A barrier PING was written and no PONG has come since: the next barrier waits.
        private var barrierWaiting = false

        /// An outbox message was written.
        mutating func messageWritten(_ uuid: String) {
            written.append(uuid)
            writtenTotal += 1
        }

        /// A PING (keepalive or barrier) was written: it covers everything written so far.
        mutating func pingWritten(barrier: Bool = false) {
            unansweredPings.append(writtenTotal)
            coveredByLastPing = writtenTotal
            if barrier { barrierWaiting = true }
        }

        /// Messages written after our last PING, and no barrier waits: the next barrier is due.
        /// A barrier waits until any PONG arrives (not necessarily its own: after a skipped PONG
        /// the count lags, and waiting for "its" PONG could wait for the rest of the connection).
        /// So barriers go at most one per PONG: a server that never answers gets one, not one
        /// per message.
        var needsBarrier: Bool { !barrierWaiting && writtenTotal > coveredByLastPing }

        /// Counts a PONG; returns the messages it confirms (written before the earliest PING it
        /// can answer). A PONG when none of our PINGs waits answers nothing and is not counted.
        mutating func pongReceived() -> [String] {
            guard !unansweredPings.isEmpty else { return [] }
            barrierWaiting = false
            let before = unansweredPings.removeFirst()
            let confirmedTotal = writtenTotal - written.count
            let n = before - confirmedTotal
            guard n > 0 else { return [] }
            let confirmed = Array(written.prefix(n))
            written.removeFirst(n)
            return confirmed
        }

        /// Every message written on the connection counts as read (a clean close we started).
        mutating func confirmAll() -> [String] {
            defer { written = [] }
            return written
        }
    }

    enum UserSource: Equatable { case config, op }

    struct UserState: Equatable {
        var extUserID: String
        var hash: String?
        var source: UserSource
    }

    /// Everything of the user acted for (nil `user`: the anonymous session). Replaced whole at a
    /// user boundary — a switch, a logout, a refusal — so nothing of one user reaches the next.
    struct Account {
        var user: UserState?
        /// The user before an `identify` of this one, until the server answered for this one: a
        /// refused IDENTIFY does not leave the device without its user.
        var previous: UserState?
        /// A hash given with the `identify` op, used by the next IDENTIFY before the hash command.
        var freshHash: String?
        /// The last IDENTIFY answer for this user.
        var identity: IdentifyUserResponse? {
            didSet { popupURLJSON = EngagementJournal.popupURLJSON(SessionMachine.popupURL(identity)) }
        }
        /// `popup_url` as each engagement event carries it (JSON: a string or `null`), made once
        /// per IDENTIFY answer.
        var popupURLJSON = EngagementJournal.popupURLJSON(nil)
        var props: JSONObject = [:]
        var forceLogin = false
        var lastActivityMs: Int64?
        var activityPersistedMs: Int64?
        /// Closed by the `reidentify` timer: the next IDENTIFY refreshes the URLs, no new logical session.
        var refreshingURLs = false
    }

    /// What the machine remembers of users across accounts. Memory only.
    struct UserMemory {
        /// Hashes known per user (given with `identify` or configured), for sending an earlier
        /// user's queued messages under that user when `user.hash_command` is not configured.
        var knownHashes = RecentUsers<String>()
        /// Users who logged out while no connection spoke for them: the connection that sends their
        /// last messages ends with LOGOUT.
        var loggedOutOffline = RecentUsers<Bool>()
        /// Non-fatal IDENTIFY errors in a row per earlier user; at ``maxDrainFailures`` their messages
        /// are dropped (an earlier user the server keeps refusing cannot hold the current one back).
        var drainFailures = RecentUsers<Int>()
        /// The last user whose IDENTIFY the server refused (fatal errCode): shown as
        /// `user.rejected`, never as the current user.
        var rejected: (extUserID: String, errCode: Int64?, errMsg: String?)?
        /// Per user ("" for the anonymous session): the `client.language` last queued for them (store
        /// meta `x.language_sent.<user>`): it goes once per change, not again on a reconnect or restart.
        var languagesSent: [String: String] = [:]
        /// `"<user>\u{0}<engagement_uid>"` of the 105s whose `dp:action` was reported in this run, oldest
        /// first (at most ``maxActedDeepLinks``): the server sends them again after every IDENTIFY.
        var actedDeepLinks: [String] = []
    }
    static let maxDrainFailures = 3
    static let maxActedDeepLinks = 1_024

    /// The device, from `.start`: its id, `ua.fp`, and its push data.
    struct Device {
        var id = ""
        var fingerprint: Int32 = 0
        var push: StoredPush?
    }

    /// Numbers that outlive connections: ids handed out, failures in a row.
    struct Dialing {
        var connections: UInt64 = 0
        /// Matches `.hashResult` to the hash command run for it; moved on when that run is abandoned.
        var hashToken: UInt64 = 0
        /// Consecutive failures (the backoff's `n`), back to 0 after a healthy session.
        var attempt = 0
        /// INIT answers with a fatal errCode in a row (the long retry, ``fatalInitRetryMs(after:)``).
        var fatalInitFailures = 0
    }

    /// What the status object shows beyond the connection.
    struct Shown {
        /// The public state last announced, and since when.
        var state: SessionState = .disconnected
        var sinceMs: Int64 = 0
        /// The latest failure of any kind, for `status.last_error` (null until one, kept after recovery).
        var lastError: (code: String, message: String, atMs: Int64)?
        var lastPingMs: Int64?
    }

    /// Counters of the status object.
    public struct Counters: Sendable, Equatable {
        /// Connection attempts after the first.
        public var reconnects = 0
        public var messagesIn = 0
        public var messagesOut = 0
        /// PINGs received from the server plus our own PINGs (keepalive and barrier).
        public var pings = 0
        /// PONGs sent plus PONGs received.
        public var pongs = 0
        /// Answers to requests nobody waited for any more (dropped: not published, not journaled).
        public var answersDropped = 0
    }

    // MARK: state

    /// Where the session is (``state`` is its public name).
    var current: State = .idle
    public private(set) var config: ResolvedConfig
    var env: SessionEnvironment
    /// The actions of the input being handled (the caller's buffer, `handle(_:now:into:)`).
    var out: [SessionAction] = []
    /// The deadline of each timer the driver has armed.
    var deadlines: [SessionTimer: Int64] = [:]
    var shown = Shown()
    public internal(set) var counters = Counters()
    var dialing = Dialing()
    var device = Device()
    var account = Account()
    var memory = UserMemory()
    var requests: RequestBook
    /// `.loadOutbox` actions not yet answered; only the answer to the last one is used.
    var outstandingLoads = 0
    /// Whether the INIT answer of the connection that identified the user offers gamification
    /// (product 100, 002 §1.2). Without it the widget may not be opened: no gamification URL is
    /// handed out. An answer without a `products` array gates nothing.
    var gamificationOffered = true

    /// - Parameters:
    ///   - config: the resolved configuration.
    ///   - environment: time zone, random source and fixed timings.
    public init(config: ResolvedConfig, environment: SessionEnvironment = SessionEnvironment()) {
        self.config = config
        self.env = environment
        self.requests = RequestBook(shares: RequestShares(
            pool: environment.maxPendingRequests, readPerSecond: config.config.socket.readRequestsPerS,
            readBurst: config.config.socket.readRequestsBurst))
    }

    /// Feeds one input at time `now` (ms since the epoch, the clock of `.schedule`) and returns
    /// the actions to perform, in order.
    public mutating func handle(_ input: SessionInput, now: Int64) -> [SessionAction] {
        var actions: [SessionAction] = []
        handle(input, now: now, into: &actions)
        return actions
    }

    /// `handle(_:now:)` with the actions put into `actions` (emptied first).
    public mutating func handle(_ input: SessionInput, now: Int64, into actions: inout [SessionAction]) {
        actions.removeAll(keepingCapacity: true)
        swap(&out, &actions)
        defer { swap(&out, &actions) }
        switch input {
        case .start(let snapshot): start(snapshot, now: now)
        case .connected(let c): onConnected(c, now: now)
        case .connectFailed(let c, let reason, let message): onConnectFailed(c, reason: reason, message: message, now: now)
        case .received(let c, let bytes): onReceived(c, bytes, now: now)
        case .closed(let c, let code, let reason, let clean): onClosed(c, code: code, reason: reason, clean: clean, now: now)
        case .timerFired(let t): onTimer(t, now: now)
        case .hashResult(let token, let outcome): onHashResult(token, outcome, now: now)
        case .outboxStored(let uuid, let failure): onOutboxStored(uuid, failure, now: now)
        case .outboxLoaded(let entries): onOutboxLoaded(entries, now: now)
        case .outboxDropped(let user, let count): onOutboxDropped(user: user, count: count, now: now)
        case .request(let id, let request, let owner): onRequest(id, request, owner: owner, now: now)
        case .abandon(let ids): abandon(ids, now: now)
        case .shutdown: onShutdown(now: now)
        case .reload(let newConfig): onReload(newConfig, now: now)
        case .networkChanged: onNetworkChanged(now: now)
        }
        sendBarrierIfNeeded(now: now)
    }

    // MARK: derived values

    var sessionConfig: DaemonConfig.Session { config.config.session }
    var backoff: Backoff { Backoff(sessionConfig.reconnect) }

    /// The public state for the status object.
    public var state: SessionState { shown.state }
    var stateSinceMs: Int64 { shown.sinceMs }
    var lastError: (code: String, message: String, atMs: Int64)? {
        get { shown.lastError }
        set { shown.lastError = newValue }
    }
    /// The daemon's user (nil: anonymous), and the props known for the session.
    var user: UserState? { account.user }
    var props: JSONObject { account.props }
    var livePending: Int { requests.live }
    var pending: [PendingRequest] { requests.pending }
    /// Shutting down, or shut down.
    var stopping: Bool {
        switch current {
        case .stopped: true
        case .closing(_, let after): after == .stop
        default: false
        }
    }

    static func publicState(of state: State) -> SessionState {
        switch state {
        case .idle, .stopped: .disconnected
        case .connecting: .connecting
        case .connected(let c):
            switch c.phase {
            case .initializing, .sorting: .initializing
            case .hashing, .identifying, .draining: .identifying
            case .ready, .loggingOut: .ready
            }
        case .closing(_, let after): after == .stop ? .stopping : .connecting
        case .backoff: .backoff
        }
    }

    /// The open connection; nil in any other state. Setting it changes an open connection only.
    var connection: ConnectionState? {
        get { if case .connected(let c) = current { c } else { nil } }
        set { if let newValue, case .connected = current { current = .connected(newValue) } }
    }

    /// The open connection, also while we close it.
    var lastConnection: ConnectionState? {
        switch current {
        case .connected(let c): c
        case .closing(let c, _): c
        default: nil
        }
    }

    /// The connection being opened, open or closing.
    var connectionID: ConnectionID? {
        if case .connecting(let id) = current { return id }
        return lastConnection?.id
    }

    /// The phase of the open connection.
    var phase: ConnectionState.Phase? { connection?.phase }

    /// The daemon's user is identified on the connection (also while we close it).
    var identifiedOnConn: Bool { lastConnection?.speaker.map { $0 == user?.extUserID } ?? false }

    /// Messages that act for the user may go: the session is ready and speaks as the daemon's user
    /// (identified as them, or anonymous when there is no user).
    var gateOpen: Bool {
        guard case .ready(let s)? = phase else { return false }
        return s?.user == user?.extUserID
    }

    /// `page` of INIT and IDENTIFY: `client.page`, else `https://<client.domain or "app">/` as
    /// Smartico's SDK sends it — never empty (002 marks it required in INIT).
    var page: String {
        if let p = config.config.client.page, !p.isEmpty { return p }
        return "https://\(config.config.client.domain ?? "app")/"
    }

    func userAgent(now: Int64) -> UserAgent {
        let c = config.config.client
        let tz = UserAgent.tzoffset(in: env.timeZone, atEpochMilliseconds: now)
        return UserAgent(fp: Int64(device.fingerprint), agent: c.agent, host: c.host, deviceType: c.deviceType, tzoffset: tz, os: c.os)
    }

    mutating func makeUUID() -> String { UUIDv4.random(using: &env.random).string }

    // MARK: state changes and timers

    /// Enters `next`; tells the driver and subscribers when the public state changed.
    mutating func enter(_ next: State, reason: String, now: Int64, extra: JSONObject = [:]) {
        current = next
        announce(reason: reason, now: now, extra: extra)
    }

    /// The open connection enters `phase`.
    mutating func enter(_ phase: ConnectionState.Phase, reason: String, now: Int64) {
        connection?.phase = phase
        announce(reason: reason, now: now)
    }

    mutating func announce(reason: String, now: Int64, extra: JSONObject = [:]) {
        let s = Self.publicState(of: current)
        guard s != shown.state else { return }
        shown.state = s
        shown.sinceMs = now
        out.append(.statusChanged(s))
        var data: JSONObject = ["state": .string(s.rawValue), "reason": .string(reason)]
        for (k, v) in extra { data[k] = v }
        emit(.session, .object(data), journaled: false)
    }

    mutating func schedule(_ t: SessionTimer, at: Int64) {
        deadlines[t] = at
        out.append(.schedule(t, atMs: at))
    }

    mutating func cancel(_ t: SessionTimer) {
        if deadlines.removeValue(forKey: t) != nil { out.append(.cancel(t)) }
    }

    mutating func cancelConnectionTimers() {
        for t in [SessionTimer.connect, .response, .keepalive, .dead, .healthyReset, .logoutWait, .closeWait, .reidentify] { cancel(t) }
    }

    mutating func emit(_ kind: EventKind, _ data: JSONValue, journaled: Bool) {
        out.append(.emit(DaemonEvent(kind: kind, data: data, journaled: journaled)))
    }

    mutating func emitError(_ code: String, _ message: String, errCode: Int64? = nil, errMsg: String? = nil, now: Int64) {
        shown.lastError = (code, message, now)
        var d: JSONObject = ["code": .string(code), "message": .string(message)]
        if let errCode { d["errCode"] = .number(errCode) }
        if let errMsg { d["errMsg"] = .string(errMsg) }
        emit(.error, .object(d), journaled: false)
    }

    mutating func reply(_ id: SessionRequestID, _ result: Result<JSONValue, SocketAPIError>) {
        out.append(.reply(id, result))
    }

    // MARK: start, connect

    mutating func start(_ snapshot: SessionSnapshot, now: Int64) {
        guard case .idle = current else { return }
        device = Device(id: config.config.client.deviceID ?? snapshot.deviceID, fingerprint: snapshot.fingerprint,
                        push: snapshot.push ?? Self.configPush(config))
        if let stored = snapshot.user {
            account = Account(user: UserState(extUserID: stored.extUserID, hash: stored.hash, source: .op),
                              lastActivityMs: stored.lastActivityMs, activityPersistedMs: stored.lastActivityMs)
            if let bytes = stored.props, case .object(let o)? = try? JSONValue(parsing: bytes) { account.props = o }
        } else if let ext = config.config.user.extUserID {
            account = Account(user: UserState(extUserID: ext, hash: config.config.user.hash?.exposedValue, source: .config))
        }
        if let u = user, let h = u.hash { memory.knownHashes[u.extUserID] = h }
        memory.languagesSent = snapshot.languagesSent
        connect(now: now, reason: "start")
    }

    static func configPush(_ config: ResolvedConfig) -> StoredPush? {
        let p = config.config.user.push
        guard let token = p.token else { return nil }
        return StoredPush(token: token.exposedValue, platform: p.platform, status: p.status, appPackageID: p.appPackageID)
    }

    mutating func connect(now: Int64, reason: String) {
        if dialing.connections > 0 { counters.reconnects += 1 }
        dialing.connections += 1
        let c = ConnectionID(dialing.connections)
        connectionGone()
        enter(.connecting(c), reason: reason, now: now)
        out.append(.connect(c, url: config.server.url))
        schedule(.connect, at: now + Int64(sessionConfig.connectTimeoutS) * 1000)
    }

    /// What outlives a connection but refers to it: a hash command run for it (its answer is
    /// ignored) and the requests written on it (written again on the next one).
    mutating func connectionGone() {
        dialing.hashToken &+= 1
        requests.connectionGone()
    }

    mutating func onConnected(_ c: ConnectionID, now: Int64) {
        guard case .connecting(c) = current else { return }
        cancel(.connect)
        let sid = makeUUID()
        current = .connected(ConnectionState(id: c, connectedAtMs: now, sessionID: sid, heardAtMs: now))
        let cfg = config.config
        // label_key and label_name: the key without its environment suffix (the SDK sends both).
        let initMessage = InitSessionRequest(
            labelKey: config.labelKey.key.exposedValue, brandKey: cfg.server.brandKey, deviceID: device.id,
            page: page, trackerVersion: cfg.client.effectiveTrackerVersion, sessionID: sid, ua: userAgent(now: now),
            labelName: config.labelKey.key.exposedValue, simulationMode: false)
        send(initMessage.json, now: now)
        announce(reason: "connected", now: now)
        schedule(.response, at: now + Int64(sessionConfig.responseTimeoutS) * 1000)
        restartSilenceTimer(now: now)
    }

    mutating func onConnectFailed(_ c: ConnectionID, reason: String, message: String, now: Int64) {
        guard case .connecting(c) = current else { return }
        fail(reason: reason, message: message, now: now, transportGone: true)
    }

    /// Stamps (`ts`, `uuid` when absent) and writes a message on the open connection.
    mutating func send(_ json: JSONObject, now: Int64) {
        guard connection != nil else { return }
        write(stamp(json, now: now), now: now)
    }

    /// Writes `m` on the open connection. `fromOutbox`: it stays in the outbox until the server
    /// proves it read it (``Receipts``).
    mutating func write(_ m: OutgoingMessage, now: Int64, fromOutbox: Bool = false, barrier: Bool = false) {
        guard var c = connection else { return }
        counters.messagesOut += 1
        if m.cid == 1 { c.receipts.pingWritten(barrier: barrier) }
        if fromOutbox { c.receipts.messageWritten(m.uuid) }
        if m.cid == ClassID.registerPushTokenRequest.rawValue { c.pushTokensUnanswered += 1 }
        connection = c
        out.append(.send(c.id, m))
        // Keepalive is not activity: an idle but connected device still starts a new logical
        // session after login_after_inactivity_min.
        if c.speaker != nil, c.speaker == user?.extUserID, m.cid != 1, m.cid != 2 { noteActivity(now: now) }
    }

    /// Fills in `ts` and `uuid` when absent. `envelope`: events (cid 9) and data requests get the
    /// SDK's envelope (``RequestEnvelope``: `api_key` — the full label key —, `brand_key`, `cid`,
    /// `uuid`, `ts`, then the message).
    mutating func stamp(_ json: JSONObject, now: Int64, envelope: Bool = false) -> OutgoingMessage {
        var o = json
        if envelope {
            o = RequestEnvelope.wrap(json, apiKey: config.labelKey.full.exposedValue, brandKey: config.config.server.brandKey,
                                     uuid: makeUUID(), ts: now)
        } else {
            if o["ts"] == nil || o["ts"]?.isNull == true { o["ts"] = .number(now) }
            if o["uuid"] == nil || o["uuid"]?.isNull == true { o["uuid"] = .string(makeUUID()) }
        }
        return OutgoingMessage(bytes: o.serialized(), cid: o["cid"]?.int64Value ?? 0, uuid: o["uuid"]?.stringValue ?? "")
    }

    mutating func noteActivity(now: Int64) {
        account.lastActivityMs = now
        if let p = account.activityPersistedMs, now - p < env.activityPersistIntervalMs { return }
        account.activityPersistedMs = now
        out.append(.recordActivity(atMs: now))
    }

    // MARK: proof of receipt

    /// After an input: outbox messages written since our last PING get a barrier PING behind
    /// them, unless a barrier still waits for a PONG (at most one barrier per PONG received).
    mutating func sendBarrierIfNeeded(now: Int64) {
        guard connection?.receipts.needsBarrier == true else { return }
        counters.pings += 1
        write(stamp(Ping().json, now: now), now: now, barrier: true)
    }

    /// A PONG on the open connection: what the PINGs it answers followed has been read.
    mutating func pongReceived() {
        guard let confirmed = connection?.receipts.pongReceived() else { return }
        confirm(confirmed)
    }

    /// The server read these outbox messages: they leave the outbox.
    mutating func confirm(_ uuids: [String]) {
        if !uuids.isEmpty { out.append(.markSent(uuids)) }
    }

    // MARK: failure, backoff, graceful close

    /// Any failure: tell subscribers why, drop the connection, back off, reconnect. Outbox
    /// messages written on it and not confirmed stay in the outbox.
    /// `retryInMs`: a fixed delay instead of the backoff's (the long retry after a fatal INIT errCode).
    mutating func fail(reason: String, message: String, now: Int64, transportGone: Bool = false,
                       closeCode: Int? = nil, retryInMs: Int64? = nil) {
        if let c = connectionID, !transportGone {
            if let code = closeCode { out.append(.close(c, code: code, reason: reason)) } else { out.append(.abort(c)) }
        }
        cancelConnectionTimers()
        connectionGone()
        shown.lastError = (reason, message, now)
        if stopping { return finish(now: now) } // (a failure comes from a connection, never while stopping)
        let delay = retryInMs ?? backoff.delayMs(attempt: dialing.attempt, using: &env.random)
        dialing.attempt += 1
        schedule(.backoff, at: now + delay)
        enter(.backoff(retryAtMs: now + delay), reason: reason, now: now, extra: [
            "message": .string(message), "attempt": .number(dialing.attempt), "retry_in_ms": .number(delay),
        ])
    }

    /// Close 1000 and wait ≤ `closeWaitMs` for the server's close, then reconnect or stop.
    mutating func closeGracefully(then next: AfterClose, reason: String, now: Int64) {
        guard case .connected(let c) = current else {
            // Nothing open yet: drop the attempt, no close handshake to wait for.
            if case .connecting(let id) = current { out.append(.abort(id)) }
            cancelConnectionTimers()
            if next == .stop { finish(now: now) } else { connect(now: now, reason: reason) }
            return
        }
        cancelConnectionTimers()
        out.append(.close(c.id, code: 1000, reason: reason))
        enter(.closing(c, then: next), reason: reason, now: now)
        schedule(.closeWait, at: now + env.closeWaitMs)
    }

    /// The connection we were closing is gone. `confirmed`: its close handshake completed, so
    /// the server read everything written before our close.
    mutating func afterClose(_ closing: ConnectionState, then next: AfterClose, confirmed: Bool, now: Int64) {
        cancel(.closeWait)
        if confirmed {
            var receipts = closing.receipts
            confirm(receipts.confirmAll())
        }
        connectionGone()
        if next == .stop { finish(now: now) } else { connect(now: now, reason: "reconnect") }
    }

    mutating func onClosed(_ c: ConnectionID, code: Int?, reason: String, clean: Bool, now: Int64) {
        if case .closing(let closing, let next) = current, closing.id == c {
            afterClose(closing, then: next, confirmed: clean, now: now)
        } else if connectionID == c {
            let detail = code.map { "code \($0)" } ?? "no close code"
            fail(reason: "server_closed", message: "the connection closed (\(detail)\(reason.isEmpty ? "" : ": \(reason)"))",
                 now: now, transportGone: true)
        }
    }

    /// Stops: no connection is left (the callers dropped it).
    mutating func finish(now: Int64) {
        for t in SessionTimer.allCases { cancel(t) }
        if let a = account.lastActivityMs, a != account.activityPersistedMs {
            account.activityPersistedMs = a
            out.append(.recordActivity(atMs: a))
        }
        failAllWaiters(SocketAPIError(.notReady, "the daemon is stopping"))
        enter(.stopped, reason: "shutdown", now: now)
        out.append(.stopped)
    }

    mutating func failAllWaiters(_ error: SocketAPIError) {
        for id in requests.takeAll() { reply(id, .failure(error)) }
        cancel(.requests)
    }

    // MARK: timers

    mutating func onTimer(_ t: SessionTimer, now: Int64) {
        guard let at = deadlines[t], now >= at else { return }
        deadlines[t] = nil
        switch t {
        case .connect:
            if case .connecting = current {
                fail(reason: "connect_timeout", message: "no WebSocket within \(sessionConfig.connectTimeoutS) s (session.connect_timeout_s)", now: now)
            }
        case .response:
            if phase == .initializing {
                fail(reason: "response_timeout", message: "no INIT_SESSION_RESPONSE (cid 4) within \(sessionConfig.responseTimeoutS) s (session.response_timeout_s)", now: now, closeCode: 1000)
            } else if case .identifying? = phase {
                fail(reason: "response_timeout", message: "no IDENTIFY_USER_RESPONSE (cid 6) within \(sessionConfig.responseTimeoutS) s (session.response_timeout_s)", now: now, closeCode: 1000)
            }
        case .keepalive:
            guard connection != nil else { return }
            counters.pings += 1
            send(Ping().json, now: now)
            if deadlines[.dead] == nil { schedule(.dead, at: deadDeadline(pingAt: now)) }
            schedule(.keepalive, at: now + Int64(sessionConfig.keepaliveS) * 1000)
        case .dead:
            guard let c = connection else { return }
            let silentS = (now - c.heardAtMs) / 1000
            fail(reason: "heartbeat_timeout", message: "nothing from the server for \(silentS) s, and no answer to our PING (session.keepalive_s \(sessionConfig.keepaliveS) + session.dead_after_s \(sessionConfig.deadAfterS))", now: now)
        case .backoff:
            if case .backoff = current { connect(now: now, reason: "retry") }
        case .healthyReset:
            dialing.attempt = 0
        case .logoutWait:
            if case .loggingOut? = phase { finishLogout(now: now) }
        case .closeWait:
            if case .closing(let closing, let next) = current {
                out.append(.abort(closing.id))
                afterClose(closing, then: next, confirmed: false, now: now)
            }
        case .requests:
            expireRequests(now: now)
        case .reidentify:
            // 002 §1.5: one IDENTIFY per WebSocket session (the server refuses a second one), so
            // identifying again is a new connection: INIT, IDENTIFY (a fresh hash from
            // hash_command), new URLs. Only from ready: in any other phase the connection is
            // being made or ended already, and its IDENTIFY schedules the next one.
            guard case .ready(let s)? = phase, s?.user == user?.extUserID, account.identity != nil else { return }
            account.refreshingURLs = true
            closeGracefully(then: .reconnect, reason: "reidentify", now: now)
        }
    }

    // MARK: INIT → (earlier users' messages) → IDENTIFY → LOGIN → ready

    /// The long retry after a fatal INIT errCode (≥ 100000: the server refuses the configuration,
    /// e.g. 100001 for a wrong label key): the first after 10 minutes, each next one twice as late,
    /// at most an hour apart. A fixed configuration is found within the hour (or at once with
    /// SIGHUP), without asking the server every minute in between.
    static let fatalInitRetryFirstMs: Int64 = 10 * 60_000
    static let fatalInitRetryMaxMs: Int64 = 60 * 60_000

    /// The delay before the next INIT after `failures` fatal INIT answers in a row (1: the first).
    static func fatalInitRetryMs(after failures: Int) -> Int64 {
        var delay = fatalInitRetryFirstMs
        for _ in 1..<max(1, failures) {
            delay *= 2
            if delay >= fatalInitRetryMaxMs { return fatalInitRetryMaxMs }
        }
        return min(delay, fatalInitRetryMaxMs)
    }

    mutating func onInitResponse(_ r: InitSessionResponse, now: Int64) {
        guard phase == .initializing else { return }
        cancel(.response)
        if let problem = r.errCodeProblem {
            // Neither a success nor a failure: nothing to go on (session rule 7, "unusable").
            fail(reason: "bad_server_message", message: "unusable INIT_SESSION_RESPONSE (cid 4): \(problem)", now: now, closeCode: 1002)
            return
        }
        guard r.isSuccess else {
            let code = r.errCode ?? 0
            var msg = "the server rejected INIT_SESSION_REQUEST: errCode \(code)\(r.errMsg.map { " (\($0))" } ?? "")"
            var retryIn: Int64?
            if r.isFatalError {
                dialing.fatalInitFailures += 1
                let delay = Self.fatalInitRetryMs(after: dialing.fatalInitFailures)
                retryIn = delay
                msg += "; check server.label_key, server.brand_key and the environment of the server URL "
                    + "(\(redactedURL(config.server.url))); retrying in \(delay / 60_000) min, or at once on SIGHUP with changed server settings"
            }
            emitError("init_rejected", msg, errCode: code, errMsg: r.errMsg, now: now)
            fail(reason: "init_rejected", message: msg, now: now, closeCode: 1000, retryInMs: retryIn)
            return
        }
        dialing.fatalInitFailures = 0
        connection?.initResponse = r
        sort(now: now)
    }

    /// Reads the outbox from its oldest message before identifying (session rule 5).
    mutating func sort(now: Int64) {
        enter(.sorting, reason: "outbox", now: now)
        startFlush()
    }

    /// Identifies `ext` on the open connection: the daemon's user, or an earlier user whose queued
    /// messages must go first. An earlier user needs a fresh hash from `user.hash_command`, or a
    /// hash the daemon was given for them; without one their messages are dropped.
    mutating func beginIdentify(_ ext: String, now: Int64) {
        let forUser = ext == user?.extUserID
        if forUser, let h = account.freshHash {
            account.freshHash = nil
            sendIdentify(ext, hash: h, now: now)
        } else if let argv = config.config.user.hashCommand, !argv.isEmpty {
            dialing.hashToken &+= 1
            cancel(.response)
            enter(.hashing(for: ext), reason: "hash_command", now: now)
            out.append(.runHashCommand(token: dialing.hashToken, argv: argv, user: ext))
        } else if forUser {
            sendIdentify(ext, hash: user?.hash, now: now)
        } else if let h = memory.knownHashes[ext] {
            sendIdentify(ext, hash: h, now: now)
        } else {
            dropMessages(of: ext, now: now)
        }
    }

    /// `ext`'s queued messages cannot be sent under `ext`: they are removed (`.outboxDropped`
    /// reports how many, and sorting goes on when this connection has not sent IDENTIFY).
    mutating func dropMessages(of ext: String, now: Int64) {
        out.append(.dropOutbox(user: ext))
        if case .hashing? = phase { enter(.sorting, reason: "outbox", now: now) }
    }

    mutating func onHashResult(_ token: UInt64, _ outcome: HashCommandOutcome, now: Int64) {
        guard token == dialing.hashToken, case .hashing(let ext)? = phase else { return }
        switch outcome {
        case .hash(let secret): sendIdentify(ext, hash: secret.exposedValue, now: now)
        case .failed(let error):
            let msg = "user.hash_command failed for \(ext): \(error)"
            emitError("hash_command_failed", msg, now: now)
            if ext == user?.extUserID {
                // Every identify waiting for this user is answered now: IDENTIFY cannot be sent
                // without a hash. The user stays the daemon's; the next connection runs the
                // command again.
                let answer = SocketAPIError(.hashCommandFailed, msg + "; no IDENTIFY was sent. \(ext) stays the daemon's user: the command runs again at the next connection, after the backoff")
                for id in requests.takeIdentifyWaiters() { reply(id, .failure(answer)) }
                rescheduleRequestTimer()
                fail(reason: "hash_command_failed", message: msg, now: now, closeCode: 1000)
            } else {
                dropMessages(of: ext, now: now)
            }
        }
    }

    mutating func sendIdentify(_ ext: String, hash: String?, now: Int64) {
        // Push data belongs to the device's current user: an earlier user's IDENTIFY carries none.
        // With `user.push.register_via: "http"` the token goes over the public HTTP API instead.
        let p = ext == user?.extUserID && config.config.user.push.registerVia == .socket ? device.push : nil
        let request = IdentifyUserRequest(
            extUserID: ext, hash: hash, ua: userAgent(now: now), page: page,
            pushNotificationUserStatus: p.flatMap { PushNotificationUserStatus(rawValue: Int64($0.status)) },
            token: p?.token, trackerVersion: config.config.client.effectiveTrackerVersion,
            platform: p.flatMap { PushClientPlatform(rawValue: Int64($0.platform)) }, appPackageID: p?.appPackageID)
        send(request.json, now: now)
        enter(.identifying(as: ConnectionState.Speaker(user: ext, hash: hash)), reason: "identify", now: now)
        schedule(.response, at: now + Int64(sessionConfig.responseTimeoutS) * 1000)
    }

    mutating func onIdentifyResponse(_ r: IdentifyUserResponse, now: Int64) {
        guard let c = connection, case .identifying(let speaker) = c.phase else { return }
        let ext = speaker.user
        cancel(.response)
        if let problem = r.errCodeProblem {
            fail(reason: "bad_server_message", message: "unusable IDENTIFY_USER_RESPONSE (cid 6): \(problem)", now: now, closeCode: 1002)
            return
        }
        let forUser = ext == user?.extUserID
        if r.isSuccess {
            memory.drainFailures[ext] = nil
            if let h = speaker.hash { memory.knownHashes[ext] = h }
            guard forUser, let u = user else {
                // An earlier user: only their queued messages go on this connection.
                enter(.draining(speaker), reason: "draining", now: now)
                startFlush()
                return
            }
            memory.rejected = nil
            account.previous = nil
            out.append(.userAccepted(ext))
            account.props = Self.mergedProps(props, identify: r)
            account.identity = r
            gamificationOffered = c.initResponse.map(Self.offersGamification) ?? true
            out.append(.persistProfile(publicUsername: r.publicUsername, props: props.serialized()))
            schedule(.reidentify, at: now + Int64(config.config.user.reidentifyAfterS) * 1000)
            let data = identifiedData(r, user: u)
            // A server URL that is not handed out is logged once, with this answer.
            out.append(.emit(DaemonEvent(kind: .identified, data: data, journaled: false, warning: data["problem"]?.stringValue)))
            for id in requests.takeIdentifyWaiters() { reply(id, .success(data)) }
            // A re-identify (user.reidentify_after_s) only refreshes the URLs: no new logical
            // session, so no LOGIN for inactivity (every_identify still sends one).
            let inactive = !account.refreshingURLs && (account.lastActivityMs.map { now - $0 >= Int64(sessionConfig.loginAfterInactivityMin) * 60_000 } ?? true)
            account.refreshingURLs = false
            if sessionConfig.loginPolicy == .everyIdentify || account.forceLogin || inactive {
                account.forceLogin = false
                send(Login(ua: userAgent(now: now)).json, now: now)
            }
            noteActivity(now: now)
            becomeReady(speaker, reason: "identified", now: now)
        } else if r.isFatalError {
            let code = r.errCode ?? 0
            memory.knownHashes[ext] = nil
            if forUser {
                userRejected(ext, errCode: code, errMsg: r.errMsg, now: now)
            } else {
                emitError("identify_rejected", "the server rejected IDENTIFY for \(ext), whose queued messages were waiting: errCode \(code)\(r.errMsg.map { " (\($0))" } ?? "")",
                          errCode: code, errMsg: r.errMsg, now: now)
            }
            out.append(.dropOutbox(user: ext))
            // One IDENTIFY per connection: the next one starts afresh.
            closeGracefully(then: .reconnect, reason: "identify_rejected", now: now)
        } else {
            let code = r.errCode ?? 0
            let msg = "IDENTIFY for \(ext) failed: errCode \(code)\(r.errMsg.map { " (\($0))" } ?? "")"
            emitError("identify_failed", msg, errCode: code, errMsg: r.errMsg, now: now)
            if !forUser {
                let failures = (memory.drainFailures[ext] ?? 0) + 1
                memory.drainFailures[ext] = failures
                if failures >= Self.maxDrainFailures {
                    memory.drainFailures[ext] = nil
                    out.append(.dropOutbox(user: ext))
                    closeGracefully(then: .reconnect, reason: "identify_failed", now: now)
                    return
                }
            }
            fail(reason: "identify_failed", message: msg, now: now, closeCode: 1000)
        }
    }

    /// The server refused the daemon's user: it is `rejected`, no longer the current user. The user
    /// acted for before an `identify` of this one comes back; else the session is anonymous.
    mutating func userRejected(_ ext: String, errCode: Int64, errMsg: String?, now: Int64) {
        memory.rejected = (ext, errCode, errMsg)
        let back = account.previous.flatMap { $0.extUserID == ext ? nil : $0 }
        let msg = "the server rejected IDENTIFY for \(ext): errCode \(errCode)\(errMsg.map { " (\($0))" } ?? ""); "
            + (back.map { "acting for \($0.extUserID) again" } ?? "the session is anonymous until identify is called with a valid hash")
        emitError("identify_rejected", msg, errCode: errCode, errMsg: errMsg, now: now)
        for id in requests.takeIdentifyWaiters() { reply(id, .failure(SocketAPIError(.serverError, msg, errCode: errCode, errMsg: errMsg))) }
        failRequests(notFor: back?.extUserID, why: "the server rejected IDENTIFY for \(ext)")
        account = back.map { Account(user: $0, freshHash: $0.hash, forceLogin: true) } ?? Account()
        if let b = back {
            out.append(.persistUser(StoredUser(extUserID: b.extUserID, hash: b.hash)))
        } else {
            out.append(.clearUser)
        }
    }

    /// Answers `not_ready` to the waiting `request`s made for another user than `ext` (those
    /// written are recognised until their own deadline).
    mutating func failRequests(notFor ext: String?, why: String) {
        for p in requests.take({ $0.user != ext }, keepingWrittenUntil: \.deadlineMs) {
            reply(p.id, .failure(SocketAPIError(.notReady, "\(why) before the answer; the request was made for \(p.user ?? "the anonymous session")")))
        }
        rescheduleRequestTimer()
    }

    /// The identity fields Smartico's SDK copies from the top level of the IDENTIFY answer into the
    /// public props (where an app finds them with the rest).
    static let mirroredIdentityFields = ["user_id", "avatar_id", "avatar_real_id", "public_username", "native_app_gf_url"]

    /// `props` with the answer's `props` merged into them and the identity fields mirrored, as the
    /// SDK does: merged, not replaced (a prop the answer does not repeat keeps its value). Values
    /// are kept as received, whatever their type.
    static func mergedProps(_ props: JSONObject, identify r: IdentifyUserResponse) -> JSONObject {
        var merged = props.merging(r.json["props"]?.objectValue ?? [:])
        for k in mirroredIdentityFields {
            if let v = r.json[k], !v.isNull { merged[k] = v }
        }
        // The wrapper page is a URL apps open: null unless http or https (WebURL).
        if let gf = merged["native_app_gf_url"]?.stringValue, WebURL.checked(gf) == nil { merged["native_app_gf_url"] = .null }
        return merged
    }

    /// The `identified` event's data (and the `identify` op's answer). The URLs are handed out only
    /// when they are http or https URLs with a host (``WebURL``): else null, and `problem` says
    /// which and why (null when all are usable).
    func identifiedData(_ r: IdentifyUserResponse, user u: UserState) -> JSONValue {
        let domain = ImageDomain.resolve(dynamic: lastConnection?.initResponse?.dynamicImageDomain, label: config.imageDomain)
        var problems: [String] = []
        func url(_ value: String?, _ field: String) -> JSONValue {
            guard let value else { return .null }
            if let problem = WebURL.problem(value, field: field) {
                problems.append(problem)
                return .null
            }
            return .string(value)
        }
        func wrapper(_ value: String?, _ field: String) -> JSONValue {
            url(value, field).stringValue.map { .string(WrapperURL.forcingMobile($0)) } ?? .null
        }
        let avatar = url(r.avatarURL(imageDomain: domain), "avatar_url")
        let gf = gamificationOffered ? wrapper(r.gamificationURL, "native_app_gf_url") : .null
        if !gamificationOffered, r.gamificationURL != nil { problems.append(Self.gamificationUnavailable) }
        let popup = wrapper(r.popupURL, "native_app_popup_url")
        return .object([
            "ext_user_id": .string(u.extUserID),
            "user_id": r.json["user_id"] ?? .null,
            "public_username": r.publicUsername.map(JSONValue.string) ?? .null,
            "avatar_id": r.avatarID.map(JSONValue.string) ?? .null,
            "avatar_url": avatar,
            "gf_url": gf,
            "gamification": .bool(gamificationOffered),
            "popup_url": popup,
            "props": .object(props),
            "problem": problems.isEmpty ? .null : .string(problems.joined(separator: "; ")),
        ])
    }

    /// The IDENTIFY answer's popup page (`native_app_popup_url`) when it may be handed out
    /// (``WebURL``), with `force_mobile=true` (``WrapperURL/forcingMobile(_:)``): engagements carry
    /// it as `popup_url`.
    var popupURL: String? { Self.popupURL(account.identity) }

    /// The popup page of an IDENTIFY answer when it may be handed out, with `force_mobile=true`.
    static func popupURL(_ identity: IdentifyUserResponse?) -> String? {
        identity?.popupURL.flatMap(WebURL.checked).map(WrapperURL.forcingMobile)
    }
    /// The IDENTIFY answer's gamification page (`native_app_gf_url`) when it may be handed out, with
    /// `force_mobile=true`: the base of the `url` of deep links and mini-games (which keep it).
    var gamificationURL: String? {
        guard gamificationOffered else { return nil }
        return account.identity?.gamificationURL.flatMap(WebURL.checked).map(WrapperURL.forcingMobile)
    }

    /// Why a gamification URL is not handed out although the user is identified: INIT's products
    /// lack 100. Nil otherwise.
    var gamificationProblem: String? {
        account.identity != nil && !gamificationOffered ? Self.gamificationUnavailable : nil
    }

    /// Whether an INIT answer lets the widget be opened: `products` has 100, or there is no
    /// `products` array to go by.
    static func offersGamification(_ r: InitSessionResponse) -> Bool {
        r.json["products"]?.arrayValue == nil || r.hasGamification
    }

    static let gamificationUnavailable = "gamification is unavailable: INIT's \"products\" lack 100 (GAMIFICATION, 002 §1.2), so the widget may not be opened and no gamification URL is handed out"

    mutating func becomeReady(_ speaker: ConnectionState.Speaker?, reason: String, now: Int64) {
        enter(.ready(speaker), reason: reason, now: now)
        if deadlines[.healthyReset] == nil { schedule(.healthyReset, at: now + env.healthyResetMs) }
        if gateOpen { onGateOpen(now: now) }
    }

    /// The identify gate opened: send waiting requests, the configured language, the outbox.
    mutating func onGateOpen(now: Int64) {
        guard let c = connection else { return }
        for (k, p) in requests.pending.enumerated() where p.sentOn != c.id && p.user == c.speaker && !p.abandoned {
            requests.pending[k].sentOn = c.id
            write(p.message, now: now)
        }
        queueConfigLanguageIfChanged(now: now)
        startFlush()
    }

    /// `client.language` once per change (daemon.md): queued durably for whom the ready session
    /// speaks as, when it differs from the last one queued for them — so a reconnect or a restart
    /// sends nothing, a new configured language (SIGHUP) goes once. The `language` op is separate
    /// and always sent.
    mutating func queueConfigLanguageIfChanged(now: Int64) {
        guard gateOpen, let c = connection, let lang = config.config.client.language else { return }
        let key = c.speaker ?? ""
        guard memory.languagesSent[key] != lang else { return }
        memory.languagesSent[key] = lang
        out.append(.persistLanguageSent(user: c.speaker, language: lang))
        queueDurable(ClientEvent.languageChanged(lang).json, id: nil, now: now, envelope: true)
    }

    /// Loads the outbox to send what waits in it. The load asks for more than a batch by the
    /// messages already written on this connection and not yet confirmed (still in the store):
    /// those are skipped, not sent twice on one connection.
    mutating func startFlush() {
        guard var c = connection else { return }
        if c.flushing { connection?.flushAgain = true; return }
        c.flushing = true
        c.flushAgain = false
        connection = c
        outstandingLoads += 1
        out.append(.loadOutbox(limit: env.outboxBatch + c.receipts.written.count))
    }

    /// The outbox from its oldest message: the run that belongs to whom the connection speaks as
    /// (anonymous while sorting) is written; the first message of someone else ends the run.
    mutating func onOutboxLoaded(_ entries: [OutboxEntry], now: Int64) {
        outstandingLoads = max(0, outstandingLoads - 1)
        // A load asked for by an earlier connection: a newer one follows, use that.
        guard let c = connection, c.flushing, outstandingLoads == 0 else { return }
        connection?.flushing = false
        switch c.phase {
        case .sorting, .ready, .draining: break
        default: return
        }
        let written = Set(c.receipts.written)
        let fresh = entries.filter { !written.contains($0.uuid) }
        var other: OutboxEntry?
        for e in fresh {
            guard e.user == c.speaker else { other = e; break }
            write(OutgoingMessage(bytes: e.bytes, cid: Int64(e.cid), uuid: e.uuid), now: now, fromOutbox: true)
        }
        if let other {
            // Someone else's message: identify them when this connection has not identified
            // anyone yet, else leave it (one IDENTIFY per connection).
            if c.phase == .sorting, let ext = other.user {
                beginIdentify(ext, now: now)
            } else {
                leave(now: now)
            }
        } else if fresh.count >= env.outboxBatch || c.flushAgain {
            startFlush()
        } else {
            outboxWritten(now: now)
        }
    }

    /// Everything of whom the connection speaks as is written.
    mutating func outboxWritten(now: Int64) {
        guard let c = connection else { return }
        switch c.phase {
        case .sorting:
            // (Sorting comes before this connection's IDENTIFY.)
            if let ext = user?.extUserID {
                beginIdentify(ext, now: now)
            } else {
                becomeReady(nil, reason: "anonymous", now: now)
            }
        case .ready, .draining:
            if c.speaker != user?.extUserID { leave(now: now) }
        default:
            break
        }
    }

    /// The connection has said all it may for whom it speaks as: LOGOUT when they logged out, then
    /// close and connect again for the next user.
    mutating func leave(now: Int64) {
        guard let c = connection else { return }
        if let s = c.speaking, s.logoutPending || memory.loggedOutOffline[s.user] == true {
            memory.loggedOutOffline[s.user] = nil
            send(Logout().json, now: now)
            enter(.loggingOut(s), reason: "logout", now: now)
            schedule(.logoutWait, at: now + env.logoutWaitMs)
            return
        }
        let why = if case .draining = c.phase { "drained" } else { "user_switch" }
        closeGracefully(then: .reconnect, reason: why, now: now)
    }

    /// The user or the outbox changed while connected: go on from where the connection is.
    mutating func reconsider(now: Int64) {
        guard connection?.flushing == false else { return }
        outboxWritten(now: now)
    }

    // MARK: logout, shutdown, reload

    mutating func finishLogout(now: Int64) {
        cancel(.logoutWait)
        for id in requests.logoutWaiters { reply(id, .success(.object([:]))) }
        requests.logoutWaiters = []
        closeGracefully(then: .reconnect, reason: "logout", now: now)
    }

    /// No user any more (logout): what is made from now on is anonymous.
    mutating func forgetUser() {
        if let u = user, let h = u.hash { memory.knownHashes[u.extUserID] = h }
        account = Account()
        out.append(.clearUser)
        for id in requests.takeIdentifyWaiters() { reply(id, .failure(SocketAPIError(.notReady, "the user logged out before the server answered IDENTIFY"))) }
        failRequests(notFor: nil, why: "the user logged out")
    }

    mutating func onShutdown(now: Int64) {
        if stopping { return }
        failAllWaiters(SocketAPIError(.notReady, "the daemon is stopping"))
        switch current {
        case .idle, .backoff, .stopped:
            finish(now: now)
        case .connecting(let id):
            out.append(.abort(id))
            finish(now: now)
        case .closing(let c, _):
            enter(.closing(c, then: .stop), reason: "shutdown", now: now)
        case .connected:
            closeGracefully(then: .stop, reason: "shutdown", now: now)
        }
    }

    /// Routes, addresses or links changed (docs/session.md, "Network changes"). Backing off: the way
    /// to the server may be back, so the backoff starts over and a connection is tried now (not after
    /// a long INIT refusal: the network does not fix a refused configuration). Connecting: the
    /// attempt may be stuck on the old route, so it starts over. Connected: the connection may be
    /// dead (its address or route gone), so a PING goes now and the connection counts as dead if
    /// nothing arrives within `dead_after_s` (the keepalive's own check, moved forward).
    mutating func onNetworkChanged(now: Int64) {
        guard !stopping else { return }
        switch current {
        case .backoff:
            guard dialing.fatalInitFailures == 0 else { return }
            cancel(.backoff)
            dialing.attempt = 0
            connect(now: now, reason: "network_changed")
        case .connecting(let id):
            out.append(.abort(id))
            cancel(.connect)
            dialing.attempt = 0
            connect(now: now, reason: "network_changed")
        case .connected:
            counters.pings += 1
            send(Ping().json, now: now)
            let at = deadDeadline(pingAt: now)
            if let existing = deadlines[.dead], existing <= at { return }
            schedule(.dead, at: at)
        case .idle, .closing, .stopped:
            break
        }
    }

    mutating func onReload(_ newConfig: ResolvedConfig, now: Int64) {
        guard !stopping else { return }
        let old = config
        config = newConfig
        requests.shares.readPerSecond = newConfig.config.socket.readRequestsPerS
        requests.shares.readBurst = newConfig.config.socket.readRequestsBurst
        if old.config.client.language != newConfig.config.client.language { queueConfigLanguageIfChanged(now: now) }
        let oldUser = old.config.user, newUser = newConfig.config.user
        if oldUser != newUser, user == nil || user?.source == .config {
            if let ext = newUser.extUserID {
                if user?.extUserID != ext {
                    supersedeIdentifyWaiters(by: ext)
                    switchUser(to: UserState(extUserID: ext, hash: newUser.hash?.exposedValue, source: .config), now: now, persist: false)
                    return
                } else if newUser.hash != oldUser.hash {
                    account.user?.hash = newUser.hash?.exposedValue
                    account.freshHash = user?.hash
                }
            }
        }
        if device.push == Self.configPush(old), let p = Self.configPush(newConfig) { device.push = p }
        guard newConfig.requiresReconnect(from: old) else { return }
        // Changed server settings may be the fix for what failed: no waiting for the (long) retry.
        dialing.fatalInitFailures = 0
        switch current {
        case .connecting, .connected: closeGracefully(then: .reconnect, reason: "reload", now: now)
        case .backoff:
            cancel(.backoff)
            connect(now: now, reason: "reload")
        default: break
        }
    }

    /// Another user. What was queued for the previous one still goes under the previous one
    /// (session rule 5): the connection finishes writing it, then is left for the new user.
    /// `newUser` is not the current user (the callers check).
    mutating func switchUser(to newUser: UserState, now: Int64, persist: Bool) {
        let old = user
        if let o = old, let h = o.hash ?? (lastConnection?.speaker == o.extUserID ? lastConnection?.speaking?.hash : nil) {
            memory.knownHashes[o.extUserID] = h
        }
        account = Account(user: newUser, previous: old, freshHash: newUser.hash, forceLogin: true)
        memory.loggedOutOffline[newUser.extUserID] = nil
        if let h = newUser.hash { memory.knownHashes[newUser.extUserID] = h }
        failRequests(notFor: newUser.extUserID, why: "the user changed to \(newUser.extUserID)")
        if persist { out.append(.persistUser(StoredUser(extUserID: newUser.extUserID, hash: newUser.hash))) }
        // Connecting, initializing, backoff, closing: the next INIT sorts the outbox.
        guard let c = connection else { return }
        switch c.phase {
        case .hashing(let u) where u == old?.extUserID:
            // The hash of the replaced user is no longer wanted.
            dialing.hashToken &+= 1
            sort(now: now)
        case .ready(nil):
            // Anonymous on this connection: identify on it, after the anonymous messages.
            sort(now: now)
        default:
            reconsider(now: now)
        }
    }
}

/// What the machine remembers per earlier user (a hash, a logout, failures): the
/// ``capacity`` users set most recently, so that a peer naming users in a loop cannot grow it.
/// A user beyond it is forgotten: their queued messages are then dropped (reported), not sent
/// under anyone else.
struct RecentUsers<Value: Sendable>: Sendable {
    static var capacity: Int { 32 }
    private var entries: [(user: String, value: Value)] = []

    subscript(user: String) -> Value? {
        get { entries.last { $0.user == user }?.value }
        set {
            entries.removeAll { $0.user == user }
            guard let newValue else { return }
            entries.append((user, newValue))
            if entries.count > Self.capacity { entries.removeFirst(entries.count - Self.capacity) }
        }
    }
}
