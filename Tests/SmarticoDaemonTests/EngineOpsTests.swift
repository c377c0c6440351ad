import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing

/// Every socket op and every event kind through the real daemon and the real simulator: what a
/// peer asks for reaches the server as the right message, and what the server (or the bridge)
/// sends comes out as the right event with its data (socket-api.md).
@Suite(.serialized)
struct EngineOpsTests {
    /// The sim's received messages of `cid` whose field `key` equals `value`, waited for (bounded).
    static func arrived(_ sim: SimProcess, cid: Int64, where match: @escaping @Sendable (JSONObject) -> Bool) async throws -> JSONObject? {
        var found: JSONObject? = nil
        _ = try await eventually {
            found = try await sim.received(cids: [cid]).last(where: match)
            return found != nil
        }
        return found
    }

    static func event(_ client: DaemonClient, _ name: String, where match: @escaping @Sendable (JSONObject) -> Bool = { _ in true }) async -> JSONObject? {
        await client.nextEvent(timeoutMs: 15_000) { $0["event"]?.stringValue == name && match($0) }
    }

    @Test func everyOpReachesTheServerAndEveryEventKindArrives() async throws {
        let (setup, sim, client) = try await startReadyAgainstSim()
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe")

        // --- ops that become client messages ---
        let loginsBefore = try await sim.received(cids: [7]).count
        _ = try await client.ok("login")
        #expect(try await eventually { try await sim.received(cids: [7]).count == loginsBefore + 1 }, "login: no second cid 7")

        _ = try await client.ok("push_token", ["token": "tok-123", "status": 1, "platform": 2])
        let push = try await Self.arrived(sim, cid: 1003) { $0["token"]?.stringValue == "tok-123" }
        #expect(push != nil, "push_token: no cid 1003 with the token")

        _ = try await client.ok("language", ["language": "pt-br"])
        let language = try await Self.arrived(sim, cid: 9) { $0["eventType"]?.stringValue == "core_language_changed" }
        #expect(language != nil, "language: no cid 9 core_language_changed")

        for (kind, cid) in [("impression", Int64(103)), ("action", 104), ("failed", 106)] {
            let uid = "eng-\(kind)"
            _ = try await client.ok("report", ["kind": .string(kind), "engagement_uid": .string(uid), "action": "dp:ok"])
            let report = try await Self.arrived(sim, cid: cid) { $0["engagement_uid"]?.stringValue == uid }
            #expect(report != nil, "report \(kind): no cid \(cid) for \(uid)")
            #expect(report?["activityType"]?.int64Value == 30, "report \(kind): activityType default 30")
        }

        _ = try await client.ok("minigame_ack", ["saw_template_id": 5, "pending_message_id": 77])
        let ack = try await Self.arrived(sim, cid: 711) { $0["saw_template_id"]?.int64Value == 5 }
        #expect(ack != nil, "minigame_ack: no cid 711")

        let sent = try await client.ok("send", ["message": ["cid": 9, "eventType": "ops_test_send"]])
        let sentUUID = try #require(sent["uuid"]?.stringValue)
        let sentArrived = try await Self.arrived(sim, cid: 9) { $0["uuid"]?.stringValue == sentUUID }
        #expect(sentArrived?["eventType"]?.stringValue == "ops_test_send")
        #expect(sentArrived?["ts"]?.int64Value ?? 0 > 1_600_000_000_000, "send: ts filled in")

        let levels = try await client.ok("request", ["message": ["cid": 500]])
        #expect(levels["message"]?["cid"]?.int64Value == 501, "request 500 → 501: \(levels)")

        // The sim answers an unknown cid with 99999 (UNSUPPORTED_COMMAND) under the same uuid.
        let unsupported = try await client.request("request", ["message": ["cid": 12_345], "timeout_ms": 5_000])
        #expect(unsupported["error"]?["code"]?.stringValue == "server_error", "unknown cid: \(unsupported)")
        #expect(unsupported["error"]?["errCode"]?.int64Value == 6, "unknown cid (the sim answers errCode 6): \(unsupported)")

        // An answer slower than timeout_ms: `timeout`.
        _ = try await sim.control(["op": "fault", "kind": "delay", "ms": 1_500])
        let late = try await client.request("request", ["message": ["cid": 500], "timeout_ms": 300])
        #expect(late["error"]?["code"]?.stringValue == "timeout", "a late answer: \(late)")
        _ = try await sim.control(["op": "fault", "kind": "clear"])
        // The late answer is nobody's any more: it is dropped and counted, not published (the
        // checks below end by expecting no more events, so a `message` would fail them).
        let dropped = try await eventually(timeout: .seconds(10)) {
            try await client.ok("status")["counters"]?["answers_dropped"]?.int64Value == 1
        }
        let counters = try await client.ok("status")["counters"]
        #expect(dropped, "the late 501 was not counted as dropped: \(String(describing: counters))")

        // --- the bridge ---
        _ = try await client.ok("bridge", ["message": ["bcid": 6, "cid": 9, "eventType": "ops_test_bridge"]])
        let bridged = try await Self.arrived(sim, cid: 9) { $0["eventType"]?.stringValue == "ops_test_bridge" }
        #expect(bridged != nil && bridged?["bcid"] == nil, "bridge 6: forwarded without bcid")

        _ = try await client.ok("bridge", ["message": ["bcid": 4, "dp": "dp:cashier"]])
        let custom = await Self.event(client, "deeplink") { $0["data"]?["source"]?.stringValue == "bridge" }
        #expect(custom?["data"]?["kind"]?.stringValue == "custom")
        #expect(custom?["data"]?["dp"]?.stringValue == "dp:cashier")

        _ = try await client.ok("bridge", ["message": ["bcid": 7, "ops_test_prop": 42]])
        let props = await Self.event(client, "props") { $0["data"]?["ops_test_prop"] != nil || $0["data"]?["props"]?["ops_test_prop"] != nil }
        #expect(props != nil, "bridge 7: no props event carrying the new prop")

        _ = try await client.ok("bridge", ["message": ["bcid": 8, "ach_game_id": 3, "context": "ops"]])
        let opening = await Self.event(client, "game_opening")
        #expect(opening != nil, "bridge 8: no game_opening event")

        _ = try await client.ok("bridge", ["message": ["bcid": 1]])
        let other = await Self.event(client, "bridge")
        #expect(other != nil, "bridge 1: no bridge event")

        // --- server pushes ---
        _ = try await sim.control(["op": "emit", "kind": "show_spin", "user": "alice"])
        let minigame = await Self.event(client, "minigame")
        #expect(minigame?["data"]?["saw_template_id"] != nil)
        #expect(minigame?["data"]?["url"]?.stringValue?.contains("dp%3Agf_saw") == true, "minigame url: \(String(describing: minigame))")

        _ = try await sim.control(["op": "emit", "kind": "deeplink", "user": "alice"])
        let serverLink = await Self.event(client, "deeplink") { $0["data"]?["source"]?.stringValue == "server" }
        #expect(serverLink?["data"]?["engagement_uid"]?.stringValue?.isEmpty == false)
        #expect(serverLink?["data"]?["dp"]?.stringValue?.hasPrefix("dp:") == true)

        _ = try await sim.control(["op": "emit", "kind": "props", "user": "alice"])
        #expect(await Self.event(client, "props") != nil, "server 108: no props event")

        _ = try await sim.control(["op": "emit", "kind": "reload_achievements", "user": "alice"])
        let message = await Self.event(client, "message")
        #expect(message?["data"]?["name"]?.stringValue == "reload_achievements")
        #expect(message?["data"]?["message"]?["cid"]?.int64Value == 504)

        // --- subscription ops ---
        let badAck = try await client.request("ack", ["seq": 1])
        #expect(badAck["error"]?["code"]?.stringValue == "bad_request", "ack without a durable subscription: \(badAck)")
        _ = try await client.ok("unsubscribe")
        _ = try await sim.control(["op": "emit", "kind": "reload_achievements", "user": "alice"])
        let afterUnsubscribe = await client.drainEvents(forMs: 1_000)
        #expect(afterUnsubscribe.isEmpty, "events after unsubscribe: \(afterUnsubscribe)")

        expectExitedZero(await setup.stop(), "log:\n\(setup.log)")
        _ = await sim.stop()
    }

