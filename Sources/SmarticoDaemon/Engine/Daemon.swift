#if canImport(Glibc)
import Glibc
#endif
import Logging
import SmarticoProtocol
import Synchronization
import Transport

/// The whole daemon started from a ``ResolvedConfig``: the store in `state_dir`, one event loop,
/// the local socket server (or the socket systemd passed), the session driver, signals and
/// systemd notifications. `smarticod` calls ``runBlocking(config:configPath:environment:)``.
///
/// Start order: store → socket listening → `READY=1` → session (connect). Stop (SIGTERM/SIGINT):
/// `STOPPING=1`, the session closes gracefully (close 1000, ≤ 2 s for the server's close), the
/// socket server closes (its file is removed), the store closes; exit status 0.
public enum Daemon {
    /// Exit status when the daemon cannot start (store or socket unusable); the reason is logged.
    public static let startFailureExitCode: Int32 = 1
    /// Exit status when the state directory or the socket's directory cannot be created or
    /// written (daemon.md; the unit's `RestartPreventExitStatus`); the path is logged.
    public static let unusableDirectoryExitCode: Int32 = 73

    /// Logs to stderr at `level`, one line per call with untrusted text escaped
    /// (``DaemonLogHandler``); under systemd (`JOURNAL_STREAM` in `environment`) with syslog
    /// priority prefixes and no timestamps. All loggers share one level, changeable at run time.
    /// Call once, before anything logs.
    public static func bootstrapLogging(level: Logger.Level, environment: [String: String] = [:]) {
        let journal = !(environment["JOURNAL_STREAM"] ?? "").isEmpty
        let shared = DaemonLogLevel(level)
        LoggingSystem.bootstrap { label in
            DaemonLogHandler(label: label, journal: journal, level: shared)
        }
    }

    /// The signals the daemon handles (through a `signalfd` on its loop).
    static let handledSignals: [Int32] = [SIGTERM, SIGINT, SIGHUP]

    /// Runs the daemon until SIGTERM/SIGINT; returns the exit status. Blocks the calling thread
    /// (the main thread), never a thread of the cooperative pool. Call it before any other thread
    /// exists: it blocks SIGTERM/SIGINT/SIGHUP here so that every thread started later inherits
    /// the mask and the signals reach the daemon's `signalfd`.
    ///
    /// The daemon never touches Swift's global concurrent executor or libdispatch (whose worker
    /// threads keep a 1 Hz timer once started): its top-level task prefers the event loop
    /// (`Task(executorPreference:)`), the store has its own thread, and the calling thread waits on
    /// a semaphore (docs/transport.md, "No global executor").
    public static func runBlocking(config: ResolvedConfig, configPath: String?, environment: [String: String]) -> Int32 {
        LoopSignalSource.blockInCallingThread(handledSignals)
        signal(SIGPIPE, SIG_IGN)
        closeInheritedDescriptorsOnExec()
        ProcessMemory.useOneArena()
        // What a hash command leaves outside its process group (setsid, a double fork) comes back
        // to the daemon and is killed when its run ends (docs/security.md, "Hash commands"). Only
        // here, in the daemon's own process, which has no other children (not in ``run``, which
        // a host process with children of its own could call).
        if let failure = HashCommandRunner.adoptOrphans() {
            Logger(label: "smarticod").warning("cannot become a child subreaper (\(failure)): a user.hash_command descendant that leaves the command's process group can outlive its run")
        }
        guard let loop = makeLoop() else { return startFailureExitCode }
        let status = Mutex<Int32>(startFailureExitCode)
        let done = ThreadLatch()
        Task(executorPreference: loop) {
            let code = await run(config: config, configPath: configPath, environment: environment, loop: loop)
            status.withLock { $0 = code }
            done.open()
        }
        done.wait()
        loop.shutdownAndJoin()
        return status.withLock { $0 }
    }

