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
/// lets two `handle` calls interleave. The one other task on this actor, the journal's group
/// commit (``toSubscribers(_:)``), touches only the journal queue and the socket server.
actor SessionDriver {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    /// The socket API handler that feeds this driver.
    nonisolated let socketHandler: DriverSocketHandler

    // The properties marked `@exclusivity(unchecked)` are touched on every server message and never
    // accessed across a call that could reach the driver again (the machine is a value; timers and
    // commits are values; an actor property cannot be held inout across an await): not checked for
    // exclusive access at run time, each check having cost ~90 instructions and a thread-local lookup
    // (docs/benchmarks.md, "Exclusivity checks").
    @exclusivity(unchecked) private var machine: SessionMachine
    private var config: ResolvedConfig
    private let configPath: String?
    private let environment: [String: String]
    private let store: SmarticoStore
    private let server: SocketAPIServer
    private let notifier: SystemdNotifier
    private var logger: Logger {
        didSet { logLevel = logger.logLevel }
    }
    /// `logger.logLevel`, kept: reading it through the logger copied its handler (an existential,
    /// retained and released) at every check on the per-message path.
    private var logLevel: Logger.Level = .info

    /// The FIFO (``DriverInbox``).
    private let inbox: DriverInbox

    private var connectOptions: WebSocketConnectOptions
    /// Open connections by id (removed when their transport reports `.closed`).
    private var connections: [ConnectionID: WebSocketConnection] = [:]
    /// Connect attempts under way; an attempt removed from here (aborted, closed) is dropped when it opens.
    private var connecting: Set<ConnectionID> = []
    @exclusivity(unchecked) private var timers = SessionTimerSlots<LoopTimer>()
    @exclusivity(unchecked) private var timerDeadlines = SessionTimerSlots<Int64>()
    private var watchdogTimer: LoopTimer?
    private var maintenanceTimer: LoopTimer?
    /// Gives the store's page cache, the heap's free pages and the pages of code the daemon ran back after a burst
    /// (``ProcessMemory``): armed again every `trimAfterInputs` inputs and whenever the session becomes ready, it fires
    /// once the burst has been over for `trimDelay`.
    private var trimTimer: LoopTimer?
    @exclusivity(unchecked) private var inputsSinceTrimArmed = 0
    static let trimAfterInputs = 512
    static let trimDelay: Duration = .seconds(5)
    /// How often journal retention runs without appends.
    static let maintenanceInterval: Duration = .seconds(3600)
    private var replies: [SessionRequestID: SocketAPIReply] = [:]
    /// Outbox messages written but not yet known to be received, per connection (see ``Delivery``).
    @exclusivity(unchecked) private var deliveries: [ConnectionID: Delivery] = [:]
    /// Connections we asked to close (a clean close handshake then proves receipt).
    private var closingByUs: Set<ConnectionID> = []
    private var nextRequestID: UInt64 = 1
    @exclusivity(unchecked) private var stopped = false
    @exclusivity(unchecked) private var terminating = false

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
        logLevel = logger.logLevel
        machine = SessionMachine(config: config, environment: sessionEnvironment)
        connectOptions = config.webSocketConnectOptions
        let inbox = DriverInbox()
        self.inbox = inbox
        socketHandler = DriverSocketHandler(inbox: inbox)
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
            do throws(ConfigError) { result = .success(try ConfigLoader.loadResolved(path: path, environment: environment)) } catch {
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
        await process(.maintenance)
        await feed(.start(snapshot))
        var leftover: [DriverInput] = []
        var batch: [DriverInput] = []
        while !stopped, await inbox.next(into: &batch) {
            countInputs(batch.count)
            var trimRequested = false
            for i in batch.indices {
                // Each input is moved out of the batch (a payload-free case left in its place), not
                // copied: a copy retained its payload and the batch's clearing released it again.
                var input = DriverInput.maintenance
                swap(&input, &batch[i])
                if case .trimMemory = input { trimRequested = true }
                await process(input)
                if stopped {
                    leftover = Array(batch[(i + 1)...])
                    break
                }
            }
            updateReading()
            if trimRequested {
                // The burst is over: the batch storage kept for the next one goes too (up to two
                // arrays of 4,096 inputs, ~1 MB after the saturation benchmark), then the heap is
                // trimmed, with the pages the store's cache freed in `process`.
                batch = []
                inbox.releaseSpareStorage()
                ProcessMemory.returnFreePagesToSystem()
                // And the code and constant data the burst (or the start and the handshake) ran,
                // off the loop: unmapped, not lost; the idle loop's own pages come back on first use.
                loop.blockingPool.submit { ProcessMemory.releaseReadOnlyFilePages() }
            }
        }
        await journalDrained()
        leftover += inbox.finish()
        // Requests that arrived during the last steps get a proper answer, not the reply's
        // "dropped" fallback.
        for input in leftover {
            if case .call(_, let reply) = input { reply.fail(SocketAPIError(.notReady, "the daemon is stopping")) }
        }
        for timer in timers.values { timer.invalidate() }
        timers.removeAll()
        watchdogTimer?.invalidate()
        watchdogTimer = nil
        maintenanceTimer?.invalidate()
        maintenanceTimer = nil
        trimTimer?.invalidate()
        trimTimer = nil
        for connection in connections.values { connection.abort() }
        connections.removeAll()
        // A hash command still running (its answer would go nowhere) does not outlive the daemon.
        let killed = HashCommandRunner.killRunning()
        if killed > 0 { logger.info("stopping: killed \(killed) hash command(s) still running") }
        for (_, reply) in replies { reply.fail(SocketAPIError(.notReady, "the daemon is stopping")) }
        replies.removeAll()
    }

    private func process(_ input: consuming DriverInput) async {
        // Consumed: the payload moves into the case's bindings instead of being retained for them.
        switch consume input {
        case .session(let sessionInput):
            if case .received(let conn, let bytes) = sessionInput, deliveries[conn] != nil, Self.isPong(bytes) {
                await pongReceived(on: conn, now: Self.wallClockMs())
            }
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
            let received = { [weak connection, weak self] (bytes: [UInt8]) in
                if let self, self.receivedOnLoop(conn, bytes) { return }
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
            // Only a close handshake we started proves the server read what we wrote before it.
            await settleDeliveries(of: conn, received: closingByUs.remove(conn) != nil && clean)
            logger.debug("connection closed", metadata: ["conn": "\(conn)", "code": "\(code.map(String.init) ?? "none")", "reason": "\(reason)"])
            await feed(.closed(conn, code: code, reason: reason))
        case .perform(var actions, let now):
            // The actions of a server message handled in place that include store work.
            var results: [SessionInput] = []
            await perform(&actions, now: now, results: &results)
            await feedResults(&results)
        case .call(let call, let reply):
            await answer(call, reply)
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
                config = newConfig
                connectOptions = newConfig.webSocketConnectOptions
                logger.logLevel = newConfig.logLevel.loggerLevel
                await store.updateOptions(Daemon.storeOptions(newConfig))
                await feed(.reload(newConfig))
                notify { try $0.ready(status: "configuration reloaded; \(self.machine.state.rawValue)") }
            }
        }
    }

    private func answer(_ call: SocketAPICall, _ reply: SocketAPIReply) async {
        switch call {
        case .status:
            let outbox = try? await store.outboxStatus()
            let journal = try? await store.journalBounds()
            reply.succeed(machine.status(outbox: outbox, journal: journal, subscribers: server.subscriberCount))
        case .session(let request):
            let id = SessionRequestID(nextRequestID)
            nextRequestID += 1
            replies[id] = reply
            await feed(.request(id, request))
        case .hello:
            reply.succeed(SocketAPIServer.helloResult(version: SmarticoVersion.string, state: machine.state))
        case .pushReport:
            reply.fail(SocketAPIError(.notImplemented, "push_report is not implemented in this version of smarticod"))
        }
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

    /// One `machine.handle` and its actions, in order. Only the store's actions are awaited: an
    /// `await` for every action (timers, events, sends: all of an engagement's) cost an async frame
    /// and a copy of the action per event.
    private func handle(_ input: SessionInput, now: Int64, results: inout [SessionInput]) async {
        if logLevel <= .trace { logger.trace("input \(input)") }
        var actions = takeSpareActions()
        machine.handle(input, now: now, into: &actions)
        await perform(&actions, now: now, results: &results)
    }

    /// Performs `actions` in order (emptying the array and keeping it for the next input), awaiting
    /// the store's.
    private func perform(_ actions: inout [SessionAction], now: Int64, results: inout [SessionInput]) async {
        var batch = Batch()
        for i in actions.indices {
            // Moved out (a payload-free case left in its place), not copied: reading `actions[i]`
            // copied the action, retaining its payload, and released it again.
            var action = SessionAction.clearUser
            swap(&action, &actions[i])
            if action.awaitsStore {
                await performStore(action, results: &results)
            } else {
                performNow(consume action, now: now, batch: &batch)
            }
        }
        sendBarrierIfNeeded(now: now)
        keepSpareActions(&actions)
    }

    /// The array of the last input's actions, reused (`SessionMachine.handle(_:now:into:)`); taken,
    /// so an input handled while another awaits the store gets one of its own.
    private func takeSpareActions() -> [SessionAction] {
        var actions: [SessionAction] = []
        swap(&actions, &spareActions)
        return actions
    }

    private func keepSpareActions(_ actions: inout [SessionAction]) {
        actions.removeAll(keepingCapacity: true)
        if actions.capacity <= Self.maxSpareActions { swap(&actions, &spareActions) }
    }

    // MARK: Handled in place

    /// True while an input is handled in place (``handleReceivedInPlace(_:_:)``): a transport event
    /// raised meanwhile goes through the FIFO.
    @exclusivity(unchecked) private var handlingInPlace = false

    /// A server message, handled at once on the loop thread as the transport hands it over, when
    /// the FIFO is idle: the driver waits in the inbox with nothing queued, so no input is ahead of
    /// this one and none is half done. Everything else — and this too when the driver is busy, the
    /// inbox holds inputs, or the message is a PONG that may prove outbox messages received (that
    /// awaits the store) — goes through the inbox as before. Handled in place, a message costs no
    /// queueing, no task switch and no async frames (docs/session.md, "Handled in place").
    /// Called on the loop thread (the transport's handler); false: queue it.
    nonisolated func receivedOnLoop(_ conn: ConnectionID, _ bytes: [UInt8]) -> Bool {
        assumeIsolated { driver in
            driver.anticipateCommit(bytes.count)
            return driver.handleReceivedInPlace(conn, bytes)
        }
    }

    /// A message this size is most likely one the machine journals (an engagement, a mini-game, a
    /// deep link; pings and most answers are smaller): when no commit is in flight, the store's
    /// thread is woken while it is decoded, not after (docs/store.md, "Anticipation"). With a commit
    /// in flight the next one follows it on a thread that is awake, and a woken thread would only
    /// spin: under load (a backlog read in 64 KiB reads of hundreds of messages, commits back to
    /// back) that spinning was ~3 % of the daemon's CPU.
    private func anticipateCommit(_ messageBytes: Int) {
        _ = messageBytes  // the store's executor no longer anticipates jobs
    }

    private func handleReceivedInPlace(_ conn: ConnectionID, _ bytes: [UInt8]) -> Bool {
        guard !handlingInPlace, !terminating, !stopped, inbox.isIdle else { return false }
        if deliveries[conn] != nil, Self.isPong(bytes) { return false }
        handlingInPlace = true
        defer { handlingInPlace = false }
        countInputs(1)
        let now = Self.wallClockMs()
        let input = SessionInput.received(conn, bytes)
        if logLevel <= .trace { logger.trace("input \(input)") }
        var actions = takeSpareActions()
        machine.handle(input, now: now, into: &actions)
        if actions.contains(where: \.awaitsStore) {
            // Store work is awaited, one action after another, by the FIFO: the actions go first in
            // line, and what arrives meanwhile queues behind them (the inbox is no longer empty).
            inbox.yield(.perform(actions, now: now))
            return true
        }
        var batch = Batch()
        for i in actions.indices {
            var action = SessionAction.clearUser
            swap(&action, &actions[i])
            performNow(consume action, now: now, batch: &batch)
        }
        sendBarrierIfNeeded(now: now)
        keepSpareActions(&actions)
        if journalBacklogBytes >= Self.pauseReadingBacklogBytes { updateReading() }
        return true
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

    /// The storage of the last input's actions, kept for the next one (``handle(_:now:results:)``).
    @exclusivity(unchecked) private var spareActions: [SessionAction] = []
    /// The largest action array kept: a reconnect's outbox flush can make hundreds.
    static let maxSpareActions = 64

    /// What one `handle` call's actions did, for its `.markSent`.
    private struct Batch {
        /// uuids whose write failed: their `.markSent` must not remove them.
        var unsent: Set<String> = []
        /// The connection the batch's messages were written on.
        var conn: ConnectionID?
    }

    /// Performs an action that does not wait for the store (``SessionAction/awaitsStore`` false).
    private func performNow(_ action: consuming SessionAction, now: Int64, batch: inout Batch) {
        switch consume action {
        case .schedule(let kind, let atMs):
            arm(kind, atMs: atMs, now: now)
        case .cancel(let kind):
            disarm(kind)
        case .emit(let event):
            emit(event, now: now)
        case .journalOnce(let user, let uid, let event):
            let body = Self.body(of: event)
            toSubscribers(.journaled(name: event.name, body: body, tsMs: now,
                                     write: JournalWrite(NewJournalEvent(name: event.name, tsMs: now, body: body), once: uid, user: user),
                                     loggedUID: logLevel <= .debug ? uid : nil))
        case .connect(let conn, let url):
            connect(conn, url: url)
        case .send(let conn, let message):
            guard let connection = connections[conn] else {
                batch.unsent.insert(message.uuid)
                logger.debug("not sent, connection gone", metadata: ["conn": "\(conn)", "message": "\(message)"])
                return
            }
            do {
                try connection.send(text: String(decoding: message.bytes, as: UTF8.self))
                batch.conn = conn
                if message.cid == 1 { deliveries[conn, default: Delivery()].pingsSent += 1 }
                if logLevel <= .debug { logger.debug("sent \(message)", metadata: ["conn": "\(conn)"]) }
            } catch {
                batch.unsent.insert(message.uuid)
                logger.debug("not sent: \(error)", metadata: ["conn": "\(conn)", "message": "\(message)"])
            }
        case .close(let conn, let code, let reason):
            if connecting.remove(conn) != nil { return }
            if connections[conn] != nil { closingByUs.insert(conn) }
            do {
                try connections[conn]?.close(code: WebSocketCloseCode(UInt16(clamping: code)), reason: reason)
            } catch {
                connections[conn]?.abort()
            }
        case .abort(let conn):
            if connecting.remove(conn) != nil { return }
            // Nothing more can be proven received on it: its unconfirmed messages go back to the outbox.
            deliveries[conn] = nil
            connections[conn]?.abort()
        case .runHashCommand(let token, let argv, let user):
            let inbox = self.inbox
            // The runner spawns and waits on its own thread; this only awaits its answer.
            HashCommandRunner.start(argv: argv, user: user) { outcome in
                inbox.yield(.session(.hashResult(token: token, outcome)))
            }
        case .markSent(let uuids):
            let sent = batch.unsent.isEmpty ? uuids : uuids.filter { !batch.unsent.contains($0) }
            if sent.count != uuids.count {
                logger.info("\(uuids.count - sent.count) message(s) stay in the outbox: the connection closed before they were written")
            }
            // Written is not received: they leave the outbox when the server proves it read them.
            if let conn = batch.conn, connections[conn] != nil, !sent.isEmpty {
                deliveries[conn, default: Delivery()].unconfirmed += sent
            }
        case .reply(let id, let result):
            replies.removeValue(forKey: id)?.complete(result)
        case .statusChanged(let state):
            socketHandler.state.withLock { $0 = state }
            notify { try $0.status(state.rawValue) }
            // Ready: the start-up and the handshake are done; trim once the session is quiet. The
            // mappings seen now are the ones that trim may drop pages of (ProcessMemory).
            if state == .ready {
                trimTimer?.schedule(after: Self.trimDelay)
                loop.blockingPool.submit { ProcessMemory.noteReadOnlyFileMappings() }
            }
        case .stopped:
            stopped = true
            logger.info("session stopped")
        case .persistUser, .persistProfile, .recordActivity, .clearUser, .persistPush, .storeOutbox, .storeLatest, .loadOutbox:
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
        case .clearUser:
            await storeWork("clearUser") { try await $0.clearUser() }
        case .persistPush(let push):
            await storeWork("setPush") { try await $0.setPush(push) }
        case .storeOutbox(let entry):
            let failure: OutboxStoreFailure?
            do throws(StoreError) {
                try await store.enqueue(uuid: entry.uuid, cid: entry.cid, kind: .socket, payload: entry.bytes, createdMs: entry.createdMs)
                failure = nil
            } catch {
                if case .queueFull(let max) = error { failure = .queueFull(max: max) } else {
                    logger.error("outbox write failed: \(error)")
                    failure = .failed(error.description)
                }
            }
            results.append(.outboxStored(uuid: entry.uuid, failure: failure))
        case .storeLatest(let slot, let entry):
            let failure: OutboxStoreFailure?
            do throws(StoreError) {
                try await store.putLatest(slot: slot, uuid: entry.uuid, cid: entry.cid, payload: entry.bytes, createdMs: entry.createdMs)
                failure = nil
            } catch {
                logger.error("outbox write failed: \(error)")
                failure = .failed(error.description)
            }
            results.append(.outboxStored(uuid: entry.uuid, failure: failure))
        case .loadOutbox(let limit):
            var entries: [OutboxEntry] = []
            // Messages written on a live connection and awaiting proof of receipt are still in the
            // store but must not be sent again on it.
            var inFlight: Set<String> = []
            for delivery in deliveries.values { inFlight.formUnion(delivery.allUUIDs) }
            do throws(StoreError) {
                let waiting = try await store.peek(limit: limit + inFlight.count, kind: .socket)
                entries = waiting.lazy.filter { !inFlight.contains($0.uuid) }.prefix(limit).map {
                    OutboxEntry(uuid: $0.uuid, cid: $0.cid, bytes: $0.payload, createdMs: $0.createdMs)
                }
                if waiting.count < limit + inFlight.count {
                    entries += try await store.latestMessages().filter { !inFlight.contains($0.uuid) }.map {
                        OutboxEntry(uuid: $0.uuid, cid: $0.cid, bytes: $0.payload, createdMs: $0.createdMs)
                    }
                }
            } catch {
                logger.error("outbox read failed: \(error)")
                entries = []
            }
            results.append(.outboxLoaded(entries))
        default:
            preconditionFailure("not a store action: performNow")
        }
    }

    // MARK: Proof of receipt

    /// The outbox messages of one connection that were written but not yet proven received.
    ///
    /// A written message can still be lost: when the daemon dies (kill -9) with unread server
    /// data in its receive buffer, the kernel resets the connection and the server may drop
    /// what it had not read yet. So a message leaves the outbox only when the server proved it
    /// read it: it answered a PING written after the message (the server answers PINGs in
    /// order, one PONG each), or it completed the close handshake we started after it. Until
    /// then a crash or a dead connection sends it again, with the same uuid.
    struct Delivery {
        /// PINGs written on this connection (the machine's keepalive and our barriers).
        var pingsSent = 0
        /// PONGs received on it.
        var pongsReceived = 0
        /// Written since the last barrier PING.
        var unconfirmed: [String] = []
        /// Barrier PINGs in flight: the PING's number and the messages written before it.
        var barriers: [(ping: Int, uuids: [String])] = []

        var allUUIDs: [String] { unconfirmed + barriers.flatMap(\.uuids) }
    }

    /// After a batch: one barrier PING per connection at a time, after its unconfirmed messages.
    private func sendBarrierIfNeeded(now: Int64) {
        for (conn, delivery) in deliveries where !delivery.unconfirmed.isEmpty && delivery.barriers.isEmpty {
            guard let connection = connections[conn] else { continue }
            let uuid = UUIDv4.random().string
            let ping: JSONObject = ["cid": 1, "ts": .number(now), "uuid": .string(uuid)]
            do {
                try connection.send(text: String(decoding: ping.serialized(), as: UTF8.self))
            } catch {
                continue
            }
            var d = delivery
            d.pingsSent += 1
            d.barriers.append((d.pingsSent, d.unconfirmed))
            d.unconfirmed = []
            deliveries[conn] = d
        }
    }

    /// A PONG on `conn`: the barriers it answers are received; their messages leave the outbox.
    private func pongReceived(on conn: ConnectionID, now: Int64) async {
        guard var d = deliveries[conn] else { return }
        d.pongsReceived += 1
        var confirmed: [String] = []
        while let first = d.barriers.first, first.ping <= d.pongsReceived {
            confirmed += first.uuids
            d.barriers.removeFirst()
        }
        deliveries[conn] = d
        if !confirmed.isEmpty {
            await storeWork("markSent") { _ = try await $0.markSent(confirmed) }
            sendBarrierIfNeeded(now: now)
        }
    }

    /// `conn` ended: a clean close we started proves receipt; otherwise its unconfirmed messages
    /// stay in the outbox for the next connection.
    private func settleDeliveries(of conn: ConnectionID, received: Bool) async {
        guard let d = deliveries.removeValue(forKey: conn) else { return }
        let uuids = d.allUUIDs
        guard !uuids.isEmpty else { return }
        if received {
            await storeWork("markSent") { _ = try await $0.markSent(uuids) }
        } else {
            logger.info("\(uuids.count) message(s) written but not proven received stay in the outbox (sent again, same uuid)")
        }
    }

    /// Server messages from this size up announce a journal commit to the store's thread.
    static let anticipatedMessageBytes = 128

    /// A PONG (cid 2)? PONGs are small; bigger messages are not parsed.
    static func isPong(_ bytes: [UInt8]) -> Bool {
        guard bytes.count <= 512, case .object(let o)? = try? JSONValue(parsing: bytes) else { return false }
        return o["cid"]?.int64Value == 2
    }

    private func emit(_ event: DaemonEvent, now: Int64) {
        if event.name == "session" || event.name == "error", logLevel <= .info {
            logger.info("\(event.name): \(Self.summary(event.data))")
        }
        let body = Self.body(of: event)
        if event.journaled {
            toSubscribers(.journaled(name: event.name, body: body, tsMs: now,
                                     write: JournalWrite(NewJournalEvent(name: event.name, tsMs: now, body: body)), loggedUID: nil))
        } else {
            toSubscribers(.published(name: event.name, body: body, tsMs: now))
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

    // MARK: Group commit

    /// An event on its way to subscribers; a journaled one waits for its commit.
    private struct Outgoing {
        var name: String
        /// The event's `data`, serialized once (an engagement's kept as the 110's bytes): journaled,
        /// and appended to each subscriber's line from these bytes.
        var body: EventBody
        var tsMs: Int64
        /// The journal row; nil: not journaled (published in order with the journaled events around
        /// it). Moved to the store when its commit starts (`takeWrites`).
        var write: JournalWrite?
        /// Whether the event is journaled (its `write` may be at the store already).
        let journaled: Bool
        /// The engagement uid for the `repeat dropped` debug line (kept only when it is logged).
        let loggedUID: String?

        /// A journaled event. (Deriving `journaled` from `write` in one initializer copied the row.)
        static func journaled(name: String, body: EventBody, tsMs: Int64, write: JournalWrite, loggedUID: String?) -> Outgoing {
            Outgoing(name: name, body: body, tsMs: tsMs, write: write, journaled: true, loggedUID: loggedUID)
        }

        /// An event published without being journaled.
        static func published(name: String, body: EventBody, tsMs: Int64) -> Outgoing {
            Outgoing(name: name, body: body, tsMs: tsMs, write: nil, journaled: false, loggedUID: nil)
        }

        /// Moves the journal rows out of `events`, in order, for the store (on its thread, as the
        /// commit starts). Copied instead, each row's data and strings were retained there and
        /// released again after the commit: reference counts on the event loop's objects from the
        /// other thread, ~8 of them an engagement.
        static func takeWrites(_ events: inout [Outgoing]) -> [JournalWrite] {
            var writes: [JournalWrite] = []
            writes.reserveCapacity(events.count)
            for i in events.indices {
                if let write = events[i].write.take() { writes.append(write) }
            }
            return writes
        }
    }

    /// The group commit's order and batching (CommitPipeline.swift): two commits may be at the
    /// store at once, so one that waited for the disk is already queued there when the one before it
    /// ends.
    @exclusivity(unchecked) private var commits = CommitPipeline<Outgoing, CommitOutcome>(depth: 2) { $0.journaled }
    /// What the store said of a commit: a seq (or nil for a repeat) per write, or why it failed.
    private typealias CommitOutcome = (results: [JournalSeq?], failure: StoreError?)
    private var journalIdleWaiters: [CheckedContinuation<Void, Never>] = []

    /// Publishes `event` in emission order. A journaled event is shown to subscribers only after
    /// its commit reached the disk (socket-api.md); an event emitted while commits are in flight —
    /// journaled or not, so the order holds — waits for them. The machine never waits for the
    /// journal: no result of it feeds back.
    private func toSubscribers(_ event: consuming Outgoing) {
        let bytes = event.body.lineCount
        let steps = commits.emitted(event)
        if case .publishNow? = steps.first {} else { journalBacklogBytes += bytes }
        run(steps)
    }

    /// Bytes of the events queued or in flight behind journal commits.
    @exclusivity(unchecked) private var journalBacklogBytes = 0

    /// Backpressure on the server (docs/session.md, "Backpressure"): the socket stops being read
    /// when this many bytes of server messages wait in the inbox, or this many bytes of events
    /// wait for the journal (a slow disk); it is read again once both are below the resume marks.
    static let pauseReadingInboxBytes = 1 << 20
    static let pauseReadingBacklogBytes = 2 << 20
    static let resumeReadingInboxBytes = 256 << 10
    static let resumeReadingBacklogBytes = 512 << 10

    /// Pauses or resumes reading the server by the backlog; after every batch of inputs and
    /// every commit's publication.
    private func updateReading() {
        if journalBacklogBytes >= Self.pauseReadingBacklogBytes {
            for (conn, connection) in connections where !connection.isReadingPaused {
                connection.pauseReading()
                logger.debug("server reading paused", metadata: ["conn": "\(conn)", "journal_backlog_bytes": "\(journalBacklogBytes)"])
            }
        } else if journalBacklogBytes < Self.resumeReadingBacklogBytes
                    && inbox.queuedMessageBytes < Self.resumeReadingInboxBytes {
            for (conn, connection) in connections where connection.isReadingPaused {
                connection.resumeReading()
                logger.debug("server reading resumed", metadata: ["conn": "\(conn)"])
            }
        }
    }

    private func run(_ steps: [CommitPipeline<Outgoing, CommitOutcome>.Step]) {
        for step in steps {
            switch step {
            case .publishNow(let event):
                server.publish(name: event.name, body: event.body, seq: nil, tsMs: event.tsMs)
            case .submit(let ticket, let batch):
                commit(batch, ticket: ticket)
            case .publishCommitted(_, let batch, let outcome):
                for event in batch { journalBacklogBytes -= event.body.lineCount }
                publishCommitted(batch, results: outcome.results, failure: outcome.failure)
            case .publishWaiting(let events):
                for event in events { journalBacklogBytes -= event.body.lineCount }
                server.publish(events.map { PreparedEvent(name: $0.name, seq: nil, tsMs: $0.tsMs, body: $0.body) })
            }
        }
        if commits.isIdle && !journalIdleWaiters.isEmpty {
            let waiters = journalIdleWaiters
            journalIdleWaiters = []
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Hands the commit to the store's thread at once (its FIFO, in ticket order: commits are
    /// submitted in the order they are made), and its outcome back to the loop. No task: a `Task`
    /// made here started only once the loop was free again — after the whole read being handled,
    /// hundreds of messages under load, while the store's thread, woken for it (anticipation),
    /// spun idle — and cost a task and two executor hops per commit.
    private func commit(_ batch: CommitBatch<Outgoing>, ticket: Int) {
        let store = self.store
        let loop = self.loop
        store.executor.submit { [weak self] in
            // The batch is sealed on the store's thread as the commit starts: it holds every event
            // emitted while the commit before it ran (CommitPipeline).
            let outcome: CommitOutcome = store.assumeIsolated { store in
                do throws(StoreError) {
                    return (try store.journal(batch.seal { Outgoing.takeWrites(&$0) }), nil)
                } catch {
                    return ([], error)
                }
            }
            _ = loop.execute { [weak self] in
                self?.assumeIsolated { $0.committed(ticket: ticket, outcome: outcome) }
            }
        }
    }

    private func committed(ticket: Int, outcome: CommitOutcome) {
        run(commits.committed(ticket: ticket, outcome: outcome))
        updateReading()
    }

    /// The lines of a committed batch, in order, as one task on the loop.
    private func publishCommitted(_ batch: [Outgoing], results: [JournalSeq?], failure: StoreError?) {
        var next = results.makeIterator()
        var ready: [PreparedEvent] = []
        ready.reserveCapacity(batch.count)
        // Borrowed through the buffer pointer: a copy of each event retained and released its fields.
        batch.withUnsafeBufferPointer { batch in
            for i in batch.indices {
                guard batch[i].journaled else {
                    ready.append(PreparedEvent(name: batch[i].name, seq: nil, tsMs: batch[i].tsMs, body: batch[i].body))
                    continue
                }
                if let failure {
                    server.publish(ready)
                    ready = []
                    journalFailed(batch[i].name, failure, now: batch[i].tsMs)
                } else if let seq = next.next() ?? nil {
                    ready.append(PreparedEvent(name: batch[i].name, seq: seq, tsMs: batch[i].tsMs, body: batch[i].body))
                } else if logLevel <= .debug {
                    logger.debug("repeat dropped", metadata: ["event": "\(batch[i].name)", "engagement_uid": "\(batch[i].loggedUID ?? "")"])
                }
            }
        }
        server.publish(ready)
    }

    /// Returns when every emitted event has been committed and published.
    private func journalDrained() async {
        guard !commits.isIdle else { return }
        await withCheckedContinuation { journalIdleWaiters.append($0) }
    }

    /// An event that could not be journaled is not shown to anyone (it would not be replayable);
    /// subscribers get an `error` event saying so.
    private func journalFailed(_ name: String, _ error: StoreError, now: Int64) {
        logger.error("journal write failed, \(name) event dropped: \(error)")
        server.publish(DaemonEvent(name: "error", data: .object([
            "code": "journal_write_failed",
            "message": .string("a \(name) event could not be journaled and was dropped: \(error)"),
        ]), journaled: false), seq: nil, tsMs: now)
    }

    private func storeWork(_ what: String, _ body: (SmarticoStore) async throws -> Void) async {
        do { try await body(store) } catch {
            logger.error("store \(what) failed: \(error)")
        }
    }

    private func connect(_ conn: ConnectionID, url: String) {
        // The machine has given up every other connection: what they wrote without proof goes
        // back to the outbox now, so the new connection's flush sends it first, in order (a close
        // handshake still running on an old one could otherwise hold it past that flush).
        for (old, delivery) in deliveries where old != conn && !delivery.allUUIDs.isEmpty {
            logger.info("\(delivery.allUUIDs.count) message(s) written on \(old) but not proven received stay in the outbox (sent again, same uuid)")
        }
        deliveries = [:]
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

    /// The deadline each session timer's `LoopTimer` is armed for (the machine's clock, ms); nil when
    /// it is not armed.
    @exclusivity(unchecked) private var timerArmedAt = SessionTimerSlots<Int64>()
    /// A deadline moved later by less than this keeps the loop timer armed for the earlier one:
    /// every server message pushes the keepalive deadline back by a few microseconds, and re-arming
    /// the loop timer for each was ~1 % of the loop thread under load. When the earlier deadline
    /// comes, the timer arms itself again for the rest (`loopTimerFired`). Bigger moves (an idle
    /// session's, ~30 s at each server PING) re-arm at once, so the idle daemon wakes no more often.
    static let lazyRearmMs: Int64 = 1_000

    private func arm(_ kind: SessionTimer, atMs: Int64, now: Int64) {
        timerDeadlines[kind] = atMs
        if let armed = timerArmedAt[kind], armed <= atMs, atMs - armed < Self.lazyRearmMs { return }
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
        timerArmedAt[kind] = atMs
        timer.schedule(after: .milliseconds(max(0, atMs - now)))
    }

    private func disarm(_ kind: SessionTimer) {
        timerDeadlines[kind] = nil
        timerArmedAt[kind] = nil
        timers[kind]?.cancel()
    }

    /// The loop timer of `kind` fired: the machine's timer fires, unless its deadline moved later
    /// meanwhile (`lazyRearmMs`), when the loop timer is armed again for it.
    private func loopTimerFired(_ kind: SessionTimer) {
        timerArmedAt[kind] = nil
        guard let at = timerDeadlines[kind] else { return }
        let now = Self.wallClockMs()
        if at > now, let timer = timers[kind] {
            timerArmedAt[kind] = at
            timer.schedule(after: .milliseconds(at - now))
            return
        }
        inbox.yield(.timer(kind, atMs: at))
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
            case .string(let s): parts.append("\(key)=\(s)")
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
        case .persistUser, .persistProfile, .recordActivity, .clearUser, .persistPush, .storeOutbox, .storeLatest, .loadOutbox:
            true
        default:
            false
        }
    }
}
