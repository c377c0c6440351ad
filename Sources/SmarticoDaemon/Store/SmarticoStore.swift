// The daemon's durable store: device id, user and push data, the outbox, the seen-set of engagement
// uids and durable subscriber cursors in one SQLite file; the event journal in segment files beside it
// (`EventLog`), its records carrying what an engagement marks seen.
//
// Durability: WAL with synchronous=FULL, so every method that writes has committed and fsync'd before
// it returns; an event batch is one write and one fdatasync of the event log (see docs/store.md).
// Threading: the actor runs on its own thread (`StoreThreadExecutor`), so callers simply `await` and the
// blocking file work never touches the cooperative pool.
import CSQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The durable store. Open it with `SmarticoStore.open(directory:options:)`.
public actor SmarticoStore {
    /// The name of the database file inside the state directory.
    public static let fileName = "smarticod.db"

    /// The executor every isolated method runs on: one dedicated thread.
    public nonisolated let executor: StoreThreadExecutor
    /// Makes every isolated method run on `executor`'s thread.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// The database file.
    public nonisolated let path: String
    private let directory: String
    private var options: StoreOptions
    private var db: SQLiteConnection?
    private var cachedDeviceID = ""
    // The journal path's state (marked `@exclusivity(unchecked)`) is touched by every commit on the
    // store's thread and never held across a call that could reach the store again: not checked for
    // exclusive access at run time (see `SessionDriver.machine`).
    @exclusivity(unchecked) private var cachedLastSeq: JournalSeq = 0
    /// The event journal's records (nil once closed).
    private var eventLog: EventLog?
    /// The oldest seq retention still keeps (the log may hold older records until their segment
    /// goes): `events` and `journalBounds` start here.
    private var firstKept: JournalSeq = 1
    /// Whether `firstKept` moved since it was last written to `meta`.
    private var firstKeptDirty = false
    /// Engagements journaled since the seen table was last brought up to date, in seq order: their
    /// (user, uid) are in the event log's records and here, and reach the table with the next
    /// transaction (docs/store.md, "The seen-set, folded").
    @exclusivity(unchecked) private var pendingSeen: [SeenKey] = []
    /// `meta.seen_seq` as last written: every record up to it has its seen uid in the table.
    private var seenSeqWritten: JournalSeq = 0
    @exclusivity(unchecked) private var pendingSeenKeys: Set<SeenKey> = []
    /// Bring the seen table up to date once this many engagements wait.
    static let foldAfter = 1_024
    /// The seen-set of the user last journaled for, in memory (nil: load it from the table first).
    /// Dropped whenever it may differ from the table: a failed transaction, a write by another
    /// connection (`seenDataVersion`), a user's set cleared.
    @exclusivity(unchecked) private var seenSet: SeenSet?
    /// `PRAGMA data_version` when `seenSet` was last known to match the table: it changes when
    /// another connection (another process) commits.
    private var seenDataVersion: Int64 = -1
    /// False while every uid in `pendingSeen` is known to be absent from the seen table: each was
    /// looked up there when it was journaled, and since then only this store wrote the table (every
    /// write transaction folds `pendingSeen` first). Another connection's commit (`seenDataVersion`)
    /// and the open's recovery set it: the fold then looks each uid up again.
    private var pendingMayBeInTable = true
    /// How `SeenSet` hashes a uid (tests substitute one that collides).
    private let seenKey: @Sendable (String) -> Int

    private init(directory: String, options: StoreOptions, seenKey: @escaping @Sendable (String) -> Int) {
        self.seenKey = seenKey
        self.directory = directory
        self.path = directory.hasSuffix("/") ? directory + Self.fileName : directory + "/" + Self.fileName
        self.options = options
        self.executor = StoreThreadExecutor()
    }

    /// Opens (creating when missing) the store in `directory`: the directory is created with mode 0700,
    /// the database file with 0600; the schema is migrated to the latest version; the device id is
    /// generated on first use. Throws `StoreError.databaseTooNew` for a database of a newer smarticod.
    public static func open(directory: String, options: StoreOptions = StoreOptions()) async throws(StoreError)
        -> SmarticoStore
    {
        try await open(directory: directory, options: options, seenKey: SeenSet.processKey)
    }

    /// ``open(directory:options:)`` with the seen-set's uid hash chosen (tests: one that collides).
    static func open(directory: String, options: StoreOptions, seenKey: @escaping @Sendable (String) -> Int)
        async throws(StoreError) -> SmarticoStore
    {
        let store = SmarticoStore(directory: directory, options: options, seenKey: seenKey)
        try await store.openDatabase()
        return store
    }

    private func openDatabase() throws(StoreError) {
        try Self.makeDirectory(directory)
        try Self.createFile(path)
        let connection: SQLiteConnection
        do {
            connection = try SQLiteConnection(path: path, gatherWAL: true)
        } catch {
            throw .sqlite(error)
        }
        do {
            try connection.execute("PRAGMA busy_timeout = \(max(0, options.busyTimeoutMs))")
            let mode = try connection.queryFirst("PRAGMA journal_mode = WAL") { $0.text(0) } ?? ""
            guard mode.lowercased() == "wal" else {
                connection.close()
                throw StoreError.walUnavailable(path: path, journalMode: mode)
            }
            // FULL: the WAL is fsync'd at every commit, so a commit survives power loss.
            try connection.execute("PRAGMA synchronous = FULL")
            try connection.execute("PRAGMA foreign_keys = ON")
            // Bound the WAL file left after checkpoints.
            try connection.execute("PRAGMA journal_size_limit = 4194304")
            // A page cache big enough for the journal's hot pages under load (the default 2 MB made
            // every commit and checkpoint re-read pages it had just written: ~12 µs of system time
            // per event in the saturation benchmark). Given back after a burst: `releaseCacheMemory()`.
            try connection.execute("PRAGMA cache_size = -\(Self.cacheKiB)")
        } catch let error as SQLiteError {
            connection.close()
            throw .sqlite(error)
        } catch let error as StoreError {
            connection.close()
            throw error
        } catch {
            connection.close()
            throw .other(String(describing: error))
        }
        do {
            try StoreSchema.migrate(connection)
        } catch {
            connection.close()
            throw error
        }
        db = connection
        do {
            try inTransaction { db in
                if try db.queryFirst("SELECT value FROM meta WHERE key = 'device_id'", [], { $0.text(0) }) == nil {
                    try db.run("INSERT INTO meta(key, value) VALUES ('device_id', ?)", [.text(Self.makeUUID())])
                }
                if try db.queryFirst("SELECT 1 FROM meta WHERE key = 'fp_seed'", [], { _ in true }) == nil {
                    try db.run("INSERT INTO meta(key, value) VALUES ('fp_seed', ?)", [.blob(Self.randomBytes(16))])
                }
            }
            cachedDeviceID = try withDB { db in
                try db.queryFirst("SELECT value FROM meta WHERE key = 'device_id'") { $0.text(0) } ?? ""
            }
            try moveSeenRowsIntoChunks()
            try openEventLog()
        } catch {
            close()
            throw error
        }
    }

    /// A store released without `close()` still closes its database on its own thread (closing the last
    /// connection checkpoints the WAL, which blocks), not on whichever thread dropped the last reference.
    isolated deinit {
        try? foldSeen()
        eventLog?.close()
        db?.close()
    }

    /// Closes the database and the event log. Every acknowledged write is already on disk; later
    /// calls throw `.closed`.
    public func close() {
        // Best effort: what it does not write now, the next open recovers from the event log.
        try? foldSeen()
        eventLog?.close()
        eventLog = nil
        db?.close()
        db = nil
    }

    /// Applies new limits and retention (e.g. after SIGHUP). Retention takes effect at the next append
    /// or `applyRetention`.
    public func updateOptions(_ newOptions: StoreOptions) {
        options = newOptions
    }

    // MARK: meta

    /// The device id: a random UUID v4, lowercase, generated once and kept.
    public func deviceID() -> String { cachedDeviceID }

    /// 16 random bytes generated once and kept: the fallback seed of `client.fp` when the machine has no
    /// machine id.
    public func fingerprintSeed() throws(StoreError) -> [UInt8] {
        try withDB { db in
            try db.queryFirst("SELECT value FROM meta WHERE key = 'fp_seed'") { $0.blob(0) } ?? []
        }
    }

    /// A small value kept under `key` (a namespace of its own: it cannot touch the store's own keys).
    public func metaValue(_ key: String) throws(StoreError) -> [UInt8]? {
        try withDB { db in
            try db.queryFirst("SELECT value FROM meta WHERE key = ?", [.text("x." + key)]) { $0.blob(0) }
        }
    }

    /// Stores (or with nil removes) a small value under `key`.
    public func setMetaValue(_ key: String, _ value: [UInt8]?) throws(StoreError) {
        try inTransaction { db in
            if let value {
                try db.run("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                           [.text("x." + key), .blob(value)])
            } else {
                try db.run("DELETE FROM meta WHERE key = ?", [.text("x." + key)])
            }
        }
    }

    // MARK: user and push

    /// The current user, or nil when anonymous.
    public func user() throws(StoreError) -> StoredUser? {
        try withDB { db in
            try db.queryFirst(
                "SELECT ext_user_id, hash, public_username, props, last_activity_ms FROM user WHERE id = 1"
            ) { row in
                StoredUser(extUserID: row.text(0), hash: row.optionalText(1), publicUsername: row.optionalText(2),
                           props: row.optionalBlob(3), lastActivityMs: row.optionalInt64(4))
            }
        }
    }

    /// Replaces the current user. When the user changes, the previous user's seen-set is cleared in the
    /// same transaction.
    public func setUser(_ user: StoredUser) throws(StoreError) {
        if seenSet?.user != user.extUserID { seenSet = nil }
        try inTransaction { db in
            try Self.deleteSeen("WHERE user <> ?", [.text(user.extUserID)], db)
            try db.run("""
                INSERT INTO user(id, ext_user_id, hash, public_username, props, last_activity_ms)
                VALUES (1, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET ext_user_id = excluded.ext_user_id, hash = excluded.hash,
                    public_username = excluded.public_username, props = excluded.props,
                    last_activity_ms = excluded.last_activity_ms
                """,
                [.text(user.extUserID), .optionalText(user.hash), .optionalText(user.publicUsername),
                 .optionalBlob(user.props), .optionalInteger(user.lastActivityMs)])
        }
    }

    /// Forgets the user (logout) and every seen-set, in one transaction. Push data is kept.
    public func clearUser() throws(StoreError) {
        seenSet = nil
        try inTransaction { db in
            try db.run("DELETE FROM user")
            try Self.deleteSeen("", [], db)
        }
    }

    /// Records activity of the current user at `atMs` (no effect when anonymous).
    public func recordActivity(atMs: Int64) throws(StoreError) {
        try inTransaction { db in
            try db.run("UPDATE user SET last_activity_ms = ? WHERE id = 1", [.integer(atMs)])
        }
    }

    /// Updates what the server told about the current user (IDENTIFY response, 108, bridge 7).
    public func updateUserProfile(publicUsername: String?, props: [UInt8]?) throws(StoreError) {
        try inTransaction { db in
            try db.run("UPDATE user SET public_username = ?, props = ? WHERE id = 1",
                       [.optionalText(publicUsername), .optionalBlob(props)])
        }
    }

    /// The push data, or nil when none is known.
    public func push() throws(StoreError) -> StoredPush? {
        try withDB { db in
            try db.queryFirst("SELECT token, platform, status, app_package_id FROM push WHERE id = 1") { row in
                StoredPush(token: row.text(0), platform: Int(row.int64(1)), status: Int(row.int64(2)),
                           appPackageID: row.optionalText(3))
            }
        }
    }

    /// Replaces the push data (or with nil forgets it).
    public func setPush(_ push: StoredPush?) throws(StoreError) {
        try inTransaction { db in
            if let push {
                try db.run("""
                    INSERT INTO push(id, token, platform, status, app_package_id) VALUES (1, ?, ?, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET token = excluded.token, platform = excluded.platform,
                        status = excluded.status, app_package_id = excluded.app_package_id
                    """,
                    [.text(push.token), .integer(Int64(push.platform)), .integer(Int64(push.status)),
                     .optionalText(push.appPackageID)])
            } else {
                try db.run("DELETE FROM push")
            }
        }
    }

    // MARK: outbox

    /// Stores a client message accepted while offline, after the ones already waiting.
    /// Throws `.queueFull` when `maxOutboxMessages` are waiting and `.duplicateUUID` for a uuid already
    /// in the outbox. On return the message is on disk.
    public func enqueue(
        uuid: String, cid: Int, kind: OutboxKind = .socket, payload: [UInt8], createdMs: Int64
    ) throws(StoreError) {
        let max = options.maxOutboxMessages
        try inTransaction { db in
            let depth = try db.queryFirst("SELECT count(*) FROM outbox") { $0.int64(0) } ?? 0
            guard depth < Int64(max) else { throw StoreError.queueFull(max: max) }
            if try db.queryFirst("SELECT 1 FROM outbox WHERE uuid = ?", [.text(uuid)], { _ in true }) != nil {
                throw StoreError.duplicateUUID(uuid)
            }
            try db.run("INSERT INTO outbox(uuid, cid, kind, payload, created_ms) VALUES (?, ?, ?, ?, ?)",
                       [.text(uuid), .integer(Int64(cid)), .text(kind.rawValue), .blob(payload), .integer(createdMs)])
        }
    }

    /// Up to `limit` waiting messages, oldest first; only those of `kind` when given.
    public func peek(limit: Int, kind: OutboxKind? = nil) throws(StoreError) -> [OutboxMessage] {
        guard limit > 0 else { return [] }
        return try withDB { db in
            let columns = "SELECT position, uuid, cid, kind, payload, created_ms, attempts FROM outbox"
            let map: (SQLiteRow) -> OutboxMessage = { row in
                OutboxMessage(position: row.int64(0), uuid: row.text(1), cid: Int(row.int64(2)),
                              kind: OutboxKind(rawValue: row.text(3)) ?? .socket, payload: row.blob(4),
                              createdMs: row.int64(5), attempts: Int(row.int64(6)))
            }
            if let kind {
                return try db.query(columns + " WHERE kind = ? ORDER BY position LIMIT ?",
                                    [.text(kind.rawValue), .integer(Int64(limit))], map)
            }
            return try db.query(columns + " ORDER BY position LIMIT ?", [.integer(Int64(limit))], map)
        }
    }

    /// Removes the messages with these uuids (outbox rows and latest-value slots), in one transaction.
    /// Returns how many were removed; unknown uuids are ignored, so removal is exactly once.
    @discardableResult
    public func markSent(_ uuids: [String]) throws(StoreError) -> Int {
        guard !uuids.isEmpty else { return 0 }
        return try inTransaction { db in
            var removed = 0
            for uuid in uuids {
                try db.run("DELETE FROM outbox WHERE uuid = ?", [.text(uuid)])
                removed += db.changes
                try db.run("DELETE FROM latest WHERE uuid = ?", [.text(uuid)])
                removed += db.changes
            }
            return removed
        }
    }

    /// Counts one more sending attempt for these outbox messages (HTTP retries).
    public func recordAttempt(_ uuids: [String]) throws(StoreError) {
        guard !uuids.isEmpty else { return }
        try inTransaction { db in
            for uuid in uuids {
                try db.run("UPDATE outbox SET attempts = attempts + 1 WHERE uuid = ?", [.text(uuid)])
            }
        }
    }

    /// Puts a message in a latest-value-only slot (e.g. `language`), replacing what waited there.
    /// Slots do not count against `maxOutboxMessages`.
    public func putLatest(slot: String, uuid: String, cid: Int, payload: [UInt8], createdMs: Int64) throws(StoreError) {
        try inTransaction { db in
            try db.run("""
                INSERT INTO latest(slot, uuid, cid, payload, created_ms) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(slot) DO UPDATE SET uuid = excluded.uuid, cid = excluded.cid,
                    payload = excluded.payload, created_ms = excluded.created_ms
                """,
                [.text(slot), .text(uuid), .integer(Int64(cid)), .blob(payload), .integer(createdMs)])
        }
    }

    /// The filled latest-value slots, oldest first. Remove one after sending with `markSent([uuid])`:
    /// a newer value put meanwhile has another uuid and stays.
    public func latestMessages() throws(StoreError) -> [LatestMessage] {
        try withDB { db in
            try db.query("SELECT slot, uuid, cid, payload, created_ms FROM latest ORDER BY created_ms, slot") { row in
                LatestMessage(slot: row.text(0), uuid: row.text(1), cid: Int(row.int64(2)),
                              payload: row.blob(3), createdMs: row.int64(4))
            }
        }
    }

    /// Depth and oldest time of what waits, for `status`.
    public func outboxStatus() throws(StoreError) -> OutboxStatus {
        try withDB { db in
            let outbox = try db.queryFirst("SELECT count(*), min(created_ms) FROM outbox") {
                (Int($0.int64(0)), $0.optionalInt64(1))
            } ?? (0, nil)
            let latest = try db.queryFirst("SELECT count(*), min(created_ms) FROM latest") {
                (Int($0.int64(0)), $0.optionalInt64(1))
            } ?? (0, nil)
            let oldest = [outbox.1, latest.1].compactMap { $0 }.min()
            return OutboxStatus(depth: outbox.0 + latest.0, oldestMs: oldest)
        }
    }

    // MARK: journal

    /// Journals `events` in one transaction and returns their seqs, in order, after the commit reached
    /// the disk. Retention (count, and age relative to the newest `tsMs` of the batch) is applied in
    /// the same transaction.
    public func appendEvents(_ events: [NewJournalEvent]) throws(StoreError) -> [JournalSeq] {
        // Unconditional writes always get a seq.
        try journal(events.map(JournalWrite.init)).compactMap { $0 }
    }

    /// Journals an engagement once per (user, uid): in one transaction, marks `uid` seen for `user`
    /// and appends `event`. Returns its seq, or nil (and journals nothing) when the uid was already seen.
    public func appendEngagement(user: String, uid: String, event: NewJournalEvent) throws(StoreError)
        -> JournalSeq?
    {
        try journal([JournalWrite(event, once: uid, user: user)]).first ?? nil
    }

    /// `journal(_:)` of what `take` returns, called on the store's thread as this job starts: a
    /// commit that waited behind another takes every event emitted while that one ran.
    public func journal(sealing take: @Sendable () -> [JournalWrite]) throws(StoreError) -> [JournalSeq?] {
        try journal(take())
    }

    /// Group commit: journals every write of `writes`, in order, in **one** transaction (one `fsync`),
    /// and returns one result per write: its seq, or nil for an engagement whose uid was already
    /// seen (including earlier in the same batch). Retention runs once, after the batch. The driver
    /// hands over every event that arrived while the previous commit ran, so under load the cost of
    /// the commit is shared by the batch (docs/store.md, "Group commit").
    public func journal(_ writes: [JournalWrite]) throws(StoreError) -> [JournalSeq?] {
        guard !writes.isEmpty else { return [] }
        guard let log = eventLog, let db else { throw .closed }
        var seq = cachedLastSeq
        // Each record is encoded into the log's batch as its write is checked (no entry value per
        // record: copying one retained its strings and data here, objects the event loop made).
        var batch = log.beginBatch()
        var results: [JournalSeq?] = []
        results.reserveCapacity(writes.count)
        // This batch's new uids join `pendingSeenKeys` as they are checked (one set operation a uid:
        // a repeat, waiting or earlier in the batch, is an insert that finds it), and leave it again
        // when the batch fails.
        let pendingBefore = pendingSeen.count
        var newest = Int64.min
        func forgetBatch() {
            for key in pendingSeen[pendingBefore...] { pendingSeenKeys.remove(key) }
            pendingSeen.removeSubrange(pendingBefore...)
        }
        do {
            if writes.contains(where: { $0.seen != nil }) { try refreshSeenSetIfChanged(db) }
            // Borrowed through the buffer pointer: a copy of each write (`for write in writes`, and
            // `writes[i]` too) retains and releases its strings and data once more.
            try writes.withUnsafeBufferPointer { writes in
                for i in writes.indices {
                    if let seen = writes[i].seen {
                        let key = SeenKey(user: seen.user, uid: seen.uid, key: seenKey(seen.uid))
                        guard pendingSeenKeys.insert(key).inserted else {
                            results.append(nil)
                            continue
                        }
                        pendingSeen.append(key)
                        if try isSeenInTable(key, db) {
                            pendingSeenKeys.remove(pendingSeen.removeLast())
                            results.append(nil)
                            continue
                        }
                    }
                    seq += 1
                    batch.add(seq: seq, tsMs: writes[i].event.tsMs, name: writes[i].event.name, seen: writes[i].seen,
                              body: writes[i].event.body)
                    newest = max(newest, writes[i].event.tsMs)
                    results.append(seq)
                }
            }
        } catch {
            forgetBatch()
            seenSet = nil
            log.discard(consume batch)
            throw Self.storeError(error)
        }
        guard batch.count > 0 else {
            log.discard(consume batch)
            return results
        }
        do {
            try log.append(consume batch)
        } catch {
            forgetBatch()
            throw error
        }
        cachedLastSeq = seq
        // Retention, then what it lets go of on disk; the seen table catches up now and then. Both
        // are SQLite commits (~2.5 ms for a fold of 1,024 uids): they run as the store's next job,
        // after this batch's results are on their way back, so the batch's lines are not held
        // behind them (they were: one event in 1,024 published ~2.5 ms late, docs/benchmarks.md).
        let dropsSegments = retainLog(nowMs: newest, slack: retentionSlack) > 0 && log.segments.count > 1
            && log.segments[1].firstSeq <= firstKept
        if dropsSegments || pendingSeen.count >= Self.foldAfter { scheduleUpkeep() }
        return results
    }

    /// True while an upkeep job is queued on the store's thread.
    private var upkeepScheduled = false

    /// Queues `upkeep()` behind the current job, once.
    private func scheduleUpkeep() {
        guard !upkeepScheduled else { return }
        upkeepScheduled = true
        Task { self.upkeep() }  // isolated to the store: runs on its thread, after what is queued there now
    }

    /// Retention's deletion of whole segments when it is due, else the seen table's catch-up when
    /// enough uids wait (both fold the seen-set first). Failures are retried at the next batch.
    private func upkeep() {
        upkeepScheduled = false
        guard let log = eventLog else { return }
        if log.segments.count > 1 && log.segments[1].firstSeq <= firstKept {
            try? persistRetention()
        } else if pendingSeen.count >= Self.foldAfter {
            try? foldSeen()
        }
    }

    /// Marks `uid` seen for `user`; true when it was new. At least the newest `seenPerUser` uids are
    /// kept (pruning runs every few inserts, see `insertSeen`).
    public func markSeen(user: String, uid: String) throws(StoreError) -> Bool {
        let key = SeenKey(user: user, uid: uid, key: seenKey(uid))
        return try inTransaction(usesSeenSet: true) { db in try self.insertSeen(key, db) }
    }

    /// Forgets the seen-set of `user`.
    public func clearSeen(user: String) throws(StoreError) {
        try inTransaction { db in
            try Self.deleteSeen("WHERE user = ?", [.text(user)], db)
        }
        if seenSet?.user == user { seenSet = nil }
    }

    /// Brings the seen table up to date with the engagements journaled since it last was (every
    /// write transaction does this first; the driver's trim after a burst calls it so an idle
    /// daemon has nothing waiting), and records retention's first kept seq.
    public func foldSeen() throws(StoreError) {
        guard !pendingSeen.isEmpty || firstKeptDirty || seenSeqWritten < cachedLastSeq else { return }
        try inTransaction { _ in }
    }

    /// Up to `limit` journaled events with a seq greater than `after`, in seq order; only those whose
    /// name is in `types` when given.
    public func events(after: JournalSeq, limit: Int, types: Set<String>? = nil) throws(StoreError) -> [JournalEvent] {
        guard let log = eventLog else { throw .closed }
        guard limit > 0, after < JournalSeq.max else { return [] }
        var result: [JournalEvent] = []
        try log.forEach(from: max(after + 1, firstKept)) { record in
            if types?.contains(record.name) ?? true {
                result.append(JournalEvent(seq: record.seq, name: record.name, tsMs: record.tsMs, data: record.data))
            }
            return result.count < limit
        }
        return result
    }

    /// The last seq ever assigned (0 before the first event). Never goes backwards.
    public func lastSeq() -> JournalSeq { cachedLastSeq }

    /// The smallest stored seq (nil when the journal is empty) and the last assigned seq.
    public func journalBounds() throws(StoreError) -> JournalBounds {
        guard let log = eventLog else { throw .closed }
        let first = max(firstKept, log.firstSeq ?? firstKept)
        return JournalBounds(firstSeq: first <= log.lastSeq ? first : nil, lastSeq: cachedLastSeq)
    }

    /// Applies retention now: keeps at most `retentionEvents` events and none older than
    /// `retentionHours` before `nowMs`. Returns how many events were deleted. The seq counter is kept.
    @discardableResult
    public func applyRetention(nowMs: Int64) throws(StoreError) -> Int {
        guard eventLog != nil else { throw .closed }
        let hidden = retainLog(nowMs: nowMs, slack: 0)
        try persistRetention()
        return hidden
    }

    // MARK: durable cursors

    /// The last seq acknowledged by the durable subscription `name`, or nil when it is unknown.
    public func cursor(_ name: String) throws(StoreError) -> JournalSeq? {
        try withDB { db in
            try db.queryFirst("SELECT seq FROM cursors WHERE name = ?", [.text(name)]) { $0.int64(0) }
        }
    }

    /// Acknowledges `seq` for `name`. The cursor never moves backwards: the result is the cursor after
    /// the call (the larger of the old and new values). A seq beyond `lastSeq()` throws
    /// `.cursorBeyondLastSeq`; a new name when `maxCursors` names exist throws `.tooManyCursors`.
    @discardableResult
    public func setCursor(_ name: String, _ seq: JournalSeq) throws(StoreError) -> JournalSeq {
        guard !name.isEmpty else { throw .invalidArgument("a durable subscription name must not be empty") }
        guard seq >= 0 else { throw .invalidArgument("cannot acknowledge negative seq \(seq) for \"\(name)\"") }
        let maxCursors = options.maxCursors
        let last = cachedLastSeq
        return try inTransaction { db in
            guard seq <= last else { throw StoreError.cursorBeyondLastSeq(name: name, seq: seq, lastSeq: last) }
            if try db.queryFirst("SELECT 1 FROM cursors WHERE name = ?", [.text(name)], { _ in true }) == nil {
                let count = try db.queryFirst("SELECT count(*) FROM cursors") { $0.int64(0) } ?? 0
                guard count < Int64(maxCursors) else {
                    throw StoreError.tooManyCursors(name: name, max: maxCursors)
                }
            }
            try db.run("""
                INSERT INTO cursors(name, seq) VALUES (?, ?)
                ON CONFLICT(name) DO UPDATE SET seq = max(seq, excluded.seq)
                """, [.text(name), .integer(seq)])
            return try db.queryFirst("SELECT seq FROM cursors WHERE name = ?", [.text(name)]) { $0.int64(0) } ?? seq
        }
    }

    /// Forgets the durable subscription `name`.
    public func removeCursor(_ name: String) throws(StoreError) {
        try inTransaction { db in try db.run("DELETE FROM cursors WHERE name = ?", [.text(name)]) }
    }

    // MARK: maintenance

    /// Runs `PRAGMA integrity_check`; returns the problems found, empty when the database is sound.
    public func integrityCheck() throws(StoreError) -> [String] {
        let lines = try withDB { db in try db.query("PRAGMA integrity_check") { $0.text(0) } }
        return lines == ["ok"] ? [] : lines
    }

    /// The durability settings in force: `journal_mode` and `synchronous` (2 is FULL).
    public func durabilitySettings() throws(StoreError) -> (journalMode: String, synchronous: Int) {
        try withDB { db in
            let mode = try db.queryFirst("PRAGMA journal_mode") { $0.text(0) } ?? ""
            let sync = try db.queryFirst("PRAGMA synchronous") { Int($0.int64(0)) } ?? -1
            return (mode, sync)
        }
    }

    /// The schema version of the open database.
    public func schemaVersion() throws(StoreError) -> Int {
        try withDB { db in try StoreSchema.userVersion(db) }
    }

    /// The page cache's limit in KiB (`PRAGMA cache_size`).
    static let cacheKiB = 16_384

    /// Gives the page cache's memory back (the driver calls this after a burst, before trimming the
    /// heap); the next reads fill it again. Returns the bytes freed.
    @discardableResult
    public func releaseCacheMemory() -> Int {
        try? foldSeen()
        eventLog?.releaseMemory()
        return db?.releaseCacheMemory() ?? 0
    }

    /// The heap memory the page cache holds now.
    public func cacheBytes() -> Int { db?.cacheBytes ?? 0 }

    /// What opening the event log found and repaired (a record cut by a crash, damaged bytes), one
    /// line each; empty when its files were clean. The daemon logs them.
    public func eventLogRecovery() -> [String] { eventLog?.recoveryNotes ?? [] }

    /// Tests: waits until the event log's next segment, written ahead of time, is ready (or its
    /// writing failed); true when one is ready.
    func waitForSpareSegment() -> Bool {
        eventLog?.waitForSpare() ?? false
    }

    /// Tests: the event log's next append fails with `errno`, as a full or failing disk would make it.
    func failNextEventLogAppend(errno: Int32) {
        eventLog?.failNextAppend = errno
    }

    /// The event log's directory.
    nonisolated var eventLogDirectory: String {
        directory + (directory.hasSuffix("/") ? "" : "/") + EventLog.directoryName
    }

    /// The kernel id of the thread running this method (tests use it to show the store thread sleeps).
    func currentThreadID() -> Int32? {
        currentKernelThreadID()
    }

    // MARK: private

    private func withDB<T>(_ body: (SQLiteConnection) throws -> T) throws(StoreError) -> T {
        guard let db else { throw .closed }
        do {
            return try body(db)
        } catch {
            throw Self.storeError(error)
        }
    }

    /// `error` as the store reports it.
    private static func storeError(_ error: any Error) -> StoreError {
        switch error {
        case let error as StoreError: return error
        case let error as SQLiteError: return .sqlite(error)
        default: return .other(String(describing: error))
        }
    }

    /// A write transaction. It first brings the seen table up to date with the engagements
    /// journaled since it last was (`pendingSeen`) and records retention's first kept seq, so
    /// everything that reads or changes the seen-set sees them, in the same commit.
    /// `usesSeenSet`: the body uses the in-memory seen-set too (it is checked against other
    /// connections' commits first, and dropped when the transaction fails).
    private func inTransaction<T>(usesSeenSet: Bool = false, _ body: (SQLiteConnection) throws -> T) throws(StoreError) -> T {
        guard let db else { throw .closed }
        let folding = pendingSeen.count
        let writesFirst = firstKeptDirty
        let upTo = cachedLastSeq
        let writesMeta = folding > 0 || writesFirst || seenSeqWritten < upTo
        do {
            let value = try db.transaction { () throws -> T in
                if writesMeta || usesSeenSet { try self.refreshSeenSetIfChanged(db) }
                if writesMeta {
                    try self.foldIntoTable(self.pendingSeen.prefix(folding), db)
                    try self.setMeta("seen_seq", upTo, db)
                    try self.setMeta("journal_first", self.firstKept, db)
                    try self.setMeta("last_seq", upTo, db)
                }
                return try body(db)
            }
            if writesMeta { seenSeqWritten = upTo }
            if folding == pendingSeen.count {
                // Everything waiting was folded (so far always: no transaction body adds to it): the
                // sets are emptied whole, not key by key.
                pendingSeen.removeAll(keepingCapacity: true)
                pendingSeenKeys.removeAll(keepingCapacity: true)
                pendingMayBeInTable = false
            } else if folding > 0 {
                for key in pendingSeen.prefix(folding) { pendingSeenKeys.remove(key) }
                pendingSeen.removeFirst(folding)
            }
            if writesFirst { firstKeptDirty = false }
            return value
        } catch {
            if folding > 0 || usesSeenSet { seenSet = nil }  // it may hold rows that were rolled back
            throw error
        }
    }

    private func setMeta(_ key: String, _ value: Int64, _ db: SQLiteConnection) throws {
        try db.run("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                   [.text(key), .integer(value)])
    }

    private func metaInteger(_ key: String, _ db: SQLiteConnection) throws -> Int64? {
        try db.queryFirst("SELECT value FROM meta WHERE key = ?", [.text(key)]) { $0.int64(0) }
    }

    /// Opens the event log, moves what an older smarticod journaled in the `journal` table into it,
    /// and brings the seen table up to date with engagements journaled before a crash.
    private func openEventLog() throws(StoreError) {
        guard let db else { throw .closed }
        let log = try EventLog(directory: eventLogDirectory, segmentBytes: options.segmentBytes,
                               preallocate: options.preallocateSegments)
        eventLog = log
        do {
            // Rows of the `journal` table (a database of an older smarticod): appended to the log in
            // seq order, then deleted. A crash in between appends only the rows the log lacks.
            var movedUpTo: JournalSeq?
            while true {
                let rows = try db.query("SELECT seq, name, ts_ms, data FROM journal WHERE seq > ? ORDER BY seq LIMIT 512",
                                        [.integer(log.lastSeq)]) { row in
                    EventLogEntry(seq: row.int64(0), tsMs: row.int64(2), name: row.text(1), seen: nil, data: row.blob(3))
                }
                guard !rows.isEmpty else { break }
                var run: [EventLogEntry] = []
                for entry in rows {
                    if let last = run.last, last.seq + 1 != entry.seq {
                        try log.append(run)
                        run = []
                    }
                    run.append(entry)
                }
                try log.append(run)
                movedUpTo = run.last?.seq
            }
            let tableLast = try Self.readLastSeq(db)
            cachedLastSeq = max(tableLast, log.lastSeq)
            let leftInTable = try db.queryFirst("SELECT 1 FROM journal LIMIT 1") { _ in true } != nil
            if movedUpTo != nil || leftInTable {
                let seenBefore = try metaInteger("seen_seq", db) ?? 0
                try db.transaction {
                    try db.run("DELETE FROM journal")
                    // The moved rows' seen uids are in the table already.
                    if let movedUpTo { try self.setMeta("seen_seq", max(seenBefore, movedUpTo), db) }
                    try self.setMeta("last_seq", self.cachedLastSeq, db)
                }
            }
            firstKept = max(try metaInteger("journal_first", db) ?? 1, log.firstSeq ?? cachedLastSeq + 1)
            // Engagements journaled after the seen table's last update (a crash): fold them now.
            let seenSeq = try metaInteger("seen_seq", db) ?? 0
            seenSeqWritten = seenSeq
            try log.forEach(from: seenSeq + 1) { record in
                if let seen = record.seen {
                    let key = SeenKey(user: seen.user, uid: seen.uid, key: seenKey(seen.uid))
                    if pendingSeenKeys.insert(key).inserted { pendingSeen.append(key) }
                }
                return true
            }
            if !pendingSeen.isEmpty || seenSeq < cachedLastSeq {
                try foldSeen()
            }
        } catch {
            throw Self.storeError(error)
        }
    }

    /// Moves `firstKept` for retention: by count once more than `slack` events are over the limit
    /// (then down to the limit), and by age — in journal order — for events received before
    /// `nowMs − retentionHours`. Returns how many events it let go of.
    private func retainLog(nowMs: Int64, slack: Int64) -> Int {
        guard let log = eventLog, let logFirst = log.firstSeq else { return 0 }
        let last = log.lastSeq
        let before = max(firstKept, logFirst)
        var first = before
        let keep = Int64(max(0, options.retentionEvents))
        if last - keep >= first + slack { first = last - keep + 1 }
        let (window, overflow) = Int64(max(0, options.retentionHours)).multipliedReportingOverflow(by: 3_600_000)
        if !overflow && nowMs > Int64.min + window {
            let cutoff = nowMs - window
            while first <= last, let t = log.time(of: first), t < cutoff { first += 1 }
        }
        if first != firstKept {
            firstKept = first
            firstKeptDirty = true
        }
        return Int(first - before)
    }

    /// Writes retention's first kept seq (with the seen table brought up to date: the records about
    /// to go carry seen uids) and deletes the segments now wholly before it.
    private func persistRetention() throws(StoreError) {
        firstKeptDirty = true
        try foldSeen()
        eventLog?.dropSegments(below: firstKept)
    }

    /// Drops the in-memory seen-set when another connection (another process) committed since it
    /// was last current (`PRAGMA data_version`).
    private func refreshSeenSetIfChanged(_ db: SQLiteConnection) throws {
        let version = try db.queryFirst("PRAGMA data_version") { $0.int64(0) } ?? -1
        if version != seenDataVersion {
            seenSet = nil
            seenDataVersion = version
            pendingMayBeInTable = true
        }
    }

    /// The high-water mark of seqs: the newest journal row, or — when retention deleted rows — the
    /// value `retain` recorded in `meta` before deleting, whichever is larger. So appends write no
    /// `meta` page, and seq never goes backwards even when retention emptied the journal.
    private static func readLastSeq(_ db: SQLiteConnection) throws(SQLiteError) -> JournalSeq {
        try db.queryFirst("""
            SELECT max((SELECT value FROM meta WHERE key = 'last_seq'), coalesce((SELECT max(seq) FROM journal), 0))
            """) { $0.int64(0) } ?? 0
    }

    /// How many events over `journal.retention_events` an append may leave before retention deletes
    /// them (1/64 of the limit, at most 256; 0 for limits under 64): deleting rows frees pages, which
    /// rewrites the freelist, the table's and the index's pages in that commit. Batched, an append of
    /// one event writes ~3 pages fewer (docs/store.md, "Pages per commit").
    var retentionSlack: Int64 { Int64(min(256, max(0, options.retentionEvents) / 64)) }

    /// Adds `uid` to `user`'s seen-set, in the caller's transaction; false when it was there.
    /// The lookup goes through an in-memory index (`SeenSet`, loaded from the table on first use;
    /// a hit is confirmed by reading the bytes it points at); a new uid is a chunk of one appended
    /// to the table. At least the newest `seenPerUser` uids are kept: once the set holds
    /// `min(256, seenPerUser / 16)` more, the oldest go down to the limit (so it holds between the
    /// limit and the limit + that slack − 1; small sets are pruned exactly; keeping a few more never
    /// lets a duplicate through).
    private func insertSeen(_ seen: SeenKey, _ db: SQLiteConnection) throws -> Bool {
        if try isSeenInTable(seen, db) { return false }
        let id = try Self.insertChunk(SeenChunk.entry(seen.uid), user: seen.user, db)
        seenSet?.append(locator: SeenChunk.locator(chunk: id, offset: 0), key: seen.key)
        try pruneSeen(user: seen.user, db)
        return true
    }

    /// Forgets `user`'s oldest uids once the set passed its bound (``insertSeen(_:_:)``): the chunks
    /// wholly before the oldest uid kept are deleted, and where the kept uids start is recorded.
    private func pruneSeen(user: String, _ db: SQLiteConnection) throws {
        let limit = max(1, options.seenPerUser)
        let slack = max(1, min(256, limit / 16)) - 1
        if let kept = seenSet?.dropOldest(keeping: limit, slack: slack) {
            let chunk = SeenChunk.chunk(of: kept)
            try db.run("DELETE FROM seen_chunk WHERE id < ? AND user = ?", [.integer(chunk), .text(user)])
            try db.run("""
                INSERT INTO seen_start(user, chunk, byte) VALUES (?, ?, ?)
                ON CONFLICT(user) DO UPDATE SET chunk = excluded.chunk, byte = excluded.byte
                """, [.text(user), .integer(chunk), .integer(Int64(SeenChunk.offset(of: kept)))])
        }
    }

    /// The fold: `keys` (journal order, no key twice) become chunks of the seen table, in the
    /// caller's transaction — those not there already (checked as ``insertSeen(_:_:)`` does, unless
    /// `pendingMayBeInTable` says none can be: they were looked up as they were journaled) — one row
    /// for each run of one user's uids (`SeenChunk`). A row per uid, even 64 rows per `INSERT`, cost
    /// ~3 µs an engagement on the store's thread (binding, B-tree cells, the prune's `DELETE`): 17 %
    /// of the drain's CPU, measured by leaving the fold out of a throwaway build. The set is
    /// pruned after each chunk, so its bounds hold at every commit as with one uid at a time.
    private func foldIntoTable(_ keys: ArraySlice<SeenKey>, _ db: SQLiteConnection) throws {
        // The keys themselves unless some must be left out: a copy retains and releases two
        // strings a key (~1 % of the drain's samples).
        let fresh: ArraySlice<SeenKey>
        if pendingMayBeInTable {
            var kept: [SeenKey] = []
            kept.reserveCapacity(keys.count)
            for key in keys where try !isSeenInTable(key, db) { kept.append(key) }
            fresh = kept[...]
        } else {
            fresh = keys
        }
        var chunk: [UInt8] = []
        var offsets: [Int] = []
        var start = fresh.startIndex
        while start < fresh.endIndex {
            // A chunk: a run of one user's keys (the index covers one user at a time).
            let user = fresh[start].user
            try loadSeenSet(for: user, db)
            chunk.removeAll(keepingCapacity: true)
            offsets.removeAll(keepingCapacity: true)
            var end = start
            while end < fresh.endIndex && fresh[end].user == user && chunk.count < SeenChunk.maxBytes {
                offsets.append(chunk.count)
                SeenChunk.append(fresh[end].uid, to: &chunk)
                end += 1
            }
            let id = try Self.insertChunk(chunk, user: user, db)
            for (offset, key) in zip(offsets, fresh[start ..< end]) {
                seenSet?.append(locator: SeenChunk.locator(chunk: id, offset: offset), key: key.key)
            }
            try pruneSeen(user: user, db)
            start = end
        }
    }

    /// Appends a chunk of `user`'s uids to the table; returns its id.
    private static func insertChunk(_ chunk: [UInt8], user: String, _ db: SQLiteConnection) throws -> Int64 {
        try db.run("INSERT INTO seen_chunk(user, uids) VALUES (?, ?)", [.text(user), .blob(chunk)])
        return db.lastInsertRowID
    }

    /// Deletes the seen-sets `predicate` (on `user`; empty: all of them) selects: their chunks and
    /// where their kept uids start, together.
    private static func deleteSeen(_ predicate: String, _ values: [SQLiteValue], _ db: SQLiteConnection) throws {
        try db.run("DELETE FROM seen_chunk " + predicate, values)
        try db.run("DELETE FROM seen_start " + predicate, values)
    }

    /// Calls `body` with each chunk of `user`'s kept uids, in order: its id, its bytes and where its
    /// kept entries start. Throws `StoreError.damagedSeenChunk` for a chunk that cannot be read.
    private static func forEachSeenChunk(user: String, _ db: SQLiteConnection,
                                         _ body: (Int64, UnsafeRawBufferPointer, Int) throws -> Void) throws {
        let start = try db.queryFirst("SELECT chunk, byte FROM seen_start WHERE user = ?", [.text(user)]) {
            (chunk: $0.int64(0), byte: $0.int64(1))
        } ?? (chunk: 0, byte: 0)
        var failure: (any Error)?
        try db.forEachRow("SELECT id, uids FROM seen_chunk WHERE id >= ? AND user = ? ORDER BY id",
                          [.integer(start.chunk), .text(user)]) { row in
            let id = row.int64(0)
            do {
                try row.blob(1).withUnsafeBytes { bytes in
                    try body(id, bytes, id == start.chunk ? Int(clamping: start.byte) : 0)
                }
            } catch let damage as SeenChunk.Damage {
                failure = StoreError.damagedSeenChunk(path: db.path, id: id, offset: damage.offset)
            } catch {
                failure = error
            }
            return failure == nil
        }
        if let failure { throw failure }
    }

    /// The uids of `user`'s seen-set as the table holds them, oldest first (tests read the table
    /// through this).
    static func seenUIDs(user: String, _ db: SQLiteConnection) throws -> [String] {
        var uids: [String] = []
        try forEachSeenChunk(user: user, db) { _, chunk, start in
            try SeenChunk.forEach(chunk, from: start) { _, uid in uids.append(String(decoding: uid, as: UTF8.self)) }
        }
        return uids
    }

    /// Makes `seenSet` the index of `user`'s uids, loading it from the table unless it already is.
    private func loadSeenSet(for user: String, _ db: SQLiteConnection) throws {
        guard seenSet?.user != user else { return }
        var found: [(locator: Int64, key: Int)] = []
        try Self.forEachSeenChunk(user: user, db) { id, chunk, start in
            try SeenChunk.forEach(chunk, from: start) { offset, uid in
                found.append((SeenChunk.locator(chunk: id, offset: offset), seenKey(String(decoding: uid, as: UTF8.self))))
            }
        }
        let loaded = SeenSet(user: user)
        for (locator, key) in found { loaded.append(locator: locator, key: key) }
        seenSet = loaded
    }

    /// Whether the seen table holds `uid` for `user`, answered through the in-memory index (loaded
    /// from the table on first use; a hit is confirmed by reading the entry it points at).
    private func isSeenInTable(_ seen: SeenKey, _ db: SQLiteConnection) throws -> Bool {
        let (user, uid) = (seen.user, seen.uid)
        try loadSeenSet(for: user, db)
        guard let candidate = seenSet?.candidate(forKey: seen.key) else { return false }
        // The in-memory index holds hashes: confirm with the bytes it points at, and search the
        // user's chunks in the (~1 in 2^64) case that they hold another uid.
        if try Self.entry(at: candidate, is: uid, db) { return true }
        var found = false
        let wanted = Array(uid.utf8)
        try Self.forEachSeenChunk(user: user, db) { _, chunk, start in
            guard !found else { return }
            try SeenChunk.forEach(chunk, from: start) { _, bytes in
                if !found && bytes.elementsEqual(wanted) { found = true }
            }
        }
        return found
    }

    /// Whether the entry of `seen_chunk` at `locator` holds `uid`: its bytes there are compared with
    /// `uid`'s entry (length and bytes), without reading the rest of the chunk into memory.
    static func entry(at locator: SeenChunk.Locator, is uid: String, _ db: SQLiteConnection) throws -> Bool {
        let entry = SeenChunk.entry(uid)
        return try db.queryFirst("SELECT substr(uids, ?, ?) = ? FROM seen_chunk WHERE id = ?",
                                 [.integer(Int64(SeenChunk.offset(of: locator)) + 1), .integer(Int64(entry.count)),
                                  .blob(entry), .integer(SeenChunk.chunk(of: locator))]) { $0.int64(0) } == 1
    }

    /// Moves the rows of the `seen` table (a database of schema 7 or older: a row per uid) into
    /// chunks, in one transaction, through the fold (each user's uids in their order, pruned to
    /// the bound); the table is left empty. A crash before the commit leaves the rows where they
    /// were, for the next open.
    private func moveSeenRowsIntoChunks() throws(StoreError) {
        let any = try withDB { db in try db.queryFirst("SELECT 1 FROM seen LIMIT 1") { _ in true } != nil }
        guard any else { return }
        try inTransaction(usesSeenSet: true) { db in
            var users: [String] = []
            var keys: [String: [SeenKey]] = [:]
            try db.forEachRow("SELECT user, uid FROM seen ORDER BY id") { row in
                let (user, uid) = (row.text(0), row.text(1))
                if keys[user] == nil { users.append(user) }
                keys[user, default: []].append(SeenKey(user: user, uid: uid, key: seenKey(uid)))
                return true
            }
            // A run per user: the fold writes each as one chunk.
            try foldIntoTable(users.flatMap { keys[$0] ?? [] }[...], db)
            try db.run("DELETE FROM seen")
        }
    }

    private static func makeDirectory(_ directory: String) throws(StoreError) {
        var isDirectory = stat()
        if stat(directory, &isDirectory) == 0 { return }
        // Create missing parents too, each with 0700.
        var prefix = ""
        for component in directory.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += (prefix.isEmpty && !directory.hasPrefix("/") ? "" : "/") + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw .fileSystem(path: prefix, operation: "creating directory", errno: errno)
            }
        }
        // Make the new directory entry durable: fsync the parent.
        let parent = directory.split(separator: "/", omittingEmptySubsequences: true).dropLast().joined(separator: "/")
        let parentPath = directory.hasPrefix("/") ? "/" + parent : (parent.isEmpty ? "." : parent)
        let fd = posixOpen(parentPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0)
        if fd >= 0 {
            _ = fsync(fd)
            posixClose(fd)
        }
    }

    private static func createFile(_ path: String) throws(StoreError) {
        let fd = posixOpen(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .fileSystem(path: path, operation: "opening database file", errno: errno) }
        defer { posixClose(fd) }
        // Tighten an existing file too; the WAL and shm files inherit the database file's mode.
        _ = fchmod(fd, 0o600)
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// A random UUID v4 in lowercase (RFC 9562).
    static func makeUUID() -> String {
        var bytes = randomBytes(16)
        bytes[6] = (bytes[6] & 0x0f) | 0x40
        bytes[8] = (bytes[8] & 0x3f) | 0x80
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(36)
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { out.append(UInt8(ascii: "-")) }
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// An engagement's (user, uid), as the seen-set knows it, with the uid's keyed hash (the store's
/// `seenKey`) computed once: the sets of uids waiting to be folded, a batch's uids and the in-memory
/// index (`SeenSet`) all hash these 8 bytes, not the two strings (hashing the strings again at each
/// of them was ~1 µs an engagement on the store's thread). Equal keys are then compared in full.
struct SeenKey: Hashable {
    let user: String
    let uid: String
    /// The uid's keyed hash (the same for every user: the user is compared, not hashed).
    let key: Int

    func hash(into hasher: inout Hasher) { hasher.combine(key) }

    static func == (a: SeenKey, b: SeenKey) -> Bool { a.key == b.key && a.uid == b.uid && a.user == b.user }
}

// The actor has its own `close()`; these name the POSIX calls unambiguously.
private func posixOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 { open(path, flags, mode) }
private func posixClose(_ fd: Int32) { _ = close(fd) }
