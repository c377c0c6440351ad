// Session rule 5 end to end: the real smarticod against smartico-sim (which checks IDENTIFY hashes
// and records, for every message it receives, the user identified on that connection). Every
// message must reach the server under the user it was made for, or be reported dropped.
import Foundation
import SmarticoProtocol
import Testing
@testable import SmarticoDaemon
import SmarticoTestSupport

@Suite("Engine: identity boundary", .serialized) struct EngineIdentityTests {
    static let salt = "s3cret"

    /// A daemon acting for alice (identified with the hash command) against a sim that checks hashes.
    static func aliceOnline(hashCommand: Bool = true) async throws -> (DaemonSetup, SimProcess, DaemonClient) {
        try await startAgainstSim(sim: ["--hash-salt", salt]) { setup, sim in
            let script = try writeHashScript(dir: setup.dir, salt: salt)
            try setup.writeConfig(url: sim.serverURL, user: hashCommand ? "alice" : nil, hash: nil,
                                  hashCommand: hashCommand ? ["/bin/sh", script] : nil)
        }
    }

    static func identified(_ client: DaemonClient, as user: String?) async throws -> Bool {
        let s = try await client.status()
        guard s["state"]?.stringValue == "ready", s["outbox"]?["depth"]?.int64Value == 0 else { return false }
        if let user { return s["user"]?["ext_user_id"]?.stringValue == user && s["user"]?["identified"]?.boolValue == true }
        return s["user"]?["ext_user_id"] == .null
    }

    /// Sends `identify` and does not wait for the server's answer (the server is down).
    static func identifyWithoutWaiting(_ setup: DaemonSetup, _ user: String, hash: String? = nil) async throws {
        let other = try await DaemonClient.connect(path: setup.socketPath)
        defer { other.close() }
        var args: JSONObject = ["ext_user_id": .string(user)]
        if let hash { args["hash"] = .string(hash) }
        _ = try? await other.request("identify", args, timeoutMs: 300) // no answer while the server is down
    }

    /// The sim's received entries for cid 9 events: (eventType, the user identified when it arrived).
    static func events(_ sim: SimProcess) async throws -> [(String, String?)] {
        try await sim.receivedEntries(cids: [9]).compactMap { e in
            guard let type = e["message"]?["eventType"]?.stringValue else { return nil }
            return (type, e["user"]?.stringValue)
        }
    }

    @Test("an offline switch: alice's event under alice, bob's under bob", arguments: [false, true])
    func offlineSwitch(killBetween: Bool) async throws {
        let (setup, sim1, first) = try await Self.aliceOnline()
        defer { setup.remove() }
        var client = first
        defer { client.close() }
        #expect(try await eventually { try await Self.identified(client, as: "alice") }, "log:\n\(setup.log)")

        await sim1.child.kill9()
        #expect(try await eventually { try await client.status()["state"]?.stringValue != "ready" })
        let a = try await client.ok("event", ["event_type": "alice_only_event", "payload": ["who": "alice"]])
        #expect(a["queued"]?.boolValue == true)
        try await Self.identifyWithoutWaiting(setup, "bob")
        let b = try await client.ok("event", ["event_type": "bob_event", "payload": ["who": "bob"]])
        #expect(b["queued"]?.boolValue == true)
        if killBetween {
            await setup.kill9()
            client.close()
            client = try await setup.start()
        }

        let sim2 = try await SimProcess.start(dir: setup.dir, port: sim1.port, extra: ["--hash-salt", Self.salt])
        let back = try await eventually(timeout: .seconds(20)) { try await Self.identified(client, as: "bob") }
        #expect(back, "log:\n\(setup.log)")
        let events = try await Self.events(sim2)
        #expect(events.map(\.0) == ["alice_only_event", "bob_event"], "\(events)")
        #expect(events.first?.1 == "alice", "alice's event arrived under \(events.first?.1 ?? "nobody")")
        #expect(events.last?.1 == "bob")
        let identifies = try await sim2.received(cids: [5]).compactMap { $0["ext_user_id"]?.stringValue }
        #expect(identifies == ["alice", "bob"])
        expectExitedZero(await setup.stop())
        _ = await sim2.stop()
    }

    @Test func anOfflineLogoutSendsTheBacklogUnderTheUserThenLogsOut() async throws {
        let (setup, sim1, client) = try await Self.aliceOnline()
        defer { setup.remove() }
        defer { client.close() }
        #expect(try await eventually { try await Self.identified(client, as: "alice") }, "log:\n\(setup.log)")
        await sim1.child.kill9()
        #expect(try await eventually { try await client.status()["state"]?.stringValue != "ready" })
        for i in 0..<3 { _ = try await client.ok("event", ["event_type": .string("alice_\(i)")]) }
        _ = try await client.ok("logout")
        _ = try await client.ok("event", ["event_type": "anonymous_after"])
        let s = try await client.status()
        #expect(s["user"]?["ext_user_id"] == .null)
        #expect(s["outbox"]?["depth"]?.int64Value == 4)

        let sim2 = try await SimProcess.start(dir: setup.dir, port: sim1.port, extra: ["--hash-salt", Self.salt])
        #expect(try await eventually(timeout: .seconds(20)) { try await Self.identified(client, as: nil) }, "log:\n\(setup.log)")
        let events = try await Self.events(sim2)
        #expect(events.map(\.0) == ["alice_0", "alice_1", "alice_2", "anonymous_after"], "\(events)")
        #expect(events.prefix(3).allSatisfy { $0.1 == "alice" }, "\(events)")
        #expect(events.last?.1 == nil, "the anonymous event arrived under \(events.last?.1 ?? "")")
        // Alice's session ends with LOGOUT after her messages.
        let entries = try await sim2.receivedEntries(cids: [8, 9])
        let logout = entries.firstIndex { $0["message"]?["cid"]?.int64Value == 8 }
        #expect(logout != nil && logout! > 2 && entries[logout!]["user"]?.stringValue == "alice", "\(entries)")
        expectExitedZero(await setup.stop())
        _ = await sim2.stop()
    }

