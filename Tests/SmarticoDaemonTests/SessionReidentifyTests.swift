import Foundation
import SmarticoProtocol
import Testing
@testable import SmarticoDaemon

/// `user.reidentify_after_s` (issue 41, "Fresh URLs"): the hash in IDENTIFY's wrapper URLs is
/// valid 24 hours (002 §1.6), and 002 §1.5 allows one IDENTIFY per WebSocket session, so the
/// daemon makes a new connection that long after the last IDENTIFY answer.
@Suite("Session: re-identify for fresh URLs")
struct SessionReidentifyTests {
    static let fresh = "https://wrap.example/gf?label=1&user_ext_id=u1&hash=day2"

    @Test func theDaemonIdentifiesAgainOnANewConnectionWithTheNewURLs() throws {
        // 1 hour: longer than login_after_inactivity_min (30), so a LOGIN would go out if the
        // refresh counted as a new logical session.
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h", reidentifyAfterS: 3600))
        let first = h.bringUp()
        #expect(first.events("identified").count == 1)
        #expect(first.sent(cid: 7).count == 1, "the first IDENTIFY starts a logical session")
        #expect(h.timers[.reidentify] == SessionFixtures.t0 + 3_600_000)
        let oldConn = h.conn!

        // Nothing before the deadline.
        let before = h.keepAlive(for: 3_590_000)
        #expect(before.closes.isEmpty && before.events("identified").isEmpty)

        // At the deadline: a graceful close, then a new connection.
        let due = h.keepAlive(for: 10_000)
        #expect(due.closes == [1000], "\(due)")
        #expect(due.events("session").first?.data["reason"] == .string("reidentify"), "\(due)")
        let again = h.feed(.closed(oldConn, code: 1000, reason: "reidentify", clean: true))
        #expect(again.connects.count == 1, "reconnects at once, no backoff: \(again)")
        #expect(h.conn != oldConn)
        h.connected()
        let identify = h.initOK()
        #expect(identify.sent(cid: 5).count == 1, "IDENTIFY on the new connection")

        let answer = h.server(IdentifyUserResponse(props: [:], publicUsername: "Player One", avatarID: "av-1",
                                                   gamificationURL: Self.fresh, popupURL: "https://wrap.example/popup?x=2").json)
        let identified = answer.events("identified")
        #expect(identified.count == 1, "a new identified event")
        #expect(identified.first?.data["gf_url"]?.stringValue == Self.fresh + "&force_mobile=true")
        #expect(answer.sent(cid: 7).isEmpty, "a refresh is no new logical session: no LOGIN")
        let user = h.machine.status()["user"]
        #expect(user?["gf_url"]?.stringValue == Self.fresh + "&force_mobile=true")
        #expect(user?["popup_url"]?.stringValue == "https://wrap.example/popup?x=2&force_mobile=true")
        #expect(h.machine.status()["state"]?.stringValue == "ready")
        // Later events use the new URL.
        let link = h.server(["cid": 105, "dp": "dp:gf_missions", "engagement_uid": "e-9"])
        #expect(link.events("deeplink").first?.data["url"]?.stringValue?.hasPrefix(Self.fresh) == true)
        // And the next refresh is scheduled from this answer.
        #expect(h.timers[.reidentify] == h.now + 3_600_000)
    }

    /// The server re-delivers the user's pending engagements after the new IDENTIFY: the same
    /// seen-set key as the first time, so the store journals it once.
    @Test func anEngagementRedeliveredAfterTheRefreshHasTheSameSeenKey() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h", reidentifyAfterS: 60))
        h.bringUp()
        let first = h.server(["cid": 110, "engagement_uid": "e-1"])
        let oldConn = h.conn!
        #expect(h.keepAlive(for: 60_000).closes == [1000])
        h.feed(.closed(oldConn, code: 1000, reason: "reidentify", clean: true))
        h.connected()
        h.initOK()
        h.identifyOK()
        let again = h.server(["cid": 110, "engagement_uid": "e-1"])
        let keys = (first + again).compactMap { a -> String? in
            if case .journalOnce(let user, let uid, _) = a { return "\(user)/\(uid)" }
            return nil
        }
        #expect(keys == ["u1/e-1", "u1/e-1"])
    }

    /// Not while the session is anonymous or being closed: only a ready session of the daemon's
    /// user is refreshed; a reconnect in between reschedules from its own IDENTIFY answer.
    @Test func aReconnectInBetweenRestartsTheClock() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h", reidentifyAfterS: 60))
        h.bringUp()
        h.keepAlive(for: 30_000)
        h.reconnect()
        h.initOK()
        h.identifyOK()
        #expect(h.timers[.reidentify] == h.now + 60_000)
        #expect(h.keepAlive(for: 50_000).closes.isEmpty, "60 s from the new answer, not the old one")
        #expect(h.keepAlive(for: 10_000).closes == [1000])
    }
}
