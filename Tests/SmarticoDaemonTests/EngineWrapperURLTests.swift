import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing

/// The wrapper URLs the built `smarticod` hands out, against `smartico-sim` (issue 41): as
/// Smartico's SDK builds them (`buildWrapperUrl`: `force_mobile=true`, once).
@Suite("Engine: wrapper URLs")
struct EngineWrapperURLTests {
    static func forceMobileCount(_ url: String?) -> Int {
        guard let url, let q = url.firstIndex(of: "?") else { return 0 }
        return url[url.index(after: q)...].split(separator: "&").filter { $0.hasPrefix("force_mobile=") }.count
    }

    static func hasOneForceMobile(_ url: JSONValue?) -> Bool {
        guard let s = url?.stringValue else { return false }
        return forceMobileCount(s) == 1 && s.contains("force_mobile=true")
    }

    /// `identified`, `minigame`, `deeplink`, the engagement's `popup_url` and `status` carry
    /// exactly one `force_mobile=true`.
    @Test func everyWrapperURLForcesTheMobileLayoutOnce() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir)
        try setup.writeConfig(url: sim.serverURL)
        let client = try await setup.start()
        defer { client.close() }
        #expect(try await eventually { try await EngineSessionTests.isReady(client) }, "never ready; log:\n\(setup.log)")
        _ = try await client.ok("subscribe")

        // A new user: a new `identified` event (and the op's answer, the same data).
        let answer = try await client.ok("identify", ["ext_user_id": "bob", "hash": "h"])
        let identified = try #require(await client.nextEvent { $0["event"]?.stringValue == "identified" })
        for data in [answer, try #require(identified["data"])] {
            #expect(Self.hasOneForceMobile(data["gf_url"]), "gf_url: \(data)")
            #expect(Self.hasOneForceMobile(data["popup_url"]), "popup_url: \(data)")
        }
        let status = try await EngineSessionTests.status(client)
        #expect(Self.hasOneForceMobile(status["user"]?["gf_url"]), "status: \(status)")
        #expect(Self.hasOneForceMobile(status["user"]?["popup_url"]), "status: \(status)")

        for kind in ["show_spin", "deeplink", "engagement"] {
            _ = try await sim.control(["op": "emit", "kind": .string(kind), "user": "bob"])
        }
        let spin = try #require(await client.nextEvent { $0["event"]?.stringValue == "minigame" })
        #expect(Self.hasOneForceMobile(spin["data"]?["url"]), "minigame: \(spin)")
        #expect(spin["data"]?["url"]?.stringValue?.contains("dp=") == true, "minigame: \(spin)")
        let link = try #require(await client.nextEvent { $0["event"]?.stringValue == "deeplink" })
        #expect(link["data"]?["kind"]?.stringValue == "gamification", "\(link)")
        #expect(Self.hasOneForceMobile(link["data"]?["url"]), "deeplink: \(link)")
        let engagement = try #require(await client.nextEvent { $0["event"]?.stringValue == "engagement" })
        #expect(Self.hasOneForceMobile(engagement["data"]?["popup_url"]), "engagement: \(engagement)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// 002 §1.2: gamification may be opened only with product 100. A label whose INIT answer
    /// lacks it gets no gamification URL: `status` and `identified` say `gamification: false`,
    /// `minigame` and `deeplink` carry `url: null` and the `problem`.
    @Test func withoutProduct100NoGamificationURLIsHandedOut() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir, extra: ["--products", "0,5"])
        try setup.writeConfig(url: sim.serverURL)
        let client = try await setup.start()
        defer { client.close() }
        #expect(try await eventually { try await EngineSessionTests.isReady(client) }, "never ready; log:\n\(setup.log)")
        _ = try await client.ok("subscribe")
        let status = try await EngineSessionTests.status(client)
        #expect(status["session"]?["products"] == .array([.number(0), .number(5)]), "\(status)")
        #expect(status["session"]?["gamification"] == .bool(false), "\(status)")
        #expect(status["user"]?["gf_url"] == .null, "\(status)")
        #expect(Self.hasOneForceMobile(status["user"]?["popup_url"]), "engagements still show: \(status)")

        let answer = try await client.ok("identify", ["ext_user_id": "bob", "hash": "h"])
        #expect(answer["gamification"] == .bool(false), "\(answer)")
        #expect(answer["gf_url"] == .null, "\(answer)")
        #expect(answer["problem"]?.stringValue?.contains("100") == true, "\(answer)")
        let identified = try #require(await client.nextEvent { $0["event"]?.stringValue == "identified" })
        #expect(identified["data"]?["gamification"] == .bool(false), "\(identified)")

        for kind in ["show_spin", "deeplink"] {
            _ = try await sim.control(["op": "emit", "kind": .string(kind), "user": "bob"])
        }
        let spin = try #require(await client.nextEvent { $0["event"]?.stringValue == "minigame" })
        #expect(spin["data"]?["url"] == .null, "\(spin)")
        #expect(spin["data"]?["problem"]?.stringValue?.contains("gamification is unavailable") == true, "\(spin)")
        let link = try #require(await client.nextEvent { $0["event"]?.stringValue == "deeplink" })
        #expect(link["data"]?["kind"]?.stringValue == "gamification" && link["data"]?["url"] == .null, "\(link)")
        #expect(link["data"]?["problem"]?.stringValue?.contains("gamification is unavailable") == true, "\(link)")
        // With 100 (the default answer) nothing is gated: the first test.
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }
}
