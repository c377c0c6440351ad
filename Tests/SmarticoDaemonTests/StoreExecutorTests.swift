// The store's work runs on its own thread, and that thread sleeps when there is no work.
import COpenSSL  // smartico_pin_thread, smartico_usable_cpus
import Foundation
import Synchronization
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

/// An actor on a given `StoreThreadExecutor`, to run jobs on its thread.
private actor OnStoreThread {
    nonisolated let executor: StoreThreadExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    /// Set once `holdUntilReleased` has started.
    nonisolated let holding = Atomic<Bool>(false)
    /// Set by the test to end `holdUntilReleased`.
    nonisolated let released = Atomic<Bool>(false)
    init(_ executor: StoreThreadExecutor) { self.executor = executor }
    func threadID() -> Int32? { currentKernelThreadID() }
    /// Holds the thread (a job that blocks, like a commit's fsync) until `released` is set, at most
    /// 10 s. Not for a fixed time: on a loaded machine the test's next step could come after it.
    func holdUntilReleased() {
        holding.store(true, ordering: .releasing)
        for _ in 0 ..< 10_000 where !released.load(ordering: .acquiring) { usleep(1_000) }
    }
}

/// A new executor's thread, asleep (state `S`) for longer than `afterSleep`'s default (200 µs),
/// and the actor that runs jobs on it.
private func asleepStoreThread(anticipation: Duration?, afterSleep: Duration = .microseconds(200)) async throws
    -> (actor: OnStoreThread, tid: Int32) {
    let actor = OnStoreThread(StoreThreadExecutor(name: "anticipate-test", anticipation: anticipation, afterSleep: afterSleep))
    let tid = try #require(await actor.threadID())
    #expect(try await eventually(timeout: .seconds(5)) { try threadSchedule(tid).state == "S" })
    try await Task.sleep(for: .milliseconds(5))
    return (actor, tid)
}

/// `anticipateJob()`: the store's thread wakes when a message that may be journaled arrives, and
/// waits for the commit spinning instead of sleeping, for a bounded time (docs/store.md).
@Suite struct StoreExecutorAnticipationTests {
    @Test func anAnticipatedJobIsTakenWhileTheThreadSpins() async throws {
        // A bound far longer than the test needs, so the spin cannot end before the job comes.
        let (actor, tid) = try await asleepStoreThread(anticipation: .seconds(30))
        actor.executor.anticipateJob(announcedOn: -1)
        // Woken and spinning: running (R), not sleeping, with no job queued.
        #expect(try await eventually(timeout: .seconds(5)) { try threadSchedule(tid).state == "R" })
        try await Task.sleep(for: .milliseconds(20))
        #expect(try threadSchedule(tid).state == "R")
        #expect(actor.executor.anticipationCounts == (spins: 1, hits: 0))
        // The job is taken by the spinning thread, then the thread sleeps again.
        #expect(await actor.threadID() == tid)
        #expect(actor.executor.anticipationCounts == (spins: 1, hits: 1))
        #expect(try await eventually(timeout: .seconds(5)) { try threadSchedule(tid).state == "S" })
    }

    @Test func anUnansweredAnticipationEndsAndTheThreadSleepsAgain() async throws {
        let (actor, tid) = try await asleepStoreThread(anticipation: .milliseconds(20))
        actor.executor.anticipateJob(announcedOn: -1)
        #expect(await eventually(timeout: .seconds(5)) { actor.executor.anticipationCounts.spins == 1 })
        // No job came: after its bound the thread sleeps, and stays asleep (no more turns).
        #expect(try await eventually(timeout: .seconds(5)) { try threadSchedule(tid).state == "S" })
        let turns = actor.executor.loopIterations
        let switches = try threadSchedule(tid).switches
        try await Task.sleep(for: .milliseconds(200))
        #expect(actor.executor.loopIterations == turns)
        #expect(try threadSchedule(tid).switches == switches)
        #expect(actor.executor.anticipationCounts == (spins: 1, hits: 0))
        // Jobs still run.
        #expect(await actor.threadID() == tid)
    }

