// Schema migrations: from an empty file, from a version-1 database, and refusal of a newer one.
import CSQLite
import Foundation
import Testing
@testable import SmarticoDaemon

/// The schema as version 1 shipped it, frozen here: the migration test must start from what real
/// version-1 files contain, whatever the code's step 1 becomes.
private let version1Schema = """
    CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL) WITHOUT ROWID;
    INSERT INTO meta(key, value) VALUES ('last_seq', 0);
    CREATE TABLE journal(seq INTEGER PRIMARY KEY, name TEXT NOT NULL, ts_ms INTEGER NOT NULL, data BLOB NOT NULL);
    CREATE INDEX journal_ts ON journal(ts_ms);
    CREATE TABLE outbox(position INTEGER PRIMARY KEY AUTOINCREMENT, uuid TEXT NOT NULL UNIQUE,
        cid INTEGER NOT NULL, payload BLOB NOT NULL, created_ms INTEGER NOT NULL);
    CREATE TABLE cursors(name TEXT PRIMARY KEY NOT NULL, seq INTEGER NOT NULL) WITHOUT ROWID;
    CREATE TABLE user(id INTEGER PRIMARY KEY CHECK (id = 1), ext_user_id TEXT NOT NULL, hash TEXT,
        public_username TEXT, props BLOB, last_activity_ms INTEGER);
    PRAGMA user_version = 1;
    """

/// Runs raw SQL on a database file with SQLite's C API, outside the store, on a dedicated thread
/// (it fsyncs).
private func rawSQL(_ path: String, _ sql: String) async throws {
    try await onDedicatedThread { try rawSQLBlocking(path, sql) }
}

private func rawSQLBlocking(_ path: String, _ sql: String) throws {
    var db: OpaquePointer?
    guard sqlite3_open(path, &db) == SQLITE_OK else { throw StoreTestFailure("cannot open \(path)") }
    defer { sqlite3_close(db) }
    var message: UnsafeMutablePointer<CChar>?
    guard sqlite3_exec(db, sql, nil, nil, &message) == SQLITE_OK else {
        let text = message.map { String(cString: $0) } ?? "?"
        sqlite3_free(message)
        throw StoreTestFailure("SQL failed: \(text)")
    }
}

/// A database at schema `version` as it shipped (built with the code's own steps), then `sql`.
private func makeDatabase(_ path: String, atVersion version: Int, then sql: String) async throws {
    try await onDedicatedThread {
        let db = try SQLiteConnection(path: path)
        defer { db.close() }
        try StoreSchema.migrate(db, upTo: version)
        try db.execute(sql)
    }
}

/// The names of the indexes on `table`, read through a connection of its own.
private func indexes(_ path: String, on table: String) async throws -> [String] {
    try await onDedicatedThread {
        let db = try SQLiteConnection(path: path)
        defer { db.close() }
        return try db.query("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", [.text(table)]) { $0.text(0) }
    }
}

