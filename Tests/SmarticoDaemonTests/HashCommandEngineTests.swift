// Issue 43: user.hash_command through the real daemon against smartico-sim: a descendant that
// leaves the command's process group dies with it (docs/security.md, "Hash commands").
import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

@Suite("user.hash_command: smarticod against smartico-sim")
struct HashCommandEngineTests {
    /// Whether `pid` is a live process (a zombie counts as gone: it no longer runs).
    static func alive(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let paren = stat.lastIndex(of: ")") else { return false }
        return !stat[stat.index(after: paren)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    /// The pids written to `path`, one a line.
    static func pids(in path: String) -> [pid_t] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { pid_t($0) }
    }

    /// A hash command that never answers: it starts a grandchild in a session of its own
    /// (`setsid`, so out of the command's process group), which appends its pid to a file and
    /// sleeps; then it sleeps itself, until the daemon kills it at the timeout (10 s).
    @Test func aGrandchildThatCallsSetsidIsKilledWithTheCommand() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let pidFile = setup.dir + "/grandchildren"
        defer { for pid in Self.pids(in: pidFile) where Self.alive(pid) { kill(pid, SIGKILL) } }
        let sim = try await SimProcess.start(dir: setup.dir)
        let script = "/usr/bin/setsid /bin/sh -c 'echo $$ >> \(pidFile); exec sleep 120' & exec sleep 120"
        try setup.writeConfig(url: sim.serverURL, hash: nil, hashCommand: ["/bin/sh", "-c", script], logLevel: "info")
        let client = try await setup.start()
        defer { client.close() }
        _ = try await client.ok("subscribe", ["types": ["error"]])

        #expect(await eventually { !Self.pids(in: pidFile).isEmpty }, "no grandchild; log:\n\(setup.log)")
        let grandchild = try #require(Self.pids(in: pidFile).first)
        #expect(Self.alive(grandchild))
        // It did leave the command's process group and session: a kill of the group misses it.
        #expect(getsid(grandchild) == grandchild && getpgid(grandchild) == grandchild)

        let failed = await client.nextEvent(timeoutMs: 30_000) { $0["data"]?["code"]?.stringValue == "hash_command_failed" }
        #expect(failed?["data"]?["message"]?.stringValue?.contains("did not finish within 10000 ms and was killed") == true,
                "\(failed?.text ?? "no event"); log:\n\(setup.log)")
        #expect(await eventually(timeout: .seconds(5)) { !Self.alive(grandchild) }, "the setsid grandchild \(grandchild) outlived the timeout kill")
        // Reaped by the daemon (its subreaper), not left a zombie.
        #expect(!FileManager.default.fileExists(atPath: "/proc/\(grandchild)"))
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
        #expect(!setup.log.contains("cannot become a child subreaper"), "log:\n\(setup.log)")
    }

}
