import Foundation
import Synchronization
import SmarticoProtocol
import SmarticoTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Issue 7: memory a burst used is given back once it is over. The store's page cache (16 MiB
/// under load) and the loop's buffers are freed after the burst; they must also leave the process
/// (`sqlite3_db_release_memory`, then `malloc_trim`, with every thread allocating from glibc's main
/// arena, whose top `malloc_trim` can shrink: `ProcessMemory.useOneArena()`).
@Suite("Engine: memory after a burst")
struct EngineMemoryTests {
    static func rssAnonKiB(_ pid: Int32) -> Int? { EngineBackpressureTests.statusKiB(pid, "RssAnon") }

    /// A daemon identified against a simulator of ~2 KB engagements, and its pid (debug log: the
    /// tests read the trim's and the backpressure's lines).
    static func identifiedDaemon(simExtra: [String] = []) async throws -> (DaemonSetup, SimProcess, DaemonClient, Int32) {
        try await EngineBackpressureTests.identifiedDaemon(logLevel: "debug", simExtra: simExtra)
    }

    @Test func aBurstsMemoryIsGivenBackAfterIt() async throws {
        let (setup, sim, client, pid) = try await Self.identifiedDaemon()
        defer { setup.remove() }
        defer { client.close() }
        _ = try await client.ok("subscribe", ["types": ["engagement"]])
        let idle = try #require(Self.rssAnonKiB(pid))

        // A burst: 4,000 engagements of ~2 KB, journaled (the page cache fills) and published.
        let total = 4_000
        for _ in 0..<(total / 500) {
            _ = try await sim.control(["op": "emit", "kind": "engagement", "user": "alice", "bodies": false, "count": 500])
        }
        var received = 0
        while received < total, await client.nextEvent(timeoutMs: 15_000) != nil { received += 1 }
        #expect(received == total, "log:\n\(setup.log)")
        let peak = try #require(Self.rssAnonKiB(pid))
        // Subscribers' queues are bounded now (socket-api.md, "Framing"): a burst grows the heap by
        // its transient buffers and the store's page cache only, a few MiB.
        if SanitizerEnvironment.memoryBoundsApply {
            #expect(peak - idle < 16 << 10, "the burst grew the daemon's memory by \(peak - idle) KiB (\(idle) → \(peak) KiB)")
        } else {
            SanitizerEnvironment.memoryBoundNotChecked("the burst grew RssAnon by \(peak - idle) KiB (\(idle) → \(peak) KiB)")
        }

        // 5 s after the burst the driver trims the heap; give it up to 15 s. What stays is the
        // store's page cache (SQLite's default, 2 MiB) and the allocator's slack.
        let trimmed = await eventually(timeout: .seconds(15)) { setup.log.contains("heap trimmed after a burst") }
        #expect(trimmed, "the driver never trimmed the heap after the burst; log:\n\(setup.log.suffix(2000))")
        let after = Self.rssAnonKiB(pid) ?? peak
        if SanitizerEnvironment.memoryBoundsApply {
            #expect(after < idle + (4 << 10), "RssAnon idle \(idle) KiB, after the burst \(peak) KiB, after the trim \(after) KiB")
        } else {
            SanitizerEnvironment.memoryBoundNotChecked("RssAnon idle \(idle) KiB, after the burst \(peak) KiB, after the trim \(after) KiB")
        }
        expectExitedZero(await setup.stop(), "log:\n\(setup.log)")
        _ = await sim.stop()
    }

    /// Backpressure (docs/session.md): a server that sends faster than the daemon journals is read
    /// no faster than that, so a flood costs a bounded amount of memory and loses nothing.
    @Test func aFloodFromTheServerIsReadNoFasterThanItIsJournaled() async throws {
        // The daemon is stopped while the flood is queued: the sim must not drop it for a missing
        // PONG meanwhile (on a loaded machine queuing takes longer than its default PONG timeout).
        let (setup, sim, client, pid) = try await Self.identifiedDaemon(simExtra: ["--ping-interval", "10m"])
        defer { setup.remove() }
        defer { client.close() }
        let idle = try #require(Self.rssAnonKiB(pid))
        let before = try await client.status()["journal"]?["last_seq"]?.int64Value ?? 0

        // 20,000 engagements of ~2 KB (~40 MB) queued while the daemon is stopped (as on a busy
        // device), so that when it runs again they are all there to read at once: without
        // backpressure the daemon read them into memory far ahead of its journal.
        let peak = Mutex(idle)
        let sampler = Task.detached {
            while !Task.isCancelled {
                if let now = Self.rssAnonKiB(pid) { peak.withLock { $0 = max($0, now) } }
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
        let total = 20_000
        kill(pid, SIGSTOP)
        // In requests of 1,000: each is answered within the control socket's 15 s on a loaded machine.
        try await EngineBackpressureTests.emit(sim, count: total)
        kill(pid, SIGCONT)
        var last: Int64 = before
        let journaled = try await eventually(timeout: .seconds(300)) {
            last = try await client.status()["journal"]?["last_seq"]?.int64Value ?? last
            return last >= before + Int64(total)
        }
        sampler.cancel()
        _ = await sampler.value
        #expect(journaled, "journaled \(last - before) of \(total); log:\n\(setup.log.suffix(3000))")
        let grew = peak.withLock { $0 } - idle
        // The bound: ~1 MiB of server messages waiting in the inbox, the store's page cache, the
        // heap's slack (docs/benchmarks.md has the measured figures).
        if SanitizerEnvironment.memoryBoundsApply {
            #expect(grew < 48 << 10, "RssAnon grew by \(grew) KiB during the flood")
        } else {
            SanitizerEnvironment.memoryBoundNotChecked("RssAnon grew by \(grew) KiB during the flood")
        }
        #expect(setup.log.contains("server reading paused"), "the flood never made the daemon pause: the test shows nothing")
        expectExitedZero(await setup.stop(), "log:\n\(setup.log.suffix(3000))")
        _ = await sim.stop()
    }
}
