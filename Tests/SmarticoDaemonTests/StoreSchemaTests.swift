// The schema: version 1 created in an empty directory; a store of a development build of smarticod,
// of a newer smarticod, or another SQLite database is refused with an error that says what to do.
import CSQLite
import Foundation
import Testing
@testable import SmarticoDaemon

/// Runs raw SQL on a database file with SQLite's C API, outside the store, on a dedicated thread
/// (it fsyncs).
private func rawSQL(_ path: String, _ sql: String) async throws {
    try await onDedicatedThread {
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
}

/// The rows of a query on a database file, each column as text ("NULL" for null), outside the
/// store, on a dedicated thread.
private func rawRows(_ path: String, _ sql: String) async throws -> [[String]] {
    try await onDedicatedThread {
        var db: OpaquePointer?
        guard sqlite3_open(path, &db) == SQLITE_OK else { throw StoreTestFailure("cannot open \(path)") }
        defer { sqlite3_close(db) }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else {
            throw StoreTestFailure("SQL failed: \(String(cString: sqlite3_errmsg(db)))")
        }
        defer { sqlite3_finalize(statement) }
        var rows: [[String]] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            rows.append((0..<sqlite3_column_count(statement)).map { i in
                sqlite3_column_text(statement, i).map { String(cString: $0) } ?? "NULL"
            })
        }
        return rows
    }
}

/// Opening `directory` fails; returns the error.
private func openFails(_ directory: String) async throws -> StoreError {
    do {
        let store = try await SmarticoStore.open(directory: directory)
        await store.close()
    } catch {
        return error
    }
    throw StoreTestFailure("opening \(directory) succeeded")
}

