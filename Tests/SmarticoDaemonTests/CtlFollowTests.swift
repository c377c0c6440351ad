// Issue 29: `smarticoctl tail --follow` keeps following across a daemon restart, resuming after the
// last seq it printed: no gap, no duplicate.
import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

@Suite("smarticoctl tail --follow against smarticod", .serialized)
struct CtlFollowTests {
    /// `smarticoctl tail --follow --json --types engagement --since 0` against `setup`'s daemon
    /// (with SIGINT and SIGTERM blocked when it starts, if asked), its stdout lines, and what to
    /// print when a check fails.
    static func startTail(_ setup: DaemonSetup, blockingSignals: Bool) throws
        -> (ChildProcess, @Sendable () -> [String], @Sendable () -> String) {
        let outPath = setup.dir + "/tail.out", errPath = setup.dir + "/tail.err"
        for path in [outPath, errPath] { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        let ctl = try TestExecutables.url("smarticoctl").path
        let arguments = ["--socket", setup.socketPath, "tail", "--follow", "--json", "--types", "engagement", "--since", "0"]
        let p = Process()
        if blockingSignals {
            p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            p.arguments = ["-c", "import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM}); os.execv(sys.argv[1], sys.argv[1:])",
                           ctl] + arguments
        } else {
            p.executableURL = URL(fileURLWithPath: ctl)
            p.arguments = arguments
        }
        p.environment = SanitizerEnvironment.adding(to: ["PATH": "/usr/bin:/bin"])
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle(forWritingAtPath: outPath)
        p.standardError = FileHandle(forWritingAtPath: errPath)
        try p.runSerialized()
        let lines: @Sendable () -> [String] = {
            ((try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        let log = setup.logPath
        let diagnostics: @Sendable () -> String = {
            "tail stdout:\n\(lines().joined(separator: "\n"))\ntail stderr:\n\((try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")\ndaemon log:\n\(((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").suffix(3000))"
        }
        return (ChildProcess(process: p, logPath: errPath), lines, diagnostics)
    }

    @Test func tailFollowResumesAcrossARestartWithoutGapOrDuplicate() async throws {
        let (setup, sim, client) = try await startAgainstSim { setup, sim in
            try setup.writeConfig(url: sim.serverURL, logLevel: "info")
        }
        defer { setup.remove() }
        var emitted = [try await sim.emitEngagement(to: "alice")]

        // Started with SIGINT and SIGTERM blocked, as a parent that reads them from a signalfd (the
        // daemon, this test process) hands them on: smarticoctl must unblock them to stop on SIGTERM.
        let (tail, lines, diagnostics) = try Self.startTail(setup, blockingSignals: true)

        emitted.append(try await sim.emitEngagement(to: "alice"))
        let before = await eventually { lines().count >= 2 }
        #expect(before, "\(diagnostics())")

        client.close()
        expectExitedZero(await setup.stop())
        try await Task.sleep(for: .milliseconds(700))  // the tail finds no socket at least once
        #expect(tail.isRunning, "tail --follow exited with the daemon: \(diagnostics())")
        let restarted = try await setup.start()
        defer { restarted.close() }
        // Queued by the simulator until the daemon identifies alice again, journaled, and then
        // replayed to the tail when it reconnects or delivered live.
        emitted.append(try await sim.emitEngagement(to: "alice"))
        emitted.append(try await sim.emitEngagement(to: "alice"))
        let after = await eventually { lines().count >= 4 }
        #expect(after, "\(diagnostics())")
        try await Task.sleep(for: .milliseconds(300))  // a duplicate would arrive now

        // SIGTERM stops it although it was started with SIGTERM blocked.
        tail.signal(SIGTERM)
        #expect(await tail.waitForExit(timeout: .seconds(10)) == -SIGTERM, "\(diagnostics())")
        let printed = lines()
        #expect(printed.count == 4, "\(diagnostics())")
        var seqs: [Int64] = []
        for (line, uid) in zip(printed, emitted) {
            #expect(line.contains(uid), "expected \(uid) in \(line); \(diagnostics())")
            let value = try JSONValue(parsing: Array(line.utf8))
            seqs.append(try #require(value["seq"]?.int64Value, "\(line)"))
        }
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "seqs \(seqs)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// The daemon comes back on a fresh store (its database damaged and moved aside) whose journal
    /// has grown past the seqs the tail printed before the tail reconnects: the tail names the old
    /// journal, so the daemon replays the new one from its start instead of resuming at the old seq
    /// inside it (which skipped the events before it).
    @Test func tailFollowAcrossAFreshStoreSkipsNothing() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir)
        try setup.writeConfig(url: sim.serverURL, logLevel: "info")
        var client = try await setup.start()
        var emitted = [try await sim.emitEngagement(to: "alice"), try await sim.emitEngagement(to: "alice")]
        let (tail, lines, diagnostics) = try Self.startTail(setup, blockingSignals: false)
        defer { tail.signal(SIGKILL) }
        #expect(await eventually { lines().count >= 2 }, "\(diagnostics())")
        // Reported, so the simulator does not send them again to the fresh store.
        for uid in emitted { _ = try await client.ok("report", ["kind": "impression", "engagement_uid": .string(uid)]) }
        #expect(await eventually { ((try? await sim.received(cids: [103])) ?? []).count >= 2 })
        client.close()

        tail.signal(SIGSTOP)  // the tail reconnects only once the new journal is past its old seqs
        expectExitedZero(await setup.stop())
        let db = try #require(FileHandle(forWritingAtPath: setup.stateDir + "/" + SmarticoStore.fileName))
        try db.write(contentsOf: Data(String(repeating: "not a database, ", count: 64).utf8))
        try db.close()
        client = try await setup.start()
        defer { client.close() }
        for _ in 0..<4 { emitted.append(try await sim.emitEngagement(to: "alice")) }
        // store_damaged and the four: seq 5, beyond the 2 the tail printed.
        #expect(try await eventually { (try await client.ok("status")["journal"]?["last_seq"]?.int64Value ?? 0) >= 5 },
                "\(diagnostics())")
        tail.signal(SIGCONT)
        // The two, the gap naming the old journal, then the four of the new one.
        #expect(await eventually { lines().count >= 7 }, "\(diagnostics())")
        try await Task.sleep(for: .milliseconds(300))  // a duplicate would arrive now
        let printed = lines()
        #expect(printed.count == 7, "\(diagnostics())")
        #expect(printed.count > 2 && printed[2].contains(#""event":"gap""#) && printed[2].contains(#""reason":"journal_replaced""#),
                "\(diagnostics())")
        let engagements = printed.filter { $0.contains(#""event":"engagement""#) }
        #expect(engagements.count == emitted.count)
        for (line, uid) in zip(engagements, emitted) { #expect(line.contains(uid), "expected \(uid) in \(line.prefix(200))") }
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }
}
