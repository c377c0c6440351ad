// Device id, meta values, user and push persistence, file modes, typed SQLite errors.
import CSQLite
import Foundation
import Testing
@testable import SmarticoDaemon

@Suite struct StoreStateTests {
    @Test func deviceIDIsGeneratedOnceAndKept() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path)
        let id = await store.deviceID()
        let seed = try await store.fingerprintSeed()
        // A UUID v4 in lowercase: 8-4-4-4-12 hex digits, version 4, variant 10xx.
        let parts = id.split(separator: "-").map(String.init)
        #expect(parts.map(\.count) == [8, 4, 4, 4, 12])
        #expect(id.allSatisfy { "0123456789abcdef-".contains($0) })
        #expect(parts[2].first == "4")
        #expect("89ab".contains(parts[3].first!))
        #expect(seed.count == 16)
        try await store.setMetaValue("note", bytes("hello"))
        await store.close()

        store = try await SmarticoStore.open(directory: dir.path)
        #expect(await store.deviceID() == id)
        #expect(try await store.fingerprintSeed() == seed)
        #expect(try await store.metaValue("note") == bytes("hello"))
        // The public namespace cannot reach the store's own keys.
        #expect(try await store.metaValue("device_id") == nil)
        try await store.setMetaValue("last_seq", bytes("99"))
        #expect(try await store.appendEvents([journalEvent("message", ts: 1, "{}")]) == [1])
        try await store.setMetaValue("note", nil)
        #expect(try await store.metaValue("note") == nil)
        await store.close()

        // Another state directory is another device.
        let other = try StoreTempDir()
        defer { other.remove() }
        let otherStore = try await SmarticoStore.open(directory: other.path)
        #expect(await otherStore.deviceID() != id)
        await otherStore.close()
    }

    @Test func userAndPushPersist() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.user() == nil)
        #expect(try await store.push() == nil)
        // Push data is remembered while anonymous.
        let push = StoredPush(token: "tok", platform: 5, status: 4, appPackageID: "ai.example.app")
        try await store.setPush(push)
        let alice = StoredUser(extUserID: "alice", hash: "h1", publicUsername: nil, props: nil, lastActivityMs: 10)
        try await store.setUser(alice)
        try await store.updateUserProfile(publicUsername: "Alice", props: bytes("{\"level\":3}"))
        try await store.recordActivity(atMs: 20)
        await store.close()

        store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.user() == StoredUser(extUserID: "alice", hash: "h1", publicUsername: "Alice",
                                                     props: bytes("{\"level\":3}"), lastActivityMs: 20))
        #expect(try await store.push() == push)
        try await store.setPush(StoredPush(token: "tok2", platform: 5, status: 1))
        try await store.clearUser()
        await store.close()

        store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.user() == nil)
        #expect(try await store.push() == StoredPush(token: "tok2", platform: 5, status: 1, appPackageID: nil))
        // Activity without a user changes nothing.
        try await store.recordActivity(atMs: 30)
        #expect(try await store.user() == nil)
        try await store.setPush(nil)
        #expect(try await store.push() == nil)
        await store.close()
    }

    /// The configured language last queued per user survives a restart (daemon.md, `client.language`),
    /// and the keys of other meta values do not show up among them.
    @Test func languagesSentPersistPerUser() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.languagesSent() == [:])
        try await store.setLanguageSent("en", user: "alice")
        try await store.setLanguageSent("de", user: nil)
        try await store.setLanguageSent("pt-br", user: "alice")
        try await store.setMetaValue("language_sentinel", Array("x".utf8))
        await store.close()

        store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.languagesSent() == ["alice": "pt-br", "": "de"])
        await store.close()
    }

    @Test func createsPrivateDirectoryAndFiles() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let stateDir = dir.sub("a/b/state")
        let store = try await SmarticoStore.open(directory: stateDir)
        _ = try await store.appendEvents([journalEvent("message", ts: 1, "{}")])
        func mode(_ path: String) -> mode_t {
            var info = stat()
            #expect(stat(path, &info) == 0, "stat \(path)")
            return info.st_mode & 0o777
        }
        #expect(mode(dir.sub("a")) == 0o700)
        #expect(mode(stateDir) == 0o700)
        #expect(store.path == stateDir + "/smarticod.db")
        #expect(mode(store.path) == 0o600)
        #expect(mode(store.path + "-wal") == 0o600)
        #expect(mode(store.path + "-shm") == 0o600)
        // WAL with synchronous=FULL: every commit is fsync'd before the call returns.
        let settings = try await store.durabilitySettings()
        #expect(settings.journalMode == "wal" && settings.synchronous == 2)
        await store.close()

        // A directory that cannot be created is a clear error naming the path.
        let blocker = dir.sub("file")
        #expect(FileManager.default.createFile(atPath: blocker, contents: Data()))
        do {
            _ = try await SmarticoStore.open(directory: blocker + "/state")
            Issue.record("opening under a regular file succeeded")
        } catch let error {
            guard case .fileSystem(let path, _, let code) = error else {
                Issue.record("unexpected error \(error)")
                return
            }
            #expect(path == blocker + "/state")
            #expect(code == ENOTDIR)
            #expect(error.description.contains(blocker))
        }
    }

    @Test func sqliteErrorsCarryCodesMessageAndSQL() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let path = dir.sub("x.db")
        // SQLite blocks (fsync): run it on a thread of its own, check the results here.
        typealias Results = (SQLiteError?, SQLiteError?, StoreError?, [String], [[UInt8]])
        let (duplicate, badSQL, transactionError, keys, blobs) = try await onDedicatedThread { () throws -> Results in
            let db = try SQLiteConnection(path: path)
            defer { db.close() }
            try db.execute("CREATE TABLE t(k TEXT PRIMARY KEY)")
            try db.run("INSERT INTO t(k) VALUES (?)", [.text("a")])
            var duplicate: SQLiteError?
            do { try db.run("INSERT INTO t(k) VALUES (?)", [.text("a")]) } catch let caught as SQLiteError { duplicate = caught }
            var badSQL: SQLiteError?
            do { try db.run("SELECT nope FROM t") } catch let caught as SQLiteError { badSQL = caught }
            // A failing transaction body rolls everything back.
            var transactionError: StoreError?
            do {
                try db.transaction {
                    try db.run("INSERT INTO t(k) VALUES (?)", [.text("b")])
                    try db.run("INSERT INTO t(k) VALUES (?)", [.text("a")])
                }
            } catch let caught as StoreError {
                transactionError = caught
            }
            let keys = try db.query("SELECT k FROM t ORDER BY k") { $0.text(0) }
            // Empty and non-empty blobs round-trip as blobs.
            try db.execute("CREATE TABLE b(v BLOB NOT NULL)")
            try db.run("INSERT INTO b(v) VALUES (?), (?)", [.blob([]), .blob([0, 1, 255])])
            let blobs = try db.query("SELECT v FROM b ORDER BY rowid") { $0.blob(0) }
            return (duplicate, badSQL, transactionError, keys, blobs)
        }
        let error = try #require(duplicate, "a duplicate key was accepted")
        #expect(error.code == SQLITE_CONSTRAINT)
        #expect(error.extendedCode == SQLITE_CONSTRAINT | (6 << 8))  // SQLITE_CONSTRAINT_PRIMARYKEY
        #expect(error.message.contains("UNIQUE constraint failed: t.k"))
        #expect(error.sql == "INSERT INTO t(k) VALUES (?)")
        #expect(error.description.contains("x.db"))
        let bad = try #require(badSQL, "bad SQL was accepted")
        #expect(bad.code == SQLITE_ERROR)
        #expect(bad.message.contains("no such column: nope"))
        #expect(bad.sql == "SELECT nope FROM t")
        guard case .sqlite(let inner)? = transactionError else {
            Issue.record("the failing transaction did not throw a SQLite error: \(String(describing: transactionError))")
            return
        }
        #expect(inner.code == SQLITE_CONSTRAINT)
        #expect(keys == ["a"])
        #expect(blobs == [[], [0, 1, 255]])
    }
}