@Suite struct StoreSchemaTests {
    @Test func createsTheCurrentVersionInAnEmptyDirectoryAndReopensIt() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.schemaVersion() == StoreSchema.version)
        let durability = try await store.durabilitySettings()
        #expect(durability.journalMode == "wal" && durability.synchronous == 2)
        _ = try await store.appendEvents([journalEvent("message", ts: 1, "{}")])
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.schemaVersion() == StoreSchema.version)
        #expect(await store.lastSeq() == 1)
        #expect(try await store.integrityCheck().isEmpty)
        await store.close()
    }

    /// A database of a development build (schema 2 to 8, tables of its own): a clear error naming the
    /// file, the schema and what to move away; the file is left as it was.
    @Test func refusesADevelopmentStore() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let path = dir.sub(SmarticoStore.fileName)
        try await rawSQL(path, """
            CREATE TABLE seen_chunk(id INTEGER PRIMARY KEY, user TEXT NOT NULL, uids BLOB NOT NULL);
            INSERT INTO seen_chunk(user, uids) VALUES ('alice', X'0161');
            PRAGMA user_version = 8;
            """)
        let error = try await openFails(dir.path)
        #expect(error == .developmentFormat(path: path, found: 8))
        #expect(error.description.contains("development version of smarticod (schema 8)"))
        #expect(error.description.contains("-wal/-shm") && error.description.contains("events/"))
        // Untouched: not even put in WAL mode.
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        // Untouched: still schema 8, its row still there.
        try await rawSQL(path, "SELECT 1 FROM seen_chunk")
        #expect(try await onDedicatedThread {
            let db = try SQLiteConnection(path: path)
            defer { db.close() }
            return try StoreSchema.userVersion(db)
        } == 8)
    }

    /// The event-log folder of a development build beside an otherwise empty state directory.
    @Test func refusesTheEventLogFilesOfADevelopmentStore() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.sub("events"), withIntermediateDirectories: false)
        let error = try await openFails(dir.path)
        #expect(error == .developmentFormat(path: dir.sub("events"), found: nil))
        #expect(error.description.contains("event-log files"))
        #expect(!FileManager.default.fileExists(atPath: dir.sub(SmarticoStore.fileName)))
    }

    @Test func aVersion1StoreIsMigratedAndItsWaitingMessagesGetTheStoredUser() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let path = dir.sub(SmarticoStore.fileName)
        var store = try await SmarticoStore.open(directory: dir.path)
        try await store.setUser(StoredUser(extUserID: "alice", hash: nil))
        try await store.enqueue(uuid: "u-1", cid: 9, payload: Array("{}".utf8), createdMs: 1)
        try await store.putLatest(slot: "language", uuid: "l-1", cid: 9, payload: Array("{}".utf8), createdMs: 2)
        _ = try await store.setCursor("app", 0)
        await store.close()
        // Back to version 1's tables, as the previous release wrote them.
        try await rawSQL(path, """
            ALTER TABLE outbox DROP COLUMN user; ALTER TABLE latest DROP COLUMN user;
            ALTER TABLE cursors DROP COLUMN owner_uid; DROP TABLE http_queue; PRAGMA user_version = 1;
            """)
        store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.schemaVersion() == StoreSchema.version)
        #expect(try await store.peek(limit: 10).map(\.user) == ["alice"])
        #expect(try await store.latestMessages().map(\.user) == ["alice"])
        #expect(try await store.cursor("app") == 0)
        #expect(try await store.integrityCheck().isEmpty)
        await store.close()
    }

    @Test func aStoreMigratedFromVersion1HasTheSchemaOfACreatedOne() async throws {
        let created = try StoreTempDir(), migrated = try StoreTempDir()
        defer { created.remove(); migrated.remove() }
        await (try await SmarticoStore.open(directory: created.path)).close()
        await (try await SmarticoStore.open(directory: migrated.path)).close()
        // Version 1's tables, as the first release wrote them; opening migrates 1 → 2 → 3.
        try await rawSQL(migrated.sub(SmarticoStore.fileName), """
            ALTER TABLE outbox DROP COLUMN user; ALTER TABLE latest DROP COLUMN user;
            ALTER TABLE cursors DROP COLUMN owner_uid; DROP TABLE http_queue; PRAGMA user_version = 1;
            """)
        await (try await SmarticoStore.open(directory: migrated.path)).close()
        // Columns (name, type, not null, default, primary key) of every table, in any order (an
        // added column comes last), and every index.
        let columns = """
            SELECT m.name, p.name, p.type, p."notnull", p.dflt_value, p.pk
            FROM sqlite_master m JOIN pragma_table_info(m.name) p
            WHERE m.type = 'table' ORDER BY m.name, p.name
            """
        let indexes = "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name"
        for query in [columns, indexes, "PRAGMA user_version"] {
            let a = try await rawRows(created.sub(SmarticoStore.fileName), query)
            let b = try await rawRows(migrated.sub(SmarticoStore.fileName), query)
            #expect(!a.isEmpty && a == b, "created \(a)\nmigrated \(b)")
        }
    }

    @Test func aVersion2StoreGetsTheHTTPQueueAndKeepsItsRows() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let path = dir.sub(SmarticoStore.fileName)
        var store = try await SmarticoStore.open(directory: dir.path)
        try await store.enqueue(uuid: "u-1", cid: 9, payload: Array("{}".utf8), createdMs: 1, user: "alice")
        await store.close()
        // Back to version 2, as the previous release wrote it.
        try await rawSQL(path, "DROP TABLE http_queue; PRAGMA user_version = 2;")
        store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.schemaVersion() == 3)
        #expect(try await store.peek(limit: 10).map(\.uuid) == ["u-1"])
        // The new table works: in order, failed attempts recorded, removed once.
        try await store.enqueueHTTP(uuid: "h-1", kind: .pushReport, request: Array("{}".utf8), user: nil, createdMs: 5, max: 10)
        try await store.enqueueHTTP(uuid: "h-2", kind: .pushToken, request: Array("{}".utf8), user: "bob", createdMs: 6, max: 10)
        await #expect(throws: StoreError.queueFull(max: 2)) {
            try await store.enqueueHTTP(uuid: "h-3", kind: .pushReport, request: Array("{}".utf8), user: nil, createdMs: 7, max: 2)
        }
        try await store.failedHTTP(uuid: "h-1", nextMs: 99, error: "HTTP 503")
        let first = try #require(try await store.firstHTTP())
        #expect(first.uuid == "h-1" && first.attempts == 1 && first.nextMs == 99 && first.lastError == "HTTP 503" && first.user == nil)
        #expect(try await store.httpQueueStatus() == HTTPQueueStatus(depth: 2, oldestMs: 5))
        #expect(try await store.removeHTTP(uuid: "h-1"))
        #expect(try await store.removeHTTP(uuid: "h-1") == false)
        #expect(try await store.firstHTTP()?.uuid == "h-2")
        #expect(try await store.integrityCheck().isEmpty)
        await store.close()
    }

    @Test func refusesADatabaseOfANewerVersion() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let path = dir.sub(SmarticoStore.fileName)
        let store = try await SmarticoStore.open(directory: dir.path)
        await store.close()
        let newer = StoreSchema.version + 1
        try await rawSQL(path, "PRAGMA user_version = \(newer)")
        let error = try await openFails(dir.path)
        #expect(error == .databaseTooNew(path: path, found: newer, known: StoreSchema.version))
        #expect(error.description.contains("newer smarticod"))
    }

    @Test func refusesAnotherSQLiteDatabase() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let path = dir.sub(SmarticoStore.fileName)
        try await rawSQL(path, "CREATE TABLE notes(text TEXT)")
        let error = try await openFails(dir.path)
        #expect(error == .notAStore(path: path))
        #expect(error.description.contains("not a smarticod store"))
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }
}