    /// A durable subscriber acknowledges part of what it saw; the daemon restarts (SIGTERM, then
    /// kill -9 on the second round); the same name resumes right after its last ack: no gap (what it
    /// did not ack and what arrived while it was away) and nothing it acknowledged again.
    @Test func aDurableSubscriberSurvivesDaemonRestarts() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir)
        try setup.writeConfig(url: sim.serverURL)
        var client = try await setup.start()
        #expect(try await eventually { try await client.isReady() }, "never ready; log:\n\(setup.log)")

        func engagementSeqs(_ c: DaemonClient, count: Int) async -> [Int64] {
            var seqs: [Int64] = []
            while seqs.count < count, let e = await c.nextEvent(where: { $0["event"]?.stringValue == "engagement" }) {
                if let seq = e["seq"]?.int64Value { seqs.append(seq) }
            }
            return seqs
        }

        _ = try await client.ok("subscribe", ["durable": "kiosk", "types": ["engagement"]])
        for _ in 0 ..< 4 { _ = try await sim.emitEngagement(to: "alice") }
        let first = await engagementSeqs(client, count: 4)
        #expect(first.count == 4, "saw \(first)")
        let acked = try #require(first.dropLast(2).last)  // ack the first two only
        _ = try await client.ok("ack", ["seq": .number(acked)])

        for round in 0 ..< 2 {
            client.close()
            if round == 0 { expectExitedZero(await setup.stop(), "log:\n\(setup.log)") } else { await setup.kill9() }
            // Engagements while the daemon is down wait at the sim (pending) and arrive after IDENTIFY.
            _ = try await sim.emitEngagement(to: "alice")
            client = try await setup.start()
            #expect(try await eventually { try await client.isReady() }, "never ready after restart \(round); log:\n\(setup.log)")
            let resumed = try await client.ok("subscribe", ["durable": "kiosk", "types": ["engagement"]])
            #expect(resumed["last_seq"] != nil)
            let expectedCount = round == 0 ? 3 : 1 + 3  // round 0: 2 unacked + 1 new; round 1: nothing acked since, so all again + 1
            let replayed = await engagementSeqs(client, count: expectedCount)
            #expect(replayed.first == acked + 1, "round \(round): resumed at \(String(describing: replayed.first)), acked \(acked)")
            #expect(replayed == replayed.sorted() && Set(replayed).count == replayed.count, "round \(round): order/duplicates \(replayed)")
            #expect(replayed.count == expectedCount, "round \(round): \(replayed)")
            let identifies = try await sim.received(cids: [5]).count
            #expect(identifies >= round + 2, "IDENTIFY after every start: \(identifies)")
        }
        client.close()
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }
}
