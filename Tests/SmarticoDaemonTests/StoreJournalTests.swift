// The journal and its seq counter, retention, replay, durable cursors and the seen-set.
import Glibc
import Testing
@testable import SmarticoDaemon

@Suite struct StoreJournalTests {
    @Test func seqIsMonotonicAcrossReopen() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path)
        #expect(await store.lastSeq() == 0)
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: nil, lastSeq: 0))
        #expect(try await store.appendEvents([]) == [])
        let first = try await store.appendEvents([
            journalEvent("engagement", ts: 1, "{\"a\":1}"),
            journalEvent("message", ts: 2, "{\"a\":2}"),
            journalEvent("deeplink", ts: 3, "{\"a\":3}"),
        ])
        #expect(first == [1, 2, 3])
        await store.close()
        await #expect(throws: StoreError.closed) { try await store.appendEvents([journalEvent("x", ts: 1, "{}")]) }

        store = try await SmarticoStore.open(directory: dir.path)
        #expect(await store.lastSeq() == 3)
        #expect(try await store.appendEvents([journalEvent("message", ts: 4, "{}")]) == [4])
        #expect(try await store.appendEvents([journalEvent("message", ts: 5, "{}"),
                                              journalEvent("message", ts: 6, "{}")]) == [5, 6])
        let all = try await store.events(after: 0, limit: 100)
        #expect(all.map(\.seq) == [1, 2, 3, 4, 5, 6])
        #expect(all[1] == JournalEvent(seq: 2, name: "message", tsMs: 2, data: bytes("{\"a\":2}")))
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: 1, lastSeq: 6))
        await store.close()
    }

    @Test func groupCommitJournalsABatchInOrderAndDropsRepeatsEvenWithinIt() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(retentionEvents: 4))
        #expect(try await store.journal([]) == [])
        let e = { (uid: String, ts: Int64) in journalEvent("engagement", ts: ts, "{\"uid\":\"\(uid)\"}") }
        #expect(try await store.appendEngagement(user: "alice", uid: "old", event: e("old", 1)) == 1)
        let results = try await store.journal([
            JournalWrite(e("a", 2), once: "a", user: "alice"),
            JournalWrite(journalEvent("deeplink", ts: 3, "{}")),
            JournalWrite(e("a", 4), once: "a", user: "alice"),      // repeat inside the batch
            JournalWrite(e("old", 5), once: "old", user: "alice"),  // repeat of an earlier commit
            JournalWrite(e("a", 6), once: "a", user: "bob"),        // another user's set
            JournalWrite(journalEvent("message", ts: 7, "{}")),
        ])
        #expect(results == [2, 3, nil, nil, 4, 5])
        #expect(await store.lastSeq() == 5)
        // Retention (4 events) ran once, after the batch: seq 1 is gone, 2…5 stay, in order.
        let stored = try await store.events(after: 0, limit: 10)
        #expect(stored.map(\.seq) == [2, 3, 4, 5])
        #expect(stored.map(\.name) == ["engagement", "deeplink", "engagement", "message"])
        #expect(stored[2].data == bytes("{\"uid\":\"a\"}") && stored[2].tsMs == 6)
        // A batch of repeats only journals nothing and leaves the counter alone.
        #expect(try await store.journal([JournalWrite(e("a", 8), once: "a", user: "alice")]) == [nil])
        #expect(await store.lastSeq() == 5)
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(retentionEvents: 4))
        #expect(await store.lastSeq() == 5)
        #expect(try await store.journal([JournalWrite(e("b", 9), once: "b", user: "alice")]) == [6])
        await store.close()
    }

    @Test func seqNeverGoesBackwardsAfterRetentionDeletedEverything() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(retentionHours: 1))
        _ = try await store.appendEvents((0..<5).map { journalEvent("message", ts: Int64($0), "{}") })
        // Ten hours later every event is past retention.
        #expect(try await store.applyRetention(nowMs: 10 * 3_600_000) == 5)
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: nil, lastSeq: 5))
        #expect(try await store.events(after: 0, limit: 10).isEmpty)
        await store.close()

        store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(retentionHours: 1))
        #expect(await store.lastSeq() == 5)
        #expect(try await store.appendEvents([journalEvent("message", ts: 10 * 3_600_000, "{}")]) == [6])
        // Retention by count down to zero events also keeps the counter.
        await store.updateOptions(StoreOptions(retentionEvents: 0))
        #expect(try await store.appendEvents([journalEvent("message", ts: 10 * 3_600_000, "{}")]) == [7])
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: nil, lastSeq: 7))
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.appendEvents([journalEvent("message", ts: 1, "{}")]) == [8])
        await store.close()
    }

    @Test func concurrentCallersGetDistinctContiguousSeqs() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        let batches = try await withThrowingTaskGroup(of: [JournalSeq].self) { group in
            for task in 0..<20 {
                group.addTask {
                    try await store.appendEvents((0..<3).map { journalEvent("message", ts: Int64(task), "{\"i\":\($0)}") })
                }
            }
            var all: [[JournalSeq]] = []
            for try await seqs in group { all.append(seqs) }
            return all
        }
        // Each batch got consecutive seqs, and together they are exactly 1...60.
        for seqs in batches { #expect(seqs == Array(seqs[0]...seqs[0] + 2)) }
        #expect(batches.flatMap { $0 }.sorted() == Array(1...60))
        #expect(await store.lastSeq() == 60)
        await store.close()
    }

    @Test func replayAfterSeqWithTypeFilter() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        let names = ["engagement", "message", "minigame", "message", "deeplink", "engagement", "message"]
        _ = try await store.appendEvents(names.enumerated().map { journalEvent($1, ts: Int64($0), "{\"i\":\($0)}") })
        #expect(try await store.events(after: 2, limit: 100).map(\.seq) == [3, 4, 5, 6, 7])
        #expect(try await store.events(after: 2, limit: 2).map(\.seq) == [3, 4])
        let messages = try await store.events(after: 1, limit: 100, types: ["message"])
        #expect(messages.map(\.seq) == [2, 4, 7])
        #expect(messages.map(\.data) == [bytes("{\"i\":1}"), bytes("{\"i\":3}"), bytes("{\"i\":6}")])
        #expect(try await store.events(after: 0, limit: 2, types: ["engagement", "deeplink"]).map(\.seq) == [1, 5])
        #expect(try await store.events(after: 5, limit: 100, types: ["engagement", "deeplink"]).map(\.seq) == [6])
        #expect(try await store.events(after: 0, limit: 100, types: []).isEmpty)
        #expect(try await store.events(after: 7, limit: 100).isEmpty)
        await store.close()
    }

    @Test func retentionByCount() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(retentionEvents: 5))
        for batch in 0..<4 {
            _ = try await store.appendEvents((0..<3).map { journalEvent("message", ts: Int64(batch * 3 + $0), "{}") })
        }
        // 12 appended, the newest 5 kept, pruned in the same transaction as the append.
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: 8, lastSeq: 12))
        #expect(try await store.events(after: 0, limit: 100).map(\.seq) == [8, 9, 10, 11, 12])
        #expect(try await store.applyRetention(nowMs: 12) == 0)
        await store.close()
    }

    @Test func retentionByAge() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(retentionHours: 2))
        _ = try await store.appendEvents(messages(at: 0, hour, 2 * hour))
        #expect(try await store.journalBounds().firstSeq == 1)
        // An append at 3h drops what is older than 1h (the batch's newest ts is "now").
        _ = try await store.appendEvents([journalEvent("message", ts: 3 * hour, "{}")])
        #expect(try await store.events(after: 0, limit: 10).map(\.tsMs) == [hour, 2 * hour, 3 * hour])
        // The separate call with the time passed in.
        #expect(try await store.applyRetention(nowMs: 4 * hour + 1) == 2)
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [4])
        await store.close()
    }

    /// Age retention walks the journal in seq order: everything before the first row inside the
    /// window goes; after a wall clock step backwards, a younger row ahead keeps the older ones
    /// behind it until it ages out itself.
    @Test func retentionByAgeGoesInJournalOrder() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(retentionHours: 2))
        // The clock steps forward to 5 h, then back.
        _ = try await store.appendEvents(messages(at: 0, 1, 5 * hour, 2, 3))
        // The append's own retention (its newest ts, 5 h, is "now"): seqs 1 and 2 go; 4 and 5 are
        // as old but stay behind seq 3.
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [3, 4, 5])
        #expect(try await store.applyRetention(nowMs: 6 * hour) == 0)
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [3, 4, 5])
        #expect(try await store.applyRetention(nowMs: 8 * hour) == 3)
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: nil, lastSeq: 5))
        await store.close()
    }

    @Test func durableCursorNeverMovesBackwards() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path)
        _ = try await store.appendEvents((0..<5).map { journalEvent("message", ts: Int64($0), "{}") })
        #expect(try await store.cursor("ui") == nil)
        #expect(try await store.setCursor("ui", 3) == 3)
        #expect(try await store.setCursor("ui", 1) == 3)
        #expect(try await store.cursor("ui") == 3)
        await #expect(throws: StoreError.cursorBeyondLastSeq(name: "ui", seq: 6, lastSeq: 5)) {
            try await store.setCursor("ui", 6)
        }
        #expect(StoreError.cursorBeyondLastSeq(name: "ui", seq: 6, lastSeq: 5).description.contains("last seq is 5"))
        await #expect(throws: StoreError.self) { try await store.setCursor("", 1) }
        #expect(try await store.setCursor("other", 5) == 5)
        await store.close()

        store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.cursor("ui") == 3)
        #expect(try await store.setCursor("ui", 2) == 3)
        #expect(try await store.cursor("other") == 5)
        try await store.removeCursor("other")
        #expect(try await store.cursor("other") == nil)

        // The number of names is bounded; known names still move.
        await store.updateOptions(StoreOptions(maxCursors: 2))
        #expect(try await store.setCursor("second", 1) == 1)
        await #expect(throws: StoreError.tooManyCursors(name: "third", max: 2)) {
            try await store.setCursor("third", 1)
        }
        #expect(try await store.setCursor("ui", 5) == 5)
        try await store.removeCursor("second")
        #expect(try await store.setCursor("third", 1) == 1)
        await store.close()
    }

    @Test func largeSeenSetsArePrunedInBatchesKeepingAtLeastTheNewest() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        // 64 per user: pruned every 4 inserts, so between 64 and 67 uids are kept.
        let store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(seenPerUser: 64))
        try await store.setUser(StoredUser(extUserID: "alice"))
        for i in 0 ..< 300 { #expect(try await store.markSeen(user: "alice", uid: "u\(i)") == true) }
        // The newest 64 are all still seen (a repeat is refused)…
        for i in 236 ..< 300 { #expect(try await store.markSeen(user: "alice", uid: "u\(i)") == false, "u\(i) forgotten") }
        // …and the set is bounded: everything older than the newest 68 is forgotten.
        for i in 0 ..< 232 { #expect(try await store.markSeen(user: "alice", uid: "u\(i)") == true, "u\(i) still remembered") }
    }

    @Test func seenSetDedupesAndIsClearedWhenTheUserChanges() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(seenPerUser: 3))
        try await store.setUser(StoredUser(extUserID: "alice"))
        let event = journalEvent("engagement", ts: 1, "{\"uid\":\"e1\"}")
        #expect(try await store.appendEngagement(user: "alice", uid: "e1", event: event) == 1)
        #expect(try await store.appendEngagement(user: "alice", uid: "e1", event: event) == nil)
        #expect(await store.lastSeq() == 1)
        #expect(try await store.events(after: 0, limit: 10).count == 1)
        #expect(try await store.markSeen(user: "alice", uid: "e2") == true)
        #expect(try await store.markSeen(user: "alice", uid: "e2") == false)

        // The seen-set survives a restart.
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(seenPerUser: 3))
        #expect(try await store.appendEngagement(user: "alice", uid: "e1", event: event) == nil)

        // Bounded: with room for 3, the oldest uid is forgotten after a fourth.
        #expect(try await store.markSeen(user: "alice", uid: "e3") == true)
        #expect(try await store.markSeen(user: "alice", uid: "e4") == true)
        #expect(try await store.markSeen(user: "alice", uid: "e2") == false)
        #expect(try await store.markSeen(user: "alice", uid: "e1") == true)

        // Same user again: kept. Another user: alice's set is cleared in the same transaction.
        try await store.setUser(StoredUser(extUserID: "alice", hash: "h2"))
        #expect(try await store.markSeen(user: "alice", uid: "e1") == false)
        try await store.setUser(StoredUser(extUserID: "bob"))
        #expect(try await store.appendEngagement(user: "bob", uid: "e1", event: event) == 2)
        try await store.setUser(StoredUser(extUserID: "alice"))
        #expect(try await store.appendEngagement(user: "alice", uid: "e1", event: event) == 3)
        // Logout forgets every seen-set; clearSeen forgets one.
        try await store.clearUser()
        #expect(try await store.markSeen(user: "alice", uid: "e1") == true)
        try await store.clearSeen(user: "alice")
        #expect(try await store.markSeen(user: "alice", uid: "e1") == true)
        await store.close()
    }
}

