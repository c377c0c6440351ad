import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing

/// The built `smarticod` against a `smartico-sim` that does not share its assumptions: a server
/// that never answers our PINGs (proof of receipt, docs/session.md), answers that do not echo
/// the request's uuid, and quirks mode (what the real server may send).
@Suite("Engine: protocol fidelity")
struct EngineFidelityTests {
    static func reconnects(_ client: DaemonClient) async throws -> Int64? {
        try await client.status()["counters"]?["reconnects"]?.int64Value
    }

    /// docs/session.md, "Proof of receipt": a server that never answers our PINGs proves nothing,
    /// so what was written stays in the outbox; its own PINGs keep the connection up; when the
    /// connection ends, the next one sends every message again with the same uuid; nothing is lost.
    @Test func pongWithheldNothingIsLostAndDuplicatesKeepTheirUUID() async throws {
        let (setup, sim, client) = try await startAgainstSim(sim: ["--withhold-pong", "--ping-interval", "500ms", "--pong-timeout", "5s"], ready: true) { setup, sim in
            try setup.writeConfig(url: sim.serverURL, session: ["keepalive_s": 2, "dead_after_s": 2])
        }
        defer { client.close(); setup.remove() }
        let first = try #require(try await sim.control(["op": "clients"])["clients"]?[0]?["id"]?.stringValue)
        let reconnectsBefore = try #require(try await Self.reconnects(client))

        var uuids: [String] = []
        for i in 0..<5 {
            let r = try await client.ok("event", ["event_type": .string("unproven_\(i)"), "payload": ["n": .number(i)]])
            uuids.append(try #require(r["uuid"]?.stringValue))
        }
        let arrived = try await eventually {
            Set(try await sim.received(cids: [9]).compactMap { $0["uuid"]?.stringValue }).isSuperset(of: uuids)
        }
        #expect(arrived, "the events reach the server")
        // Longer than keepalive_s + dead_after_s: the server's PINGs keep the connection alive,
        // but no PONG proves anything: every event stays in the outbox.
        try await Task.sleep(for: .seconds(5))
        let s = try await client.status()
        #expect(s["state"]?.stringValue == "ready")
        #expect(s["counters"]?["reconnects"]?.int64Value == reconnectsBefore, "no reconnect: \(s)")
        #expect(s["outbox"]?["depth"]?.int64Value == 5, "unproven messages stay: \(s)")
        let summary = try #require(try await sim.control(["op": "clients"])["clients"]?[0])
        #expect((summary["pongs_withheld"]?.int64Value ?? 0) >= 1, "the daemon's barrier PING went unanswered: \(summary)")
        // One barrier waits for a PONG: no PING per message.
        #expect(try await sim.received(cids: [1]).count < 5)

        // The connection ends (a server close): the next one re-sends every event, same uuid.
        _ = try await sim.control(["op": "fault", "kind": "close", "code": 4000, "reason": "test", "client": .string(first)])
        let resent = try await eventually {
            let entries = try await sim.receivedEntries(cids: [9])
            return uuids.allSatisfy { u in
                Set(entries.filter { $0["message"]?["uuid"]?.stringValue == u }.compactMap { $0["client"]?.stringValue }).count == 2
            }
        }
        #expect(resent, "each event once per connection, same uuid; log:\n\(setup.log)")
        let again = try await sim.receivedEntries(cids: [9]).filter { $0["client"]?.stringValue != first }
        #expect(again.compactMap { $0["message"]?["uuid"]?.stringValue } == uuids, "in order, same uuids")
        #expect(again.allSatisfy { $0["error"] == nil }, "\(again)")
        #expect(try await eventually { try await client.isReady() })
        #expect(try await Self.reconnects(client) == reconnectsBefore + 1)
        #expect(try await client.status()["outbox"]?["depth"]?.int64Value == 5)

        // A close we start and the server completes proves everything was read: after a clean
        // stop the outbox is empty, and a restart sends nothing again.
        expectExitedZero(await setup.stop())
        let before = try await sim.received(cids: [9]).count
        let restarted = try await setup.start()
        defer { restarted.close() }
        #expect(try await eventually { try await restarted.isReady() })
        #expect(try await restarted.status()["outbox"]?["depth"]?.int64Value == 0)
        #expect(try await sim.received(cids: [9]).count == before)
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// Everything the daemon sends, checked by the simulator's own reading (not the daemon's
    /// message types): INIT, IDENTIFY, LOGIN, an event, a language change, a push token, a
    /// request, PINGs and PONGs. Returns the received entries.
    static func daemonTraffic(_ setup: DaemonSetup, _ sim: SimProcess) async throws -> [JSONObject] {
        try setup.writeConfig(url: sim.serverURL, session: ["keepalive_s": 1, "dead_after_s": 5])
        let client = try await setup.start()
        defer { client.close() }
        #expect(try await eventually { try await client.isReady() }, "log:\n\(setup.log)")
        _ = try await client.ok("event", ["event_type": "fidelity", "payload": ["n": 1]])
        _ = try await client.ok("language", ["language": "pt-br"])
        _ = try await client.ok("push_token", ["token": "tok-1", "status": 0, "platform": 7])
        _ = try await client.ok("request", ["message": ["cid": 500]])
        let all = try await eventually {
            Set(try await sim.receivedEntries().compactMap { $0["message"]?["cid"]?.int64Value }).isSuperset(of: [1, 2, 3, 5, 7, 9, 500, 1003])
        }
        let entries = try await sim.receivedEntries()
        #expect(all, "every kind of message reached the sim: \(entries.map(\.text))")
        expectExitedZero(await setup.stop())
        return try await sim.receivedEntries()
    }

    @Test func theDaemonsMessagesPassTheSimulatorsOwnReading() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir, extra: ["--ping-interval", "500ms"])
        let entries = try await Self.daemonTraffic(setup, sim)
        let refused = entries.filter { $0["error"] != nil }
        #expect(refused.isEmpty, "refused by the simulator: \(refused.map(\.text))")
        _ = await sim.stop()
    }