    @Test func withoutAHashForTheEarlierUserItsMessagesAreDroppedAndReported() async throws {
        // No hash command: the hashes come with `identify`, and they are kept in memory only.
        let (setup, sim1, client) = try await Self.aliceOnline(hashCommand: false)
        defer { setup.remove() }
        let script = try writeHashScript(dir: setup.dir, salt: Self.salt)
        _ = try await client.ok("identify", ["ext_user_id": "alice", "hash": .string(await SimHashFixture.hash("alice", script: script))])
        #expect(try await eventually { try await Self.identified(client, as: "alice") }, "log:\n\(setup.log)")
        await sim1.child.kill9()
        #expect(try await eventually { try await client.status()["state"]?.stringValue != "ready" })
        _ = try await client.ok("event", ["event_type": "alice_only_event"])
        try await Self.identifyWithoutWaiting(setup, "bob", hash: await SimHashFixture.hash("bob", script: script))
        _ = try await client.ok("event", ["event_type": "bob_event"])
        // A restart loses alice's hash: her message can no longer go under her.
        await setup.kill9()
        client.close()
        let after = try await setup.start()
        defer { after.close() }
        _ = try await after.ok("subscribe", ["types": ["error"]])
        let sim2 = try await SimProcess.start(dir: setup.dir, port: sim1.port, extra: ["--hash-salt", Self.salt])
        let dropped = await after.nextEvent(timeoutMs: 20_000) { $0["data"]?["code"]?.stringValue == "outbox_dropped" }
        #expect(dropped?["data"]?["user"]?.stringValue == "alice", "log:\n\(setup.log)")
        #expect(dropped?["data"]?["count"]?.int64Value == 1)
        #expect(try await eventually(timeout: .seconds(20)) { try await Self.identified(after, as: "bob") }, "log:\n\(setup.log)")
        let events = try await Self.events(sim2)
        #expect(events.map(\.0) == ["bob_event"], "\(events)")
        #expect(events.first?.1 == "bob")
        expectExitedZero(await setup.stop())
        _ = await sim2.stop()
    }
}

/// A hash the sim accepts, made by the test's hash script (on a thread of its own: it waits for a
/// process).
enum SimHashFixture {
    static func hash(_ user: String, script: String) async -> String {
        await TestExecutables.onThread {
            let p = Process()
            // Through sh: exec of a file just written can fail with ETXTBSY while other tests fork.
            p.executableURL = URL(fileURLWithPath: "/bin/sh")
            p.arguments = [script]
            p.environment = ["PATH": "/usr/bin:/bin", "SMARTICO_EXT_USER_ID": user]
            let output = Pipe()
            p.standardOutput = output
            // Serialized: concurrent Process.run() calls crash Foundation (ProcessLaunch.swift).
            try? p.runSerialized()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            p.waitForExit(timeout: .seconds(10))
            return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }
}

extension EngineIdentityTests {
    /// A refused switch brings the user back with its seen-set: the engagements the server sends
    /// again after the user's new IDENTIFY are not shown twice.
    @Test func aRefusedSwitchDoesNotShowTheUsersEngagementsAgain() async throws {
        let (setup, sim, client) = try await Self.aliceOnline()
        defer { setup.remove() }
        defer { client.close() }
        #expect(try await eventually { try await Self.identified(client, as: "alice") }, "log:\n\(setup.log)")
        _ = try await client.ok("subscribe", ["types": ["engagement"]])
        let uid = try await sim.emitEngagement(to: "alice")
        let first = await client.nextEvent { $0["data"]?["message"]?["engagement_uid"]?.stringValue == uid }
        #expect(first != nil, "log:\n\(setup.log)")

        let refused = try await client.request("identify", ["ext_user_id": "bob", "hash": "not-a-valid-hash"])
        #expect(refused["error"]?["code"]?.stringValue == "server_error", "\(refused)")
        #expect(try await eventually { try await Self.identified(client, as: "alice") }, "log:\n\(setup.log)")
        // Alice was identified again, and the sim sent her pending engagement again after it.
        let identifies = try await sim.received(cids: [5]).compactMap { $0["ext_user_id"]?.stringValue }
        #expect(identifies == ["alice", "bob", "alice"], "\(identifies)")
        let again = await client.drainEvents(forMs: 1_500)
        let repeats = again.filter { event in event["data"]?["message"]?["engagement_uid"]?.stringValue == uid }
        #expect(repeats.isEmpty, "shown twice: \(repeats)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }
}
