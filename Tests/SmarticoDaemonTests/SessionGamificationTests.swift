import Foundation
import SmarticoProtocol
import Testing
@testable import SmarticoDaemon

/// 002 §1.2 (issue 41): without product 100 the widget may not be opened.
@Suite("Session: gamification gating")
struct SessionGamificationGatingTests {
    @Test func anAnonymousSessionWithoutProduct100SaysSoInStatus() throws {
        var h = Harness(SessionFixtures.config())
        h.start()
        h.connected()
        #expect(h.machine.status()["session"]?["gamification"] == .bool(true), "nothing known yet: not gated")
        h.server(InitSessionResponse(products: [0, 5]).json)
        #expect(h.machine.status()["session"]?["gamification"] == .bool(false))
    }

    @Test func withoutProduct100TheUserGetsNoGamificationURL() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.start()
        h.connected()
        h.server(InitSessionResponse(products: [0]).json)
        // The outbox load after INIT, answered (empty) as `initOK` does.
        while h.unansweredLoads > 0 { h.feed(.outboxLoaded([])) }
        let identified = try #require(h.identifyOK().events("identified").first)
        #expect(identified.data["gamification"] == .bool(false))
        #expect(identified.data["gf_url"] == .null)
        #expect(identified.data["popup_url"]?.stringValue == "https://wrap.example/popup?x=1&force_mobile=true")
        #expect(identified.data["problem"]?.stringValue?.contains("lack 100") == true)
        let spin = try #require(h.server(SawShowSpinPush(sawTemplateID: 5, pendingMessageID: 8).json).events("minigame").first)
        #expect(spin.data["url"] == .null && spin.data["problem"]?.stringValue?.contains("lack 100") == true)
        let link = try #require(h.server(["cid": 105, "dp": "dp:gf_missions", "engagement_uid": "e-1"]).events("deeplink").first)
        #expect(link.data["url"] == .null && link.data["problem"]?.stringValue?.contains("lack 100") == true)
        let custom = try #require(h.server(["cid": 105, "dp": "dp:cashier", "engagement_uid": "e-2"]).events("deeplink").first)
        #expect(custom.data["problem"] == .null, "only gamification links are gated")
        #expect(h.machine.status()["user"]?["gf_url"] == .null)
    }
}
