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

    /// Retention never empties the journal: `last_seq` always names an event a replay can read
    /// (issue 30), and seq never goes backwards.
    @Test func lastSeqStaysReadableAndSeqNeverGoesBackwardsAfterRetention() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(retentionHours: 1))
        _ = try await store.appendEvents((0..<5).map { journalEvent("message", ts: Int64($0), "{\"i\":\($0)}") })
        // Ten hours later every event is past retention; the newest stays.
        #expect(try await store.applyRetention(nowMs: 10 * 3_600_000) == 4)
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: 5, lastSeq: 5))
        let last = try await store.events(after: await store.lastSeq() - 1, limit: 10)
        #expect(last.map(\.seq) == [5])
        #expect(last.first?.data == bytes("{\"i\":4}"))
        #expect(try await store.applyRetention(nowMs: 20 * 3_600_000) == 0)
        await store.close()

        store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(retentionHours: 1))
        #expect(await store.lastSeq() == 5)
        #expect(try await store.appendEvents([journalEvent("message", ts: 10 * 3_600_000, "{}")]) == [6])
        // Retention by count set to zero keeps the newest event too, and the counter.
        await store.updateOptions(StoreOptions(retentionEvents: 0))
        #expect(try await store.appendEvents([journalEvent("message", ts: 10 * 3_600_000, "{}")]) == [7])
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: 7, lastSeq: 7))
        #expect(try await store.events(after: 6, limit: 10).map(\.seq) == [7])
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
        // All past the window: the newest stays (last_seq names a readable event).
        #expect(try await store.applyRetention(nowMs: 8 * hour) == 2)
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: 5, lastSeq: 5))
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

        // Same user again: kept. Another user: alice's set is kept until the server accepts bob
        // (a refused switch brings alice back with her set), then cleared.
        try await store.setUser(StoredUser(extUserID: "alice", hash: "h2"))
        #expect(try await store.markSeen(user: "alice", uid: "e1") == false)
        try await store.setUser(StoredUser(extUserID: "bob"))
        #expect(try await store.appendEngagement(user: "bob", uid: "e1", event: event) == 2)
        #expect(try await store.markSeen(user: "alice", uid: "e1") == false)
        try await store.keepSeen(only: "bob")
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

@Suite struct StoreRetentionTests {
    /// `journal.max_bytes`: the oldest events go until the data of those left fits, the newest is
    /// kept whatever its size, and the byte count survives a restart.
    @Test func retentionByBytes() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let tenBytes = "{\"k\":\"12\"}"  // 10 bytes
        let options = StoreOptions(maxJournalBytes: 35)
        var store = try await SmarticoStore.open(directory: dir.path, options: options)
        _ = try await store.appendEvents((0..<3).map { journalEvent("message", ts: Int64($0), tenBytes) })
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: 1, lastSeq: 3))
        // 40 bytes: the oldest goes in the same transaction.
        _ = try await store.appendEvents([journalEvent("message", ts: 3, tenBytes)])
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [2, 3, 4])
        await store.close()

        // The running total was kept: one more event after a restart again drops exactly one.
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        _ = try await store.appendEvents([journalEvent("message", ts: 4, tenBytes)])
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [3, 4, 5])
        // An event bigger than the whole limit: everything older goes, it stays.
        let big = "{\"k\":\"" + String(repeating: "x", count: 100) + "\"}"
        _ = try await store.appendEvents([journalEvent("message", ts: 5, big)])
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [6])
        // A lower limit applies at the next retention: the newest still stays.
        await store.updateOptions(StoreOptions(maxJournalBytes: 1))
        #expect(try await store.applyRetention(nowMs: 5) == 0)
        _ = try await store.appendEvents([journalEvent("message", ts: 6, tenBytes)])
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: 7, lastSeq: 7))
        await store.close()
    }

    /// All three limits together: the one reached first decides.
    @Test func whicheverLimitIsReachedFirstDeletes() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(
            directory: dir.path, options: StoreOptions(retentionEvents: 4, retentionHours: 1, maxJournalBytes: 1_000))
        _ = try await store.appendEvents((0..<6).map { journalEvent("message", ts: Int64($0), "{}") })
        #expect(try await store.journalBounds().firstSeq == 3)  // by count
        _ = try await store.appendEvents([journalEvent("message", ts: hour + 6, "{}")])
        #expect(try await store.journalBounds().firstSeq == 7)  // by age: seqs 3…6 are over an hour old
        _ = try await store.appendEvents([journalEvent("message", ts: hour + 7, "{\"k\":\"" + String(repeating: "y", count: 995) + "\"}")])
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: 8, lastSeq: 8))  // by bytes
        await store.close()
    }

    /// Retention never moves the seq counter back, through deletion of all but the newest event and reopen.
    @Test func seqNeverGoesBackwardsAcrossRetentionAndReopen() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var last: JournalSeq = 0
        for round in 0..<4 {
            let store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(retentionEvents: 2))
            #expect(await store.lastSeq() == last)
            let seqs = try await store.appendEvents((0..<3).map { journalEvent("message", ts: Int64(round * 3 + $0), "{}") })
            #expect(seqs == [last + 1, last + 2, last + 3])
            last += 3
            #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [last - 1, last])
            if round % 2 == 1 {
                await store.updateOptions(StoreOptions(retentionEvents: 0))
                // The newest event stays: last_seq names a readable event.
                #expect(try await store.applyRetention(nowMs: 0) == 1)
                #expect(try await store.journalBounds() == JournalBounds(firstSeq: last, lastSeq: last))
            }
            await store.close()
        }
    }
}

