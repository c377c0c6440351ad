// The daemon's durable store: one SQLite database in the state directory holding the device id, the
// user and push data, the outbox, the latest-value slots, the event journal, the seen-set of
// engagement uids and the durable subscriber cursors (docs/store.md).
//
// Durability: WAL with synchronous=FULL, so every method that writes has committed and fsync'd before
// it returns; a batch of journal writes is one transaction.
// Threading: the actor runs on its own thread (`StoreThreadExecutor`), so callers simply `await` and the
// blocking file work never touches the cooperative pool nor the event loop.
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
    /// The page size of a new database: 8 KiB. A journal row is an event's data — for an engagement
    /// the 110 as received (about 2 KB) and its popup URL — so with SQLite's default of 4 KiB a
    /// row of just over half a page took a page of its own, and every event moved a page or more
    /// through the WAL, the checkpoint and retention; an 8 KiB page holds three such rows
    /// (docs/store.md, "Pages").
    static let pageSize = 8192

    /// The folder of event-log segments a development build of smarticod kept beside the database.
    static let developmentEventsFolder = "events"

    /// The executor every isolated method runs on: one dedicated thread.
    public nonisolated let executor: StoreThreadExecutor
    /// Makes every isolated method run on `executor`'s thread.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// The database file.
    public nonisolated let path: String
    private let directory: String
    private var options: StoreOptions
    private var db: SQLiteConnection?
    /// Runs the WAL's checkpoints off the commit path (``WALCheckpointer``); nil while closed.
    private var checkpointer: WALCheckpointer?
    private var cachedDeviceID = ""
    private var cachedJournalID = ""

    /// What retention and `journalBounds` need to know of the journal without reading it; changed
    /// only after the transaction that changed the table committed.
    private struct JournalState {
        /// The high-water mark of seqs (`counters.last_seq`).
        var lastSeq: JournalSeq = 0
        /// The oldest seq kept, nil when the journal is empty.
        var firstSeq: JournalSeq?
        /// How many events the journal holds.
        var count: Int64 = 0
        /// The sum of their data's sizes (`counters.journal_bytes`).
        var bytes: Int64 = 0
    }

    private var journalState = JournalState()
    /// Uids added to the seen-set since it was last pruned.
    private var seenSincePrune = 0

    init(directory: String, options: StoreOptions) {
        self.directory = directory
        self.path = directory.hasSuffix("/") ? directory + Self.fileName : directory + "/" + Self.fileName
        self.options = options
        self.executor = StoreThreadExecutor()
    }

    /// Opens (creating when missing) the store in `directory`: the directory is created with mode 0700,
    /// the database file with 0600; the device id is generated on first use. Throws
    /// `StoreError.databaseTooNew` for a database of a newer smarticod and `.developmentFormat` for a
    /// store written by a development build (schema 1 to 8 without this format's mark, or an
    /// `events/` folder of segment files beside it).
    public static func open(directory: String, options: StoreOptions = StoreOptions()) async throws(StoreError)
        -> SmarticoStore
    {
        let store = SmarticoStore(directory: directory, options: options)
        try await store.openDatabase()
        return store
    }

    /// Opens the database of a store made with `init` (after a damaged one was moved aside).
    func reopen() throws(StoreError) { try openDatabase() }

    private func openDatabase() throws(StoreError) {
        try Self.makeDirectory(directory)
        try Self.refuseDevelopmentFiles(directory)
        try Self.createFile(path)
        let connection: SQLiteConnection
        do {
            // SQLITE_OPEN_NOFOLLOW refuses a link anywhere in the path it is given: hand it the
            // state directory's real path (state_dir may be reached through links the
            // administrator made), so that only a link at the database's own name is refused.
            connection = try SQLiteConnection(path: Self.realDirectory(directory).map { $0 + "/" + Self.fileName } ?? path)
        } catch {
            // SQLITE_CANTOPEN_SYMLINK, a macro Swift does not import.
            if error.extendedCode == SQLITE_CANTOPEN | (6 << 8) {
                throw .unsafeStateDir(path: path, reason: Self.symbolicLinkRefusal(path))
            }
            throw .sqlite(error)
        }
        do {
            try connection.execute("PRAGMA busy_timeout = \(max(0, options.busyTimeoutMs))")
            // Before anything is written (the journal mode is): a refused file stays as it was.
            let empty = try StoreSchema.check(connection)
            // Damage the schema check did not reach (docs/store.md, "A damaged database"): read-only,
            // one pass over the file.
            if !empty {
                let problems = try connection.query("PRAGMA quick_check(3)") { $0.text(0) }
                if problems != ["ok"] {
                    throw StoreError.sqlite(SQLiteError(
                        code: SQLITE_CORRUPT, extendedCode: SQLITE_CORRUPT,
                        message: "PRAGMA quick_check found damage: " + problems.joined(separator: "; "),
                        sql: "PRAGMA quick_check", path: path))
                }
            }
            // A new database gets pages of ``pageSize`` (an existing one keeps the size it was made with).
            if empty { try connection.execute("PRAGMA page_size = \(Self.pageSize)") }
            let mode = try connection.queryFirst("PRAGMA journal_mode = WAL") { $0.text(0) } ?? ""
            guard mode.lowercased() == "wal" else {
                throw StoreError.walUnavailable(path: path, journalMode: mode)
            }
            // FULL: the WAL is fsync'd at every commit, so a commit survives power loss.
            try connection.execute("PRAGMA synchronous = FULL")
            // Bound the WAL file left after checkpoints.
            try connection.execute("PRAGMA journal_size_limit = 4194304")
            if empty { try StoreSchema.create(connection) } else { try StoreSchema.migrate(connection) }
        } catch {
            connection.close()
            throw Self.storeError(error)
        }
        db = connection
        connection.takeOverCheckpoints()
        let pageSize = (try? connection.queryFirst("PRAGMA page_size") { Int($0.int64(0)) }) ?? nil
        checkpointer = WALCheckpointer(path: connection.path, pageSize: pageSize ?? 4096)
        do {
            try inTransaction { db in
                try db.run("INSERT OR IGNORE INTO meta(key, value) VALUES ('device_id', ?)", [.text(Self.makeUUID())])
                try db.run("INSERT OR IGNORE INTO meta(key, value) VALUES ('fp_seed', ?)", [.blob(Self.randomBytes(16))])
                // Names this journal: a store created in place of a damaged one has another, so a seq an
                // app kept from the old journal is never taken for a position in this one.
                try db.run("INSERT OR IGNORE INTO meta(key, value) VALUES ('journal_id', ?)", [.text(Self.makeUUID())])
                // Bring every seen-set within its bound (the count of uids since the last pruning is
                // not kept across restarts).
                for user in try db.query("SELECT DISTINCT user FROM seen", [], { $0.text(0) }) {
                    try self.pruneSeen(user: user, db)
                }
            }
            try withDB { db in
                cachedDeviceID = try db.queryFirst("SELECT value FROM meta WHERE key = 'device_id'") { $0.text(0) } ?? ""
                cachedJournalID = try db.queryFirst("SELECT value FROM meta WHERE key = 'journal_id'") { $0.text(0) } ?? ""
                journalState.lastSeq = try Self.counter("last_seq", db)
                journalState.bytes = try Self.counter("journal_bytes", db)
                try db.forEachRow("SELECT min(seq), count(*) FROM journal") { row in
                    journalState.firstSeq = row.optionalInt64(0)
                    journalState.count = row.int64(1)
                    return false
                }
            }
        } catch {
            close()
            throw error
        }
    }

    /// A store released without `close()` still closes its database on its own thread (closing the last
    /// connection checkpoints the WAL, which blocks), not on whichever thread dropped the last reference.
    isolated deinit {
        close()
    }

    /// Closes the database. Every acknowledged write is already on disk; later calls throw `.closed`.
    /// The checkpointer's connection closes first: the store's, the last, checkpoints what the
    /// WAL still holds and removes it.
    public func close() {
        checkpointer?.close()
        checkpointer = nil
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

    /// The journal's id: a random UUID generated with the store (the subscribe answer's `journal`).
    /// Seqs are positions in one journal; a fresh store after a damaged one starts again at 1 under a new id.
    public func journalID() -> String { cachedJournalID }

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

    /// `client.language` last queued for `user` (nil: the anonymous session), under
    /// `x.language_sent.<user>` (`x.language_sent.` for the anonymous session).
    public func setLanguageSent(_ language: String, user: String?) throws(StoreError) {
        try setMetaValue(Self.languageSentPrefix + (user ?? ""), Array(language.utf8))
    }

    /// Every `setLanguageSent` value, keyed by user ("" for the anonymous session).
    public func languagesSent() throws(StoreError) -> [String: String] {
        let prefix = "x." + Self.languageSentPrefix
        let rows: [(String, String)] = try withDB { db in
            // The keys from the prefix up to the next one ('/' follows '.'), without LIKE's wildcards.
            try db.query("SELECT key, value FROM meta WHERE key >= ? AND key < ?",
                         [.text(prefix), .text("x.language_sent/")]) { ($0.text(0), String(decoding: $0.blob(1), as: UTF8.self)) }
        }
        var out: [String: String] = [:]
        for (k, v) in rows { out[String(k.dropFirst(prefix.count))] = v }
        return out
    }

    static let languageSentPrefix = "language_sent."

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

    /// Replaces the current user. The seen-sets stay until the server accepts a user
    /// (``keepSeen(only:)``): a switch the server refuses brings the previous user back with its
    /// seen-set, so its re-delivered engagements are not shown twice.
    public func setUser(_ user: StoredUser) throws(StoreError) {
        try inTransaction { db in
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

    /// Stores a client message made for `user` (nil: on an anonymous session), after the ones already
    /// waiting. Throws `.queueFull` when `maxOutboxMessages` are waiting and `.duplicateUUID` for a
    /// uuid already in the outbox. On return the message is on disk.
    public func enqueue(
        uuid: String, cid: Int, kind: OutboxKind = .socket, payload: [UInt8], createdMs: Int64, user: String? = nil
    ) throws(StoreError) {
        let max = options.maxOutboxMessages
        try inTransaction { db in
            let depth = try db.queryFirst("SELECT count(*) FROM outbox") { $0.int64(0) } ?? 0
            guard depth < Int64(max) else { throw StoreError.queueFull(max: max) }
            if try db.queryFirst("SELECT 1 FROM outbox WHERE uuid = ?", [.text(uuid)], { _ in true }) != nil {
                throw StoreError.duplicateUUID(uuid)
            }
            try db.run("INSERT INTO outbox(uuid, cid, kind, payload, created_ms, user) VALUES (?, ?, ?, ?, ?, ?)",
                       [.text(uuid), .integer(Int64(cid)), .text(kind.rawValue), .blob(payload), .integer(createdMs),
                        user.map { .text($0) } ?? .null])
        }
    }

    /// Up to `limit` waiting messages, oldest first; only those of `kind` when given.
    public func peek(limit: Int, kind: OutboxKind? = nil) throws(StoreError) -> [OutboxMessage] {
        guard limit > 0 else { return [] }
        return try withDB { db in
            let columns = "SELECT position, uuid, cid, kind, payload, created_ms, attempts, user FROM outbox"
            let map: (SQLiteRow) -> OutboxMessage = { row in
                OutboxMessage(position: row.int64(0), uuid: row.text(1), cid: Int(row.int64(2)),
                              kind: OutboxKind(rawValue: row.text(3)) ?? .socket, payload: row.blob(4),
                              createdMs: row.int64(5), attempts: Int(row.int64(6)), user: row.optionalText(7))
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

    /// Removes every waiting message made for `user` (nil: the anonymous ones), outbox rows and
    /// latest-value slots, in one transaction; returns how many. For messages that can never be sent
    /// under their own user (daemon.md, session rule 5).
    @discardableResult
    public func dropOutbox(user: String?) throws(StoreError) -> Int {
        try inTransaction { db in
            let match = user == nil ? "user IS NULL" : "user = ?"
            let args: [SQLiteValue] = user.map { [.text($0)] } ?? []
            try db.run("DELETE FROM outbox WHERE " + match, args)
            var removed = db.changes
            try db.run("DELETE FROM latest WHERE " + match, args)
            removed += db.changes
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
    public func putLatest(slot: String, uuid: String, cid: Int, payload: [UInt8], createdMs: Int64,
                          user: String? = nil) throws(StoreError) {
        try inTransaction { db in
            try db.run("""
                INSERT INTO latest(slot, uuid, cid, payload, created_ms, user) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(slot) DO UPDATE SET uuid = excluded.uuid, cid = excluded.cid,
                    payload = excluded.payload, created_ms = excluded.created_ms, user = excluded.user
                """,
                [.text(slot), .text(uuid), .integer(Int64(cid)), .blob(payload), .integer(createdMs),
                 user.map { .text($0) } ?? .null])
        }
    }

    /// The filled latest-value slots, oldest first. Remove one after sending with `markSent([uuid])`:
    /// a newer value put meanwhile has another uuid and stays.
    public func latestMessages() throws(StoreError) -> [LatestMessage] {
        try withDB { db in
            try db.query("SELECT slot, uuid, cid, payload, created_ms, user FROM latest ORDER BY created_ms, slot") { row in
                LatestMessage(slot: row.text(0), uuid: row.text(1), cid: Int(row.int64(2)),
                              payload: row.blob(3), createdMs: row.int64(4), user: row.optionalText(5))
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

    // MARK: HTTP queue

    /// Stores a public API call after those already waiting; on return it is on disk. Throws
    /// `.queueFull` when `max` wait already.
    public func enqueueHTTP(
        uuid: String, kind: HTTPCallKind, request: [UInt8], user: String?, createdMs: Int64, max: Int
    ) throws(StoreError) {
        try inTransaction { db in
            let depth = try db.queryFirst("SELECT count(*) FROM http_queue") { $0.int64(0) } ?? 0
            guard depth < Int64(max) else { throw StoreError.queueFull(max: max) }
            try db.run("INSERT INTO http_queue(uuid, kind, request, user, created_ms) VALUES (?, ?, ?, ?, ?)",
                       [.text(uuid), .text(kind.rawValue), .blob(request), .optionalText(user), .integer(createdMs)])
        }
    }

    /// The oldest waiting call, or nil.
    public func firstHTTP() throws(StoreError) -> HTTPCall? {
        try withDB { db in
            try db.queryFirst("""
                SELECT position, uuid, kind, request, user, created_ms, attempts, next_ms, last_error
                FROM http_queue ORDER BY position LIMIT 1
                """) { row in
                HTTPCall(position: row.int64(0), uuid: row.text(1), kind: HTTPCallKind(rawValue: row.text(2)) ?? .pushReport,
                         request: row.blob(3), user: row.optionalText(4), createdMs: row.int64(5),
                         attempts: Int(row.int64(6)), nextMs: row.int64(7), lastError: row.optionalText(8))
            }
        }
    }

    /// Removes a call that was delivered (a 2xx) or dropped (another 4xx). Returns whether it was there.
    @discardableResult
    public func removeHTTP(uuid: String) throws(StoreError) -> Bool {
        try inTransaction { db in
            try db.run("DELETE FROM http_queue WHERE uuid = ?", [.text(uuid)])
            return db.changes > 0
        }
    }

    /// Records a failed attempt: one more attempt, not before `nextMs`, and why.
    public func failedHTTP(uuid: String, nextMs: Int64, error: String) throws(StoreError) {
        try inTransaction { db in
            try db.run("UPDATE http_queue SET attempts = attempts + 1, next_ms = ?, last_error = ? WHERE uuid = ?",
                       [.integer(nextMs), .text(error), .text(uuid)])
        }
    }

    /// Depth and oldest time of the HTTP queue.
    public func httpQueueStatus() throws(StoreError) -> HTTPQueueStatus {
        try withDB { db in
            try db.queryFirst("SELECT count(*), min(created_ms) FROM http_queue") {
                HTTPQueueStatus(depth: Int($0.int64(0)), oldestMs: $0.optionalInt64(1))
            } ?? HTTPQueueStatus(depth: 0, oldestMs: nil)
        }
    }

    // MARK: journal

    /// Journals `events` in one transaction and returns their seqs, in order, after the commit reached
    /// the disk.
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

    /// Journals every write of `writes`, in order, in **one** transaction (one `fsync`), and returns
    /// one result per write: its seq, or nil for an engagement whose uid was already seen (including
    /// earlier in the same batch). Retention (relative to the newest `tsMs` of the batch) runs in the
    /// same transaction when a limit is exceeded. When it throws, nothing of the batch was journaled.
    public func journal(_ writes: [JournalWrite]) throws(StoreError) -> [JournalSeq?] {
        guard !writes.isEmpty else { return [] }
        var state = journalState
        var seenAdded = 0
        let results = try inTransaction { db -> [JournalSeq?] in
            var results: [JournalSeq?] = []
            results.reserveCapacity(writes.count)
            var newest = Int64.min
            var users: Set<String> = []
            for write in writes {
                if let seen = write.seen {
                    try db.run("INSERT OR IGNORE INTO seen(user, uid) VALUES (?, ?)", [.text(seen.user), .text(seen.uid)])
                    guard db.changes == 1 else {
                        results.append(nil)
                        continue
                    }
                    seenAdded += 1
                    users.insert(seen.user)
                }
                state.lastSeq += 1
                try db.run("INSERT INTO journal(seq, name, ts_ms, data) VALUES (?, ?, ?, ?)",
                           [.integer(state.lastSeq), .text(write.event.name), .integer(write.event.tsMs),
                            .blob(write.event.data)])
                state.firstSeq = state.firstSeq ?? state.lastSeq
                state.count += 1
                state.bytes += Int64(write.event.data.count)
                newest = max(newest, write.event.tsMs)
                results.append(state.lastSeq)
            }
            guard state.lastSeq != journalState.lastSeq else { return results }
            try Self.setCounter("last_seq", state.lastSeq, db)
            try Self.setCounter("journal_bytes", state.bytes, db)
            try self.retain(&state, nowMs: newest, db)
            if self.seenPruneDue(adding: seenAdded) {
                for user in users { try self.pruneSeen(user: user, db) }
            }
            return results
        }
        journalState = state
        noteSeenAdded(seenAdded)
        return results
    }

    /// Marks `uid` seen for `user` without journaling anything; true when it was new.
    public func markSeen(user: String, uid: String) throws(StoreError) -> Bool {
        let added = try inTransaction { db -> Bool in
            try db.run("INSERT OR IGNORE INTO seen(user, uid) VALUES (?, ?)", [.text(user), .text(uid)])
            guard db.changes == 1 else { return false }
            if self.seenPruneDue(adding: 1) { try self.pruneSeen(user: user, db) }
            return true
        }
        if added { noteSeenAdded(1) }
        return added
    }

    /// Forgets every seen-set but `user`'s: the server accepted `user` as the daemon's user.
    public func keepSeen(only user: String) throws(StoreError) {
        try inTransaction { db in try db.run("DELETE FROM seen WHERE user <> ?", [.text(user)]) }
    }

    /// Forgets the seen-set of `user`.
    public func clearSeen(user: String) throws(StoreError) {
        try inTransaction { db in try db.run("DELETE FROM seen WHERE user = ?", [.text(user)]) }
    }

    /// The seen-set is pruned once this many uids were added since the last pruning: it holds between
    /// `limit` and `limit + seenPruneEvery(limit) - 1` uids per user.
    static func seenPruneEvery(_ limit: Int) -> Int { max(1, min(64, limit / 16)) }

    /// Whether the seen-set is pruned in a transaction that adds `added` uids.
    private func seenPruneDue(adding added: Int) -> Bool {
        added > 0 && seenSincePrune + added >= Self.seenPruneEvery(options.seenPerUser)
    }

    /// Counts `added` uids after their transaction committed (pruned in it when that was due).
    private func noteSeenAdded(_ added: Int) {
        seenSincePrune = seenPruneDue(adding: added) ? 0 : seenSincePrune + added
    }

    /// Deletes `user`'s oldest uids beyond `seenPerUser`, in the caller's transaction.
    private func pruneSeen(user: String, _ db: SQLiteConnection) throws {
        try db.run("""
            DELETE FROM seen WHERE user = ?1
                AND id <= (SELECT id FROM seen WHERE user = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)
            """, [.text(user), .integer(Int64(max(1, options.seenPerUser)))])
    }

    /// Journaled events with a seq greater than `after`, in seq order; only those whose name is in
    /// `types` when given. At most `limit` of them, and — when `maxBytes` is given — no more than
    /// fit in that many bytes of data, but always at least one when there is one.
    public func events(after: JournalSeq, limit: Int, types: Set<String>? = nil, maxBytes: Int? = nil)
        throws(StoreError) -> [JournalEvent]
    {
        guard limit > 0, after < JournalSeq.max else { return [] }
        return try withDB { db in
            var result: [JournalEvent] = []
            var bytes = 0
            try db.forEachRow("SELECT seq, name, ts_ms, data FROM journal WHERE seq > ? ORDER BY seq",
                              [.integer(after)]) { row in
                let name = row.text(1)
                guard types?.contains(name) ?? true else { return true }
                let data = row.blob(3)
                if let maxBytes, !result.isEmpty, bytes + data.count > maxBytes { return false }
                bytes += data.count
                result.append(JournalEvent(seq: row.int64(0), name: name, tsMs: row.int64(2), data: data))
                return result.count < limit
            }
            return result
        }
    }

    /// Journaled events as subscribers get them: those of ``events(after:limit:types:maxBytes:)``,
    /// each with its line's `data` — an engagement's row gets back the `bridge` it was journaled
    /// without (``EngagementJournal``), so nothing outside the store knows how a row is laid out.
    public func lines(after: JournalSeq, limit: Int, types: Set<String>? = nil) throws(StoreError) -> [JournalEvent] {
        var events = try events(after: after, limit: limit, types: types)
        for i in events.indices {
            events[i].data = EngagementJournal.lineData(name: events[i].name, journaled: events[i].data)
        }
        return events
    }

    /// The last seq ever assigned (0 before the first event). Never goes backwards.
    public func lastSeq() -> JournalSeq { journalState.lastSeq }

    /// The oldest stored seq (nil when the journal is empty) and the last assigned seq.
    public func journalBounds() throws(StoreError) -> JournalBounds {
        guard db != nil else { throw .closed }
        return JournalBounds(firstSeq: journalState.firstSeq, lastSeq: journalState.lastSeq)
    }

    /// Applies retention now: keeps at most `retentionEvents` events, none received before `nowMs`
    /// minus `retentionHours`, and their data within `maxJournalBytes` (the newest event is kept by
    /// that limit). Returns how many events were deleted. The seq counter is kept.
    @discardableResult
    public func applyRetention(nowMs: Int64) throws(StoreError) -> Int {
        var state = journalState
        let deleted = try inTransaction { db in try self.retain(&state, nowMs: nowMs, db) }
        journalState = state
        return deleted
    }

    /// Deletes the oldest events, in the caller's transaction, until every limit holds (age in journal
    /// order: the events from the first one received after the cut-off on are kept). Cheap when no
    /// limit is exceeded: one row read. Returns how many events it deleted.
    @discardableResult
    private func retain(_ state: inout JournalState, nowMs: Int64, _ db: SQLiteConnection) throws -> Int {
        guard let first = state.firstSeq else { return 0 }
        let maxEvents = Int64(max(0, options.retentionEvents))
        let maxBytes = Int64(max(0, options.maxJournalBytes))
        let (window, overflow) = Int64(max(0, options.retentionHours)).multipliedReportingOverflow(by: 3_600_000)
        let cutoff: Int64? = overflow || nowMs <= Int64.min + window ? nil : nowMs - window
        let oldestTs = try db.queryFirst("SELECT ts_ms FROM journal WHERE seq = ?", [.integer(first)]) { $0.int64(0) }
        let tooOld = cutoff.map { (oldestTs ?? .max) < $0 } ?? false
        guard state.count > maxEvents || state.bytes > maxBytes || tooOld else { return 0 }
        var remaining = state.count
        var bytes = state.bytes
        var upTo: JournalSeq?
        try db.forEachRow("SELECT seq, ts_ms, length(data) FROM journal ORDER BY seq") { row in
            let old = cutoff.map { row.int64(1) < $0 } ?? false
            // The newest event always stays, so `last_seq` names an event a replay can read.
            guard remaining > 1, remaining > maxEvents || old || bytes > maxBytes else { return false }
            upTo = row.int64(0)
            remaining -= 1
            bytes -= row.int64(2)
            return true
        }
        guard let upTo else { return 0 }
        try db.run("DELETE FROM journal WHERE seq <= ?", [.integer(upTo)])
        let deleted = state.count - remaining
        state.count = remaining
        state.bytes = bytes
        state.firstSeq = try db.queryFirst("SELECT min(seq) FROM journal") { $0.optionalInt64(0) } ?? nil
        try Self.setCounter("journal_bytes", bytes, db)
        return Int(deleted)
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
    ///
    /// `uid`: the peer acknowledging (socket-api.md, "Permissions"). A name owned by another uid
    /// throws `.cursorOwned` (root, uid 0, excepted); a name without an owner is claimed; a new name
    /// is owned by `uid`, and beyond `maxPerOwner` names of that uid throws `.tooManyCursorsForOwner`
    /// (root is not limited). Nil: no ownership checks (tools, tests).
    @discardableResult
    public func setCursor(
        _ name: String, _ seq: JournalSeq, uid: UInt32? = nil, maxPerOwner: Int = .max
    ) throws(StoreError) -> JournalSeq {
        guard !name.isEmpty else { throw .invalidArgument("a durable subscription name must not be empty") }
        guard seq >= 0 else { throw .invalidArgument("cannot acknowledge negative seq \(seq) for \"\(name)\"") }
        let maxCursors = options.maxCursors
        let last = journalState.lastSeq
        return try inTransaction { db in
            guard seq <= last else { throw StoreError.cursorBeyondLastSeq(name: name, seq: seq, lastSeq: last) }
            if try Self.checkOwner(name, uid: uid, db) == nil {
                try Self.checkRoom(name, uid: uid, maxCursors: maxCursors, maxPerOwner: maxPerOwner, db)
                try db.run("INSERT INTO cursors(name, seq, owner_uid) VALUES (?, ?, ?)",
                           [.text(name), .integer(seq), uid.map { .integer(Int64($0)) } ?? .null])
                return seq
            }
            try db.run("UPDATE cursors SET seq = max(seq, ?) WHERE name = ?", [.integer(seq), .text(name)])
            return try db.queryFirst("SELECT seq FROM cursors WHERE name = ?", [.text(name)]) { $0.int64(0) } ?? seq
        }
    }

    /// Opens the durable subscription `name` for `uid`: its cursor, or for a new name `start` (at
    /// most the last seq), stored at once and owned by `uid`. Ownership and limits as
    /// ``setCursor(_:_:uid:maxPerOwner:)``.
    public func claimCursor(
        _ name: String, uid: UInt32, start: JournalSeq, maxPerOwner: Int = .max
    ) throws(StoreError) -> JournalSeq {
        guard !name.isEmpty else { throw .invalidArgument("a durable subscription name must not be empty") }
        let maxCursors = options.maxCursors
        let from = max(0, min(start, journalState.lastSeq))
        return try inTransaction { db in
            if let seq = try Self.checkOwner(name, uid: uid, db) { return seq }
            try Self.checkRoom(name, uid: uid, maxCursors: maxCursors, maxPerOwner: maxPerOwner, db)
            try db.run("INSERT INTO cursors(name, seq, owner_uid) VALUES (?, ?, ?)",
                       [.text(name), .integer(from), .integer(Int64(uid))])
            return from
        }
    }

    /// Forgets the durable subscription `name`; false when there was none. `uid`: the peer asking
    /// (another uid's name throws `.cursorOwned`, root excepted); nil: no check.
    @discardableResult
    public func removeCursor(_ name: String, uid: UInt32? = nil) throws(StoreError) -> Bool {
        try inTransaction { db in
            guard try Self.checkOwner(name, uid: uid, db) != nil else { return false }
            try db.run("DELETE FROM cursors WHERE name = ?", [.text(name)])
            return true
        }
    }

    /// The owner of a durable name, or nil when unknown or made before names had owners. Tests,
    /// diagnostics.
    public func cursorOwner(_ name: String) throws(StoreError) -> UInt32? {
        try withDB { db in
            try db.queryFirst("SELECT owner_uid FROM cursors WHERE name = ?", [.text(name)]) { $0.optionalInt64(0) } ?? nil
        }.map { UInt32(truncatingIfNeeded: $0) }
    }

    /// The cursor of `name` if it exists and `uid` may use it (claiming it when it has no owner);
    /// nil when it does not exist. Throws `.cursorOwned` for another uid's name (not for root, or
    /// a nil `uid`).
    private static func checkOwner(_ name: String, uid: UInt32?, _ db: SQLiteConnection) throws -> JournalSeq? {
        let row = try db.queryFirst("SELECT seq, owner_uid FROM cursors WHERE name = ?", [.text(name)]) {
            ($0.int64(0), $0.optionalInt64(1))
        }
        guard let (seq, owner) = row else { return nil }
        guard let uid, uid != 0 else { return seq }
        switch owner {
        case nil:
            try db.run("UPDATE cursors SET owner_uid = ? WHERE name = ?", [.integer(Int64(uid)), .text(name)])
        case let owner? where owner != Int64(uid):
            throw StoreError.cursorOwned(name: name, owner: UInt32(truncatingIfNeeded: owner), uid: uid)
        default:
            break
        }
        return seq
    }

    /// Throws when a new name would pass `maxCursors`, or `maxPerOwner` names of `uid` (root and a
    /// nil uid are not limited per owner).
    private static func checkRoom(
        _ name: String, uid: UInt32?, maxCursors: Int, maxPerOwner: Int, _ db: SQLiteConnection
    ) throws {
        let count = try db.queryFirst("SELECT count(*) FROM cursors") { $0.int64(0) } ?? 0
        guard count < Int64(maxCursors) else { throw StoreError.tooManyCursors(name: name, max: maxCursors) }
        guard let uid, uid != 0 else { return }
        let owned = try db.queryFirst("SELECT count(*) FROM cursors WHERE owner_uid = ?", [.integer(Int64(uid))]) { $0.int64(0) } ?? 0
        guard owned < Int64(maxPerOwner) else { throw StoreError.tooManyCursorsForOwner(name: name, uid: uid, max: maxPerOwner) }
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

    /// Gives the page cache's unused memory back (`PRAGMA shrink_memory`); returns the bytes freed.
    @discardableResult
    public func releaseCacheMemory() -> Int {
        guard let db else { return 0 }
        let before = db.cacheBytes
        try? db.execute("PRAGMA shrink_memory")
        return max(0, before - db.cacheBytes)
    }

    /// The heap memory the page cache holds now.
    public func cacheBytes() -> Int { db?.cacheBytes ?? 0 }

    /// The checkpoints run beside the commits since the store was opened, and the last one's
    /// failure (tests, diagnostics); and the WAL's frames after the last commit.
    func checkpointState() -> (run: Int, lastError: SQLiteError?, walFrames: Int, threshold: Int) {
        let outcome = checkpointer?.checkpoints
        return (outcome?.count ?? 0, outcome?.lastError, db?.walFrames ?? 0, checkpointer?.threshold ?? 0)
    }

    /// The kernel id of the thread running this method (tests use it to show the store thread sleeps).
    func currentThreadID() -> Int32? {
        currentKernelThreadID()
    }

    /// The uids of `user`'s seen-set, oldest first (tests).
    func seenUIDs(user: String) throws(StoreError) -> [String] {
        try withDB { db in try db.query("SELECT uid FROM seen WHERE user = ? ORDER BY id", [.text(user)]) { $0.text(0) } }
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

    /// A write transaction (`BEGIN IMMEDIATE` … `COMMIT`); rolled back when `body` throws. A
    /// commit that left the WAL long enough starts a checkpoint beside it (``WALCheckpointer``).
    private func inTransaction<T>(_ body: (SQLiteConnection) throws -> T) throws(StoreError) -> T {
        guard let db else { throw .closed }
        let value = try db.transaction { try body(db) }
        checkpointer?.committed(walFrames: db.walFrames)
        return value
    }

    private static func counter(_ name: String, _ db: SQLiteConnection) throws -> Int64 {
        try db.queryFirst("SELECT value FROM counters WHERE name = ?", [.text(name)]) { $0.int64(0) } ?? 0
    }

    private static func setCounter(_ name: String, _ value: Int64, _ db: SQLiteConnection) throws {
        try db.run("UPDATE counters SET value = ? WHERE name = ?", [.integer(value), .text(name)])
    }

    /// Throws `.developmentFormat` when the state directory holds the event log of a development build
    /// of smarticod (`events/`, its segment and index files): this store would not see those events.
    private static func refuseDevelopmentFiles(_ directory: String) throws(StoreError) {
        let events = directory + (directory.hasSuffix("/") ? "" : "/") + developmentEventsFolder
        var info = stat()
        if stat(events, &info) == 0 { throw .developmentFormat(path: events, found: nil) }
    }

    /// Why the existing state directory `directory` (its `stat` is `info`) must not be used by a
    /// daemon running as `uid`, or nil. It must belong to `uid` and be writable by no one else
    /// (no group or other write bit, sticky or not): whoever may create names in it could plant a
    /// link at `smarticod.db`, `-wal` or `-shm` before the daemon creates them, and whoever owns it
    /// may change its mode or swap what is in it. `uid` nil: the daemon's user is not known
    /// (`--check-config` run by root), the owner is not checked.
    static func stateDirectoryRefusal(_ directory: String, _ info: stat, uid: uid_t?) -> String? {
        let mode = info.st_mode & 0o7777
        let shown = "state_dir \(directory) (owner uid \(info.st_uid), mode \(MetricsTextfileWriter.octalMode(mode)))"
        if let uid, info.st_uid != uid {
            return "\(shown) does not belong to the daemon's user (uid \(uid)): its owner could read and change the stored user, outbox and journal, or plant links where the daemon writes; "
                + "give it to the daemon's user (chown -R that user's uid and group, e.g. smarticod:smarticod, on the directory) or point state_dir at a directory of its own"
        }
        if mode & (S_IWGRP | S_IWOTH) != 0 {
            return "\(shown) is writable by its group or by others: they could plant links at the names the daemon creates there (smarticod.db and its -wal and -shm files); "
                + "make it writable by its owner only (chmod 0700; systemd's StateDirectoryMode=0700 does)"
        }
        return nil
    }

    private static func makeDirectory(_ directory: String) throws(StoreError) {
        var existing = stat()
        if stat(directory, &existing) == 0 {
            // A file there fails at the database's creation, with its own error.
            guard existing.st_mode & S_IFMT == S_IFDIR else { return }
            if let refusal = stateDirectoryRefusal(directory, existing, uid: geteuid()) {
                throw .unsafeStateDir(path: directory, reason: refusal)
            }
            return
        }
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
        // O_NOFOLLOW: a link at the database's name is refused, never followed (its target is
        // neither chmod'ed nor written).
        let fd = posixOpen(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let error = errno
            var info = stat()
            if error == ELOOP, lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFLNK {
                throw .unsafeStateDir(path: path, reason: symbolicLinkRefusal(path))
            }
            throw .fileSystem(path: path, operation: "opening database file", errno: error)
        }
        defer { posixClose(fd) }
        // Tighten an existing file too; the WAL and shm files inherit the database file's mode.
        _ = fchmod(fd, 0o600)
    }

    /// `directory` with every symbolic link resolved (`realpath`), or nil when it cannot be.
    static func realDirectory(_ directory: String) -> String? {
        guard let resolved = realpath(directory, nil) else { return nil }
        defer { free(resolved) }
        let text = String(cString: resolved)
        return text == "/" ? "" : text
    }

    /// The refusal of a symbolic link at the database's name `path`, naming its target.
    static func symbolicLinkRefusal(_ path: String) -> String {
        var buffer = [CChar](repeating: 0, count: 4097)
        let n = readlink(path, &buffer, 4096)
        let target = n >= 0 ? " (to \(String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)))" : ""
        return "the database \(path) is a symbolic link\(target): the daemon does not follow links in state_dir; "
            + "remove the link (move the real database file into state_dir if that is where it belongs, with the daemon stopped)"
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
