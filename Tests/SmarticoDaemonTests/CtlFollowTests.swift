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
        let p = Process()
        p.executableURL = try TestExecutables.url("smarticoctl")
        p.arguments = ["--socket", setup.socketPath, "tail", "--follow", "--json", "--types", "engagement", "--since", "0"]
        p.environment = ["PATH": "/usr/bin:/bin"]
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

        // SIGKILL: the test process may hand its children SIGTERM blocked (the daemon's own tests
        // block it), and each line is already written.
        await tail.kill9()
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
