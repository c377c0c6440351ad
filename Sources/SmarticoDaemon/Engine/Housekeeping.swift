import Logging
import Transport

/// Journal retention by age (appends apply it too, but an idle journal has none): once at start,
/// before the session, then every ``interval`` from a loop timer of its own.
actor JournalMaintenance {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    static let interval: Duration = .seconds(3600)
    private let store: SmarticoStore
    private let logger: Logger
    private var timer: LoopTimer?

    init(loop: EventLoop, store: SmarticoStore, logger: Logger) {
        self.loop = loop
        self.store = store
        self.logger = logger
    }

    /// Applies retention now, then every ``interval`` until ``stop()``.
    func start() async {
        timer = LoopTimer(loop: loop) { [weak self] in
            guard let self else { return }
            Task(executorPreference: self.loop) { await self.applyRetention() }
        }
        await applyRetention()
    }

    func stop() {
        timer?.invalidate()
        timer = nil
    }

    private func applyRetention() async {
        do throws(StoreError) {
            let removed = try await store.applyRetention(nowMs: SessionDriver.wallClockMs())
            if removed > 0 { logger.info("journal retention removed \(removed) event(s)") }
        } catch {
            logger.error("journal retention failed: \(error)")
        }
        timer?.schedule(after: Self.interval)
    }
}

/// `WATCHDOG=1` every half of systemd's `WatchdogSec` (none asked: nothing), from a loop timer of
/// its own: a loop that stops turning stops the pings.
actor SystemdWatchdog {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    private let notifier: SystemdNotifier
    private var timer: LoopTimer?

    init(loop: EventLoop, notifier: SystemdNotifier) {
        self.loop = loop
        self.notifier = notifier
    }

    func start() {
        guard let interval = notifier.watchdogInterval else { return }
        let notifier = self.notifier
        let period = interval / 2
        let timer = LoopTimer(loop: loop) { [weak self] in
            try? notifier.watchdog()
            self?.assumeIsolated { $0.timer?.schedule(after: period) }
        }
        self.timer = timer
        try? notifier.watchdog()
        timer.schedule(after: period)
    }

    func stop() {
        timer?.invalidate()
        timer = nil
    }
}

/// Gives memory back once a burst is over (``ProcessMemory``): the store's page cache, then the
/// heap's free pages. Its timer is armed after every ``afterInputs`` inputs the driver handles,
/// whenever the session becomes ready (the start-up and the handshake are done) and when a local
/// peer with a large queue goes away; once armed, every batch of inputs puts it off again, so it
/// fires only after ``delay`` without any input.
///
/// An actor on the daemon's loop, like ``SessionDriver``: its timer is a loop timer, and the heap
/// trim runs on the loop between the driver's steps — only when nothing arrives, never in the
/// middle of a stream of events (where it held the loop and, by shrinking the store's page cache,
/// the next commits: issue 42).
actor MemoryTrimmer {
    nonisolated let loop: EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    static let afterInputs = 512
    static let delay: Duration = .seconds(5)
    private let store: SmarticoStore
    private let logger: Logger
    private var timer: LoopTimer?
    private var inputsSinceArmed = 0

    init(loop: EventLoop, store: SmarticoStore, logger: Logger) {
        self.loop = loop
        self.store = store
        self.logger = logger
    }

    func start() {
        timer = LoopTimer(loop: loop) { [weak self] in
            guard let self else { return }
            Task(executorPreference: self.loop) { await self.trim() }
        }
    }

    func stop() {
        timer?.invalidate()
        timer = nil
    }

    /// Any thread: trims once things have been quiet for ``delay``.
    nonisolated func arm() {
        _ = loop.execute { [self] in assumeIsolated { $0.timer?.schedule(after: Self.delay) } }
    }

    /// The driver handled `count` more inputs: a burst arms the timer every ``afterInputs``, and
    /// an armed timer waits again for ``delay`` without input.
    func inputsHandled(_ count: Int) {
        inputsSinceArmed += count
        guard let timer, inputsSinceArmed >= Self.afterInputs || timer.isScheduled else { return }
        if inputsSinceArmed >= Self.afterInputs { inputsSinceArmed = 0 }
        timer.schedule(after: Self.delay)
    }

    private func trim() async {
        await store.releaseCacheMemory()
        // The heap's free pages go back to the system, with the pages the store's cache just freed.
        let released = ProcessMemory.returnFreePagesToSystem()
        logger.debug("heap trimmed after a burst", metadata: ["released": "\(released)"])
    }
}