@Suite struct StoreMigrationTests {
    @Test func migratesFromAnEmptyFile() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        // A zero-byte file, as a crash right after creating it would leave.
        #expect(FileManager.default.createFile(atPath: dir.sub(SmarticoStore.fileName), contents: Data()))
        let store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.schemaVersion() == StoreSchema.latestVersion)
        #expect(StoreSchema.latestVersion == 8)
        #expect(try await store.integrityCheck().isEmpty)
        #expect(try await store.appendEvents([journalEvent("message", ts: 1, "{}")]) == [1])
        await store.close()
    }

    @Test func migratesAVersion1DatabaseKeepingItsData() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let path = dir.sub(SmarticoStore.fileName)
        try await rawSQL(path, version1Schema + """
            INSERT INTO meta(key, value) VALUES ('device_id', '11111111-2222-4333-8444-555555555555');
            INSERT INTO journal(seq, name, ts_ms, data) VALUES (41, 'message', 1, '{"old":true}');
            INSERT INTO journal(seq, name, ts_ms, data) VALUES (42, 'engagement', 2, '{}');
            UPDATE meta SET value = 42 WHERE key = 'last_seq';
            INSERT INTO outbox(uuid, cid, payload, created_ms) VALUES ('old-1', 9, '{"cid":9}', 7);
            INSERT INTO cursors(name, seq) VALUES ('ui', 41);
            INSERT INTO user(id, ext_user_id, hash) VALUES (1, 'alice', 'h');
            """)
        let store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.schemaVersion() == StoreSchema.latestVersion)
        #expect(await store.deviceID() == "11111111-2222-4333-8444-555555555555")
        #expect(await store.lastSeq() == 42)
        #expect(try await store.events(after: 40, limit: 10).map(\.seq) == [41, 42])
        #expect(try await store.cursor("ui") == 41)
        #expect(try await store.user()?.extUserID == "alice")
        // Version 2's columns got their defaults on the old rows.
        let old = try await store.peek(limit: 10)
        #expect(old.count == 1)
        #expect(old.first?.uuid == "old-1" && old.first?.kind == .socket && old.first?.attempts == 0)
        // And version 2's features work.
        try await store.enqueue(uuid: "new-1", cid: 0, kind: .http, payload: bytes("{}"), createdMs: 8)
        #expect(try await store.peek(limit: 10).map(\.uuid) == ["old-1", "new-1"])
        #expect(try await store.markSeen(user: "alice", uid: "e1"))
        try await store.setPush(StoredPush(token: "t", platform: 5, status: 4))
        #expect(try await store.appendEvents([journalEvent("message", ts: 3, "{}")]) == [43])
        #expect(try await store.integrityCheck().isEmpty)
        await store.close()
    }

    /// Version 3 drops the seen-set's (user, id) index; the set, its pruning and the rest still work.
    @Test func migratesAVersion2DatabaseDroppingTheSeenIndex() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let path = dir.sub(SmarticoStore.fileName)
        try await makeDatabase(path, atVersion: 2, then: """
            INSERT INTO seen(user, uid) VALUES ('alice', 'u1'), ('alice', 'u2'), ('bob', 'u1');
            INSERT INTO journal(seq, name, ts_ms, data) VALUES (7, 'message', 1, '{}');
            UPDATE meta SET value = 7 WHERE key = 'last_seq';
            """)
        let store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(seenPerUser: 2))
        #expect(try await store.schemaVersion() == StoreSchema.latestVersion)
        let seenIndexes = try await indexes(path, on: "seen")
        #expect(!seenIndexes.contains("seen_user_id"))
        #expect(seenIndexes.isEmpty)  // schema 5 also drops the UNIQUE (user, uid) index: lookups are in memory
        #expect(await store.lastSeq() == 7)
        #expect(try await !store.markSeen(user: "alice", uid: "u2"))
        #expect(try await store.markSeen(user: "alice", uid: "u3"))
        // Pruning (limit 2: after every insert, exact) keeps alice's newest two (u3 pushed out u1,
        // u4 pushes out u2) and leaves bob's alone.
        #expect(try await store.markSeen(user: "alice", uid: "u4"))
        #expect(try await store.markSeen(user: "alice", uid: "u1"))  // pruned by now: new again
        #expect(try await !store.markSeen(user: "bob", uid: "u1"))
        #expect(try await store.integrityCheck().isEmpty)
        await store.close()
    }

    /// Version 4 drops the journal's ts_ms index; rows, replay and age retention still work.
    @Test func migratesAVersion3DatabaseDroppingTheTimestampIndex() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let path = dir.sub(SmarticoStore.fileName)
        let hour: Int64 = 3_600_000
        try await makeDatabase(path, atVersion: 3, then: """
            INSERT INTO journal(seq, name, ts_ms, data) VALUES (5, 'message', 0, '{}'), (6, 'message', \(2 * hour), '{}');
            UPDATE meta SET value = 6 WHERE key = 'last_seq';
            """)
        #expect(try await indexes(path, on: "journal") == ["journal_ts"])
        let store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(retentionHours: 1))
        #expect(try await store.schemaVersion() == StoreSchema.latestVersion)
        #expect(try await indexes(path, on: "journal").isEmpty)
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [5, 6])
        #expect(try await store.appendEvents([journalEvent("message", ts: 2 * hour + 1, "{}")]) == [7])
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [6, 7])
        #expect(try await store.integrityCheck().isEmpty)
        await store.close()
    }

    /// Version 5 rebuilds the seen table without its UNIQUE (user, uid) index, keeping rows and
    /// ids; version 8 keeps the uids in chunks, and the open moves the rows there, each user's in
    /// their order: the uids seen before the upgrade are still refused, pruning still goes oldest first.
    @Test func migratesAVersion4DatabaseKeepingTheSeenSet() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let path = dir.sub(SmarticoStore.fileName)
        try await makeDatabase(path, atVersion: 4, then: """
            INSERT INTO seen(id, user, uid) VALUES (10, 'alice', 'u1'), (11, 'alice', 'u2'), (12, 'bob', 'u1'), (13, 'alice', 'u3');
            """)
        let store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(seenPerUser: 3))
        #expect(try await store.schemaVersion() == 8)
        #expect(try await indexes(path, on: "seen").isEmpty)
        let (rows, alice, bob, chunks) = try await onDedicatedThread {
            let db = try SQLiteConnection(path: path)
            defer { db.close() }
            return (try db.queryFirst("SELECT count(*) FROM seen") { $0.int64(0) },
                    try SmarticoStore.seenUIDs(user: "alice", db), try SmarticoStore.seenUIDs(user: "bob", db),
                    try db.queryFirst("SELECT count(*) FROM seen_chunk") { $0.int64(0) })
        }
        #expect(rows == 0, "the rows of `seen` moved into chunks")
        #expect(alice == ["u1", "u2", "u3"] && bob == ["u1"])
        #expect(chunks == 2, "one chunk a user")
        for uid in ["u1", "u2", "u3"] { #expect(try await !store.markSeen(user: "alice", uid: uid)) }
        #expect(try await !store.markSeen(user: "bob", uid: "u1"))
        // Limit 3, pruned exactly: u4 pushes out alice's oldest, u1.
        #expect(try await store.markSeen(user: "alice", uid: "u4"))
        #expect(try await store.markSeen(user: "alice", uid: "u1"))
        #expect(try await store.integrityCheck().isEmpty)
        await store.close()
    }

    @Test func refusesADatabaseOfANewerVersion() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let path = dir.sub(SmarticoStore.fileName)
        try await rawSQL(path, "CREATE TABLE future(x); PRAGMA user_version = 99;")
        do {
            _ = try await SmarticoStore.open(directory: dir.path)
            Issue.record("a version-99 database was opened")
        } catch {
            #expect(error == .databaseTooNew(path: path, found: 99, known: StoreSchema.latestVersion))
            #expect(error.description.contains("schema version 99"))
            #expect(error.description.contains("newer smarticod"))
        }
        // Nothing was changed: still version 99, the table intact.
        let (version, tables) = try await onDedicatedThread {
            let db = try SQLiteConnection(path: path)
            defer { db.close() }
            return (try StoreSchema.userVersion(db), try db.query("SELECT name FROM sqlite_master") { $0.text(0) })
        }
        #expect(version == 99)
        #expect(tables == ["future"])
    }

    @Test func aFailingStepChangesNothing() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let path = dir.sub(SmarticoStore.fileName)
        // A version-1 file in which step 2's table name is already taken: step 2 must fail as a whole.
        try await rawSQL(path, version1Schema + "CREATE TABLE latest(x);")
        do {
            _ = try await SmarticoStore.open(directory: dir.path)
            Issue.record("the migration succeeded")
        } catch {
            guard case .migrationFailed(let failedPath, let from, let to, let underlying) = error else {
                Issue.record("unexpected error \(error)")
                return
            }
            #expect(failedPath == path && from == 1 && to == 2)
            #expect(underlying.message.contains("latest"))
        }
        let (version, columns) = try await onDedicatedThread {
            let db = try SQLiteConnection(path: path)
            defer { db.close() }
            return (try StoreSchema.userVersion(db),
                    try db.query("SELECT name FROM pragma_table_info('outbox')") { $0.text(0) })
        }
        #expect(version == 1)
        // The ALTER TABLE that ran before the failure was rolled back too.
        #expect(!columns.contains("kind"))
    }
}
