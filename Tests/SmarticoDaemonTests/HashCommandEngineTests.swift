// Issue 43: user.hash_command through the real daemon against smartico-sim: a descendant that
// leaves the command's process group dies with it, and an identify whose hash command fails gets
// one answer (docs/security.md, "Hash commands"; docs/socket-api.md, `hash_command_failed`).
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

    /// `identify` of a user whose hash command keeps failing: answered `hash_command_failed` at the
    /// first failure, naming it, and only once (the command fails again at each reconnect).
    @Test func anIdentifyWhoseHashCommandFailsIsAnsweredOnce() async throws {
        let (setup, sim, client) = try await startAgainstSim { setup, sim in
            try setup.writeConfig(url: sim.serverURL, user: nil, hash: nil,
                                  hashCommand: ["/bin/sh", "-c", "echo no hash here >&2; exit 3"], logLevel: "info")
        }
        defer { client.close(); setup.remove() }
        #expect(try await eventually { try await client.isReady(identified: nil) }, "log:\n\(setup.log)")

        let socket = try #require(LineSocket.connect(path: setup.socketPath))
        defer { socket.close() }
        // Every line with `id` that arrives within `ms` (after the first, `quietMs` more).
        func answers(to id: Int, withinMs ms: Int, thenQuietMs quietMs: Int) async -> [JSONObject] {
            await TestExecutables.onThread {
                var found: [JSONObject] = []
                var deadline = Date().addingTimeInterval(Double(ms) / 1000)
                while Date() < deadline {
                    guard let line = socket.readLine(timeoutMs: max(1, Int(deadline.timeIntervalSinceNow * 1000))) else { break }
                    guard let o = (try? JSONValue(parsing: line))?.objectValue, o["id"]?.int64Value == Int64(id) else { continue }
                    if found.isEmpty { deadline = Date().addingTimeInterval(Double(quietMs) / 1000) }
                    found.append(o)
                }
                return found
            }
        }
        #expect(socket.writeLine(#"{"id":7,"op":"identify","ext_user_id":"bob"}"#))
        let first = await answers(to: 7, withinMs: 20_000, thenQuietMs: 3_000)
        #expect(first.count == 1, "\(first.map(\.text)); log:\n\(setup.log.suffix(3000))")
        #expect(first.first?["ok"] == false)
        #expect(first.first?["error"]?["code"] == "hash_command_failed", "\(first.map(\.text))")
        let message = first.first?["error"]?["message"]?.stringValue ?? ""
        #expect(message.hasPrefix(#"user.hash_command failed for bob: "/bin/sh" exited with status 3"#), "\(message)")
        #expect(message.contains("bob stays the daemon's user"), "\(message)")
        #expect(!message.contains("no hash here"), "the command's stderr reached the answer: \(message)")

        // Asked again while the daemon keeps retrying: answered again, once.
        #expect(socket.writeLine(#"{"id":8,"op":"identify","ext_user_id":"bob"}"#))
        let second = await answers(to: 8, withinMs: 20_000, thenQuietMs: 2_000)
        #expect(second.count == 1 && second.first?["error"]?["code"] == "hash_command_failed", "\(second.map(\.text))")
        #expect(try await sim.received(cids: [5]).isEmpty, "an IDENTIFY was sent without a hash")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }
}
