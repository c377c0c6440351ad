import Logging
import SmarticoProtocol
import Transport

/// The driver's side of the store (docs/store.md): it performs the machine's store actions
/// (``SessionAction/awaitsStore``), journals the events of each batch of inputs and hands them to
/// the socket server, and keeps whether the state directory takes writes (``StorageHealth``).
///
/// **One commit at a time.** The events the inputs of one batch emit are kept in order; at the
/// batch's end the journaled ones are committed in one transaction, awaited, and then all of them
/// are published in emission order.
///
/// The driver's own: used on its actor only (its async methods run there, `isolation`), so the
/// driver's FIFO orders every step of it.
final class DriverStore {
    private let store: SmarticoStore
    private let server: SocketAPIServer
    private let logger: Logger
    /// Whether the state directory takes writes (its `stateDir` follows reloads).
    var health: StorageHealth
    /// A storage problem reported and not yet in `status.last_error` (``takeReport()``).
    private var report: (message: String, atMs: Int64)?
    /// Events handed to the socket server to publish, by name (the metrics' events by type).
    private(set) var published: [String: Int] = [:]
    /// Outbox uuids the server proved it read whose removal from the outbox failed; retried with
    /// the next `.markSent`.
    private var unmarkedSent: [String] = []

    init(store: SmarticoStore, server: SocketAPIServer, logger: Logger, stateDir: String) {
        self.store = store
        self.server = server
        self.logger = logger
        health = StorageHealth(stateDir: stateDir)
    }

    /// The storage problem reported since the last call, for `status.last_error`.
    func takeReport() -> (message: String, atMs: Int64)? {
        defer { report = nil }
        return report
    }

    // MARK: Store actions

