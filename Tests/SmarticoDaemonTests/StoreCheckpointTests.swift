// The WAL's checkpoints run beside the commits, on the checkpointer's thread and connection
// (WALCheckpointer), never inside a commit.
import Foundation
import Testing
@testable import SmarticoDaemon

@Suite struct StoreCheckpointTests {
    /// A journal row of about 3 KB: one page of the WAL each.
    private static func row(_ i: Int) -> NewJournalEvent {
        journalEvent("message", ts: Int64(i), #"{"i":\#(i),"pad":""# + String(repeating: "p", count: 3_000) + #""}"#)
    }

    private static func fileSize(_ path: String) -> Int {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    }

    @Test func theWALIsCopiedBackBesideTheCommitsAndRestarts() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        let database = dir.sub(SmarticoStore.fileName)
        #expect(await store.checkpointState().run == 0)
        // Batches of 100 rows: past the threshold after about ten commits.
        var seq = 0
        for _ in 0..<50 {
            let state = await store.checkpointState()
            if state.walFrames >= state.threshold { break }
            _ = try await store.appendEvents((seq + 1...seq + 100).map(Self.row))
            seq += 100
        }
        let grown = await store.checkpointState()
        #expect(grown.threshold > 0 && grown.walFrames >= grown.threshold, "\(grown)")
        // The commit that passed the threshold returned; the checkpoint runs on its own thread.
        var waited = 0
        while await store.checkpointState().run == 0 && waited < 1_000 {
            try await Task.sleep(for: .milliseconds(10))
            waited += 1
        }
        let state = await store.checkpointState()
        #expect(state.run >= 1 && state.lastError == nil, "\(state)")
        // The pages are in the database file now, and the next commit starts the WAL again.
        #expect(Self.fileSize(database) > seq * 3_000, "\(Self.fileSize(database)) bytes for \(seq) rows of 3 KB")
        _ = try await store.appendEvents([Self.row(seq + 1)])
        let restarted = await store.checkpointState()
        #expect(restarted.walFrames < 100, "\(restarted)")
        #expect(try await store.events(after: 0, limit: 10_000).count == seq + 1)

        // Closing: the store's connection is the last one; the WAL is checkpointed and removed.
        await store.close()
        #expect(!FileManager.default.fileExists(atPath: database + "-wal"))
        let reopened = try await SmarticoStore.open(directory: dir.path)
        #expect(try await reopened.events(after: 0, limit: 10_000).map(\.seq) == Array(1...Int64(seq + 1)))
        await reopened.close()
    }

    /// Below the threshold nothing is checkpointed before the store closes (as SQLite's own
    /// automatic checkpoint did), and closing still leaves no WAL behind.
    @Test func aSmallWALWaitsForTheClose() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        _ = try await store.appendEvents((1...20).map(Self.row))
        try await Task.sleep(for: .milliseconds(50))
        #expect(await store.checkpointState().run == 0)
        await store.close()
        #expect(!FileManager.default.fileExists(atPath: dir.sub(SmarticoStore.fileName) + "-wal"))
    }
}
