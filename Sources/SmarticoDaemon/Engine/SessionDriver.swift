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
/// **One commit at a time.** The events the inputs of one batch (everything queued when the
/// driver took the inbox) emit are kept in order; at the batch's end the journaled ones are
/// committed in one transaction, awaited, and then all of them are published in emission order.
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
    private var timers = SessionTimerSlots<LoopTimer>()
    private var timerDeadlines = SessionTimerSlots<Int64>()
    private var watchdogTimer: LoopTimer?
    private var maintenanceTimer: LoopTimer?
    /// Gives the store's page cache, the heap's free pages and the pages of code the daemon ran back after a burst
    /// (``ProcessMemory``): armed again every `trimAfterInputs` inputs and whenever the session becomes ready, it fires
    /// once the burst has been over for `trimDelay`.
    private var trimTimer: LoopTimer?
    private var inputsSinceTrimArmed = 0
    static let trimAfterInputs = 512
    static let trimDelay: Duration = .seconds(5)
    /// How often journal retention runs without appends.
    static let maintenanceInterval: Duration = .seconds(3600)
    private var replies: [SessionRequestID: SocketAPIReply] = [:]
    /// The requests in `replies` by peer connection number, and the peer of each: a peer that goes
    /// away has its requests abandoned (socket-api.md, "Permissions").
    private var requestsOfPeer: [UInt64: Set<SessionRequestID>] = [:]
    private var peerOfRequest: [SessionRequestID: UInt64] = [:]
    /// Peers that made a call and have not closed (a data API call of a closed one stops).
    private var livePeers: Set<UInt64> = []
    private var nextRequestID: UInt64 = 1
    /// When the driver was made (the daemon's start, for the metrics).
    private let startedAtMs = SessionDriver.wallClockMs()
    /// Events handed to the socket server to publish, by name (the metrics' events by type).
    private var eventsPublished: [String: Int] = [:]
    /// Rewrites `metrics.textfile` on the blocking pool.
    private let metricsWriter: MetricsTextfileWriter
    /// Smartico's public HTTP API: `push_report` and push tokens over HTTP, on its own task.
    let httpQueue: HTTPReportQueue
    /// Results the data API calls keep (inbox bodies by guid).
    nonisolated let dataAPICache = DataAPICache()
    /// The user last handed to ``httpQueue``.
    private var userToldHTTPQueue: String?
    /// Fires every `metrics.interval_s` while `metrics.textfile` is set.
    private var metricsTimer: LoopTimer?
    /// Route, address and link changes (docs/session.md, "Network changes"); nil when rtnetlink is
    /// unavailable.
    private var networkMonitor: LoopNetworkMonitor?
    private var stopped = false
    private var terminating = false
    /// Why the state directory takes no writes (``StoreError/storageProblem``: full, read-only,
    /// failing) since the first failed write; nil once a write succeeds again. Reported once per
    /// change (docs/reliability.md, "A full or read-only state directory").
    private var storageProblem: String?
    /// Outbox uuids the server proved it read whose removal from the outbox failed; retried with
    /// the next `.markSent`.
    private var unmarkedSent: [String] = []

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
        socketHandler = DriverSocketHandler(inbox: inbox, logger: logger, loop: loop)
        metricsWriter = MetricsTextfileWriter(pool: loop.blockingPool, logger: logger)
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
        startWatchdog()
        let inbox = self.inbox
        let maintenance = LoopTimer(loop: loop) { inbox.yield(.maintenance) }
        maintenanceTimer = maintenance
        let trim = LoopTimer(loop: loop) { inbox.yield(.trimMemory) }
        trimTimer = trim
        metricsTimer = LoopTimer(loop: loop) { inbox.yield(.writeMetrics) }
        if config.config.metrics.textfile != nil { metricsTimer?.schedule(after: .zero) }
        startNetworkMonitor()
        await process(.maintenance)
        await httpQueue.start()
        await feed(.start(snapshot))
        await tellHTTPQueueTheUser()
        var leftover: [DriverInput] = []
        while !stopped, let batch = await inbox.next() {
            countInputs(batch.count)
            var trimRequested = false
            for (i, input) in batch.enumerated() {
                if case .trimMemory = input { trimRequested = true }
                await process(input)
                if stopped {
                    leftover = Array(batch[(i + 1)...])
                    break
                }
            }
            await commitPending()
            updateReading()
            await tellHTTPQueueTheUser()
            if trimRequested {
                // The burst is over: the heap's free pages go back to the system, with the pages
                // the store's cache freed in `process`.
                let released = ProcessMemory.returnFreePagesToSystem()
                logger.debug("heap trimmed after a burst", metadata: ["released": "\(released)"])
            }
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
        for timer in timers.values { timer.invalidate() }
        timers.removeAll()
        watchdogTimer?.invalidate()
        watchdogTimer = nil
        maintenanceTimer?.invalidate()
        maintenanceTimer = nil
        trimTimer?.invalidate()
        trimTimer = nil
        metricsTimer?.invalidate()
        metricsTimer = nil
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
            guard timerDeadlines[kind] == atMs else { return }
            timerDeadlines[kind] = nil
            // The loop's monotonic clock and the wall clock may disagree by a millisecond:
            // never hand the machine a firing that looks early (it would ignore it for good).
            await feed(.timerFired(kind), notBefore: atMs)
        case .opened(let conn, let connection):
            guard connecting.remove(conn) != nil else {
                connection.abort()
                return
            }
            connections[conn] = connection
            let inbox = self.inbox
            // Backpressure (docs/session.md): past a bound of messages waiting for the driver,
            // the socket is not read until the driver has caught up (`updateReading`).
            let logger = self.logger
            let received = { [weak connection] (bytes: [UInt8]) in
                let queued = inbox.yield(.session(.received(conn, bytes)), messageBytes: bytes.count).queuedBytes
                if queued >= Self.pauseReadingInboxBytes, let connection, !connection.isReadingPaused {
                    connection.pauseReading()
                    logger.debug("server reading paused", metadata: ["conn": "\(conn)", "inbox_bytes": "\(queued)"])
                }
            }
            connection.start { event in
                switch event {
                case .textBytes(let bytes): received(bytes)
                case .text(let text): received(Array(text.utf8))
                case .binary(let bytes): received(bytes)
                case .closed(let info):
                    inbox.yield(.transportClosed(
                        conn, code: Int(info.code.rawValue), reason: info.error?.description ?? info.reason,
                        clean: info.error == nil && info.code != .abnormalClosure))
                case .ping, .pong, .closing: break
                }
            }
            logger.debug("connected", metadata: ["conn": "\(conn)", "peer": "\(connection.peerName)"])
            await feed(.connected(conn))
        case .transportClosed(let conn, let code, let reason, let clean):
            connections[conn] = nil
            logger.debug("connection closed", metadata: ["conn": "\(conn)", "code": "\(code.map(String.init) ?? "none")", "reason": "\(reason)"])
            await feed(.closed(conn, code: code, reason: reason, clean: clean))
        case .call(.session(.pushToken(let token, let platform, let status, let app)), let reply, _, _)
            where config.config.user.push.registerVia == .http:
            await pushTokenOverHTTP(token: token, platform: platform, status: status, appPackageID: app, reply: reply)
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
            emit(event, now: Self.wallClockMs())
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
        case .maintenance:
            do throws(StoreError) {
                let removed = try await store.applyRetention(nowMs: Self.wallClockMs())
                if removed > 0 { logger.info("journal retention removed \(removed) event(s)") }
            } catch {
                logger.error("journal retention failed: \(error)")
            }
            maintenanceTimer?.schedule(after: Self.maintenanceInterval)
        case .peerReleasedMemory:
            trimTimer?.schedule(after: Self.trimDelay)
        case .writeMetrics:
            guard let path = config.config.metrics.textfile else { return }
            metricsWriter.write(await metrics().text, to: path)
            metricsTimer?.schedule(after: .seconds(config.config.metrics.intervalS))
        case .trimMemory:
            // The heap is trimmed by `run` once this batch is done, with these pages among those
            // it returns.
            await store.releaseCacheMemory()
        case .reloaded(let result):
            switch result {
            case .failure(let error):
                for line in error.lines { logger.error("reload refused, the configuration stays as it was: \(line)") }
                notify { try $0.ready(status: "reload refused: the configuration file has \(error.problems.count) problem(s)") }
            case .success(let newConfig):
                logger.info("configuration reloaded", metadata: ["reconnect": "\(newConfig.requiresReconnect(from: config))"])
                let previousMetrics = config.config.metrics
                config = newConfig
                applyMetricsChange(from: previousMetrics)
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
            reply.succeed(["content_type": .string(DaemonMetrics.contentType), "text": .string(await metrics().text)])
        case .hello:
            reply.succeed(SocketAPIServer.helloResult(version: SmarticoVersion.string, state: machine.state))
        case .pushReport(let request):
            // The user: the one named, else the current one; none → it waits for one.
            let user = request.userExtID ?? machine.user?.extUserID
            do {
                let uuid = try await httpQueue.enqueueReport(request, user: user, nowMs: Self.wallClockMs())
                reply.succeed(["queued": true, "uuid": .string(uuid), "waiting_for_user": .bool(user == nil)])
            } catch {
                reply.fail(Self.httpQueueError(error, what: "push_report"))
            }
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
        if let user { await registerConfiguredTokenOverHTTP(for: user) }
    }

    /// `user.push.token` with `register_via: "http"`: registered once per user and token (remembered
    /// in the store as `http_push_registered`), when that user becomes the daemon's user.
    private func registerConfiguredTokenOverHTTP(for user: String) async {
        let push = config.config.user.push
        guard push.registerVia == .http, let token = push.token?.exposedValue else { return }
        let key = Array("\(user)\n\(token)\n\(push.platform)\n\(push.status)\n\(push.appPackageID ?? "")".utf8)
        do {
            if try await store.metaValue("http_push_registered") == key { return }
            _ = try await httpQueue.enqueueToken(token: token, platform: push.platform, status: push.status,
                                                 appPackageID: push.appPackageID, user: user, nowMs: Self.wallClockMs())
            try await store.setMetaValue("http_push_registered", key)
        } catch {
            logger.error("user.push.token could not be queued for registration over HTTP: \(error)")
        }
    }

    /// `push_token` with `user.push.register_via: "http"`: the POST of 002 §4 through the HTTP
    /// queue, for the current user (none yet: the next one known). Nothing goes over the WebSocket.
    private func pushTokenOverHTTP(token: String, platform: Int?, status: Int, appPackageID: String?, reply: SocketAPIReply) async {
        guard !token.isEmpty else { return reply.fail(SocketAPIError(.badRequest, "field \"token\" of op \"push_token\" must not be empty")) }
        let user = machine.user?.extUserID
        do {
            let uuid = try await httpQueue.enqueueToken(
                token: token, platform: platform ?? config.config.user.push.platform, status: status, appPackageID: appPackageID,
                user: user, nowMs: Self.wallClockMs())
            reply.succeed(["queued": true, "via": "http", "uuid": .string(uuid), "waiting_for_user": .bool(user == nil)])
        } catch {
            reply.fail(Self.httpQueueError(error, what: "push_token"))
        }
    }

    static func httpQueueError(_ error: StoreError, what: String) -> SocketAPIError {
        if case .queueFull(let max) = error {
            return SocketAPIError(.queueFull, "\(what) refused: \(max) calls wait in the HTTP queue (http.max_queue); see status.http_queue.last_error")
        }
        return SocketAPIError(.internal, "\(what) could not be stored: \(error)")
    }

    // MARK: Metrics

    /// The daemon's metrics now (the `metrics` op, `metrics.textfile`): the machine's counters,
    /// the events published, the store's outbox, the server's peers, the RSS (read on the pool).
    private func metrics() async -> DaemonMetrics {
        let outbox = try? await store.outboxStatus()
        let httpQueueStatus = try? await store.httpQueueStatus()
        let resident = await loop.blockingPool.run { DaemonMetrics.residentBytes() }
        let lastError = machine.lastError.map { (code: $0.code, atMs: $0.atMs) }
        return DaemonMetrics(
            version: SmarticoVersion.string, startMs: startedAtMs, nowMs: Self.wallClockMs(),
            state: machine.state, stateSinceMs: machine.stateSinceMs,
            reconnects: machine.counters.reconnects, messagesIn: machine.counters.messagesIn,
            messagesOut: machine.counters.messagesOut, answersDropped: machine.counters.answersDropped, eventsPublished: eventsPublished,
            outboxDepth: outbox?.depth, outboxOldestMs: outbox?.oldestMs,
            subscribers: server.subscriberCount, connections: server.connectionCount,
            lastError: lastError, residentBytes: resident, httpQueueDepth: httpQueueStatus?.depth,
            httpQueueOldestMs: httpQueueStatus?.oldestMs)
    }

    /// A reload changed `metrics.*` (or not): a textfile no longer configured is removed (it
    /// would show a stale state forever); a new path or interval is written now, then every
    /// interval; none stops the timer.
    private func applyMetricsChange(from previous: DaemonConfig.Metrics) {
        let current = config.config.metrics
        guard current != previous else { return }
        if let old = previous.textfile, old != current.textfile { metricsWriter.remove(old) }
        if current.textfile != nil {
            metricsTimer?.schedule(after: .zero)
        } else {
            metricsTimer?.cancel()
        }
    }

    /// Hands the events to the server to publish, counting them by name.
    private func publish(_ events: [PreparedEvent]) {
        for event in events { eventsPublished[event.name, default: 0] += 1 }
        server.publish(events)
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
                await performStore(action, results: &results)
            } else {
                performNow(action, now: now)
            }
        }
    }

    /// Counts inputs for the heap trim after a burst.
    private func countInputs(_ count: Int) {
        inputsSinceTrimArmed += count
        if inputsSinceTrimArmed >= Self.trimAfterInputs {
            inputsSinceTrimArmed = 0
            trimTimer?.schedule(after: Self.trimDelay)
        }
    }

    // MARK: Actions

    /// Performs an action that does not wait for the store (``SessionAction/awaitsStore`` false).
    private func performNow(_ action: SessionAction, now: Int64) {
        switch action {
        case .schedule(let kind, let atMs):
            arm(kind, atMs: atMs, now: now)
        case .cancel(let kind):
            disarm(kind)
        case .emit(let event):
            emit(event, now: now)
        case .journalOnce(let user, let uid, let event):
            let body = Self.body(of: event)
            toSubscribers(Outgoing(name: event.name, body: body, tsMs: now,
                                   write: JournalWrite(NewJournalEvent(name: event.name, tsMs: now, body: body), once: uid, user: user),
                                   loggedUID: logger.logLevel <= .debug ? uid : nil))
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
            if state == .ready { trimTimer?.schedule(after: Self.trimDelay) }
        case .stopped:
            stopped = true
            logger.info("session stopped")
        case .persistUser, .userAccepted, .persistProfile, .recordActivity, .clearUser, .persistPush, .persistLanguageSent, .storeOutbox, .storeLatest, .loadOutbox, .markSent, .dropOutbox:
            preconditionFailure("a store action: performStore")
        }
    }

    /// Performs a store action, appending its result (if any) for the machine to `results`.
    private func performStore(_ action: SessionAction, results: inout [SessionInput]) async {
        switch action {
        case .persistUser(let user):
            await storeWork("setUser") { try await $0.setUser(user) }
        case .persistProfile(let publicUsername, let props):
            await storeWork("updateUserProfile") { try await $0.updateUserProfile(publicUsername: publicUsername, props: props) }
        case .recordActivity(let atMs):
            await storeWork("recordActivity") { try await $0.recordActivity(atMs: atMs) }
        case .userAccepted(let user):
            await storeWork("keepSeen") { try await $0.keepSeen(only: user) }
        case .clearUser:
            await storeWork("clearUser") { try await $0.clearUser() }
        case .persistPush(let push):
            await storeWork("setPush") { try await $0.setPush(push) }
        case .persistLanguageSent(let user, let language):
            await storeWork("setLanguageSent") { try await $0.setLanguageSent(language, user: user) }
        case .storeOutbox(let entry):
            let failure: OutboxStoreFailure?
            do throws(StoreError) {
                try await store.enqueue(uuid: entry.uuid, cid: entry.cid, kind: .socket, payload: entry.bytes,
                                        createdMs: entry.createdMs, user: entry.user)
                failure = nil
                storeWritable()
            } catch {
                if case .queueFull(let max) = error { failure = .queueFull(max: max) } else {
                    failure = outboxFailure("outbox write", error)
                }
            }
            results.append(.outboxStored(uuid: entry.uuid, failure: failure))
        case .storeLatest(let slot, let entry):
            let failure: OutboxStoreFailure?
            do throws(StoreError) {
                try await store.putLatest(slot: slot, uuid: entry.uuid, cid: entry.cid, payload: entry.bytes,
                                          createdMs: entry.createdMs, user: entry.user)
                failure = nil
                storeWritable()
            } catch {
                failure = outboxFailure("outbox write", error)
            }
            results.append(.outboxStored(uuid: entry.uuid, failure: failure))
        case .loadOutbox(let limit):
            var entries: [OutboxEntry] = []
            do throws(StoreError) {
                let waiting = try await store.peek(limit: limit, kind: .socket)
                entries = waiting.map {
                    OutboxEntry(uuid: $0.uuid, cid: $0.cid, bytes: $0.payload, createdMs: $0.createdMs, user: $0.user)
                }
                if waiting.count < limit {
                    entries += try await store.latestMessages().map {
                        OutboxEntry(uuid: $0.uuid, cid: $0.cid, bytes: $0.payload, createdMs: $0.createdMs, user: $0.user)
                    }
                }
            } catch {
                logger.error("outbox read failed: \(error)")
                entries = []
            }
            results.append(.outboxLoaded(entries))
        case .markSent(let uuids):
            // A failed markSent (a full state directory) is retried with the next one: until then
            // a reconnect would send those messages again.
            let all = unmarkedSent + uuids
            unmarkedSent = []
            if await !storeWork("markSent", { _ = try await $0.markSent(all) }) { unmarkedSent = all }
        case .dropOutbox(let user):
            var count = 0
            do throws(StoreError) {
                count = try await store.dropOutbox(user: user)
            } catch {
                logger.error("outbox delete failed: \(error)")
            }
            results.append(.outboxDropped(user: user, count: count))
        default:
            preconditionFailure("not a store action: performNow")
        }
    }


    /// `error` codes of failures that stop delivery: logged at `warning`, not `info` (daemon.md,
    /// `log.level`).
    static let warningErrorCodes: Set<String> = ["init_rejected", "identify_rejected", "hash_command_failed", "outbox_dropped", "engagement_too_large",
                                                       "push_token_refused"]

    /// The level of an event's log line: `session` and `error` events are logged, a failure that
    /// stops delivery (the codes above, a `session` entering backoff) at `warning`; nil: not logged.
    static func logLevel(of event: DaemonEvent) -> Logger.Level? {
        switch event.name {
        case "error":
            if case .string(let code)? = event.data["code"], warningErrorCodes.contains(code) { return .warning }
            return .info
        case "session":
            return event.data["state"] == .string(SessionState.backoff.rawValue) ? .warning : .info
        default:
            return nil
        }
    }

    private func emit(_ event: DaemonEvent, now: Int64) {
        if let level = Self.logLevel(of: event), logger.logLevel <= level {
            logger.log(level: level, "\(event.name): \(Self.summary(event.data))")
        }
        if let warning = event.warning { logger.warning("\(warning)") }
        let body = Self.body(of: event)
        if event.journaled {
            toSubscribers(Outgoing(name: event.name, body: body, tsMs: now,
                                   write: JournalWrite(NewJournalEvent(name: event.name, tsMs: now, body: body))))
        } else {
            toSubscribers(Outgoing(name: event.name, body: body, tsMs: now))
        }
    }

    /// An event's `data` as it is journaled and shown: an engagement's kept as the 110's bytes (its
    /// row and line are appended from them where they are written: the journal without `bridge`,
    /// the line with it, ``EngagementJournal``), anything else serialized once, the same bytes for both.
    static func body(of event: DaemonEvent) -> EventBody {
        switch event.payload {
        case .engagement(let engagement):
            return .engagement(engagement)
        case .tree(let data):
            if event.name == "engagement", let engagement = EngagementJournal.engagementData(fromTree: data) {
                return .engagement(engagement)
            }
            return .bytes(data.serialized())
        }
    }

    /// The journal row of `event` and its line's `data` bytes, as arrays (tests compare them with
    /// replay): the same bytes, except that an engagement is journaled without its `bridge`.
    static func journalRow(_ event: DaemonEvent, tsMs: Int64) -> (row: NewJournalEvent, line: [UInt8]) {
        let body = body(of: event)
        return (NewJournalEvent(name: event.name, tsMs: tsMs, body: body), body.lineBytes)
    }

    // MARK: Journal and publication

    /// An event on its way to subscribers, in emission order; a journaled one carries its row.
    private struct Outgoing {
        var name: String
        /// The event's `data`, serialized once: journaled, and appended to each subscriber's line.
        var body: EventBody
        var tsMs: Int64
        /// The journal row; nil: not journaled (published in order with the journaled events around it).
        var write: JournalWrite?
        /// The engagement uid for the `repeat dropped` debug line (kept only when it is logged).
        var loggedUID: String?
    }

    /// The events emitted by the batch of inputs being handled (``commitPending()``).
    private var pending: [Outgoing] = []

    private func toSubscribers(_ event: Outgoing) {
        pending.append(event)
    }

    /// Backpressure on the server (docs/session.md, "Backpressure"): the socket stops being read
    /// when this many bytes of server messages wait in the inbox; it is read again once they are
    /// below the resume mark.
    static let pauseReadingInboxBytes = 1 << 20
    static let resumeReadingInboxBytes = 256 << 10

    /// Resumes reading the server once the inbox has drained; after every batch of inputs.
    private func updateReading() {
        guard inbox.queuedMessageBytes < Self.resumeReadingInboxBytes else { return }
        for (conn, connection) in connections where connection.isReadingPaused {
            connection.resumeReading()
            logger.debug("server reading resumed", metadata: ["conn": "\(conn)"])
        }
    }

    /// Commits the batch's journaled events in one transaction, then publishes all of the batch's
    /// events in emission order: a journaled event is shown only once it is on disk (socket-api.md),
    /// and an event emitted after it is not shown before it.
    private func commitPending() async {
        guard !pending.isEmpty else { return }
        let events = pending
        pending = []
        let writes = events.compactMap(\.write)
        var results: [JournalSeq?] = []
        var failure: StoreError?
        if !writes.isEmpty {
            do throws(StoreError) {
                results = try await store.journal(writes)
                storeWritable()
            } catch {
                failure = error
                storageFailed("journal write", error)
            }
        }
        var next = results.makeIterator()
        var ready: [PreparedEvent] = []
        for event in events {
            guard event.write != nil else {
                ready.append(PreparedEvent(name: event.name, seq: nil, tsMs: event.tsMs, body: event.body))
                continue
            }
            if let failure {
                publish(ready)
                ready = []
                journalFailed(event.name, failure, now: event.tsMs)
            } else if let seq = next.next() ?? nil {
                ready.append(PreparedEvent(name: event.name, seq: seq, tsMs: event.tsMs, body: event.body))
            } else if logger.logLevel <= .debug {
                logger.debug("repeat dropped", metadata: ["event": "\(event.name)", "engagement_uid": "\(event.loggedUID ?? "")"])
            }
        }
        publish(ready)
    }

    /// An event that could not be journaled is not shown to anyone (it would not be replayable);
    /// subscribers get an `error` event saying so.
    private func journalFailed(_ name: String, _ error: StoreError, now: Int64) {
        // A full or read-only state directory is logged once (storageFailed); each dropped event
        // still has its journal_write_failed event.
        if error.storageProblem == nil {
            logger.error("journal write failed, \(name) event dropped: \(error)")
        } else {
            logger.debug("journal write failed, \(name) event dropped: \(error)")
        }
        var data: [UInt8] = []
        JSONValue.object([
            "code": "journal_write_failed",
            "message": .string("an event of type \(name) could not be journaled and was dropped: \(error)"),
        ]).serialize(into: &data)
        publish([PreparedEvent(name: "error", seq: nil, tsMs: now, data: data)])
    }

    /// Runs a store write whose failure only needs reporting; false when it failed.
    @discardableResult
    private func storeWork(_ what: String, _ body: (SmarticoStore) async throws -> Void) async -> Bool {
        do {
            try await body(store)
            storeWritable()
            return true
        } catch {
            if let storeError = error as? StoreError, storeError.storageProblem != nil {
                storageFailed("store \(what)", storeError)
            } else {
                logger.error("store \(what) failed: \(error)")
            }
            return false
        }
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
        do throws(StoreError) {
            try await write(store)
            storeWritable()
            return nil
        } catch {
            let consequence = "the \(what) was not done (the daemon still speaks for \(machine.user?.extUserID ?? "nobody")): "
                + "the user it speaks for could not be stored, and after a restart it would be the one stored before"
            guard let problem = error.storageProblem else {
                logger.error("store \(what) failed: \(error)")
                return SocketAPIError(.internal, "store write failed: \(error); \(consequence)")
            }
            storageFailed("store \(what)", error)
            return SocketAPIError(.storageUnavailable, "state_dir \(config.config.stateDir) is \(problem): \(error); \(consequence)")
        }
    }

    /// An outbox write that failed: `storageUnavailable` (reported once) when the state directory
    /// is full, read-only or failing, else `failed` (logged).
    private func outboxFailure(_ what: String, _ error: StoreError) -> OutboxStoreFailure {
        guard let problem = error.storageProblem else {
            logger.error("\(what) failed: \(error)")
            return .failed(error.description)
        }
        storageFailed(what, error)
        return .storageUnavailable("state_dir \(config.config.stateDir) is \(problem): \(error)")
    }

    /// A write failed. When the state directory is full, read-only or failing, the first such
    /// failure (and a change of cause) is reported: an `error` log line, a `storage_unavailable`
    /// event and `status.last_error`; the following ones only at debug. The session stays up;
    /// durable ops answer `storage_unavailable` until a write succeeds again (``storeWritable()``).
    private func storageFailed(_ what: String, _ error: StoreError) {
        guard let problem = error.storageProblem else { return }
        guard storageProblem != problem else {
            logger.debug("\(what) failed: \(error)")
            return
        }
        storageProblem = problem
        let message = "state_dir \(config.config.stateDir) is \(problem): \(what) failed: \(error). "
            + "Durable work is refused (ops that store a message answer storage_unavailable; events that "
            + "cannot be journaled are dropped, each with a journal_write_failed event); the session stays up. "
            + "Free space in, or remount read-write, the state directory: the daemon resumes by itself"
        logger.error("\(message)")
        let now = Self.wallClockMs()
        machine.lastError = ("storage_unavailable", message, now)
        var data: [UInt8] = []
        JSONValue.object(["code": "storage_unavailable", "message": .string(message)]).serialize(into: &data)
        publish([PreparedEvent(name: "error", seq: nil, tsMs: now, data: data)])
    }

    /// A write succeeded: a storage problem reported before is over.
    private func storeWritable() {
        guard let problem = storageProblem else { return }
        storageProblem = nil
        logger.notice("state_dir \(config.config.stateDir) is writable again (it was \(problem)): durable work is accepted again")
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

    private func arm(_ kind: SessionTimer, atMs: Int64, now: Int64) {
        timerDeadlines[kind] = atMs
        let timer: LoopTimer
        if let existing = timers[kind] {
            timer = existing
        } else {
            // The handler reads the deadline from the driver when it runs.
            timer = LoopTimer(loop: loop) { [weak self] in
                guard let self else { return }
                self.assumeIsolated { $0.loopTimerFired(kind) }
            }
            timers[kind] = timer
        }
        timer.schedule(after: .milliseconds(max(0, atMs - now)))
    }

    private func disarm(_ kind: SessionTimer) {
        timerDeadlines[kind] = nil
        timers[kind]?.cancel()
    }

    /// The loop timer of `kind` fired: the machine's timer fires, unless the wall clock is still short
    /// of its deadline (the loop's monotonic clock and the wall clock may disagree by a millisecond).
    private func loopTimerFired(_ kind: SessionTimer) {
        guard let at = timerDeadlines[kind] else { return }
        let now = Self.wallClockMs()
        if at > now, let timer = timers[kind] {
            timer.schedule(after: .milliseconds(at - now))
            return
        }
        inbox.yield(.timer(kind, atMs: at))
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

    private func startWatchdog() {
        guard let interval = notifier.watchdogInterval else { return }
        let notifier = self.notifier
        let period = interval / 2
        let timer = LoopTimer(loop: loop) { [weak self] in
            try? notifier.watchdog()
            guard let self else { return }
            self.assumeIsolated { $0.watchdogTimer?.schedule(after: period) }
        }
        watchdogTimer = timer
        try? notifier.watchdog()
        timer.schedule(after: period)
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

extension SessionAction {
    /// The actions the driver performs by awaiting the store (``SessionDriver``'s `performStore`);
    /// every other one is performed at once.
    var awaitsStore: Bool {
        switch self {
        case .persistUser, .userAccepted, .persistProfile, .recordActivity, .clearUser, .persistPush, .persistLanguageSent, .storeOutbox, .storeLatest, .loadOutbox, .markSent, .dropOutbox:
            true
        default:
            false
        }
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

/// The session driver as the data API calls see it: their session requests go through the driver's
/// FIFO like a peer's, answered through a reply of their own.
struct DriverDataAPIHost: DataAPIHost {
    let driver: SessionDriver
    let inbox: DriverInbox
    let loop: EventLoop
    let cache: DataAPICache
    /// The user the call was made for: every request of it is for them.
    let user: String?
    /// Who made the call: its requests count in that peer's share (RequestShares).
    let owner: RequestOwner

    func session(_ request: SessionRequest, peer: UInt64) async -> Result<JSONValue, SocketAPIError> {
        await withCheckedContinuation { continuation in
            let reply = SocketAPIReply { continuation.resume(returning: $0) }
            if !inbox.yield(.apiSession(request, user: user, reply, peer: peer, owner: owner)) {
                reply.fail(SocketAPIError(.notReady, "the daemon is stopping"))
            }
        }
    }

    func labelSettings() async -> JSONObject? { await driver.labelSettings() }

    func publicProps() async -> JSONObject? { await driver.publicProps() }

    func httpGet(_ url: String) async throws(ConnectError) -> HTTPClientResponse {
        let options = await driver.dataAPIHTTPOptions()
        return try await HTTPClient.send(HTTPClientRequest(url: url), options: options, on: loop)
    }

    func httpPost(_ url: String, body: [UInt8], headers: HTTPHeaders) async throws(ConnectError) -> HTTPClientResponse {
        let options = await driver.dataAPIHTTPOptions()
        var headers = headers
        if headers["User-Agent"] == nil { headers.add(name: "User-Agent", value: "smarticod/\(SmarticoVersion.string)") }
        return try await HTTPClient.send(HTTPClientRequest(method: "POST", url: url, headers: headers, body: body), options: options, on: loop)
    }

    func labelKeys() async -> (key: String, brandKey: String?) { await driver.dataAPILabelKeys() }

    func labelImageDomain() async -> String { await driver.dataAPIImageDomain() }

    var userExtID: String? { user }

    func nowMs() -> Int64 { SessionDriver.wallClockMs() }
}