@Suite struct StoreJournalPagingTests {
    /// `events(after:limit:maxBytes:)` pages by bytes as well as by count, and always returns at least
    /// one event when there is one.
    @Test func eventsPageByBytes() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        // Sizes 10, 20, 30, 40, 50.
        let sizes = [10, 20, 30, 40, 50]
        _ = try await store.appendEvents(sizes.enumerated().map { index, size in
            NewJournalEvent(name: index == 2 ? "deeplink" : "message", tsMs: Int64(index),
                            data: [UInt8](repeating: UInt8(ascii: "a"), count: size))
        })
        #expect(try await store.events(after: 0, limit: 10, maxBytes: 60).map(\.seq) == [1, 2, 3])
        #expect(try await store.events(after: 0, limit: 2, maxBytes: 60).map(\.seq) == [1, 2])
        #expect(try await store.events(after: 0, limit: 10, maxBytes: 59).map(\.seq) == [1, 2])
        // One event bigger than the page still comes, alone.
        #expect(try await store.events(after: 3, limit: 10, maxBytes: 5).map(\.seq) == [4])
        // Only the events of the types asked for count.
        #expect(try await store.events(after: 0, limit: 10, types: ["message"], maxBytes: 70).map(\.seq) == [1, 2, 4])
        // Paging through everything: every event once, in order.
        var after: JournalSeq = 0
        var pages: [[JournalSeq]] = []
        while true {
            let page = try await store.events(after: after, limit: 10, maxBytes: 45)
            guard let last = page.last else { break }
            pages.append(page.map(\.seq))
            after = last.seq
        }
        #expect(pages == [[1, 2], [3], [4], [5]])
        await store.close()
    }
}

@Suite struct StoreSeenSetTests {
    /// A batch that fails (here: another connection holds the write lock) is rolled back whole: none
    /// of its engagements counts as seen, and the same engagement journals when it comes again.
    @Test func aFailedBatchLeavesNoUidBehind() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(busyTimeoutMs: 0))
        let path = dir.sub(SmarticoStore.fileName)
        let locker = try await onDedicatedThread { () -> LockedDatabase in
            let db = try SQLiteConnection(path: path)
            try db.execute("BEGIN IMMEDIATE")
            return LockedDatabase(db)
        }
        let batch = [
            JournalWrite(journalEvent("engagement", ts: 1, "{}"), once: "x", user: "alice"),
            JournalWrite(journalEvent("message", ts: 1, "{}")),
        ]
        await #expect(throws: StoreError.self) { try await store.journal(batch) }
        try await onDedicatedThread { try locker.db.execute("ROLLBACK"); locker.db.close() }
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: nil, lastSeq: 0))
        let again = JournalWrite(journalEvent("engagement", ts: 2, "{}"), once: "x", user: "alice")
        #expect(try await store.journal([again]) == [1])
        #expect(try await store.journal([again]) == [nil])
        #expect(try await store.seenUIDs(user: "alice") == ["x"])
        await store.close()
    }

    /// Uids are compared whole: one with a NUL inside is not its prefix.
    @Test func uidsWithANulInsideAreKeptWhole() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.markSeen(user: "alice", uid: "a\u{0}b"))
        #expect(try await store.markSeen(user: "alice", uid: "a"))
        #expect(try await !store.markSeen(user: "alice", uid: "a\u{0}b"))
        #expect(try await store.seenUIDs(user: "alice") == ["a\u{0}b", "a"])
        await store.close()
    }

    /// The bound holds across restarts: the store prunes every user's set as it opens.
    @Test func theBoundHoldsAfterARestart() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(seenPerUser: 64))
        for i in 0..<66 { _ = try await store.markSeen(user: "alice", uid: "u\(i)") }
        // Pruned every 4 uids: 64 was the last pruning, 2 more since.
        #expect(try await store.seenUIDs(user: "alice").count == 66)
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(seenPerUser: 64))
        #expect(try await store.seenUIDs(user: "alice") == (2..<66).map { "u\($0)" })
        await store.close()
    }
}

/// A connection holding a write transaction open, handed between threads by the test (used by one
/// thread at a time, each hand-over through an `await`).
private final class LockedDatabase: @unchecked Sendable {
    let db: SQLiteConnection
    init(_ db: SQLiteConnection) { self.db = db }
}

@Suite struct StoreCacheTests {
    /// `releaseCacheMemory()` gives the page cache back after a burst without losing anything.
    @Test func pageCacheIsGivenBack() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        let long = String(repeating: "u", count: 2_000)
        for i in 0..<300 { #expect(try await store.markSeen(user: "alice", uid: "\(i)-" + long)) }
        let held = await store.cacheBytes()
        #expect(held > 256 << 10, "the cache held only \(held) bytes")
        let freed = await store.releaseCacheMemory()
        let after = await store.cacheBytes()
        #expect(freed > 0 && after < held, "freed \(freed) of \(held) bytes, \(after) left")
        for i in stride(from: 0, to: 300, by: 30) {
            #expect(try await !store.markSeen(user: "alice", uid: "\(i)-" + long))
        }
        await store.close()
    }
}

private let hour: Int64 = 3_600_000

/// One `message` event with data `{}` at each of `timestamps` (ms).
private func messages(at timestamps: Int64...) -> [NewJournalEvent] {
    timestamps.map { journalEvent("message", ts: $0, "{}") }
}