@Suite struct StoreSeenSetMemoryTests {
    /// The seen-set is answered in memory; a uid another connection (another process) marked seen
    /// or forgot is noticed (`PRAGMA data_version`), not missed.
    @Test func writesOfAnotherConnectionAreSeen() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        let event = journalEvent("engagement", ts: 1, "{}")
        #expect(try await store.appendEngagement(user: "alice", uid: "a", event: event) == 1)
        let path = dir.sub(SmarticoStore.fileName)
        func other(_ sql: String) async throws {
            try await onDedicatedThread {
                let db = try SQLiteConnection(path: path)
                defer { db.close() }
                try db.execute(sql)
            }
        }
        // The engagements journaled reach the seen table with the next transaction (or this call):
        // only then can another connection forget one.
        try await store.foldSeen()
        // A chunk of one uid (length 1, "b"), and the deletion of the chunk that holds only "a".
        try await other("INSERT INTO seen_chunk(user, uids) VALUES ('alice', X'0162')")
        #expect(try await store.appendEngagement(user: "alice", uid: "b", event: event) == nil)
        try await other("DELETE FROM seen_chunk WHERE uids = X'0161'")
        #expect(try await store.appendEngagement(user: "alice", uid: "a", event: event) == 2)
        #expect(try await store.integrityCheck().isEmpty)
        await store.close()
    }

    /// Once `foldAfter` engagements wait, the seen table catches up: as the store's next job, after
    /// the batch's results went back (the fold is an SQLite commit of milliseconds that the batch's
    /// lines must not wait for), and before any later call runs.
    @Test func theSeenTableCatchesUpRightAfterTheBatch() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        let path = dir.sub(SmarticoStore.fileName)
        /// The uids in the seen table, and its rows (chunks).
        func seenRows() async throws -> Int64 {
            try await onDedicatedThread {
                let db = try SQLiteConnection(path: path)
                defer { db.close() }
                return Int64(try SmarticoStore.seenUIDs(user: "alice", db).count)
            }
        }
        func chunks() async throws -> Int64 {
            try await onDedicatedThread {
                let db = try SQLiteConnection(path: path)
                defer { db.close() }
                return try db.queryFirst("SELECT count(*) FROM seen_chunk") { $0.int64(0) } ?? -1
            }
        }
        let event = journalEvent("engagement", ts: 1, "{}")
        let few = (0..<10).map { JournalWrite(event, once: "few-\($0)", user: "alice") }
        #expect(try await store.journal(few).compactMap { $0 }.count == 10)
        _ = await store.lastSeq()
        #expect(try await seenRows() == 0, "10 uids are folded with a later transaction, not at once")
        let many = (0..<SmarticoStore.foldAfter).map { JournalWrite(event, once: "many-\($0)", user: "alice") }
        #expect(try await store.journal(many).compactMap { $0 }.count == SmarticoStore.foldAfter)
        _ = await store.lastSeq()  // runs after the upkeep job
        #expect(try await seenRows() == Int64(10 + SmarticoStore.foldAfter))
        #expect(try await chunks() == 1, "one fold of one user's uids is one row")
        await store.close()
    }

    /// The fold writes a chunk (one row) for each run of one user's waiting uids: after one fold of
    /// a long run, then two users interleaved (a chunk of one uid each), under a small bound, the
    /// answers are exact — each user's newest are refused, their older ones forgotten — and stay so
    /// after a reopen (the index is then loaded from the rows the fold wrote).
    @Test func aFoldOfManyChunksKeepsExactAnswers() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        // 300 per user: alice's first chunk (a0…a299) is partly among her newest 300, so pruning
        // starts her uids inside it.
        let options = StoreOptions(seenPerUser: 300)  // kept: between 300 and 317 per user
        var store = try await SmarticoStore.open(directory: dir.path, options: options)
        let event = journalEvent("engagement", ts: 1, "{}")
        let run = (0..<300).map { JournalWrite(event, once: "a\($0)", user: "alice") }
        #expect(try await store.journal(run).allSatisfy { $0 != nil })
        var interleaved: [JournalWrite] = []
        for i in 0..<100 {
            interleaved.append(JournalWrite(event, once: "n\(i)", user: ""))
            interleaved.append(JournalWrite(event, once: "a\(300 + i)", user: "alice"))
        }
        #expect(try await store.journal(interleaved).allSatisfy { $0 != nil })
        try await store.foldSeen()  // 300 + 200 uids in one fold: a chunk of 300, then 200 of one
        #expect(try await store.integrityCheck().isEmpty)
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        for i in 100..<400 { #expect(try await !store.markSeen(user: "alice", uid: "a\(i)"), "a\(i) forgotten") }
        for i in 0..<100 { #expect(try await !store.markSeen(user: "", uid: "n\(i)"), "n\(i) forgotten") }
        for i in 0..<80 { #expect(try await store.markSeen(user: "alice", uid: "a\(i)"), "a\(i) still remembered") }
        await store.close()
    }

    /// The in-memory index holds hashes of uids; with a hash under which every uid collides, the
    /// answers are still exact (a hit is confirmed by the row, then by the table).
    @Test func collidingHashesStillGiveExactAnswers() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(seenPerUser: 3),
                                                 seenKey: { _ in 42 })
        for uid in ["a", "b", "c"] { #expect(try await store.markSeen(user: "alice", uid: uid), "\(uid) is new") }
        for uid in ["a", "b", "c"] { #expect(try await !store.markSeen(user: "alice", uid: uid), "\(uid) was seen") }
        // Limit 3: d pushes out a (the oldest); b and c are still refused, a is new again.
        #expect(try await store.markSeen(user: "alice", uid: "d"))
        for uid in ["b", "c", "d"] { #expect(try await !store.markSeen(user: "alice", uid: uid), "\(uid) was seen") }
        #expect(try await store.markSeen(user: "alice", uid: "a"))
        await store.close()
    }

    /// A batch that fails is rolled back whole, and its uids are not left in the in-memory set:
    /// the same engagement journals when it comes again.
    @Test func aFailedBatchLeavesNoUidBehind() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        // The event log's next write fails as a full disk would make it.
        await store.failNextEventLogAppend(errno: ENOSPC)
        let batch = [
            JournalWrite(journalEvent("engagement", ts: 1, "{}"), once: "x", user: "alice"),
            JournalWrite(journalEvent("refused", ts: 1, "{}")),
        ]
        await #expect(throws: StoreError.self) { try await store.journal(batch) }
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: nil, lastSeq: 0))
        let again = JournalWrite(journalEvent("engagement", ts: 2, "{}"), once: "x", user: "alice")
        #expect(try await store.journal([again]) == [1])
        #expect(try await store.journal([again]) == [nil])
        await store.close()
    }
}