    /// Performs a store action; returns its result for the machine, if it has one.
    func perform(_ action: SessionAction, isolation: isolated (any Actor)? = #isolation) async -> SessionInput? {
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
        case .storeOutbox(let entry), .storeLatest(_, let entry):
            let failure: OutboxStoreFailure?
            do throws(StoreError) {
                if case .storeLatest(let slot, _) = action {
                    try await store.putLatest(slot: slot, uuid: entry.uuid, cid: entry.cid, payload: entry.bytes,
                                              createdMs: entry.createdMs, user: entry.user)
                } else {
                    try await store.enqueue(uuid: entry.uuid, cid: entry.cid, kind: .socket, payload: entry.bytes,
                                            createdMs: entry.createdMs, user: entry.user)
                }
                failure = nil
                writable()
            } catch {
                // Only the outbox has a bound (the latest slots replace their message).
                if case .queueFull(let max) = error { failure = .queueFull(max: max) } else {
                    failure = outboxFailure("outbox write", error)
                }
            }
            return .outboxStored(uuid: entry.uuid, failure: failure)
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
            return .outboxLoaded(entries)
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
            return .outboxDropped(user: user, count: count)
        default:
            preconditionFailure("not a store action: performNow")
        }
        return nil
    }

    /// Runs a store write whose failure only needs reporting; false when it failed.
    @discardableResult
    private func storeWork(_ what: String, isolation: isolated (any Actor)? = #isolation,
                           _ body: (SmarticoStore) async throws -> Void) async -> Bool {
        do {
            try await body(store)
            writable()
            return true
        } catch {
            if let storeError = error as? StoreError, storeError.storageProblem != nil {
                failed("store \(what)", storeError)
            } else {
                logger.error("store \(what) failed: \(error)")
            }
            return false
        }
    }

    /// Writes whom the daemon speaks for before the session changes (``SessionDriver``'s
    /// `storeUserFirst`): nil, or the op's refusal, `storage_unavailable` when the state directory
    /// cannot take it. `consequence` ends its message.
    func writeUser(_ what: String, consequence: String, isolation: isolated (any Actor)? = #isolation,
                   _ write: @Sendable (SmarticoStore) async throws(StoreError) -> Void) async -> SocketAPIError? {
        do throws(StoreError) {
            try await write(store)
            writable()
            return nil
        } catch {
            guard let problem = error.storageProblem else {
                logger.error("store \(what) failed: \(error)")
                return SocketAPIError(.internal, "store write failed: \(error); \(consequence)")
            }
            failed("store \(what)", error)
            return SocketAPIError(.storageUnavailable, "\(health.refusal(problem, error)); \(consequence)")
        }
    }

    /// An outbox write that failed: `storageUnavailable` (reported once) when the state directory
    /// is full, read-only or failing, else `failed` (logged).
    private func outboxFailure(_ what: String, _ error: StoreError) -> OutboxStoreFailure {
        guard let problem = error.storageProblem else {
            logger.error("\(what) failed: \(error)")
            return .failed(error.description)
        }
        failed(what, error)
        return .storageUnavailable(health.refusal(problem, error))
    }

    /// A write failed: a storage problem the first time for its cause (``StorageHealth``) becomes an
    /// `error` event (`storage_unavailable`) now, and `status.last_error` (``takeReport()``).
    private func failed(_ what: String, _ error: StoreError) {
        guard let message = health.failed(what, error, logger: logger) else { return }
        let now = SessionDriver.wallClockMs()
        report = (message, now)
        publish([StorageHealth.errorEvent("storage_unavailable", message, tsMs: now)])
    }

    private func writable() { health.writable(logger: logger) }

    // MARK: Journal and publication

    /// An event on its way to subscribers, in emission order; a journaled one carries its row.
    struct Outgoing {
        var name: String
        /// The event's `data`, serialized once: journaled, and appended to each subscriber's line.
        var body: EventBody
        var tsMs: Int64
        /// The journal row; nil: not journaled (published in order with the journaled events around it).
        var write: JournalWrite?
        /// The engagement uid for the `repeat dropped` debug line (kept only when it is logged).
        var loggedUID: String?
    }

    /// The events emitted by the batch of inputs being handled (``commit(isolation:)``).
    private var pending: [Outgoing] = []

    func append(_ event: Outgoing) {
        pending.append(event)
    }

    /// An event of the machine (or of the HTTP queue): logged by its level, then kept for the batch's
    /// end. `once`: an engagement journaled only the first time its uid is seen for the user.
    func emit(_ event: DaemonEvent, now: Int64, once: (user: String, uid: String)? = nil) {
        if let level = SessionDriver.logLevel(of: event), logger.logLevel <= level {
            logger.log(level: level, "\(event.name): \(SessionDriver.summary(event.data))")
        }
        if let warning = event.warning { logger.warning("\(warning)") }
        let body = event.body
        let row = NewJournalEvent(name: event.name, tsMs: now, body: body)
        if let once {
            append(Outgoing(name: event.name, body: body, tsMs: now, write: JournalWrite(row, once: once.uid, user: once.user),
                            loggedUID: logger.logLevel <= .debug ? once.uid : nil))
        } else {
            append(Outgoing(name: event.name, body: body, tsMs: now, write: event.journaled ? JournalWrite(row) : nil))
        }
    }

    /// Hands the events to the server to publish, counting them by name.
    func publish(_ events: [PreparedEvent]) {
        for event in events { published[event.name, default: 0] += 1 }
        server.publish(events)
    }

    /// Commits the batch's journaled events in one transaction, then publishes all of the batch's
    /// events in emission order: a journaled event is shown only once it is on disk (socket-api.md),
    /// and an event emitted after it is not shown before it.
    func commit(isolation: isolated (any Actor)? = #isolation) async {
        guard !pending.isEmpty else { return }
        let events = pending
        pending = []
        let writes = events.compactMap(\.write)
        var results: [JournalSeq?] = []
        var failure: StoreError?
        if !writes.isEmpty {
            do throws(StoreError) {
                results = try await store.journal(writes)
                writable()
            } catch {
                failure = error
                failed("journal write", error)
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
        // A full or read-only state directory is logged once (failed); each dropped event still
        // has its journal_write_failed event.
        if error.storageProblem == nil {
            logger.error("journal write failed, \(name) event dropped: \(error)")
        } else {
            logger.debug("journal write failed, \(name) event dropped: \(error)")
        }
        publish([StorageHealth.errorEvent(
            "journal_write_failed", "an event of type \(name) could not be journaled and was dropped: \(error)", tsMs: now)])
    }
}

extension SessionAction {
    /// The actions the driver performs by awaiting the store (``DriverStore/perform(_:isolation:)``);
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

/// Whether the state directory takes writes (docs/reliability.md, "A full or read-only state
/// directory"). The first write that fails because it is full, read-only or failing
/// (``StoreError/storageProblem``), and the first after a change of cause, is reported: an `error`
/// log line here, and the message returned, which the driver makes `status.last_error` and an
/// `error` event; the following ones only at debug. The session stays up; durable ops answer
/// `storage_unavailable` until a write succeeds again (``writable(logger:)``).
struct StorageHealth {
    /// Why the state directory takes no writes since the first failed write; nil once a write
    /// succeeds again.
    private(set) var problem: String?
    var stateDir: String

    /// A write of `what` failed: the message to report when its storage problem is new; nil when
    /// it was reported already (logged at debug) or `error` is no storage problem.
    mutating func failed(_ what: String, _ error: StoreError, logger: Logger) -> String? {
        guard let cause = error.storageProblem else { return nil }
        guard problem != cause else {
            logger.debug("\(what) failed: \(error)")
            return nil
        }
        problem = cause
        let message = "state_dir \(stateDir) is \(cause): \(what) failed: \(error). "
            + "Durable work is refused (ops that store a message answer storage_unavailable; events that "
            + "cannot be journaled are dropped, each with a journal_write_failed event); the session stays up. "
            + "Free space in, or remount read-write, the state directory: the daemon resumes by itself"
        logger.error("\(message)")
        return message
    }

    /// A write succeeded: a storage problem reported before is over.
    mutating func writable(logger: Logger) {
        guard let cause = problem else { return }
        problem = nil
        logger.notice("state_dir \(stateDir) is writable again (it was \(cause)): durable work is accepted again")
    }

    /// What an op refused for the storage problem `cause` answers (`storage_unavailable`).
    func refusal(_ cause: String, _ error: StoreError) -> String { "state_dir \(stateDir) is \(cause): \(error)" }

    /// An `error` event (not journaled) with `code` and `message`.
    static func errorEvent(_ code: String, _ message: String, tsMs: Int64) -> PreparedEvent {
        var data: [UInt8] = []
        JSONValue.object(["code": .string(code), "message": .string(message)]).serialize(into: &data)
        return PreparedEvent(name: "error", seq: nil, tsMs: tsMs, data: data)
    }
}
