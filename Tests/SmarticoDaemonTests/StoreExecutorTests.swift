// The store's work runs on its own thread, and that thread sleeps when there is no work.
import Foundation
import Testing
@testable import SmarticoDaemon

/// `voluntary_ctxt_switches` and the state letter of one of our threads, from /proc.
private func threadSchedule(_ tid: Int32) throws -> (switches: Int, state: String) {
    let status = try String(contentsOfFile: "/proc/self/task/\(tid)/status", encoding: .utf8)
    var switches = -1
    var state = "?"
    for line in status.split(separator: "\n") {
        if line.hasPrefix("voluntary_ctxt_switches:") {
            switches = Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) ?? -1
        } else if line.hasPrefix("State:") {
            state = String(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces).prefix(1))
        }
    }
    return (switches, state)
}

@Suite struct StoreExecutorTests {
    @Test func storeWorkRunsOnTheStoreThreadWhichSleepsWhenIdle() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        _ = try await store.appendEvents([journalEvent("message", ts: 1, "{}")])
        let storeThread = try #require(await store.currentThreadID())
        let comm = try String(contentsOfFile: "/proc/self/task/\(storeThread)/comm", encoding: .utf8)
        #expect(comm.trimmingCharacters(in: .whitespacesAndNewlines) == "smarticod-store")
        // Not the caller's thread.
        #expect(currentKernelThreadID() != storeThread)
        #expect(!store.executor.isCurrentThread)

        // Work makes the loop turn ...
        let beforeWork = store.executor.loopIterations
        for index in 0..<5 {
            _ = try await store.appendEvents([journalEvent("message", ts: Int64(index), "{}")])
        }
        // (The thread goes round once more after resuming the caller; let it settle.)
        try await Task.sleep(for: .milliseconds(50))
        let afterWork = store.executor.loopIterations
        #expect(afterWork >= beforeWork + 5)

        // ... and without work it does not: no iteration and no context switch for 300 ms, while the
        // thread sits in the kernel (state S).
        let scheduleBefore = try threadSchedule(storeThread)
        try await Task.sleep(for: .milliseconds(300))
        let scheduleAfter = try threadSchedule(storeThread)
        #expect(store.executor.loopIterations == afterWork)
        #expect(scheduleAfter.switches == scheduleBefore.switches)
        #expect(scheduleAfter.state == "S")

        // It still serves work afterwards.
        #expect(try await store.appendEvents([journalEvent("message", ts: 9, "{}")]) == [7])
        #expect(store.executor.loopIterations > afterWork)
        await store.close()
    }

    @Test func releasingTheStoreClosesItsDatabaseAndEndsItsThread() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store: SmarticoStore? = try await SmarticoStore.open(directory: dir.path)
        let tid = try #require(await store?.currentThreadID())
        _ = try await store?.appendEvents([journalEvent("message", ts: 1, "{}")])
        let wal = dir.sub(SmarticoStore.fileName + "-wal")
        #expect(FileManager.default.fileExists(atPath: wal))
        // Released without close(): the isolated deinit closes the database on the store thread.
        store = nil
        // Bounded wait for the thread to leave /proc.
        var gone = false
        for _ in 0..<200 {
            if !FileManager.default.fileExists(atPath: "/proc/self/task/\(tid)") {
                gone = true
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(gone, "the store thread \(tid) still exists after the store was released")
        // Closing the last connection checkpointed and removed the WAL file.
        #expect(!FileManager.default.fileExists(atPath: wal))
        let reopened = try await SmarticoStore.open(directory: dir.path)
        #expect(try await reopened.events(after: 0, limit: 10).count == 1)
        await reopened.close()
    }
}
