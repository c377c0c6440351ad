// The seen-set's chunks (schema 8): their byte format, and a damaged chunk in the database.
import Testing
@testable import SmarticoDaemon

@Suite struct SeenChunkTests {
    /// Entries read back as written, at the offsets they were written at: the empty uid, ASCII,
    /// multi-byte UTF-8, and lengths at the edges of LEB128's one-, two- and three-byte forms.
    @Test func entriesReadBackAtTheirOffsets() throws {
        let uids = ["", "a", "ünïcødé-✓", String(repeating: "x", count: 127), String(repeating: "y", count: 128),
                    String(repeating: "z", count: 16_383), String(repeating: "w", count: 16_384), "last"]
        var chunk: [UInt8] = []
        var offsets: [Int] = []
        for uid in uids {
            offsets.append(chunk.count)
            SeenChunk.append(uid, to: &chunk)
        }
        #expect(SeenChunk.entry("a") == [1, 0x61])
        #expect(SeenChunk.entry(String(repeating: "y", count: 128)).prefix(2) == [0x80, 0x01])
        #expect(chunk.count == uids.reduce(0) { $0 + $1.utf8.count } + 1 + 1 + 1 + 1 + 2 + 2 + 3 + 1)
        var read: [(Int, String)] = []
        try chunk.withUnsafeBytes { bytes in
            try SeenChunk.forEach(bytes, from: 0) { offset, uid in read.append((offset, String(decoding: uid, as: UTF8.self))) }
        }
        #expect(read.map(\.0) == offsets)
        #expect(read.map(\.1) == uids)
        // From an entry's offset on: that entry and the ones after it.
        var tail: [String] = []
        try chunk.withUnsafeBytes { bytes in
            try SeenChunk.forEach(bytes, from: offsets[5]) { _, uid in tail.append(String(decoding: uid, as: UTF8.self)) }
        }
        #expect(tail == Array(uids[5...]))
        // A locator keeps a chunk id and an offset apart.
        let locator = SeenChunk.locator(chunk: 123_456, offset: 4_000_000)
        #expect(SeenChunk.chunk(of: locator) == 123_456 && SeenChunk.offset(of: locator) == 4_000_000)
    }

    /// A length that runs past the end, or never ends, is damage at that entry's offset, found before
    /// anything of it is passed on.
    @Test func damageIsReportedAtTheEntryItIsIn() {
        func damage(_ chunk: [UInt8], from start: Int = 0) -> (offset: Int?, read: [String]) {
            var read: [String] = []
            do {
                try chunk.withUnsafeBytes { bytes in
                    try SeenChunk.forEach(bytes, from: start) { _, uid in read.append(String(decoding: uid, as: UTF8.self)) }
                }
                return (nil, read)
            } catch let damage as SeenChunk.Damage {
                return (damage.offset, read)
            } catch {
                return (-1, read)
            }
        }
        #expect(damage([1, 0x61, 5, 0x62]) == (2, ["a"]))            // 5 bytes announced, 1 there
        #expect(damage([1, 0x61, 0x80]) == (2, ["a"]))               // a length cut in the middle
        #expect(damage([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]) == (0, []))  // longer than 4 GB
        #expect(damage([1, 0x61], from: 3) == (3, []))               // a start past the end
        #expect(damage([1, 0x61], from: 2) == (nil, []))             // the end: nothing more
    }

    /// A hit of the in-memory index is confirmed by the bytes at its place in the chunk the fold
    /// wrote (the table is searched only when they differ, so a wrong offset would only be slow,
    /// not wrong: this checks the places themselves).
    @Test func aFoldsOffsetsPointAtItsUids() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        let event = journalEvent("engagement", ts: 1, "{}")
        let uids = ["a", "bb", String(repeating: "c", count: 200), "ü"]
        #expect(try await store.journal(uids.map { JournalWrite(event, once: $0, user: "alice") }).allSatisfy { $0 != nil })
        try await store.foldSeen()
        await store.close()
        let path = dir.sub(SmarticoStore.fileName)
        let (id, answers) = try await onDedicatedThread {
            let db = try SQLiteConnection(path: path)
            defer { db.close() }
            let id = try #require(try db.queryFirst("SELECT id FROM seen_chunk WHERE user = 'alice'") { $0.int64(0) })
            // 1 + 1, 1 + 2, 2 + 200, 1 + 2 bytes: the entries start at 0, 2, 5 and 207.
            var answers: [[Bool]] = []
            for offset in [0, 2, 5, 207] {
                let locator = SeenChunk.locator(chunk: id, offset: offset)
                answers.append(try uids.map { try SmarticoStore.entry(at: locator, is: $0, db) })
            }
            return (id, answers)
        }
        #expect(id > 0)
        #expect(answers == [[true, false, false, false], [false, true, false, false],
                            [false, false, true, false], [false, false, false, true]])
    }

    /// A chunk that cannot be read, written by another connection, is reported by the store with the
    /// file, the row and the byte; the store keeps working for other users, and clearing the
    /// user's seen-set repairs it.
    @Test func aDamagedChunkInTheDatabaseIsNamedAndCanBeCleared() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        let event = journalEvent("engagement", ts: 1, "{}")
        #expect(try await store.appendEngagement(user: "alice", uid: "a", event: event) == 1)
        try await store.foldSeen()
        let path = dir.sub(SmarticoStore.fileName)
        let id = try await onDedicatedThread {
            let db = try SQLiteConnection(path: path)
            defer { db.close() }
            // "b" announced as 9 bytes long.
            try db.execute("INSERT INTO seen_chunk(user, uids) VALUES ('alice', X'0962')")
            return db.lastInsertRowID
        }
        do {
            _ = try await store.appendEngagement(user: "alice", uid: "c", event: event)
            Issue.record("an engagement was journaled against a damaged seen-set")
        } catch {
            #expect(error == .damagedSeenChunk(path: path, id: id, offset: 0))
            #expect(error.description.contains("seen_chunk") && error.description.contains("chunk \(id)"), "\(error)")
        }
        #expect(try await store.appendEngagement(user: "bob", uid: "c", event: event) == 2)
        try await store.clearSeen(user: "alice")
        #expect(try await store.appendEngagement(user: "alice", uid: "c", event: event) == 3)
        #expect(try await store.appendEngagement(user: "alice", uid: "c", event: event) == nil)
        #expect(try await store.integrityCheck().isEmpty)
        await store.close()
    }
}
