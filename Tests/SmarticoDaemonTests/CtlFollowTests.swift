// Issue 29: `smarticoctl tail --follow` keeps following across a daemon restart, resuming after the
// last seq it printed: no gap, no duplicate.
import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

@Suite("smarticoctl tail --follow against smarticod", .serialized)
struct CtlFollowTests {
    @Test func tailFollowResumesAcrossARestartWithoutGapOrDuplicate() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir)
        try setup.writeConfig(url: sim.serverURL, logLevel: "info")
        let client = try await setup.start()
        var emitted = [try await sim.emitEngagement(to: "alice")]

        let outPath = setup.dir + "/tail.out", errPath = setup.dir + "/tail.err"
        for path in [outPath, errPath] { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        // Started with SIGINT and SIGTERM blocked, as a parent that reads them from a signalfd (the
        // daemon, this test process) hands them on: smarticoctl must unblock them to stop on SIGTERM.
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = [
            "-c", "import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM}); os.execv(sys.argv[1], sys.argv[1:])",
            try TestExecutables.url("smarticoctl").path,
            "--socket", setup.socketPath, "tail", "--follow", "--json", "--types", "engagement", "--since", "0",
        ]
        p.environment = SanitizerEnvironment.adding(to: ["PATH": "/usr/bin:/bin"])
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle(forWritingAtPath: outPath)
        p.standardError = FileHandle(forWritingAtPath: errPath)
        try p.runSerialized()
        let tail = ChildProcess(process: p, logPath: errPath)
        func lines() -> [String] {
            ((try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        func diagnostics() -> String {
            "tail stdout:\n\(lines().joined(separator: "\n"))\ntail stderr:\n\((try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")\ndaemon log:\n\(setup.log.suffix(3000))"
        }

        emitted.append(try await sim.emitEngagement(to: "alice"))
        let before = await eventually { lines().count >= 2 }
        #expect(before, "\(diagnostics())")

        client.close()
        #expect(await setup.stop() == 0)
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
        #expect(await setup.stop() == 0)
        _ = await sim.stop()
    }
}
