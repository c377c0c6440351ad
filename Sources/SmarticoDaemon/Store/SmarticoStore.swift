// The daemon's durable store: device id, user and push data, the outbox, the event journal with its
// seq counter, the seen-set of engagement uids and durable subscriber cursors, in one SQLite file.
//
// Durability: WAL with synchronous=FULL, so every method that writes has committed and fsync'd before
// it returns (see docs/store.md). Threading: the actor runs on its own thread (`StoreThreadExecutor`),
// so callers simply `await` and the blocking SQLite work never touches the cooperative pool.
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
    private var cachedLastSeq: JournalSeq = 0
    /// The seen-set of the user last journaled for, in memory (nil: load it from the table first).
    /// Dropped whenever it may differ from the table: a failed transaction, a write by another
    /// connection (`seenDataVersion`), a user's set cleared.
    private var seenSet: SeenSet?
    /// `PRAGMA data_version` when `seenSet` was last known to match the table: it changes when
    /// another connection (another process) commits.
    private var seenDataVersion: Int64 = -1
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
            cachedLastSeq = try withDB { db in try Self.readLastSeq(db) }
        } catch {
            close()
            throw error
        }
    }

    /// A store released without `close()` still closes its database on its own thread (closing the last
    /// connection checkpoints the WAL, which blocks), not on whichever thread dropped the last reference.
    isolated deinit {
        db?.close()
    }

    /// Closes the database. Every acknowledged write is already on disk; later calls throw `.closed`.
    public func close() {
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
            try db.run("DELETE FROM seen WHERE user <> ?", [.text(user.extUserID)])
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
            try db.run("DELETE FROM seen")
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

    /// Group commit: journals every write of `writes`, in order, in **one** transaction (one `fsync`),
    /// and returns one result per write: its seq, or nil for an engagement whose uid was already
    /// seen (including earlier in the same batch). Retention runs once, after the batch. The driver
    /// hands over every event that arrived while the previous commit ran, so under load the cost of
    /// the commit is shared by the batch (docs/store.md, "Group commit").
    public func journal(_ writes: [JournalWrite]) throws(StoreError) -> [JournalSeq?] {
        guard !writes.isEmpty else { return [] }
        let results = try seenSetTransaction { db -> [JournalSeq?] in
            var seq = try Self.readLastSeq(db)
            let first = seq
            var newest = Int64.min
            var results: [JournalSeq?] = []
            results.reserveCapacity(writes.count)
            for write in writes {
                if let seen = write.seen, try !self.insertSeen(user: seen.user, uid: seen.uid, db) {
                    results.append(nil)
                    continue
                }
                seq += 1
                try self.insertJournalRow(seq: seq, write.event, db)
                newest = max(newest, write.event.tsMs)
                results.append(seq)
            }
            // No meta write here: while the journal holds rows, its newest seq is the high-water
            // mark (`readLastSeq`); `retain` records it in `meta` before it deletes any.
            if seq != first { _ = try self.retain(nowMs: newest, last: seq, slack: self.retentionSlack, db) }
            return results
        }
        if let last = results.lazy.compactMap({ $0 }).last { cachedLastSeq = last }
        return results
    }

    /// Marks `uid` seen for `user`; true when it was new. At least the newest `seenPerUser` uids are
    /// kept (pruning runs every few inserts, see `insertSeen`).
    public func markSeen(user: String, uid: String) throws(StoreError) -> Bool {
        try seenSetTransaction { db in try self.insertSeen(user: user, uid: uid, db) }
    }

    /// Forgets the seen-set of `user`.
    public func clearSeen(user: String) throws(StoreError) {
        if seenSet?.user == user { seenSet = nil }
        try inTransaction { db in try db.run("DELETE FROM seen WHERE user = ?", [.text(user)]) }
    }

    /// Up to `limit` journaled events with a seq greater than `after`, in seq order; only those whose
    /// name is in `types` when given.
    public func events(after: JournalSeq, limit: Int, types: Set<String>? = nil) throws(StoreError) -> [JournalEvent] {
        guard limit > 0 else { return [] }
        return try withDB { db in
            var result: [JournalEvent] = []
            if let types {
                // Filter here rather than in SQL: one cached statement, and `data` is read only for rows
                // that match. The scan is bounded by retention.
                try db.forEachRow("SELECT seq, name, ts_ms, data FROM journal WHERE seq > ? ORDER BY seq",
                                  [.integer(after)]) { row in
                    let name = row.text(1)
                    if types.contains(name) {
                        result.append(JournalEvent(seq: row.int64(0), name: name, tsMs: row.int64(2), data: row.blob(3)))
                    }
                    return result.count < limit
                }
            } else {
                result = try db.query("SELECT seq, name, ts_ms, data FROM journal WHERE seq > ? ORDER BY seq LIMIT ?",
                                      [.integer(after), .integer(Int64(limit))]) { row in
                    JournalEvent(seq: row.int64(0), name: row.text(1), tsMs: row.int64(2), data: row.blob(3))
                }
            }
            return result
        }
    }

    /// The last seq ever assigned (0 before the first event). Never goes backwards.
    public func lastSeq() -> JournalSeq { cachedLastSeq }

    /// The smallest stored seq (nil when the journal is empty) and the last assigned seq.
    public func journalBounds() throws(StoreError) -> JournalBounds {
        let first = try withDB { db in try db.queryFirst("SELECT min(seq) FROM journal") { $0.optionalInt64(0) } ?? nil }
        return JournalBounds(firstSeq: first, lastSeq: cachedLastSeq)
    }

    /// Applies retention now: keeps at most `retentionEvents` events and none older than
    /// `retentionHours` before `nowMs`. Returns how many events were deleted. The seq counter is kept.
    @discardableResult
    public func applyRetention(nowMs: Int64) throws(StoreError) -> Int {
        try inTransaction { db in try self.retain(nowMs: nowMs, db) }
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
        return try inTransaction { db in
            let last = try Self.readLastSeq(db)
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
        db?.releaseCacheMemory() ?? 0
    }

    /// The heap memory the page cache holds now.
    public func cacheBytes() -> Int { db?.cacheBytes ?? 0 }

    /// The kernel id of the thread running this method (tests use it to show the store thread sleeps).
    func currentThreadID() -> Int32? {
        currentKernelThreadID()
    }

    // MARK: private

    private func withDB<T>(_ body: (SQLiteConnection) throws -> T) throws(StoreError) -> T {
        guard let db else { throw .closed }
        do {
            return try body(db)
        } catch let error as StoreError {
            throw error
        } catch let error as SQLiteError {
            throw .sqlite(error)
        } catch {
            throw .other(String(describing: error))
        }
    }

    private func inTransaction<T>(_ body: (SQLiteConnection) throws -> T) throws(StoreError) -> T {
        guard let db else { throw .closed }
        return try db.transaction { try body(db) }
    }

    /// The high-water mark of seqs: the newest journal row, or — when retention deleted rows — the
    /// value `retain` recorded in `meta` before deleting, whichever is larger. So appends write no
    /// `meta` page, and seq never goes backwards even when retention emptied the journal.
    private static func readLastSeq(_ db: SQLiteConnection) throws(SQLiteError) -> JournalSeq {
        try db.queryFirst("""
            SELECT max((SELECT value FROM meta WHERE key = 'last_seq'), coalesce((SELECT max(seq) FROM journal), 0))
            """) { $0.int64(0) } ?? 0
    }

    private func insertJournalRow(seq: JournalSeq, _ event: NewJournalEvent, _ db: SQLiteConnection) throws {
        try db.run("INSERT INTO journal(seq, name, ts_ms, data) VALUES (?, ?, ?, ?)",
                   [.integer(seq), .text(event.name), .integer(event.tsMs), .blob(event.data)])
    }

    /// How many events over `journal.retention_events` an append may leave before retention deletes
    /// them (1/64 of the limit, at most 256; 0 for limits under 64): deleting rows frees pages, which
    /// rewrites the freelist, the table's and the index's pages in that commit. Batched, an append of
    /// one event writes ~3 pages fewer (docs/store.md, "Pages per commit").
    var retentionSlack: Int64 { Int64(min(256, max(0, options.retentionEvents) / 64)) }

    /// Deletes what retention no longer keeps: by count once more than `slack` events are over the
    /// limit, and by age. Records the seq high-water mark in `meta` first when it deletes anything.
    /// `last`: the high-water mark when the caller already knows it (an append just assigned it).
    private func retain(nowMs: Int64, last known: JournalSeq? = nil, slack: Int64 = 0, _ db: SQLiteConnection) throws -> Int {
        let last = try known ?? Self.readLastSeq(db)
        let keep = Int64(max(0, options.retentionEvents))
        let (window, overflow) = Int64(max(0, options.retentionHours)).multipliedReportingOverflow(by: 3_600_000)
        let cutoff: Int64? = !overflow && nowMs > Int64.min + window ? nowMs - window : nil
        let oldest = try db.queryFirst("SELECT seq, ts_ms FROM journal ORDER BY seq LIMIT 1") { ($0.int64(0), $0.int64(1)) }
        guard let (first, firstTsMs) = oldest else { return 0 }
        let byCount = last - keep >= first + slack
        let byAge = cutoff.map { firstTsMs < $0 } ?? false
        guard byCount || byAge else { return 0 }
        try db.run("UPDATE meta SET value = ? WHERE key = 'last_seq'", [.integer(last)])
        var deleted = 0
        if byCount {
            try db.run("DELETE FROM journal WHERE seq <= ?", [.integer(last - keep)])
            deleted += db.changes
        }
        if byAge, let cutoff {
            // In journal order: the oldest rows up to the first one inside the window. Rows are
            // journaled in receive-time order, so this is every row older than the cutoff unless
            // the wall clock went backwards; then a younger row ahead keeps older ones until it
            // ages out itself (or count retention takes them). No ts_ms index (schema 4): the
            // walk costs the rows it deletes.
            try db.run("""
                DELETE FROM journal WHERE seq < coalesce(
                    (SELECT seq FROM journal WHERE ts_ms >= ?1 ORDER BY seq LIMIT 1), ?2)
                """, [.integer(cutoff), .integer(last + 1)])
            deleted += db.changes
        }
        return deleted
    }

    /// A transaction that may use the in-memory seen-set: checks first that no other connection
    /// changed the database since the set was last current, and drops the set when the
    /// transaction fails (its rows were rolled back, the set may hold some of them).
    private func seenSetTransaction<T>(_ body: (SQLiteConnection) throws -> T) throws(StoreError) -> T {
        do {
            return try inTransaction { db in
                let version = try db.queryFirst("PRAGMA data_version") { $0.int64(0) } ?? -1
                if version != seenDataVersion {
                    seenSet = nil
                    seenDataVersion = version
                }
                return try body(db)
            }
        } catch {
            seenSet = nil
            throw error
        }
    }

    /// Adds `uid` to `user`'s seen-set, in the caller's transaction; false when it was there.
    /// The lookup goes through an in-memory index (`SeenSet`, loaded from the table on first use;
    /// a hit is confirmed by reading one row); a new uid is a row appended to the table. At least
    /// the newest `seenPerUser` uids are kept: once the set holds `min(256, seenPerUser / 16)`
    /// more, the oldest go down to the limit (so it holds
    /// between the limit and the limit + that slack − 1; small sets are pruned exactly; keeping a
    /// few more never lets a duplicate through).
    private func insertSeen(user: String, uid: String, _ db: SQLiteConnection) throws -> Bool {
        if seenSet?.user != user {
            var loaded = SeenSet(user: user, key: seenKey)
            try db.forEachRow("SELECT id, uid FROM seen WHERE user = ? ORDER BY id", [.text(user)]) { row in
                loaded.append(id: row.int64(0), uid: row.text(1))
                return true
            }
            seenSet = loaded
        }
        if let candidate = seenSet?.candidateRow(for: uid) {
            // The in-memory index holds hashes: confirm with the row it points at, and ask the
            // table itself in the (~1 in 2^64) case that the row holds another uid.
            if try db.queryFirst("SELECT uid FROM seen WHERE id = ?", [.integer(candidate)], { $0.text(0) }) == uid {
                return false
            }
            if try db.queryFirst("SELECT 1 FROM seen WHERE user = ? AND uid = ? LIMIT 1", [.text(user), .text(uid)], { _ in true }) != nil {
                return false
            }
        }
        try db.run("INSERT INTO seen(user, uid) VALUES (?, ?)", [.text(user), .text(uid)])
        seenSet?.append(id: db.lastInsertRowID, uid: uid)
        let limit = max(1, options.seenPerUser)
        let slack = max(1, min(256, limit / 16)) - 1
        if let upTo = seenSet?.dropOldest(keeping: limit, slack: slack) {
            // The rows forgotten are the user's oldest: a rowid range from the table's start.
            try db.run("DELETE FROM seen WHERE id <= ? AND user = ?", [.integer(upTo), .text(user)])
        }
        return true
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

// The actor has its own `close()`; these name the POSIX calls unambiguously.
private func posixOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 { open(path, flags, mode) }
private func posixClose(_ fd: Int32) { _ = close(fd) }
