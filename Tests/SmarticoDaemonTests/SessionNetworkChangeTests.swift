// `.networkChanged` (rtnetlink, docs/session.md "Network changes"): backing off, the backoff starts
// over and a connection is tried at once; connecting, the attempt starts over; connected, a PING goes
// now and silence for `dead_after_s` ends the connection. The sans-I/O machine, time as a value.
import SmarticoProtocol
import Testing
@testable import SmarticoDaemon

@Suite struct SessionNetworkChangeTests {
    /// Several failures push the backoff up; a network change connects at once, and the next failure
    /// backs off from the first attempt's ceiling again.
    @Test func backingOffConnectsAtOnceAndStartsTheBackoffOver() throws {
        var h = Harness(SessionFixtures.config())
        h.start()
        for _ in 0..<6 {
            h.feed(.connectFailed(h.conn!, reason: "connect_refused", message: "ENETUNREACH"))
            h.advance(by: h.timers[.backoff]! - h.now)
        }
        let failed = h.feed(.connectFailed(h.conn!, reason: "connect_refused", message: "ENETUNREACH"))
        #expect(failed.events("session").first?.data["attempt"] == .number(7))
        let waitingConn = h.conn
        #expect(h.timers[.backoff] != nil)
        h.advance(by: 1)
        let changed = h.feed(.networkChanged)
        #expect(changed.connects.count == 1, "one connection attempt at once: \(changed)")
        #expect(changed.contains(.cancel(.backoff)))
        #expect(h.timers[.backoff] == nil)
        #expect(h.conn != waitingConn)
        let s = try #require(changed.events("session").first?.data.objectValue)
        #expect(s["state"] == .string("connecting"))
        #expect(s["reason"] == .string("network_changed"))
        // The attempt counter started over: the next failure is attempt 1, within the first ceiling.
        let again = h.feed(.connectFailed(h.conn!, reason: "connect_refused", message: "ENETUNREACH"))
        let b = try #require(again.events("session").first?.data.objectValue)
        #expect(b["attempt"] == .number(1))
        #expect((b["retry_in_ms"]?.int64Value ?? .max) <= 500)
    }

    /// A connection attempt under way (maybe stuck on a route that is gone) is dropped and made again.
    @Test func connectingStartsTheAttemptOver() {
        var h = Harness(SessionFixtures.config())
        h.start()
        let first = h.conn!
        let changed = h.feed(.networkChanged)
        #expect(changed.aborts == 1)
        #expect(changed.connects.count == 1)
        #expect(h.conn != first)
        // The dropped attempt's late success is ignored; the new one proceeds.
        #expect(h.feed(.connected(first)).isEmpty)
        #expect(h.connected().sent(cid: 3).count == 1)
    }

    /// Connected: a PING now; no answer within dead_after_s → heartbeat_timeout and backoff, long
    /// before keepalive_s + dead_after_s of silence.
    @Test func connectedSendsAPingAndDeclaresTheConnectionDeadWithoutAnAnswer() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h1"))
        h.bringUp()
        h.keepAlive(for: 5_000)
        let changedAt = h.now
        let changed = h.feed(.networkChanged)
        #expect(changed.sent(cid: 1).count == 1, "a PING at once: \(changed.sent)")
        #expect(changed.connects.isEmpty && changed.aborts == 0)
        #expect(h.timers[.dead] == changedAt + 15_000)
        // Just short of dead_after_s: still connected.
        #expect(h.advance(by: 14_999).events("session").isEmpty)
        let dead = h.advance(by: 1)
        let s = try #require(dead.events("session").first?.data.objectValue)
        #expect(s["reason"] == .string("heartbeat_timeout"))
        #expect(s["state"] == .string("backoff"))
        #expect(h.now - changedAt == 15_000)
    }

    /// Connected and the connection is fine: the PONG (any message) cancels the check; the session
    /// stays ready and nothing else happens.
    @Test func connectedAnswerKeepsTheSession() {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h1"))
        h.bringUp()
        h.feed(.networkChanged)
        #expect(h.timers[.dead] != nil)
        h.advance(by: 200)
        h.server(["cid": 2])
        #expect(h.timers[.dead] == nil)
        #expect(h.advance(by: 20_000).events("session").isEmpty)
        #expect(h.machine.state == .ready)
    }

    /// Stopped, idle or shutting down: nothing happens. After a fatal INIT answer the long retry
    /// stays (a network change does not fix a refused configuration).
    @Test func noEffectWhenIdleStoppedOrRefusedByTheServer() {
        var idle = Harness(SessionFixtures.config())
        #expect(idle.feed(.networkChanged).isEmpty)

        var stopped = Harness(SessionFixtures.config())
        stopped.start()
        stopped.feed(.shutdown)
        #expect(stopped.feed(.networkChanged).isEmpty)

        var refused = Harness(SessionFixtures.config())
        refused.start()
        refused.connected()
        refused.server(InitSessionResponse(errCode: 100001, errMsg: "wrong label").json)
        #expect(refused.timers[.backoff] != nil)
        let retryAt = refused.timers[.backoff]
        #expect(refused.feed(.networkChanged).connects.isEmpty)
        #expect(refused.timers[.backoff] == retryAt)
    }
}