    /// The daemon's event loop, or nil (logged) when the kernel refuses its epoll/eventfd.
    private static func makeLoop() -> EventLoop? {
        do {
            return try EventLoop(name: "smarticod")
        } catch {
            Logger(label: "smarticod").critical("cannot start the event loop: \(error)")
            return nil
        }
    }

    /// Runs the daemon in a host process, on a loop of its own, until `control` stops it (or
    /// SIGTERM/SIGINT, when the host blocks them in every thread as
    /// ``runBlocking(config:configPath:environment:)`` does; otherwise they keep their default
    /// action); returns the exit status.
    public static func run(config: ResolvedConfig, configPath: String?, environment: [String: String],
                           control: DaemonControl = DaemonControl()) async -> Int32 {
        signal(SIGPIPE, SIG_IGN)
        guard let loop = makeLoop() else { return startFailureExitCode }
        let code = await withTaskExecutorPreference(loop) {
            await run(config: config, configPath: configPath, environment: environment, loop: loop, control: control)
        }
        await loop.shutdown()
        return code
    }

    /// Marks every descriptor the daemon inherited beyond stdin/stdout/stderr close-on-exec, so
    /// the hash command does not inherit them: a launcher's descriptor held open by a hash
    /// command that outlives the daemon (Foundation's `Process` watches a socketpair) makes the
    /// daemon look alive after it exited. The daemon still uses them (sockets systemd passes).
    static func closeInheritedDescriptorsOnExec() {
        guard let dir = opendir("/proc/self/fd") else { return }
        var fds: [Int32] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if let fd = Int32(name), fd > 2 { fds.append(fd) }
        }
        closedir(dir)
        for fd in fds {
            let flags = fcntl(fd, F_GETFD)
            if flags >= 0 && flags & FD_CLOEXEC == 0 { _ = fcntl(fd, F_SETFD, flags | FD_CLOEXEC) }
        }
    }

    /// The daemon on `loop` (the caller shuts the loop down afterwards). Run it in a task that
    /// prefers `loop`, so no step lands on the global executor.
    static func run(config: ResolvedConfig, configPath: String?, environment: [String: String], loop: EventLoop,
                    control: DaemonControl = DaemonControl()) async -> Int32 {
        var logger = Logger(label: "smarticod")
        logger.logLevel = config.logLevel.loggerLevel
        logger.info("starting smarticod \(SmarticoVersion.string)")
        for line in config.summary { logger.info("\(line)") }
        let notifier = SystemdNotifier()

        // Signals are blocked (runBlocking): one that arrives during start-up stays pending in
        // the kernel until the watcher starts below.
        let signals = SignalWatcher(loop: loop)

        let store: SmarticoStore
        do {
            let opened = try await SmarticoStore.openMovingDamageAside(
                directory: config.config.stateDir, options: storeOptions(config), nowMs: SessionDriver.wallClockMs())
            store = opened.store
            if let damaged = opened.damaged { await reportDamage(damaged, store: store, logger: logger) }
        } catch {
            logger.critical("cannot open the store in state_dir \(config.config.stateDir): \(error)")
            // What a restart cannot fix (docs/store.md, "A damaged database"): the operator must act,
            // and systemd does not restart on 73. A full disk or an I/O error may pass: exit 1.
            switch error {
            case .fileSystem, .databaseTooNew, .developmentFormat, .notAStore, .walUnavailable, .unsafeStateDir:
                return unusableDirectoryExitCode
            default:
                return startFailureExitCode
            }
        }
        let server = SocketAPIServer(loop: loop, configuration: .init(config.config.socket), store: store)
        let driver = SessionDriver(
            config: config, configPath: configPath, environment: environment, loop: loop, store: store,
            server: server, notifier: notifier, logger: logger)
        control.attach(driver)
        let log = logger
        do {
            try await signals.start(
                terminate: { driver.terminate(signal: $0) },
                reload: {
                    log.info("SIGHUP: reloading \(configPath ?? "(no configuration file)")")
                    try? notifier.reloading()
                    driver.reload()
                })
        } catch {
            logger.critical("cannot watch signals: \(error)")
            await store.close()
            return startFailureExitCode
        }

        let endpoint: SocketAPIServer.Endpoint
        if let fd = SystemdActivation.listeningSocket(in: SystemdActivation.passedSockets()) {
            endpoint = .adopted(fd: fd)
        } else {
            let socket = config.config.socket
            endpoint = .path(socket.path, mode: socket.modeBits ?? 0o660, group: socket.group)
            let directory = DaemonConfig.directoryOf(socket.path)
            if let failure = await loop.blockingPool.run({ makeSocketDirectory(directory) }) {
                logger.critical("cannot create the socket's directory \(directory) for socket.path \(socket.path): \(failure); create it, or choose another socket.path")
                await signals.stop()
                await store.close()
                return unusableDirectoryExitCode
            }
        }
        do {
            let address = try await server.start(endpoint, handler: driver.socketHandler)
            let passed: Bool
            if case .adopted = endpoint { passed = true } else { passed = false }
            logger.info("listening on \(address)\(passed ? " (socket passed by systemd)" : "")")
        } catch {
            logger.critical("\(error)")
            await signals.stop()
            await server.close()
            await store.close()
            return startFailureExitCode
        }
        do { try notifier.ready(status: "listening; connecting") } catch {
            logger.warning("sd_notify READY=1 failed: \(error)")
        }

        let snapshot = await startSnapshot(config: config, store: store, pool: loop.blockingPool, logger: logger)
        let watchdog = SystemdWatchdog(loop: loop, notifier: notifier)
        let maintenance = JournalMaintenance(loop: loop, store: store, logger: logger)
        await watchdog.start()
        await maintenance.start()
        await driver.run(snapshot)
        await maintenance.stop()
        await watchdog.stop()

        await signals.stop()
        await server.close()
        await store.close()
        logger.info("stopped")
        return 0
    }

    /// Creates the missing components of `directory` with mode 0755 (clients must search it to
    /// reach the socket, whose own mode and group restrict who may connect); an existing one is
    /// left as it is, but must be writable and searchable. Returns why it failed
    /// (`path: strerror`), or nil. Blocking: run it on the blocking pool.
    static func makeSocketDirectory(_ directory: String) -> String? {
        var info = stat()
        if stat(directory, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFDIR else { return "\(directory) is not a directory" }
            // bind() creates the socket file in it: unwritable is as unusable as missing.
            if access(directory, W_OK | X_OK) != 0 { return "\(directory): \(String(cString: strerror(errno)))" }
            return nil
        }
        var prefix = directory.hasPrefix("/") ? "" : "."
        for component in directory.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + component
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                return "\(prefix): \(String(cString: strerror(errno)))"
            }
        }
        return nil
    }

    /// A damaged database was moved aside (docs/store.md, "A damaged database"): an `error` log line,
    /// and an `error` event (`store_damaged`) journaled as the fresh store's first event, so that
    /// subscribers connecting later (`since` 0, or an old cursor beyond the new `last_seq`) see it.
    static func reportDamage(_ damaged: DamagedStore, store: SmarticoStore, logger: Logger) async {
        let message = "the database \(damaged.path) was damaged (\(damaged.error)); it was moved aside to "
            + "\(damaged.movedTo) (with its -wal/-shm files) and a fresh store was created: the stored user, "
            + "outbox, journal and durable cursors start empty"
        logger.error("\(message)")
        let data = JSONValue.object([
            "code": "store_damaged", "message": .string(message), "moved_to": .string(damaged.movedTo),
        ]).serialized()
        do throws(StoreError) {
            _ = try await store.journal([JournalWrite(NewJournalEvent(name: "error", tsMs: SessionDriver.wallClockMs(), data: data))])
        } catch {
            logger.error("cannot journal the store_damaged event in the fresh store: \(error)")
        }
    }

    /// The store's limits from the configuration.
    static func storeOptions(_ config: ResolvedConfig) -> StoreOptions {
        StoreOptions(
            maxOutboxMessages: config.config.outbox.maxMessages,
            retentionEvents: config.config.journal.retentionEvents,
            retentionHours: config.config.journal.retentionHours,
            maxJournalBytes: config.config.journal.maxBytes)
    }

    /// What the machine needs at start: device id, `ua.fp`, the stored user and push data.
    static func startSnapshot(config: ResolvedConfig, store: SmarticoStore, pool: BlockingPool, logger: Logger) async -> SessionSnapshot {
        let deviceID = await store.deviceID()
        var machineID = await pool.run { MachineID.read() }
        if machineID == nil {
            // No /etc/machine-id: the random seed the store keeps stands in for it.
            machineID = (try? await store.fingerprintSeed()).map { $0.map { String($0, radix: 16) }.joined() }
        }
        var user: StoredUser? = nil
        var push: StoredPush? = nil
        var languages: [String: String] = [:]
        do {
            user = try await store.user()
            push = try await store.push()
            languages = try await store.languagesSent()
        } catch {
            logger.error("cannot read the stored user, push data and languages sent, starting without them: \(error)")
        }
        return SessionSnapshot(deviceID: deviceID, fingerprint: config.fingerprint(machineID: machineID ?? deviceID),
                               user: user, push: push, languagesSent: languages)
    }
}

