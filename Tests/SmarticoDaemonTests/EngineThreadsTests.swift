import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Issue 7: the daemon never starts libdispatch (Swift's global concurrent executor, Dispatch
/// sources): its worker/manager threads would wake the process every second forever. The daemon's
/// threads are its own and named; signals arrive through a `signalfd`, and the hash command still
/// starts with no signal blocked.
@Suite("Engine: threads and signals without libdispatch")
struct EngineThreadsTests {
    /// The names (`/proc/PID/task/*/comm`) of the threads of `pid`.
    static func threadNames(of pid: Int32) throws -> [String] {
        let dir = "/proc/\(pid)/task"
        return try FileManager.default.contentsOfDirectory(atPath: dir).compactMap { tid in
            try? String(contentsOfFile: "\(dir)/\(tid)/comm", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }.sorted()
    }

    /// The daemon's own threads: main and event loop ("smarticod"), the store, the blocking pool,
    /// a hash command run. libdispatch names its threads after its root queues
    /// ("com.apple.root.default-qos", "…user-initiated-qos.overcommit"), whose last 15 characters
    /// Linux keeps, e.g. "oot.default-qos", "-qos.overcommit".
    static let ownThreads: Set<String> = ["smarticod", "smarticod-store", "transport-block", "smarticod-hash"]

    @Test func identifiedDaemonRunsNoDispatchThreadAndStillHandlesSignals() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir, extra: ["--hash-salt", "s3cret"])
        // The hash command records its blocked-signal mask: the daemon blocks SIGTERM/SIGINT/SIGHUP
        // in all its threads, its children must not inherit that. awk reads its own mask and then
        // runs the hash script (not a shell first: dash clears the mask when it starts).
        let maskFile = setup.dir + "/sigblk.txt"
        let hashScript = try writeHashScript(dir: setup.dir, salt: "s3cret")
        let hashCommand = ["/usr/bin/awk",
                           "/^SigBlk/ { print > \"\(maskFile)\" } END { close(\"\(maskFile)\"); exit system(\"/bin/sh \(hashScript)\") }",
                           "/proc/self/status"]
        try setup.writeConfig(url: sim.serverURL, hash: nil, hashCommand: hashCommand)
        let client = try await setup.start()
        defer { client.close() }
        #expect(try await eventually { try await client.isReady() }, "never identified; log:\n\(setup.log)")
        let pid = try #require(setup.daemon?.pid)

        // Events through the whole path (inbox, group commit task, store, publish) first.
        _ = try await client.ok("subscribe", ["types": ["engagement"]])
        var uids: [String] = []
        for _ in 0..<20 { uids.append(try await sim.emitEngagement(to: "alice")) }
        var got: [String] = []
        while got.count < uids.count, let event = await client.nextEvent() {
            if let uid = event["data"]?["message"]?["engagement_uid"]?.stringValue { got.append(uid) }
        }
        #expect(got == uids, "log:\n\(setup.log)")

        let names = try Self.threadNames(of: pid)
        #expect(names.filter { $0 == "smarticod" }.count == 2 + SanitizerEnvironment.runtimeThreads,
                "main thread and event loop expected: \(names)")
        #expect(names.contains("smarticod-store"), "\(names)")
        #expect(!names.contains { $0.contains("qos") || $0.contains("dispatch") }, "libdispatch threads: \(names)")
        #expect(names.allSatisfy { Self.ownThreads.contains($0) }, "a thread the daemon did not name: \(names)")

        let mask = try String(contentsOfFile: maskFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(mask == "SigBlk:\t0000000000000000", "the hash command inherited blocked signals: \(mask)")

        // SIGHUP (read from the signalfd on the loop) reloads; still no libdispatch thread after it.
        try setup.writeConfig(url: sim.serverURL, hash: nil, hashCommand: hashCommand, logLevel: "info")
        kill(pid, SIGHUP)
        #expect(await eventually { setup.log.contains("configuration reloaded") }, "log:\n\(setup.log)")
        #expect(try await client.isReady())
        let after = try Self.threadNames(of: pid)
        #expect(!after.contains { $0.contains("qos") || $0.contains("dispatch") }, "libdispatch threads after SIGHUP: \(after)")

        // SIGTERM: graceful, exit 0.
        expectExitedZero(await setup.stop(), "log:\n\(setup.log)")
        _ = await sim.stop()
    }
}