    @Test func aThreadWokenOnTheAnnouncersCPUSleepsInsteadOfSpinning() async throws {
        // Spinning there would hold up the announcer, which is making the job (the scheduler lets
        // a woken thread preempt its waker: seen in the benchmark's traces, docs/store.md).
        let (actor, tid) = try await asleepStoreThread(anticipation: .seconds(30))
        try #require(smartico_pin_thread(tid, 0) == 0)
        actor.executor.anticipateJob(announcedOn: 0)
        #expect(await eventually(timeout: .seconds(5)) { actor.executor.declinedAnticipations == 1 })
        #expect(try await eventually(timeout: .seconds(5)) { try threadSchedule(tid).state == "S" })
        #expect(actor.executor.anticipationCounts == (spins: 0, hits: 0))
        // The job wakes it as any job does.
        #expect(await actor.threadID() == tid)
        #expect(actor.executor.anticipationCounts == (spins: 0, hits: 0))
    }

    @Test func aSpinEndsWhenTheThreadLandsOnTheAnnouncersCPU() async throws {
        try #require(smartico_usable_cpus() >= 2, "this machine has one CPU: no other CPU to spin on")
        let (actor, tid) = try await asleepStoreThread(anticipation: .seconds(30))
        try #require(smartico_pin_thread(tid, 0) == 0)
        actor.executor.anticipateJob(announcedOn: 1)
        #expect(await eventually(timeout: .seconds(5)) { actor.executor.anticipationCounts.spins == 1 })
        #expect(try threadSchedule(tid).state == "R")
        // Moved to the announcer's CPU, it stops spinning and sleeps, long before its 30 s bound.
        try #require(smartico_pin_thread(tid, 1) == 0)
        #expect(try await eventually(timeout: .seconds(5)) { try threadSchedule(tid).state == "S" })
        #expect(actor.executor.anticipationCounts == (spins: 1, hits: 0))
        #expect(await actor.threadID() == tid)
    }

    @Test func aBusyThreadIsNotMadeToSpin() async throws {
        let actor = OnStoreThread(StoreThreadExecutor(name: "anticipate-test", anticipation: .seconds(30)))
        let tid = try #require(await actor.threadID())
        async let held: Void = actor.holdUntilReleased()
        // Announced while the thread is busy with the held job: it sleeps after it, no spin.
        #expect(await eventually(timeout: .seconds(5)) { actor.holding.load(ordering: .acquiring) })
        actor.executor.anticipateJob(announcedOn: -1)
        actor.released.store(true, ordering: .releasing)
        await held
        #expect(try await eventually(timeout: .seconds(5)) { try threadSchedule(tid).state == "S" })
        try await Task.sleep(for: .milliseconds(50))
        #expect(try threadSchedule(tid).state == "S")
        #expect(actor.executor.anticipationCounts == (spins: 0, hits: 0))
        #expect(await actor.threadID() == tid)
    }

    @Test func aThreadThatHasJustFallenAsleepIsLeftAlone() async throws {
        // Under sustained load the thread sleeps briefly between commits: no wake-up, no spin.
        let (actor, tid) = try await asleepStoreThread(anticipation: .seconds(30), afterSleep: .seconds(60))
        try await expectAnticipationLeavesItAsleep(actor, tid)
    }

    @Test func anAnnouncedJobThatCameAlreadyCausesNoSpin() async throws {
        let (actor, tid) = try await asleepStoreThread(anticipation: .seconds(30))
        // Announced, then pushed before the thread looked: it takes the job and sleeps, no spin.
        actor.executor.anticipateJob(announcedOn: -1)
        #expect(await actor.threadID() == tid)
        #expect(try await eventually(timeout: .seconds(5)) { try threadSchedule(tid).state == "S" })
        let counts = actor.executor.anticipationCounts
        // The thread may have started its spin before the push landed (then it is a hit).
        #expect(counts.spins == counts.hits)
    }

    @Test func withAnticipationOffTheThreadIsNotWoken() async throws {
        let (actor, tid) = try await asleepStoreThread(anticipation: nil)
        try await expectAnticipationLeavesItAsleep(actor, tid)
    }

    /// `anticipateJob()` on the sleeping thread `tid` neither wakes it nor makes it spin.
    private func expectAnticipationLeavesItAsleep(_ actor: OnStoreThread, _ tid: Int32) async throws {
        let turns = actor.executor.loopIterations
        actor.executor.anticipateJob(announcedOn: -1)
        try await Task.sleep(for: .milliseconds(100))
        #expect(actor.executor.loopIterations == turns)
        #expect(try threadSchedule(tid).state == "S")
        #expect(actor.executor.anticipationCounts == (spins: 0, hits: 0))
    }
}
