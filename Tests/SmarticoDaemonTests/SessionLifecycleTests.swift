import Foundation
import SmarticoTestSupport
import SmarticoProtocol
import Testing
@testable import SmarticoDaemon

/// Rules 8–9: failures and backoff, logout, shutdown, reload; the status object.
@Suite struct SessionLifecycleTests {
    @Test func backoffCeilingGrowsToTheMaximumAndJitterStaysInBounds() {
        let b = Backoff(initialMs: 500, maxMs: 60_000, multiplier: 2)
        #expect((0...9).map { b.ceilingMs(attempt: $0) } == [500, 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000])
        #expect(b.ceilingMs(attempt: 10_000) == 60_000)
        var g = SplitMix64(seed: 7)
        for attempt in 0..<8 {
            let ceiling = b.ceilingMs(attempt: attempt)
            let samples = (0..<400).map { _ in b.delayMs(attempt: attempt, using: &g) }
            #expect(samples.allSatisfy { $0 >= 0 && $0 <= ceiling })
            // Full jitter: spread over the whole range, not bunched at the top or the bottom.
            #expect(samples.min()! < ceiling / 10)
            #expect(samples.max()! > ceiling * 9 / 10)
        }
        let flat = Backoff(initialMs: 300, maxMs: 1000, multiplier: 1)
        #expect(flat.ceilingMs(attempt: 50) == 300)
        let tiny = Backoff(initialMs: 500, maxMs: 60_000, multiplier: 1.5)
        #expect(tiny.ceilingMs(attempt: 2) == 1125)
    }

    @Test func backoffResetsAfterAHealthyMinute() throws {
        var h = Harness(SessionFixtures.config())
        h.start()
        for _ in 0..<3 {
            h.feed(.connectFailed(h.conn!, reason: "connect_refused", message: "ECONNREFUSED"))
            h.advance(by: h.timers[.backoff]! - h.now)
        }
        h.connected()
        h.initOK()
        // 59 s ready, then a failure: attempt 4, ceiling 4000.
        h.keepAlive(for: 59_000)
        let early = h.feed(.closed(h.conn!, code: 1006, reason: "", clean: false))
        #expect(early.events("session").first?.data["attempt"] == .number(4))
        h.advance(by: h.timers[.backoff]! - h.now)
        h.connected()
        h.initOK()
        h.keepAlive(for: 60_000)
        let late = h.feed(.closed(h.conn!, code: 1006, reason: "", clean: false))
        let s = try #require(late.events("session").first?.data.objectValue)
        #expect(s["attempt"] == .number(1))
        #expect(s["reason"] == .string("server_closed"))
        #expect((s["retry_in_ms"]?.int64Value ?? -1) <= 500)
    }

    @Test func connectFailureAndConnectTimeout() throws {
        var h = Harness(SessionFixtures.config())
        h.start()
        let f = h.feed(.connectFailed(h.conn!, reason: "tls_error", message: "certificate verify failed"))
        #expect(f.events("session").first?.data["reason"] == .string("tls_error"))
        #expect(f.aborts == 0)
        h.advance(by: h.timers[.backoff]! - h.now)
        let t = h.advance(by: 10_000)
        #expect(t.events("session").first?.data["reason"] == .string("connect_timeout"))
        #expect(t.aborts == 1)
        // A late result of the abandoned attempt is ignored.
        let stale = h.feed(.connected(ConnectionID(2)))
        #expect(stale.isEmpty)
    }

