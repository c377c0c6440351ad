#if canImport(Glibc)
import Glibc
#endif
import Logging
import SmarticoProtocol
import Transport

/// Joins the sans-I/O ``SessionMachine`` to the world (docs/session.md, "The driver"): the
/// WebSocket client, loop timers, the hash command, the store and the socket server.
///
/// An actor whose executor is the daemon's ``EventLoop``: its code runs on the loop thread, so it
/// uses the loop-thread APIs of `WebSocketConnection` and `LoopTimer` directly.
///
/// **One FIFO.** Everything that reaches the machine — transport events, timer firings, hash
/// results, socket requests, signals — is queued in one ``DriverInbox`` consumed by ``run(_:)``
/// alone. Each input is handled to the end before the next is taken: `handle` is called, its
/// actions are performed in order, and store work is awaited one after another (the results of
/// `.storeOutbox`/`.loadOutbox` go back into the machine before any other input). While the
/// driver awaits the store, new inputs wait in the inbox, so the actor's re-entrancy never
/// lets two `handle` calls interleave.
///
/// **One commit at a time.** The events of one batch (everything queued when the driver took the
/// inbox) are journaled together and published at its end (``DriverStore``).
actor SessionDriver {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    /// The socket API handler that feeds this driver.
    nonisolated let socketHandler: DriverSocketHandler

    private var machine: SessionMachine
    private var config: ResolvedConfig
    private let configPath: String?
    private let environment: [String: String]
    private let store: SmarticoStore
    private let server: SocketAPIServer
    private let notifier: SystemdNotifier
    private var logger: Logger

    /// The FIFO (``DriverInbox``).
    private let inbox: DriverInbox

    private var connectOptions: WebSocketConnectOptions
    /// Open connections by id (removed when their transport reports `.closed`).
    private var connections: [ConnectionID: WebSocketConnection] = [:]
    /// Connect attempts under way; an attempt removed from here (aborted, closed) is dropped when it opens.
    private var connecting: Set<ConnectionID> = []
    private let timers: DriverTimers
    /// Gives memory back after a burst, on a timer of its own.
    private let trimmer: MemoryTrimmer
    /// The `metrics` op and `metrics.textfile` (on a timer of its own).
    private let metrics: MetricsService
    private var replies: [SessionRequestID: SocketAPIReply] = [:]
    /// The requests in `replies` by peer connection number, and the peer of each: a peer that goes
    /// away has its requests abandoned (socket-api.md, "Permissions").
    private var requestsOfPeer: [UInt64: Set<SessionRequestID>] = [:]
    private var peerOfRequest: [SessionRequestID: UInt64] = [:]
    /// Peers that made a call and have not closed (a data API call of a closed one stops).
    private var livePeers: Set<UInt64> = []
    private var nextRequestID: UInt64 = 1
    /// Smartico's public HTTP API: `push_report` and push tokens over HTTP, on its own task.
    let httpQueue: HTTPReportQueue
    /// Results the data API calls keep (inbox bodies by guid).
    nonisolated let dataAPICache = DataAPICache()
    /// The user last handed to ``httpQueue``.
    private var userToldHTTPQueue: String?
    /// Route, address and link changes (docs/session.md, "Network changes"); nil when rtnetlink is
    /// unavailable.
    private var networkMonitor: LoopNetworkMonitor?
    private var stopped = false
    private var terminating = false
    /// The machine's store actions, the journal and the publication of events, storage health.
    private let durable: DriverStore

    /// - Parameters:
    ///   - configPath: the file SIGHUP re-reads (nil: SIGHUP keeps the configuration).
    ///   - environment: the process environment for re-reading (proxy variables, log level).
    init(
        config: ResolvedConfig, configPath: String?, environment: [String: String], loop: EventLoop,
        store: SmarticoStore, server: SocketAPIServer, notifier: SystemdNotifier, logger: Logger,
        sessionEnvironment: SessionEnvironment = SessionEnvironment()
    ) {
        self.loop = loop
        self.config = config
        self.configPath = configPath
        self.environment = environment
        self.store = store
        self.server = server
        self.notifier = notifier
        self.logger = logger
        machine = SessionMachine(config: config, environment: sessionEnvironment)
        connectOptions = config.webSocketConnectOptions
        let inbox = DriverInbox()
        self.inbox = inbox
        timers = DriverTimers(loop: loop, inbox: inbox)
        trimmer = MemoryTrimmer(loop: loop, store: store, logger: logger)
        metrics = MetricsService(loop: loop, store: store, server: server, settings: config.config.metrics, logger: logger)
        durable = DriverStore(store: store, server: server, logger: logger, stateDir: config.config.stateDir)
        socketHandler = DriverSocketHandler(inbox: inbox, trimmer: trimmer, logger: logger, loop: loop)
        httpQueue = HTTPReportQueue(store: store, config: config, loop: loop, logger: logger) { event in
            inbox.yield(.httpEvent(event))
        }
    }

    // MARK: Entry points (any thread)

    /// SIGTERM/SIGINT: a graceful shutdown. Any thread.
    nonisolated func terminate(signal: Int32) {
        inbox.yield(.terminate(signal: signal))
    }

    /// SIGHUP: re-reads the configuration file on the blocking pool, then reloads. Any thread.
    nonisolated func reload() {
        guard let path = configPath else { return }
        let environment = self.environment
        let inbox = self.inbox
        loop.blockingPool.submit {
            let result: Result<ResolvedConfig, ConfigError>
            do throws(ConfigError) {
                let resolved = try ConfigLoader.loadResolved(path: path, environment: environment)
                // The checks of the machine smarticod makes at start (an unreadable CA file, the
                // placeholder key against a real server); the socket is already bound.
                let errors = resolved.config.hostProblems(socketDirectory: false).filter { $0.severity == .error }
                if !errors.isEmpty { throw ConfigError(source: path, problems: errors) }
                result = .success(resolved)
            } catch {
                result = .failure(error)
            }
            inbox.yield(.reloaded(result))
        }
    }

    // MARK: The FIFO

    /// Starts the session with `snapshot` and handles inputs until the machine says `.stopped`.
    func run(_ snapshot: SessionSnapshot) async {
        await trimmer.start()
        await metrics.start { [weak self] in await self?.sessionMetrics() }
        startNetworkMonitor()
        await httpQueue.start()
        await feed(.start(snapshot))
        await tellHTTPQueueTheUser()
        var leftover: [DriverInput] = []
        while !stopped, let batch = await inbox.next() {
            await trimmer.inputsHandled(batch.count)
            for (i, input) in batch.enumerated() {
                await process(input)
                if stopped {
                    leftover = Array(batch[(i + 1)...])
                    break
                }
            }
            await commitPending()
            inbox.resumeReading(connections, logger: logger)
            await tellHTTPQueueTheUser()
        }
        await commitPending()
        leftover += inbox.finish()
        // Requests that arrived during the last steps get a proper answer, not the reply's
        // "dropped" fallback.
        for input in leftover {
            switch input {
            case .call(_, let reply, _, _), .apiSession(_, _, let reply, _, _):
                reply.fail(SocketAPIError(.notReady, "the daemon is stopping"))
            default: break
            }
        }
        timers.invalidateAll()
        await trimmer.stop()
        await metrics.stop()
        networkMonitor?.cancel()
        networkMonitor = nil
        for connection in connections.values { connection.abort() }
        connections.removeAll()
        // A hash command still running (its answer would go nowhere) does not outlive the daemon.
        let killed = HashCommandRunner.killRunning()
        if killed > 0 { logger.info("stopping: killed \(killed) hash command(s) still running") }
        for (_, reply) in replies { reply.fail(SocketAPIError(.notReady, "the daemon is stopping")) }
        replies.removeAll()
        await httpQueue.stop()
    }

    private func process(_ input: DriverInput) async {
        switch input {
        case .session(let sessionInput):
            await feed(sessionInput)
        case .timer(let kind, let atMs):
            guard timers.take(kind, atMs: atMs) else { return }
            // The loop's monotonic clock and the wall clock may disagree by a millisecond:
            // never hand the machine a firing that looks early (it would ignore it for good).
            await feed(.timerFired(kind), notBefore: atMs)
        case .opened(let conn, let connection):
            guard connecting.remove(conn) != nil else {
                connection.abort()
                return
            }
            connections[conn] = connection
            inbox.feed(from: connection, conn, logger: logger)
            logger.debug("connected", metadata: ["conn": "\(conn)", "peer": "\(connection.peerName)"])
            await feed(.connected(conn))
        case .transportClosed(let conn, let code, let reason, let clean):
            connections[conn] = nil
            logger.debug("connection closed", metadata: ["conn": "\(conn)", "code": "\(code.map(String.init) ?? "none")", "reason": "\(reason)"])
            await feed(.closed(conn, code: code, reason: reason, clean: clean))
        case .call(.session(.pushToken(let token, let platform, let status, let app)), let reply, _, _)
            where config.config.user.push.registerVia == .http:
            reply.answer(await httpQueue.answerToken(token: token, platform: platform, status: status, appPackageID: app,
                                                     user: machine.user?.extUserID))
        case .call(let call, let reply, let peer, let owner):
            livePeers.insert(peer)
            await answer(call, reply, peer: peer, owner: owner)
        case .apiSession(let request, let user, let reply, let peer, let owner):
            // A data API call goes on after its peer left: nothing more is sent for it.
            guard livePeers.contains(peer) else {
                return reply.fail(SocketAPIError(.notReady, "the peer that made the call went away; nothing more was sent for it"))
            }
            let now = machine.user?.extUserID
            guard now == user else {
                return reply.fail(SocketAPIError(.notReady, "the user changed from \(user ?? "anonymous") to \(now ?? "anonymous") during the call; nothing more was sent for it"))
            }
            await answer(.session(request), reply, peer: peer, owner: owner)
        case .httpEvent(let event):
            durable.emit(event, now: Self.wallClockMs())
        case .peerClosed(let peer):
            livePeers.remove(peer)
            guard let ids = requestsOfPeer.removeValue(forKey: peer), !ids.isEmpty else { return }
            for id in ids {
                peerOfRequest[id] = nil
                // Nobody to answer: released unanswered, its answer goes to a closed connection.
                replies[id] = nil
            }
            await feed(.abandon(Array(ids)))
        case .terminate(let signal):
            guard !terminating else { return }
            terminating = true
            logger.info("stopping", metadata: ["signal": "\(signal == SIGINT ? "SIGINT" : "SIGTERM")"])
            notify { try $0.stopping(status: "stopping") }
            await feed(.shutdown)
        case .reloaded(let result):
            switch result {
            case .failure(let error):
                for line in error.lines { logger.error("reload refused, the configuration stays as it was: \(line)") }
                notify { try $0.ready(status: "reload refused: the configuration file has \(error.problems.count) problem(s)") }
            case .success(let newConfig):
                logger.info("configuration reloaded", metadata: ["reconnect": "\(newConfig.requiresReconnect(from: config))"])
                config = newConfig
                durable.health.stateDir = newConfig.config.stateDir
                await metrics.apply(newConfig.config.metrics)
                connectOptions = newConfig.webSocketConnectOptions
                logger.logLevel = newConfig.logLevel.loggerLevel
                await store.updateOptions(Daemon.storeOptions(newConfig))
                await httpQueue.reload(newConfig)
                await feed(.reload(newConfig))
                notify { try $0.ready(status: "configuration reloaded; \(self.machine.state.rawValue)") }
            }
        }
    }

    private func answer(_ call: SocketAPICall, _ reply: SocketAPIReply, peer: UInt64, owner: RequestOwner) async {
        switch call {
        case .status:
            let outbox = try? await store.outboxStatus()
            let journal = try? await store.journalBounds()
            var status = machine.status(outbox: outbox, journal: journal, subscribers: server.subscriberCount)
            let httpQueueStatus = await httpQueue.status()
            if case .object(var object) = status {
                // `request` ops waiting for the server's answer, all peers together.
                object["requests_pending"] = .number(Int64(machine.livePending))
                object["http_queue"] = httpQueueStatus
                status = .object(object)
            }
            reply.succeed(status)
        case .session(let request):
            if let refusal = await storeUserFirst(request) { return reply.fail(refusal) }
            let id = SessionRequestID(nextRequestID)
            nextRequestID += 1
            replies[id] = reply
            requestsOfPeer[peer, default: []].insert(id)
            peerOfRequest[id] = peer
            await feed(.request(id, request, owner: owner))
        case .metrics:
            reply.succeed(["content_type": .string(DaemonMetrics.contentType), "text": .string(await metrics.snapshot(sessionMetrics()).text)])
        case .hello:
            reply.succeed(SocketAPIServer.helloResult(version: SmarticoVersion.string, state: machine.state))
        case .pushReport(let request):
            reply.answer(await httpQueue.answerReport(request, user: request.userExtID ?? machine.user?.extUserID))
        case .api(let request):
            guard let spec = request.spec else {
                return reply.fail(SocketAPIError(.badRequest, "unknown call \"\(request.call)\""))
            }
            // Reads made while offline wait for the session (as `request` does); without any user
            // there is nothing to wait for.
            if spec.needsUser && machine.user == nil {
                return reply.fail(SocketAPIError(.notReady, "call \"\(spec.name)\" needs an identified user, and none is: identify one first (the identify op)"))
            }
            let host = DriverDataAPIHost(driver: self, inbox: inbox, loop: loop, cache: dataAPICache, user: machine.user?.extUserID, owner: owner)
            Task(executorPreference: loop) { reply.answer(await DataAPIImplementations.run(request, host: host, peer: peer)) }
        case .logLevel(let level):
            // The daemon's loggers share one level (Daemon.bootstrapLogging): this sets it for all,
            // until the next restart or reload.
            let previous = logger.logLevel
            logger.logLevel = level
            logger.notice("log level set to \(level) (was \(previous)) by a log_level request, until the next restart or reload",
                          metadata: ["conn": "\(peer)"])
            reply.succeed(.object(["level": .string(level.rawValue), "previous": .string(previous.rawValue)]))
        }
    }

    /// The HTTP queue sends the calls made before any user was known for the user the daemon acts
    /// for once there is one (after each batch of inputs, when it changed).
    private func tellHTTPQueueTheUser() async {
        let user = machine.user?.extUserID
        guard user != userToldHTTPQueue else { return }
        userToldHTTPQueue = user
        await httpQueue.setUser(user)
    }

    /// The session's part of the metrics (``MetricsService`` adds the rest).
    func sessionMetrics() -> DaemonMetrics {
        DaemonMetrics(
            state: machine.state, stateSinceMs: machine.stateSinceMs, reconnects: machine.counters.reconnects,
            messagesIn: machine.counters.messagesIn, messagesOut: machine.counters.messagesOut,
            answersDropped: machine.counters.answersDropped, eventsPublished: durable.published,
            lastError: machine.lastError.map { (code: $0.code, atMs: $0.atMs) })
    }

    /// Hands `first` to the machine, performs its actions in order and feeds the store results
    /// back before returning.
    private func feed(_ first: SessionInput, notBefore: Int64 = 0) async {
        var results: [SessionInput] = []
        await handle(first, now: max(Self.wallClockMs(), notBefore), results: &results)
        await feedResults(&results)
    }

    /// Store results (rare: the outbox) go back in before anything else; most inputs have none,
    /// and allocate no queue.
    private func feedResults(_ results: inout [SessionInput]) async {
        var next = 0
        while next < results.count {
            let input = results[next]
            next += 1
            await handle(input, now: Self.wallClockMs(), results: &results)
        }
    }

    /// One `machine.handle` and its actions, in order, the store's awaited.
    private func handle(_ input: SessionInput, now: Int64, results: inout [SessionInput]) async {
        if logger.logLevel <= .trace { logger.trace("input \(input)") }
        let dropped = machine.counters.answersDropped
        defer {
            if machine.counters.answersDropped != dropped, logger.logLevel <= .debug {
                logger.debug("dropped the server's answer to a request nobody waits for any more (its peer left, or it timed out)",
                             metadata: ["answers_dropped": "\(machine.counters.answersDropped)"])
            }
        }
        for action in machine.handle(input, now: now) {
            if action.awaitsStore {
                if let result = await durable.perform(action) { results.append(result) }
                takeStorageReport()
            } else {
                performNow(action, now: now)
            }
        }
    }

    // MARK: Actions

    /// Performs an action that does not wait for the store (``SessionAction/awaitsStore`` false).
    private func performNow(_ action: SessionAction, now: Int64) {
        switch action {
        case .schedule(let kind, let atMs):
            timers.arm(kind, atMs: atMs, now: now)
        case .cancel(let kind):
            timers.disarm(kind)
        case .emit(let event):
            durable.emit(event, now: now)
        case .journalOnce(let user, let uid, let event):
            durable.emit(event, now: now, once: (user: user, uid: uid))
        case .connect(let conn, let url):
            connect(conn, url: url)
        case .send(let conn, let message):
            // A failed write means the connection is going away: the machine hears `.closed`, and
            // outbox messages not confirmed on it stay in the outbox.
            guard let connection = connections[conn] else {
                logger.debug("not sent, connection gone", metadata: ["conn": "\(conn)", "message": "\(message)"])
                return
            }
            do {
                try connection.send(text: String(decoding: message.bytes, as: UTF8.self))
                if logger.logLevel <= .debug { logger.debug("sent \(message)", metadata: ["conn": "\(conn)"]) }
            } catch {
                logger.debug("not sent: \(error)", metadata: ["conn": "\(conn)", "message": "\(message)"])
            }
        case .close(let conn, let code, let reason):
            if connecting.remove(conn) != nil { return }
            do {
                try connections[conn]?.close(code: WebSocketCloseCode(UInt16(clamping: code)), reason: reason)
            } catch {
                connections[conn]?.abort()
            }
        case .abort(let conn):
            if connecting.remove(conn) != nil { return }
            connections[conn]?.abort()
        case .runHashCommand(let token, let argv, let user):
            let inbox = self.inbox
            let log = logger
            // The runner spawns and waits on its own thread; this only awaits its answer. The
            // command's stderr goes to the log only, masked (never into events).
            HashCommandRunner.start(argv: argv, user: user, environment: environment,
                                    passing: config.config.user.hashCommandEnv) { outcome in
                if case .failed(let error) = outcome, !error.stderrExcerpt.isEmpty {
                    log.debug("user.hash_command stderr (masked): \(HashCommandRunner.masked(error.stderrExcerpt))")
                }
                inbox.yield(.session(.hashResult(token: token, outcome)))
            }
        case .reply(let id, let result):
            replies.removeValue(forKey: id)?.answer(result)
            if let peer = peerOfRequest.removeValue(forKey: id) {
                requestsOfPeer[peer]?.remove(id)
                if requestsOfPeer[peer]?.isEmpty == true { requestsOfPeer[peer] = nil }
            }
        case .statusChanged(let state):
            socketHandler.state.withLock { $0 = state }
            notify { try $0.status(state.rawValue) }
            // Ready: the start-up and the handshake are done; trim once the session is quiet. The
            // mappings seen now are the ones that trim may drop pages of (ProcessMemory).
            if state == .ready { trimmer.arm() }
        case .stopped:
            stopped = true
            logger.info("session stopped")
        case .persistUser, .userAccepted, .persistProfile, .recordActivity, .clearUser, .persistPush, .persistLanguageSent, .storeOutbox, .storeLatest, .loadOutbox, .markSent, .dropOutbox:
            preconditionFailure("a store action: DriverStore.perform")
        }
    }


    /// `error` codes of failures that stop delivery: logged at `warning`, not `info` (daemon.md,
    /// `log.level`).
    static let warningErrorCodes: Set<String> = ["init_rejected", "identify_rejected", "hash_command_failed", "outbox_dropped", "engagement_too_large",
                                                       "push_token_refused"]

    /// The level of an event's log line: `session` and `error` events are logged, a failure that
    /// stops delivery (the codes above, a `session` entering backoff) at `warning`; nil: not logged.
    static func logLevel(of event: DaemonEvent) -> Logger.Level? {
        switch event.kind {
        case .error:
            if case .string(let code)? = event.data["code"], warningErrorCodes.contains(code) { return .warning }
            return .info
        case .session:
            return event.data["state"] == .string(SessionState.backoff.rawValue) ? .warning : .info
        default:
            return nil
        }
    }

    /// The journal row of `event` and its line's `data` bytes, as arrays (tests compare them with
    /// replay): the same bytes, except that an engagement is journaled without its `bridge`.
    static func journalRow(_ event: DaemonEvent, tsMs: Int64) -> (row: NewJournalEvent, line: [UInt8]) {
        (event.journalEvent(tsMs: tsMs), event.body.lineBytes)
    }

    /// An identify of another user and a logout change whom the daemon speaks for after a restart
    /// too, so the stored user is written before the session changes. When the state directory
    /// cannot take it, the op is refused (`storage_unavailable`) and nothing changes: going on in
    /// memory only, a restart would bring back the user stored before and speak for them. (The
    /// session machine writes the same user again with its own action; the second write is a no-op.)
    private func storeUserFirst(_ request: SessionRequest) async -> SocketAPIError? {
        let what: String
        let write: @Sendable (SmarticoStore) async throws(StoreError) -> Void
        switch request {
        case .identify(let ext, let hash) where ext != machine.user?.extUserID && machine.identifyRefusal(ext: ext, hash: hash) == nil:
            what = "identify of \(ext)"
            write = { store throws(StoreError) in try await store.setUser(StoredUser(extUserID: ext, hash: hash)) }
        case .logout where machine.user != nil:
            what = "logout of \(machine.user?.extUserID ?? "")"
            write = { store throws(StoreError) in try await store.clearUser() }
        default:
            return nil
        }
        let consequence = "the \(what) was not done (the daemon still speaks for \(machine.user?.extUserID ?? "nobody")): "
            + "the user it speaks for could not be stored, and after a restart it would be the one stored before"
        defer { takeStorageReport() }
        return await durable.writeUser(what, consequence: consequence, write)
    }

    /// Journals and publishes the batch's events (``DriverStore/commit(isolation:)``).
    private func commitPending() async {
        await durable.commit()
        takeStorageReport()
    }

    /// A storage problem the store side reported becomes `status.last_error`.
    private func takeStorageReport() {
        guard let report = durable.takeReport() else { return }
        machine.lastError = ("storage_unavailable", report.message, report.atMs)
    }

    private func connect(_ conn: ConnectionID, url: String) {
        connecting.insert(conn)
        let options = connectOptions
        let loop = self.loop
        let inbox = self.inbox
        logger.debug("connecting", metadata: ["conn": "\(conn)", "url": "\(redactedURL(url))"])
        Task(executorPreference: loop) {  // on the loop, never the global executor (docs/transport.md)
            do throws(ConnectError) {
                let connection = try await WebSocketClient.connect(url: url, options: options, on: loop)
                inbox.yield(.opened(conn, connection))
            } catch {
                inbox.yield(.session(.connectFailed(conn, reason: error.sessionReason, message: error.description)))
            }
        }
    }

    /// Watches rtnetlink: a burst of changes becomes one `.networkChanged`. Without it (no netlink
    /// here) the daemon still works, noticing a dead connection by its keepalive and a returned
    /// network at its next retry.
    private func startNetworkMonitor() {
        let inbox = self.inbox
        let logger = self.logger
        do {
            networkMonitor = try LoopNetworkMonitor(loop: loop) {
                logger.debug("network changed (rtnetlink)")
                inbox.yield(.session(.networkChanged))
            }
        } catch {
            logger.warning("cannot watch network changes (rtnetlink): \(error); a lost or returned network is noticed only by the keepalive and the reconnect backoff")
        }
    }

    private func notify(_ body: (SystemdNotifier) throws -> Void) {
        do { try body(notifier) } catch {
            logger.warning("sd_notify failed: \(error)")
        }
    }

    // MARK: Helpers

    /// Milliseconds since the Unix epoch (the machine's clock).
    static func wallClockMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// A `session`/`error` event's data for the log: state, reason, code, message (never message bytes).
    static func summary(_ data: JSONValue) -> String {
        guard case .object(let o) = data else { return "" }
        var parts: [String] = []
        for key in ["state", "reason", "code", "attempt", "retry_in_ms", "errCode", "message"] {
            guard let value = o[key] else { continue }
            switch value {
            // Server text (an errMsg) may be any size: each field keeps at most 1 KiB (LogEscaping).
            case .string(let s): parts.append("\(key)=\(LogEscaping.bounded(s))")
            default: parts.append("\(key)=\(value.serialized().count < 64 ? String(decoding: value.serialized(), as: UTF8.self) : "…")")
            }
        }
        return parts.joined(separator: " ")
    }
}

// MARK: - The data API's access to the session

extension SessionDriver {
    /// INIT's `settings` of the current (or last) connection.
    func labelSettings() -> JSONObject? { machine.lastConnection?.initResponse?.settings }

    /// The identified user's public props (nil while anonymous), for the data API's user calls.
    func publicProps() -> JSONObject? { machine.user == nil ? nil : machine.props }

    /// The HTTP client's options for the data API's fetches: the public API's (CA file, proxy, timeouts).
    func dataAPIHTTPOptions() -> HTTPClientOptions { HTTPReportQueue.clientOptions(config) }

    /// The configured label key (its first 36 characters) and brand key, for the data API's HTTP bodies.
    func dataAPILabelKeys() -> (key: String, brandKey: String?) { (config.labelKey.key.exposedValue, config.config.server.brandKey) }

    /// The label environment's image host (``ImageDomain``).
    func dataAPIImageDomain() -> String { config.imageDomain }
}
