import Logging
import Transport

/// The daemon's metrics (docs/operations.md, "Metrics"): the `metrics` op's snapshot, and
/// `metrics.textfile` rewritten every `metrics.interval_s` from a loop timer of its own (the
/// writes run on the blocking pool, ``MetricsTextfileWriter``).
///
/// The session's part (the machine's counters, the events published) comes from the driver; this
/// adds the store's queues, the server's peers, the daemon's start and its RSS (read on the pool).
actor MetricsService {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    private let store: SmarticoStore
    private let server: SocketAPIServer
    private let writer: MetricsTextfileWriter
    /// When the service was made (the daemon's start).
    private let startedAtMs = SessionDriver.wallClockMs()
    private var settings: DaemonConfig.Metrics
    /// Fires every `metrics.interval_s` while `metrics.textfile` is set.
    private var timer: LoopTimer?
    /// The session's part of the textfile's snapshots (nil: the session is gone, nothing is written).
    private var session: (@Sendable () async -> DaemonMetrics?)?

    init(loop: EventLoop, store: SmarticoStore, server: SocketAPIServer, settings: DaemonConfig.Metrics, logger: Logger) {
        self.loop = loop
        self.store = store
        self.server = server
        self.settings = settings
        writer = MetricsTextfileWriter(pool: loop.blockingPool, logger: logger)
    }

    /// Writes the textfile now (when one is set), then every interval until ``stop()``.
    func start(session: @escaping @Sendable () async -> DaemonMetrics?) {
        self.session = session
        timer = LoopTimer(loop: loop) { [weak self] in
            guard let self else { return }
            Task(executorPreference: self.loop) { await self.writeTextfile() }
        }
        if settings.textfile != nil { timer?.schedule(after: .zero) }
    }

    func stop() {
        timer?.invalidate()
        timer = nil
        session = nil
    }

    /// The daemon's metrics now: `session` (the driver's part) with the rest filled in.
    func snapshot(_ session: DaemonMetrics) async -> DaemonMetrics {
        var m = session
        let outbox = try? await store.outboxStatus()
        let httpQueue = try? await store.httpQueueStatus()
        m.residentBytes = await loop.blockingPool.run { DaemonMetrics.residentBytes() }
        (m.startMs, m.nowMs) = (startedAtMs, SessionDriver.wallClockMs())
        (m.outboxDepth, m.outboxOldestMs) = (outbox?.depth, outbox?.oldestMs)
        (m.httpQueueDepth, m.httpQueueOldestMs) = (httpQueue?.depth, httpQueue?.oldestMs)
        (m.subscribers, m.connections) = (server.subscriberCount, server.connectionCount)
        return m
    }

    /// A reload changed `metrics.*` (or not): a textfile no longer configured is removed (it
    /// would show a stale state forever); a new path or interval is written now, then every
    /// interval; none stops the timer.
    func apply(_ current: DaemonConfig.Metrics) {
        let previous = settings
        guard current != previous else { return }
        settings = current
        if let old = previous.textfile, old != current.textfile { writer.remove(old) }
        if current.textfile != nil {
            timer?.schedule(after: .zero)
        } else {
            timer?.cancel()
        }
    }

    private func writeTextfile() async {
        guard let path = settings.textfile, let session = await session?() else { return }
        let text = await snapshot(session).text
        // A reload while this was read moved or removed the file: the timer it armed writes the new one.
        guard settings.textfile == path, timer != nil else { return }
        writer.write(text, to: path)
        timer?.schedule(after: .seconds(settings.intervalS))
    }
}
