// Hostile input through the real daemon (issue 25): smarticod against smartico-sim, its stderr
// read from the log file, peers on the real socket.
import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

@Suite("Hostile input: smarticod against smartico-sim")
struct HostileInputEngineTests {
    /// What a forged line would start with: a whole record of the daemon's own shape.
    static let forged = "2026-11-27T23:00:00+0000 critical smarticod: [SmarticoDaemon] FORGED"

    /// The log's lines that start with `prefix`.
    static func lines(of log: String, startingWith prefix: String) -> [Substring] {
        log.split(separator: "\n").filter { $0.hasPrefix(prefix) }
    }

    @Test func aServerErrMsgWithANewlineIsEscapedOnOneLogLine() async throws {
        let (setup, sim, client) = try await startAgainstSim { setup, sim in
            _ = try await sim.control(["op": "fault", "kind": "reject_init", "errCode": 7, "errMsg": .string("maintenance\n" + Self.forged)])
            try setup.writeConfig(url: sim.serverURL, hash: "h")
        }
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe", ["types": ["error"]])
        let initRejected = await client.nextEvent { $0["data"]?["code"]?.stringValue == "init_rejected" }
        // Subscribers get the server's text as it is (JSON escapes it); only the log must not break.
        #expect(initRejected?["data"]?["errMsg"]?.stringValue == "maintenance\n" + Self.forged, "log:\n\(setup.log)")

        _ = try await sim.control(["op": "fault", "kind": "reject_identify", "errCode": 100000, "errMsg": .string("bad hash\r\n" + Self.forged)])
        _ = try await sim.control(["op": "fault", "kind": "clear", "only": "reject_init"])
        let identifyRejected = await client.nextEvent { $0["data"]?["code"]?.stringValue == "identify_rejected" }
        #expect(identifyRejected != nil, "log:\n\(setup.log)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()

        let log = setup.log
        #expect(log.contains(#"(maintenance\n"# + Self.forged + ")"), "log:\n\(log)")
        #expect(log.contains(#"(bad hash\r\n"# + Self.forged + ")"), "log:\n\(log)")
        #expect(Self.lines(of: log, startingWith: "2026-11-27T23:00:00+0000").isEmpty, "log:\n\(log)")
        #expect(!log.contains("\r"), "log:\n\(log)")
        // Every line is a record of the daemon's shape: a timestamp, a level, the label.
        for line in log.split(separator: "\n") {
            #expect(line.split(separator: " ").dropFirst().first.map { ["trace", "debug", "info", "notice", "warning", "error", "critical"].contains($0) } == true,
                    "not a log record: \(line)")
        }
    }

    /// Issue 43: a 50 KB errMsg (a warning) is logged cut to its bound, the cut marked; no line of
    /// the daemon's log is longer than 8 KiB, so journald (which splits at 48 KiB) keeps it one entry.
    @Test func aServerErrMsgOf50KBIsLoggedCutAndMarked() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir)
        // 50 KB, two-byte scalars (a cut must not split one), and a forged record far inside it.
        let errMsg = String(repeating: "é", count: 20_000) + "\n" + Self.forged + String(repeating: "é", count: 5_000)
        // Anonymous at start, so that the rejection comes after the subscription (an error event
        // is not journaled: one before it would be missed).
        try setup.writeConfig(url: sim.serverURL, user: nil, hash: nil)
        let client = try await setup.start()
        defer { client.close() }
        _ = try await client.ok("subscribe", ["types": ["error"]])
        _ = try await sim.control(["op": "fault", "kind": "reject_identify", "errCode": 100000, "errMsg": .string(errMsg)])
        let answer = try await client.request("identify", ["ext_user_id": "alice", "hash": "h"])
        #expect(answer["ok"] == false, "\(answer)")
        let rejected = await client.nextEvent { $0["data"]?["code"]?.stringValue == "identify_rejected" }
        // Apps still get the server's text whole.
        #expect(rejected?["data"]?["errMsg"]?.stringValue == errMsg, "log:\n\(setup.log.prefix(3000))")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()

        let log = setup.log
        #expect(!log.isEmpty)
        let lines = log.split(separator: "\n")
        for line in lines {
            #expect(line.utf8.count < LogEscaping.maxLineBytes, "a line of \(line.utf8.count) bytes: \(line.prefix(200))")
        }
        let warning = try #require(lines.first { $0.contains("identify_rejected") && $0.contains(" warning ") }, "log:\n\(log.prefix(3000))")
        #expect(warning.utf8.count <= 2 * LogEscaping.maxFieldBytes, "\(warning.utf8.count) bytes")
        #expect(warning.contains("…(cut, ") && warning.contains("é…(cut, "), "\(warning.suffix(200))")
        #expect(!warning.contains("FORGED"))
        #expect(Self.lines(of: log, startingWith: "2026-11-27T23:00:00+0000").isEmpty)
    }

    /// Issue 43: URLs from the server reach apps only when they are http or https with a host. A
    /// `javascript:` popup page, a `file:` gamification page and an avatar on a `javascript:` image
    /// domain are null, with a `problem` naming each, logged once; the URLs the daemon builds on
    /// them (engagements' `popup_url`, deep links' and mini-games' `url`) are null too.
    @Test func serverURLsThatAreNotHTTPAreNullAndAProblem() async throws {
        let (setup, sim, client) = try await startAgainstSim { setup, sim in
            _ = try await sim.control(["op": "fault", "kind": "answer_fields", "cid": 6,
                                       "fields": ["native_app_popup_url": "javascript:alert(document.cookie)",
                                                  "native_app_gf_url": "file:///etc/passwd"]])
            _ = try await sim.control(["op": "fault", "kind": "answer_fields", "cid": 4,
                                       "fields": ["settings": ["DYNAMIC_IMAGE_DOMAIN": "javascript://x/"]]])
            try setup.writeConfig(url: sim.serverURL, hash: "h", logLevel: "info")
        }
        defer { client.close(); setup.remove() }
        #expect(try await eventually { try await client.ok("status")["user"]?["identified"] == true }, "log:\n\(setup.log)")

        // The identify op answers what `identified` carried.
        let identified = try await client.ok("identify", ["ext_user_id": "alice", "hash": "h"])
        #expect(identified["popup_url"] == .null && identified["gf_url"] == .null && identified["avatar_url"] == .null, "\(identified)")
        let problem = identified["problem"]?.stringValue ?? ""
        #expect(problem.contains(#""native_app_popup_url" is not an http or https URL with a host (the scheme is javascript)"#), "\(problem)")
        #expect(problem.contains(#""native_app_gf_url" is not an http or https URL with a host (the scheme is file)"#), "\(problem)")
        #expect(problem.contains(#""avatar_url" is not an http or https URL with a host (the scheme is javascript)"#), "\(problem)")
        #expect(identified["props"]?["native_app_gf_url"] == .null, "\(identified)")

        _ = try await client.ok("subscribe", ["types": ["engagement", "deeplink", "minigame"]])
        _ = try await sim.emitEngagement(to: "alice")
        let engagement = await client.nextEvent { $0["event"] == "engagement" }
        #expect(engagement != nil && engagement?["data"]?["popup_url"] == .null, "\(String(describing: engagement))")
        _ = try await sim.control(["op": "emit", "user": "alice", "message": ["cid": 105, "payload": ["dp": "dp:gf_missions"]]])
        let deeplink = await client.nextEvent { $0["event"] == "deeplink" }
        #expect(deeplink?["data"]?["kind"] == "gamification" && deeplink?["data"]?["url"] == .null, "\(String(describing: deeplink))")
        _ = try await sim.control(["op": "emit", "user": "alice", "message": ["cid": 707, "saw_template_id": 5, "pending_message_id": 1]])
        let minigame = await client.nextEvent { $0["event"] == "minigame" }
        #expect(minigame?["data"]?["saw_template_id"] == 5 && minigame?["data"]?["url"] == .null, "\(String(describing: minigame))")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()

        // Logged once, with the IDENTIFY answer, at warning.
        let logged = setup.log.split(separator: "\n").filter { $0.contains("\"native_app_popup_url\" is not an http") }
        #expect(logged.count == 1 && logged.allSatisfy { $0.contains(" warning ") }, "\(logged)")
    }

    @Test func identifyRefusesControlCharactersAndOverlongIDsOnTheRealSocket() async throws {
        let (setup, sim, client) = try await startAgainstSim()
        defer { client.close(); setup.remove() }
        for (id, words) in [("victim\n" + Self.forged, "U+000A at byte offset 6"),
                            ("bob\u{0}", "U+0000 at byte offset 3"),
                            (String(repeating: "b", count: 257), "257 bytes")] {
            let response = try await client.request("identify", ["ext_user_id": .string(id), "hash": "h"])
            #expect(response["ok"]?.boolValue == false)
            #expect(response["error"]?["code"]?.stringValue == "bad_request", "\(response.text)")
            let message = response["error"]?["message"]?.stringValue ?? ""
            #expect(message.contains("ext_user_id") && message.contains(words), "\(message)")
        }
        // Nothing reached the session: the configured user is still the one identified.
        #expect(try await eventually { try await client.ok("status")["user"]?["ext_user_id"]?.stringValue == "alice" })
        #expect(try await sim.received(cids: [5]).allSatisfy { $0["ext_user_id"]?.stringValue == "alice" })
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
        #expect(Self.lines(of: setup.log, startingWith: "2026-11-27T23:00:00+0000").isEmpty, "log:\n\(setup.log)")
    }

    /// Adds `user.hash_command_env` to the configuration `setup` wrote.
    static func addHashCommandEnv(_ names: [String], to setup: DaemonSetup) throws {
        let text = try String(contentsOfFile: setup.configPath, encoding: .utf8)
        var root = try #require(try JSONValue(parsing: text).objectValue)
        var user = root["user"]?.objectValue ?? [:]
        user["hash_command_env"] = .array(names.map { .string($0) })
        root["user"] = .object(user)
        try Data(root.serialized()).write(to: URL(fileURLWithPath: setup.configPath))
    }

    @Test func theDaemonRunsTheHashCommandWithAMinimalEnvironment() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir)
        let script = try writeEnvDumpingHashScript(dir: setup.dir)
        let dump = setup.dir + "/env.txt"
        try setup.writeConfig(url: sim.serverURL, hash: nil, hashCommand: ["/bin/sh", script, dump])
        try Self.addHashCommandEnv(["VAULT_ADDR", "NOT_SET_ANYWHERE"], to: setup)
        let client = try await setup.start(environment: [
            "LANG": "C.UTF-8", "HOME": "/root", "SECRET_TOKEN": "s3cr3t", "VAULT_ADDR": "https://vault.local",
        ])
        defer { client.close() }
        #expect(try await eventually {
            try await client.ok("status")["user"]?["identified"]?.boolValue == true
        }, "log:\n\(setup.log)")
        var seen = try environmentDump(dump)
        seen["PWD"] = nil  // the shell's own (dash exports it)
        // DaemonSetup starts the daemon with PATH=/usr/bin:/bin.
        #expect(seen == ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "SMARTICO_EXT_USER_ID": "alice", "VAULT_ADDR": "https://vault.local"])
        #expect(try await sim.received(cids: [5]).first?["hash"]?.stringValue == "h-alice")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    static let failingHashCommand = ["/bin/sh", "-c", "printf 'oops\\nSECRET-abc token=hunter2\\n' >&2; exit 3"]

    @Test func hashCommandStderrReachesOnlyTheDebugLogMaskedNeverEvents() async throws {
        let (setup, sim, client) = try await startAgainstSim { setup, sim in
            try setup.writeConfig(url: sim.serverURL, hash: nil, hashCommand: Self.failingHashCommand, logLevel: "debug")
        }
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe", ["types": ["error", "session"]])
        let failed = await client.nextEvent { $0["data"]?["code"]?.stringValue == "hash_command_failed" }
        let event = failed?.text ?? ""
        #expect(event.contains("exited with status 3"), "event: \(event); log:\n\(setup.log)")
        for secret in ["oops", "SECRET-abc", "hunter2"] { #expect(!event.contains(secret), "event: \(event)") }
        // The session events after it carry nothing of it either.
        for e in await client.drainEvents(forMs: 300) {
            for secret in ["SECRET-abc", "hunter2"] { #expect(!e.text.contains(secret), "event: \(e.text)") }
        }
        expectExitedZero(await setup.stop())
        _ = await sim.stop()

        let log = setup.log
        #expect(log.contains(#"user.hash_command stderr (masked): oops\nSECRET-abc token=***"#), "log:\n\(log)")
        #expect(!log.contains("hunter2"), "log:\n\(log)")
        #expect(Self.lines(of: log, startingWith: "SECRET-abc").isEmpty, "log:\n\(log)")
    }

    @Test func atInfoLevelTheHashCommandStderrIsNotLogged() async throws {
        let (setup, sim, client) = try await startAgainstSim { setup, sim in
            try setup.writeConfig(url: sim.serverURL, hash: nil, hashCommand: Self.failingHashCommand, logLevel: "info")
        }
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe", ["types": ["error"]])
        let failed = await client.nextEvent { $0["data"]?["code"]?.stringValue == "hash_command_failed" }
        #expect(failed != nil, "log:\n\(setup.log)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
        let log = setup.log
        #expect(log.contains("hash_command_failed"), "log:\n\(log)")  // the failure itself is logged
        for secret in ["oops", "SECRET-abc", "hunter2"] { #expect(!log.contains(secret), "log:\n\(log)") }
    }
}
