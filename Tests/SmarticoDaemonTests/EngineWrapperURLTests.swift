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
        let (setup, sim, client) = try await startAgainstSim(ready: true, inProcess: true)
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe")

        // A new user: a new `identified` event (and the op's answer, the same data).
        let answer = try await client.ok("identify", ["ext_user_id": "bob", "hash": "h"])
        let identified = try #require(await client.nextEvent { $0["event"]?.stringValue == "identified" })
        for data in [answer, try #require(identified["data"])] {
            #expect(Self.hasOneForceMobile(data["gf_url"]), "gf_url: \(data)")
            #expect(Self.hasOneForceMobile(data["popup_url"]), "popup_url: \(data)")
        }
        let status = try await client.status()
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
        let (setup, sim, client) = try await startAgainstSim(sim: ["--products", "0,5"], ready: true, inProcess: true)
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe")
        let status = try await client.status()
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

    /// `user.reidentify_after_s` at its minimum (60 s; the test takes about a minute): the daemon
    /// closes and identifies again; the URLs in `status` and a new `identified` are the new
    /// connection's, no LOGIN is sent, and an engagement the server re-delivers is not shown again.
    @Test(.timeLimit(.minutes(3)))
    func theDaemonIdentifiesAgainAfterReidentifyAfterS() async throws {
        let (setup, sim, client) = try await startAgainstSim(sim: ["--ping-interval", "5s"], ready: true, inProcess: true) { setup, sim in
            try setup.writeConfig(url: sim.serverURL)
            try Self.setReidentify(setup, 60)
        }
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe")
        let started = ContinuousClock.now
        #expect(try await sim.received(cids: [5]).count == 1)
        let logins = try await sim.received(cids: [7]).count

        // An engagement nobody reports stays pending at the server, which re-delivers it after
        // every IDENTIFY.
        _ = try await sim.control(["op": "emit", "kind": "engagement", "user": "alice"])
        let first = try #require(await client.nextEvent { $0["event"]?.stringValue == "engagement" })
        let uid = try #require(first["data"]?["message"]?["engagement_uid"]?.stringValue)

        let again = await client.nextEvent(timeoutMs: 90_000) { $0["event"]?.stringValue == "identified" }
        let took = ContinuousClock.now - started
        let data = try #require(again?["data"], "no second identified within 90 s; log:\n\(setup.log)")
        #expect(took >= .seconds(55), "re-identified after \(took), before reidentify_after_s")
        #expect(try await sim.received(cids: [5]).count == 2, "a second IDENTIFY")
        #expect(Self.hasOneForceMobile(data["gf_url"]), "\(data)")
        #expect(setup.log.contains("reidentify"), "the close's reason in the log")
        #expect(try await eventually { try await client.isReady() })
        let status = try await client.status()
        #expect(status["user"]?["gf_url"] == data["gf_url"], "\(status)")
        #expect(try await sim.received(cids: [7]).count == logins, "a refresh sends no LOGIN")
        // The re-delivered engagement: pending at the server still, not shown again.
        let pending = try await sim.control(["op": "pending", "user": "alice"])
        #expect("\(pending)".contains(uid), "the sim still holds it pending (and re-delivered it): \(pending)")
        let later = await client.drainEvents(forMs: 1500)
        #expect(!later.contains { $0["event"]?.stringValue == "engagement" }, "shown again: \(later.map(\.text))")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// Adds `user.reidentify_after_s` to the written configuration.
    static func setReidentify(_ setup: DaemonSetup, _ seconds: Int) throws {
        let url = URL(fileURLWithPath: setup.configPath)
        var config = try #require(try JSONValue(parsing: Array(Data(contentsOf: url))).objectValue)
        var user = config["user"]?.objectValue ?? [:]
        user["reidentify_after_s"] = .number(Int64(seconds))
        config["user"] = .object(user)
        try Data(config.serialized()).write(to: url)
    }
}