private let hour: Int64 = 3_600_000

/// One `message` event with data `{}` at each of `timestamps` (ms).
private func messages(at timestamps: Int64...) -> [NewJournalEvent] {
    timestamps.map { journalEvent("message", ts: $0, "{}") }
}

/// A ~2 KB JSON payload, the size of the benchmark's engagement.
private let twoKBPayload = "{\"t\":\"" + String(repeating: "x", count: 2_000) + "\"}"

@Suite struct StoreCacheTests {
    /// Under load the page cache may grow past SQLite's 2 MB default (so commits and checkpoints
    /// stop re-reading the pages they just wrote), and `releaseCacheMemory()` gives it back after
    /// the burst without losing anything. The event journal no longer goes through SQLite; the
    /// seen table does (~2 KB uids here, so 3,000 of them fill ~6 MB of pages).
    @Test func pageCacheGrowsUnderLoadAndIsGivenBack() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        let long = String(repeating: "u", count: 2_000)
        for i in 0..<3_000 {
            #expect(try await store.markSeen(user: "alice", uid: "\(i)-" + long))
        }
        let held = await store.cacheBytes()
        #expect(held > 4 << 20, "the cache held only \(held) bytes: the cache_size pragma did not take effect")
        #expect(held <= (SmarticoStore.cacheKiB + 1_024) << 10, "the cache grew past its limit: \(held) bytes")
        let freed = await store.releaseCacheMemory()
        #expect(freed > 4 << 20, "released only \(freed) of \(held) bytes")
        #expect(await store.cacheBytes() < 1 << 20)
        // Nothing was lost: the uids are still seen (read through a cache that fills again).
        for i in stride(from: 0, to: 3_000, by: 30) {
            #expect(try await !store.markSeen(user: "alice", uid: "\(i)-" + long))
        }
        await store.close()
    }
}