    /// No warnings either: `page` set, the SDK's envelope on events and requests (issue 26 item 4).
    @Test
    func theDaemonsMessagesMatchTheSDKsShapes() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir, extra: ["--ping-interval", "500ms"])
        let entries = try await Self.daemonTraffic(setup, sim)
        let warned = entries.filter { $0["warnings"] != nil }
        #expect(warned.isEmpty, "warnings: \(warned.map(\.text))")
        _ = await sim.stop()
    }

    /// 701 comes back with a fresh uuid (as from the real server, by default): matched by cid.
    @Test func anAnswerWithAFreshUUIDIsMatchedByCid() async throws {
        let (setup, sim, client) = try await startReadyAgainstSim()
        defer { client.close(); setup.remove() }
        let spins = try await client.ok("request", ["message": ["cid": 700]])
        let answer = try #require(spins["message"]?.objectValue)
        #expect(answer["cid"]?.int64Value == 701 && answer["templates"]?.arrayValue?.isEmpty == false, "\(spins)")
        let request = try #require(try await sim.received(cids: [700]).last)
        #expect(answer["uuid"] != request["uuid"], "the sim did not echo the uuid")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// Issue 26: against the quirks of the real server the daemon stays ready, delivers every
    /// push (as what it is, or as `message` with a `problem`) and never reconnects over content.
    @Test
    func quirksModeKeepsTheDaemonReadyAndDeliversEveryPush() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir, extra: ["--quirks", "--ping-interval", "1s"])
        try setup.writeConfig(url: sim.serverURL)
        let client = try await setup.start()
        defer { client.close() }
        #expect(try await eventually { try await client.isReady() }, "log:\n\(setup.log)")
        _ = try await client.ok("subscribe")
        let reconnectsBefore = try #require(try await Self.reconnects(client))

        let kinds: [(kind: String, cid: Int64, events: Set<String>)] = [
            ("engagement", 110, ["engagement"]), ("deeplink", 105, ["deeplink"]), ("props", 108, ["props"]),
            ("show_spin", 707, ["minigame"]), ("reload_achievements", 504, []), ("spins_count", 706, []),
            ("prize_drop_win", 708, []), ("jp_win", 808, []),
        ]
        for k in kinds { _ = try await sim.control(["op": "emit", "kind": .string(k.kind), "user": "alice"]) }
        // Each push arrives as what it is, or as `message` (with a `problem` when the daemon could
        // not read it as that).
        var events: [JSONObject] = []
        let deadline = ContinuousClock.now + .seconds(15)
        func delivered(_ k: (kind: String, cid: Int64, events: Set<String>)) -> Bool {
            events.contains { e in
                let name = e["event"]?.stringValue ?? ""
                if k.events.contains(name) { return true }
                guard name == "message", e["data"]?["message"]?["cid"]?.int64Value == k.cid else { return false }
                return k.events.isEmpty || e["data"]?["problem"] != nil
            }
        }
        while ContinuousClock.now < deadline, !kinds.allSatisfy(delivered) {
            events += await client.drainEvents(forMs: 300)
        }
        for k in kinds { #expect(delivered(k), "\(k.kind) (cid \(k.cid)) not delivered: \(events.map(\.text))") }
        // Answers with fresh uuids are matched by cid.
        let levels = try await client.ok("request", ["message": ["cid": 500]])
        #expect(levels["message"]?["cid"]?.int64Value == 501)
        let s = try await client.status()
        #expect(s["state"]?.stringValue == "ready")
        #expect(s["counters"]?["reconnects"]?.int64Value == reconnectsBefore, "no reconnect over content: \(s)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }
}
