import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing

/// The SDK's wire shapes through the real daemon and the real simulator, checked in what the
/// simulator received (issue 26): the envelope of events and requests, INIT's members, and the
/// configured language sent once — not again on a restart.
@Suite(.serialized)
struct EngineWireShapeTests {
    static let fullKey = "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2"

    /// `writeConfig` plus `server.brand_key`.
    static func writeConfig(_ setup: DaemonSetup, url: String) throws {
        try setup.writeConfig(url: url, client: ["language": "en"])
        var config = try JSONValue(parsing: Array(try Data(contentsOf: URL(fileURLWithPath: setup.configPath)))).objectValue!
        var server = config["server"]!.objectValue!
        server["brand_key"] = "brand-7"
        config["server"] = .object(server)
        try Data(config.serialized()).write(to: URL(fileURLWithPath: setup.configPath))
    }

    static func languageEvents(_ sim: SimProcess) async throws -> [JSONObject] {
        try await sim.received(cids: [9]).filter { $0["eventType"]?.stringValue == "core_language_changed" }
    }

    @Test func eventsAndRequestsArriveInTheEnvelopeAndTheLanguageOnce() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir)
        try Self.writeConfig(setup, url: sim.serverURL)
        var client = try await setup.start()
        #expect(try await eventually { try await client.isReady() }, "never ready; log:\n\(setup.log)")

        _ = try await client.ok("event", ["event_type": "wire_shape_event", "payload": ["n": 1]])
        _ = try await client.ok("send", ["message": ["cid": 9, "eventType": "wire_shape_send"]])
        _ = try await client.ok("request", ["message": ["cid": 500]])
        #expect(try await eventually {
            try await sim.received(cids: [9]).contains { $0["eventType"]?.stringValue == "wire_shape_send" }
        }, "log:\n\(setup.log)")

        let entries = try await sim.receivedEntries(cids: [3, 9, 500])
        for entry in entries {
            #expect(entry["error"] == nil, "the simulator refused \(String(decoding: entry.serialized(), as: UTF8.self))")
        }
        let messages = entries.compactMap { $0["message"]?.objectValue }
        let wrapped = messages.filter {
            $0.cid == 500 || ["wire_shape_event", "wire_shape_send", "core_language_changed"].contains($0["eventType"]?.stringValue ?? "")
        }
        #expect(wrapped.count == 4, "\(messages)")
        for m in wrapped {
            #expect(Array(m.keys.prefix(5)) == ["api_key", "brand_key", "cid", "uuid", "ts"], "\(m)")
            #expect(m["api_key"]?.stringValue == Self.fullKey)
            #expect(m["brand_key"]?.stringValue == "brand-7")
            #expect(UUIDv4.isValidV4(m["uuid"]?.stringValue ?? ""))
            #expect(m["ts"]?.int64Value != nil)
        }
        let initMessage = try #require(messages.first { $0.cid == 3 })
        #expect(initMessage["label_key"]?.stringValue == String(Self.fullKey.prefix(36)))
        #expect(initMessage["label_name"]?.stringValue == String(Self.fullKey.prefix(36)))
        #expect(initMessage["simulation_mode"] == .bool(false))
        #expect(initMessage["page"]?.stringValue == "https://app/")
        #expect(try await Self.languageEvents(sim).count == 1)

        // A restart remembers the language sent for alice: not sent again.
        client.close()
        expectExitedZero(await setup.stop())
        client = try await setup.start()
        defer { client.close() }
        #expect(try await eventually { try await sim.received(cids: [3]).count == 2 })
        #expect(try await eventually { try await client.isReady() }, "never ready; log:\n\(setup.log)")
        _ = try await client.ok("request", ["message": ["cid": 500]])
        #expect(try await Self.languageEvents(sim).count == 1)
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }
}