    @Test func logoutWithLogoutResponseInTime() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.bringUp()
        h.feed(.outboxLoaded([])) // nothing of u1 waits: LOGOUT goes at once
        let a = h.feed(.request(SessionRequestID(1), .logout))
        #expect(a.contains(.clearUser)) // what is made from now on is anonymous
        #expect(a.sent(cid: 8).count == 1)
        #expect(h.timers[.logoutWait] == h.now + 2_000)
        #expect(a.reply(1) == nil)
        h.advance(by: 500)
        let done = h.server(ResponseMessage(cid: .logoutResponse).json)
        #expect(done.closes == [1000])
        #expect(done.reply(1)?.value == .object([:]))
        let again = h.feed(.closed(h.conn!, code: 1000, reason: "", clean: true))
        #expect(again.connects.count == 1)
        h.connected()
        let anon = h.initOK()
        #expect(anon.sent(cid: 5).isEmpty)
        #expect(h.machine.state == .ready)
        #expect(h.machine.status()["user"]?["ext_user_id"] == .null)
    }

    @Test func logoutWithoutLogoutResponseAndWithoutServerClose() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.bringUp()
        h.feed(.outboxLoaded([]))
        #expect(h.feed(.request(SessionRequestID(1), .logout)).contains(.clearUser))
        #expect(h.advance(by: 1_999).closes.isEmpty)
        let timeout = h.advance(by: 1)
        #expect(timeout.closes == [1000])
        #expect(timeout.reply(1)?.value != nil)
        // The server never closes: after 2 s the connection is dropped and a new one opened.
        let dropped = h.advance(by: 2_000)
        #expect(dropped.aborts == 1)
        #expect(dropped.connects.count == 1)
    }

    @Test func logoutAfterARejectionChangesNothing() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "bad"))
        h.bringUp(identify: false)
        let refused = h.server(IdentifyUserResponse(publicUsername: nil, avatarID: nil, gamificationURL: nil, popupURL: nil, errCode: 100_000).json)
        #expect(refused.contains(.clearUser)) // the rejected user is not the user any more
        h.feed(.closed(h.conn!, code: 1000, reason: "", clean: true))
        h.connected()
        #expect(h.initOK().sent(cid: 5).isEmpty) // the rejected hash is not tried again
        let out = h.feed(.request(SessionRequestID(1), .logout))
        #expect(out.reply(1)?.value == .object([:]))
        #expect(out.closes.isEmpty && out.connects.isEmpty && out.sent.isEmpty)
        #expect(h.machine.state == .ready)
    }

    @Test func shutdownClosesWaitsAndStops() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.bringUp()
        h.feed(.request(SessionRequestID(1), .request(message: ["cid": 500], expectCid: nil, timeoutMs: nil)))
        let s = h.feed(.shutdown)
        #expect(s.closes == [1000])
        #expect(s.reply(1)?.error?.code == .notReady)
        #expect(h.machine.state == .stopping)
        #expect(h.timers[.closeWait] == h.now + 2_000)
        #expect(!s.contains(.stopped))
        let refused = h.feed(.request(SessionRequestID(2), .event(eventType: "x", payload: nil)))
        #expect(refused.reply(2)?.error?.code == .notReady)
        let closed = h.feed(.closed(h.conn!, code: 1000, reason: "", clean: true))
        #expect(closed.last == .stopped)
        #expect(closed.connects.isEmpty)
        #expect(h.timers.isEmpty)

        var n = Harness(SessionFixtures.config())
        n.bringUp()
        n.feed(.shutdown)
        let late = n.advance(by: 2_000)
        #expect(late.aborts == 1)
        #expect(late.last == .stopped)

        var b = Harness(SessionFixtures.config())
        b.start()
        b.feed(.connectFailed(b.conn!, reason: "dns_error", message: "no such host"))
        let fromBackoff = b.feed(.shutdown)
        #expect(fromBackoff.last == .stopped)
        #expect(b.timers.isEmpty)
    }

    @Test func reloadKeepsTheConnectionUnlessServerSettingsChanged() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        let same = h.feed(.reload(SessionFixtures.config(keepalive: 40)))
        #expect(same.closes.isEmpty && same.connects.isEmpty)
        // The new keepalive applies from the next message on.
        h.server(["cid": 504])
        #expect(h.advance(by: 39_999).sent(cid: 1).isEmpty)
        #expect(h.advance(by: 1).sent(cid: 1).count == 1)

        let moved = "ws://127.0.0.1:9090/websocket/services?master&domain=app.example&version=1.2.3"
        let changed = h.feed(.reload(SessionFixtures.config(url: moved)))
        #expect(changed.closes == [1000])
        let reopened = h.feed(.closed(h.conn!, code: 1000, reason: "", clean: true))
        #expect(reopened.connects == [moved])
    }

    @Test func reloadWhileConnectingRestartsTheAttemptAtOnce() {
        var h = Harness(SessionFixtures.config())
        h.start()
        let moved = "ws://127.0.0.1:9191/websocket/services?master"
        let a = h.feed(.reload(SessionFixtures.config(url: moved)))
        #expect(a.aborts == 1)
        #expect(a.connects == [moved])
        #expect(a.closes.isEmpty)
        // The old attempt's late result is ignored.
        #expect(h.feed(.connected(ConnectionID(1))).isEmpty)
    }

    @Test func statusObject() throws {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        #expect(h.machine.status()["state"] == .string("disconnected"))
        h.bringUp()
        h.server(["cid": 1])
        let s = h.machine.status(outbox: OutboxStatus(depth: 2, oldestMs: 5), journal: JournalBounds(firstSeq: 3, lastSeq: 9), subscribers: 4)
        #expect(s["state"] == .string("ready"))
        #expect(s["since_ms"] == .number(h.now))
        #expect(s["server"]?["url"] == .string(SessionFixtures.url))
        #expect(s["server"]?["connected_at_ms"] == .number(h.now))
        #expect(UUIDv4.isValidV4(s["session"]?["session_id"]?.stringValue ?? ""))
        #expect(s["session"]?["products"] == .array([100]))
        #expect(s["session"]?["payload"] == .object(["country": "MT"]))
        #expect(s["user"]?["ext_user_id"] == .string("u1"))
        #expect(s["user"]?["public_username"] == .string("Player One"))
        #expect(s["counters"]?["messages_in"] == .number(3))
        #expect(s["counters"]?["messages_out"] == .number(4)) // INIT, IDENTIFY, LOGIN, PONG
        #expect(s["last_ping_ms"] == .number(h.now))
        #expect(s["outbox"] == .object(["depth": 2, "oldest_ms": 5]))
        #expect(s["journal"] == .object(["last_seq": 9, "first_seq": 3]))
        #expect(s["subscribers"] == .number(4))
    }
}
