#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Logging
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

    /// Logs to stderr at `level` (swift-log's `StreamLogHandler`). Call once, before anything logs.
    public static func bootstrapLogging(level: Logger.Level) {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }

    /// Runs the daemon until SIGTERM/SIGINT; returns the exit status. Blocks the calling thread
    /// (the main thread), never a thread of the cooperative pool.
    public static func runBlocking(config: ResolvedConfig, configPath: String?, environment: [String: String]) -> Int32 {
        let status = Mutex<Int32>(startFailureExitCode)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            let code = await run(config: config, configPath: configPath, environment: environment)
            status.withLock { $0 = code }
            done.signal()
        }
        done.wait()
        return status.withLock { $0 }
    }

    /// Runs the daemon until SIGTERM/SIGINT; returns the exit status.
    public static func run(config: ResolvedConfig, configPath: String?, environment: [String: String]) async -> Int32 {
        var logger = Logger(label: "smarticod")
        logger.logLevel = config.logLevel.loggerLevel
        logger.info("starting smarticod \(SmarticoVersion.string)")
        for line in config.summary { logger.info("\(line)") }
        let notifier = SystemdNotifier()

        // Signals first, so a SIGTERM during start-up is not lost (it waits in the driver's FIFO).
        let signals = SignalWatcher()

        let store: SmarticoStore
        do {
            store = try await SmarticoStore.open(directory: config.config.stateDir, options: storeOptions(config))
        } catch {
            logger.critical("cannot open the store in state_dir \(config.config.stateDir): \(error)")
            return startFailureExitCode
        }
        let loop: EventLoop
        do {
            loop = try EventLoop(name: "smarticod")
        } catch {
            logger.critical("cannot start the event loop: \(error)")
            await store.close()
            return startFailureExitCode
        }
        let server = SocketAPIServer(loop: loop, configuration: .init(config.config.socket), store: store)
        let driver = SessionDriver(
            config: config, configPath: configPath, environment: environment, loop: loop, store: store,
            server: server, notifier: notifier, logger: logger)
        let log = logger
        signals.start(
            terminate: { driver.terminate(signal: $0) },
            reload: {
                log.info("SIGHUP: reloading \(configPath ?? "(no configuration file)")")
                try? notifier.reloading()
                driver.reload()
            })

        let endpoint: SocketAPIServer.Endpoint
        if let fd = SystemdActivation.listeningSocket(in: SystemdActivation.passedSockets()) {
            endpoint = .adopted(fd: fd)
        } else {
            let socket = config.config.socket
            endpoint = .path(socket.path, mode: socket.modeBits ?? 0o660, group: socket.group)
        }
        do {
            let address = try await server.start(endpoint, handler: driver.socketHandler)
            let passed: Bool
            if case .adopted = endpoint { passed = true } else { passed = false }
            logger.info("listening on \(address)\(passed ? " (socket passed by systemd)" : "")")
        } catch {
            logger.critical("\(error)")
            signals.stop()
            await server.close()
            await store.close()
            await loop.shutdown()
            return startFailureExitCode
        }
        do { try notifier.ready(status: "listening; connecting") } catch {
            logger.warning("sd_notify READY=1 failed: \(error)")
        }

        let snapshot = await startSnapshot(config: config, store: store, pool: loop.blockingPool, logger: logger)
        await driver.run(snapshot)

        signals.stop()
        await server.close()
        await store.close()
        await loop.shutdown()
        logger.info("stopped")
        return 0
    }

    /// The store's limits from the configuration.
    static func storeOptions(_ config: ResolvedConfig) -> StoreOptions {
        StoreOptions(
            maxOutboxMessages: config.config.outbox.maxMessages,
            retentionEvents: config.config.journal.retentionEvents,
            retentionHours: config.config.journal.retentionHours)
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
        do {
            user = try await store.user()
            push = try await store.push()
        } catch {
            logger.error("cannot read the stored user and push data, starting without them: \(error)")
        }
        return SessionSnapshot(deviceID: deviceID, fingerprint: config.fingerprint(machineID: machineID ?? deviceID),
                               user: user, push: push)
    }
}

/// SIGTERM, SIGINT and SIGHUP through Dispatch signal sources (the default actions are ignored,
/// the sources see the signals on their own queue); SIGPIPE is ignored. The sources exist from
/// `init`: a SIGTERM that arrives before ``start(terminate:reload:)`` is kept and delivered then.
final class SignalWatcher: Sendable {
    private struct State {
        var sources: [any DispatchSourceSignal] = []
        var terminate: (@Sendable (Int32) -> Void)?
        var reload: (@Sendable () -> Void)?
        var pendingTerminate: Int32?
    }

    private let queue = DispatchQueue(label: "smarticod.signals")
    private let state = Mutex(State())

    init() {
        signal(SIGPIPE, SIG_IGN)
        for sig in [SIGTERM, SIGINT, SIGHUP] { signal(sig, SIG_IGN) }
        let queue = self.queue
        state.withLock { state in
            for sig in [SIGTERM, SIGINT, SIGHUP] {
                let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
                source.setEventHandler { [weak self] in self?.deliver(sig) }
                source.resume()
                state.sources.append(source)
            }
        }
    }

    private func deliver(_ sig: Int32) {
        let action: (() -> Void)? = state.withLock { state in
            if sig == SIGHUP {
                guard let reload = state.reload else { return nil }
                return { reload() }
            }
            guard let terminate = state.terminate else {
                state.pendingTerminate = state.pendingTerminate ?? sig
                return nil
            }
            return { terminate(sig) }
        }
        action?()
    }

    /// Hands the signals to these handlers from now on (a SIGTERM/SIGINT seen before goes at once).
    func start(terminate: @escaping @Sendable (Int32) -> Void, reload: @escaping @Sendable () -> Void) {
        let pending = state.withLock { state -> Int32? in
            state.terminate = terminate
            state.reload = reload
            defer { state.pendingTerminate = nil }
            return state.pendingTerminate
        }
        if let pending { terminate(pending) }
    }

    func stop() {
        state.withLock { state in
            for source in state.sources { source.cancel() }
            state.sources = []
            state.terminate = nil
            state.reload = nil
        }
    }
}
