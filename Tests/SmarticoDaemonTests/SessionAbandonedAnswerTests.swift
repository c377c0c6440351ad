// Answers nobody waits for are dropped, and the read role's requests are rationed (issue 43,
// findings 2 and 3; docs/security.md, "Limits against a misbehaving or hostile local peer").
import Testing
import SmarticoProtocol
@testable import SmarticoDaemon

@Suite struct SessionAbandonedAnswerTests {
    static let reader = RequestOwner(uid: 65534, control: false)

    static func levels(_ id: UInt64, owner: RequestOwner = reader, timeoutMs: Int64? = 10_000) -> SessionInput {
        .request(SessionRequestID(id), .request(message: ["cid": 513], expectCid: 514, timeoutMs: timeoutMs), owner: owner)
    }

    @Test func theAnswerToARequestWhosePeerLeftIsDroppedNotPublished() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        let sent = try #require(h.feed(Self.levels(1)).sent(cid: 513).first)
        h.feed(Self.levels(2))
        h.feed(.abandon([SessionRequestID(1), SessionRequestID(2)]))
        #expect(h.machine.livePending == 0, "left: no longer waited for")
        // By uuid, and without one (the oldest waiting for 514).
        let a = h.server(["cid": 514, "uuid": sent["uuid"]!, "levels": []])
        let b = h.server(["cid": 514, "levels": []])
        #expect(a.events.isEmpty && b.events.isEmpty, "answers nobody waits for are not published")
        #expect(a.replies.isEmpty && b.replies.isEmpty)
        #expect(h.machine.counters.answersDropped == 2)
        // A third is the server's own: published as before.
        #expect(h.server(["cid": 514]).events("message").count == 1)
        #expect(h.machine.counters.answersDropped == 2)
    }

    @Test func aRequestNotYetWrittenWhenItsPeerLeftIsNeverWritten() throws {
        var h = Harness(SessionFixtures.config())
        h.start()
        h.feed(Self.levels(1, timeoutMs: 120_000))
        h.feed(.abandon([SessionRequestID(1)]))
        h.connected()
        let up = h.initOK()
        #expect(up.sent(cid: 513).isEmpty)
        #expect(h.machine.pending.isEmpty)
    }

    @Test func anAbandonedRequestIsNotWrittenAgainAfterAReconnect() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        #expect(h.feed(Self.levels(1, timeoutMs: 120_000)).sent(cid: 513).count == 1)
        h.feed(.abandon([SessionRequestID(1)]))
        h.reconnect()
        #expect(h.initOK().sent(cid: 513).isEmpty)
        #expect(h.machine.pending.isEmpty, "its answer cannot come on a new connection")
    }

    @Test func aLateAnswerIsDroppedForThirtySecondsAfterTheTimeout() throws {
        var h = Harness(SessionFixtures.config())
        h.bringUp()
        h.feed(Self.levels(1, timeoutMs: 1_000))
        h.feed(Self.levels(2, timeoutMs: 1_000))
        #expect(h.advance(by: 1_000).reply(1)?.error?.code == .timeout)
        #expect(h.machine.livePending == 0)
        #expect(h.server(["cid": 514]).events.isEmpty, "late, within the grace: dropped")
        h.advance(by: SessionMachine.lateAnswerGraceMs)
        #expect(h.machine.pending.isEmpty)
        #expect(h.server(["cid": 514]).events("message").count == 1, "after the grace: the server's own message")
        #expect(h.machine.counters.answersDropped == 1)
    }

    @Test func abandonedRequestsAreRememberedAtMostAsManyAsThePool() throws {
        var h = Harness(SessionFixtures.config(), maxPendingRequests: 4)
        h.bringUp()
        for round in 0..<3 {
            let ids = (1...4).map { SessionRequestID(UInt64(round * 4 + $0)) }
            for id in ids { h.feed(.request(id, .request(message: ["cid": 513], expectCid: 514, timeoutMs: 60_000), owner: .daemon)) }
            #expect(h.machine.livePending == 4)
            h.feed(.abandon(ids))
        }
        #expect(h.machine.pending.count == 4, "the oldest abandoned are forgotten")
        #expect(h.machine.livePending == 0)
    }

    @Test func theReadRoleHoldsAtMostHalfThePoolAndOneReadUIDAQuarter() throws {
        var h = Harness(SessionFixtures.config(), maxPendingRequests: 8)
        h.bringUp()
        var id: UInt64 = 0
        func ask(_ owner: RequestOwner) -> SocketAPIError? {
            id += 1
            return h.feed(.request(SessionRequestID(id), .request(message: ["cid": 513], expectCid: 514, timeoutMs: 60_000), owner: owner)).reply(id)?.error
        }
        let a = RequestOwner(uid: 1000, control: false), b = RequestOwner(uid: 1001, control: false), c = RequestOwner(uid: 1002, control: false)
        #expect(ask(a) == nil && ask(a) == nil)
        let quarter = try #require(ask(a))
        #expect(quarter.code == .queueFull)
        #expect(quarter.message.contains("uid 1000") && quarter.message.contains("quarter"))
        #expect(ask(b) == nil && ask(b) == nil)
        let half = try #require(ask(c))
        #expect(half.code == .queueFull && half.message.contains("half"), "\(half)")
        // Control finds the other half.
        let root = RequestOwner(uid: 0, control: true)
        for _ in 0..<4 { #expect(ask(root) == nil) }
        let full = try #require(ask(root))
        #expect(full.message.contains("8 requests are already waiting"))
    }

    @Test func oneReadUIDMakesRequestsAtItsRateWithBursts() throws {
        var cfg = SessionFixtures.config().config
        cfg.socket.readRequestsPerS = 2
        cfg.socket.readRequestsBurst = 3
        var h = Harness(try ResolvedConfig(cfg, environment: [:]))
        h.bringUp()
        var id: UInt64 = 0
        func ask(_ owner: RequestOwner) -> SocketAPIError? {
            id += 1
            let r = h.feed(.request(SessionRequestID(id), .request(message: ["cid": 513], expectCid: 514, timeoutMs: 60_000), owner: owner))
            // Answered at once, so the pool never limits here.
            h.server(["cid": 514])
            return r.reply(id)?.error
        }
        for _ in 0..<3 { #expect(ask(Self.reader) == nil) }
        let limited = try #require(ask(Self.reader))
        #expect(limited.code == .queueFull)
        #expect(limited.message.contains("socket.read_requests_per_s"))
        #expect(ask(RequestOwner(uid: 1000, control: false)) == nil, "another uid has its own bucket")
        #expect(ask(RequestOwner(uid: 0, control: true)) == nil, "control is not rate limited")
        h.advance(by: 499)
        #expect(ask(Self.reader) != nil)
        h.advance(by: 1)
        #expect(ask(Self.reader) == nil, "a token every 500 ms")
        #expect(ask(Self.reader) != nil)
    }
}

@Suite struct RequestSharesTests {
    @Test func bucketsOfIdleUIDsAreForgottenBeyondTheBound() {
        var shares = RequestShares(pool: 1000, readPerSecond: 1, readBurst: 2)
        for uid in 0..<UInt32(RequestShares.maxBuckets + 10) {
            #expect(shares.admit(RequestOwner(uid: 10_000 + uid, control: false), waiting: 0, waitingOfUID: 0, waitingOfReadRole: 0, now: 0) == nil)
        }
        #expect(shares.bucketCount <= RequestShares.maxBuckets)
        // Later, all full again: forgotten at the next overflow.
        for uid in 0..<UInt32(RequestShares.maxBuckets + 1) {
            _ = shares.admit(RequestOwner(uid: 50_000 + uid, control: false), waiting: 0, waitingOfUID: 0, waitingOfReadRole: 0, now: 1_000_000)
        }
        #expect(shares.bucketCount <= RequestShares.maxBuckets)
    }

    @Test func theDaemonsOwnRequestsOnlyMeetThePool() {
        var shares = RequestShares(pool: 2, readPerSecond: 1, readBurst: 1)
        #expect(shares.admit(.daemon, waiting: 1, waitingOfUID: 0, waitingOfReadRole: 0, now: 0) == nil)
        #expect(shares.admit(.daemon, waiting: 2, waitingOfUID: 0, waitingOfReadRole: 0, now: 0) != nil)
        #expect(shares.admit(RequestOwner(uid: nil, control: false), waiting: 0, waitingOfUID: 0, waitingOfReadRole: 0, now: 0) == nil)
    }
}