/// What a host process running the daemon in itself (``Daemon/run(config:configPath:environment:control:)``)
/// has instead of signals: SIGTERM's stop and SIGHUP's reload, from any thread. A stop asked for
/// before the daemon is running stops it as soon as it is.
public final class DaemonControl: Sendable {
    private let state = Mutex<(driver: SessionDriver?, stopAsked: Bool)>((nil, false))

    public init() {}

    /// Stops the daemon as SIGTERM does.
    public func stop() {
        let driver = state.withLock { s -> SessionDriver? in
            s.stopAsked = true
            return s.driver
        }
        driver?.terminate(signal: SIGTERM)
    }

    /// Reloads the configuration file as SIGHUP does (nothing before the daemon runs).
    public func reload() {
        state.withLock { $0.driver }?.reload()
    }

    func attach(_ driver: SessionDriver) {
        let stopAsked = state.withLock { s -> Bool in
            s.driver = driver
            return s.stopAsked
        }
        if stopAsked { driver.terminate(signal: SIGTERM) }
    }
}

/// SIGTERM, SIGINT and SIGHUP read from a `signalfd` on the daemon's loop (``LoopSignalSource``);
/// the signals must be blocked in every thread (``Daemon/runBlocking(config:configPath:environment:)``).
/// Nothing reads them before ``start(terminate:reload:)``: one sent earlier waits in the kernel and
/// is handled then.
final class SignalWatcher:
    // `source` is only read and written on the loop thread (inside `loop.submit`).
    @unchecked Sendable
{
    let loop: EventLoop
    private var source: LoopSignalSource?

    init(loop: EventLoop) {
        self.loop = loop
    }

    /// Hands the signals to these handlers from now on, on the loop thread.
    func start(terminate: @escaping @Sendable (Int32) -> Void, reload: @escaping @Sendable () -> Void) async throws {
        try await loop.submit { [self] in
            source = try LoopSignalSource(loop: loop, signals: Daemon.handledSignals) { sig in
                if sig == SIGHUP { reload() } else { terminate(sig) }
            }
        }
    }

    /// Stops reading signals (they stay blocked: a late SIGTERM during shutdown is ignored).
    func stop() async {
        _ = try? await loop.submit { [self] in
            source?.cancel()
            source = nil
        }
    }
}