@Suite struct StoreCommitPagesTests {
    /// Retention by count waits for 1/64 of the limit before deleting (then deletes down to the limit),
    /// and seq stays the high-water mark though appends no longer write it to `meta`.
    @Test func retentionByCountDeletesInBatchesAndSeqHolds() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(retentionEvents: 640))
        #expect(await store.retentionSlack == 10)
        for i in 1...650 {
            _ = try await store.appendEvents([journalEvent("message", ts: Int64(i), "{}")])
        }
        // 10 over the limit: not yet.
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: 1, lastSeq: 650))
        _ = try await store.appendEvents([journalEvent("message", ts: 651, "{}")])
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: 12, lastSeq: 651))
        // The hourly maintenance is exact.
        _ = try await store.appendEvents([journalEvent("message", ts: 652, "{}")])
        #expect(try await store.applyRetention(nowMs: 652) == 1)
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: 13, lastSeq: 652))
        // Retention that empties the journal keeps the high-water mark (it is written to meta).
        await store.updateOptions(StoreOptions(retentionEvents: 0))
        #expect(try await store.applyRetention(nowMs: 652) == 640)
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(retentionEvents: 0))
        #expect(await store.lastSeq() == 652)
        #expect(try await store.appendEvents([journalEvent("message", ts: 653, "{}")]) == [653])
        await store.close()
    }

    /// What one engagement costs the disk at low rates. Through SQLite (schemas 2–5) its commit
    /// wrote 10.1, then 6.7, 5.5 and 4.5 WAL pages, each written again by the checkpoint
    /// (docs/store.md, "Pages per commit"). In the event log it is one record appended: no SQLite
    /// page at all until the seen table is brought up to date, which then costs a few pages for
    /// many engagements.
    @Test func oneEngagementCommitWritesNoDatabasePage() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(retentionEvents: 500))
        var uid = 0
        func engagement() -> JournalWrite {
            uid += 1
            return JournalWrite(journalEvent("engagement", ts: 1, twoKBPayload), once: "uid-\(uid * 7_919 % 100_003)", user: "alice")
        }
        for _ in 0..<700 { _ = try await store.journal([engagement()]) }  // past the limit: retention runs
        try await store.foldSeen()
        let path = dir.sub(SmarticoStore.fileName)
        func walFrames(_ mode: String) async throws -> Int64 {
            try await onDedicatedThread {
                let db = try SQLiteConnection(path: path)
                defer { db.close() }
                return try db.queryFirst("PRAGMA wal_checkpoint(\(mode))") { $0.int64(1) } ?? -1
            }
        }
        _ = try await walFrames("TRUNCATE")
        #expect(try await walFrames("PASSIVE") == 0)
        let commits = 50
        for _ in 0..<commits { _ = try await store.journal([engagement()]) }
        #expect(try await walFrames("PASSIVE") == 0, "journaling wrote to the database")
        try await store.foldSeen()
        let frames = try await walFrames("PASSIVE")
        #expect(frames >= 1, "the seen table was not brought up to date")
        #expect(frames <= 6, "bringing 50 uids into the seen table wrote \(frames) pages")
        // And the events are there, in the log.
        #expect(try await store.events(after: 0, limit: 1_000).count >= 500)
        await store.close()
    }

    /// The WAL's writes are gathered (the store's VFS, docs/store.md "Gathered WAL writes"): SQLite
    /// writes each frame as two calls, so a one-engagement commit (~4.5 frames) made ~9 `write`s;
    /// now its frames reach the file as one. Counted by the kernel for the store thread
    /// (`/proc/self/task/TID/io`, `syscw`).
    @Test func oneEngagementCommitIsOneWriteCall() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        var uid = 0
        func engagement() -> JournalWrite {
            uid += 1
            return JournalWrite(journalEvent("engagement", ts: 1, twoKBPayload), once: "uid-\(uid)", user: "alice")
        }
        for _ in 0..<20 { _ = try await store.journal([engagement()]) }
        let tid = try #require(await store.currentThreadID())
        let before = try writeCalls(thread: tid)
        let commits = 50  // ~225 frames: no checkpoint runs in between
        for _ in 0..<commits { _ = try await store.journal([engagement()]) }
        let perCommit = Double(try writeCalls(thread: tid) - before) / Double(commits)
        #expect(perCommit >= 1, "\(perCommit) write calls per commit: the measurement is broken")
        #expect(perCommit <= 1.5, "one engagement's commit made \(perCommit) write calls")
        await store.close()
    }

    /// A checkpoint's writes to the database file are gathered too: SQLite copies each page with
    /// one `pwrite`, in page order, and a table's new pages are consecutive. Over a run with a
    /// few autocheckpoints (1,000 frames each), the write calls beyond one per commit are counted
    /// against the pages the database file grew by: one call per page without gathering (the
    /// test fails: 1.0 per page), one per 16 consecutive pages with it.
    @Test func checkpointWritesAreGathered() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        var uid = 0
        // Ten ~2 KB uids a commit into the seen table (the event log no longer goes through SQLite).
        let long = String(repeating: "u", count: 2_000)
        func batch() async throws {
            for _ in 0..<10 {
                uid += 1
                _ = try await store.markSeen(user: "alice", uid: "\(uid)-" + long)
            }
        }
        try await batch()
        let tid = try #require(await store.currentThreadID())
        let path = dir.sub(SmarticoStore.fileName)
        func fileSize() -> Int64 {
            var info = stat()
            return stat(path, &info) == 0 ? Int64(info.st_size) : -1
        }
        let (sizeBefore, writesBefore) = (fileSize(), try writeCalls(thread: tid))
        let commits = 2_500  // one ~2 KB uid each (two a page): ~1,250 new pages, a few checkpoints
        for _ in 0..<commits / 10 { try await batch() }
        let grownPages = (fileSize() - sizeBefore) / 4096
        let extraWrites = try writeCalls(thread: tid) - writesBefore - commits
        #expect(grownPages >= 1_000, "the database grew by \(grownPages) pages: no checkpoint ran, the measurement is broken")
        #expect(extraWrites * 8 <= grownPages, "\(extraWrites) write calls beyond one per commit for \(grownPages) pages copied")
        await store.close()
    }

    /// The write calls the kernel counted for thread `tid` of this process (`/proc/self/task/TID/io`, `syscw`).
    private func writeCalls(thread tid: Int32) throws -> Int {
        let text = try String(contentsOfFile: "/proc/self/task/\(tid)/io", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("syscw:") })
        return try #require(Int(line.dropFirst("syscw:".count).trimmingCharacters(in: .whitespaces)))
    }
}
