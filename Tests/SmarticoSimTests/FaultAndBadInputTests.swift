import Testing
import SmarticoProtocol
@testable import SmarticoSim

@Suite struct FaultTests {
    @Test func rejectInitAndIdentifyWithAnErrCode() throws {
        var h = Harness()
        try h.sim.setFaults({ $0.rejectInit = 7; $0.rejectInitMessage = "maintenance" }, client: nil)
        let c = h.connect()
        let m = try #require(h.send(c, Msg.initSession()).first?.json)
        #expect(m.int("cid") == 4 && m.int("errCode") == 7 && m.str("errMsg") == "maintenance")
        #expect(h.sim.sessions[c]?.state == .awaitingInit)
        try h.sim.clearFaults(client: nil)
        #expect(h.send(c, Msg.initSession()).first?.json?.int("errCode") == 0)

        try h.sim.setFaults({ $0.rejectIdentify = 100_000 }, client: c)
        let r = try #require(h.send(c, Msg.identify("alice")).first?.json)
        #expect(r.int("cid") == 6 && r.int("errCode") == 100_000 && h.sim.sessions[c]?.user == nil)
        // Per client: another client is not affected.
        let d = h.ready(user: nil)
        #expect(h.send(d, Msg.identify("alice")).first?.json?.int("errCode") == 0)
    }

    @Test func closeAbruptlyCloseWithCodeAndMalformedOutputs() throws {
        var h = Harness()
        let a = h.ready(), b = h.ready(), c = h.ready(), d = h.ready()
        #expect(h.sim.perform(.closeAbruptly, on: [a], now: t0).map(\.output) == [.abort])
        #expect(h.sim.perform(.close(code: 4001, reason: "bye"), on: [b], now: t0).map(\.output) == [.close(code: 4001, reason: "bye")])
        #expect(h.sim.perform(.malformedJSON, on: [c], now: t0).map(\.output) == [.text(SimWire.malformedJSON)])
        #expect((try? JSONValue(parsing: SimWire.malformedJSON)) == nil)
        #expect(h.sim.perform(.malformedFrame, on: [d], now: t0).map(\.output) == [.malformedFrame])
        // Closed connections say nothing more; the malformed ones stay usable.
        #expect(h.sim.sessions[a]?.state == .closed && h.sim.sessions[b]?.state == .closed)
        #expect(h.send(a, Msg.simple(7)).isEmpty)
        #expect(h.send(c, Msg.simple(7)).cids == [11])
    }

    @Test func armedFaultReplacesTheAnswerToTheNextMessageWithThatCid() throws {
        var h = Harness()
        let c = h.connect()
        try h.sim.arm(.close(code: 1011, reason: "boom"), onCID: 5, client: c)
        #expect(h.send(c, Msg.initSession()).cids == [4])
        #expect(h.send(c, Msg.identify("alice")).map(\.output) == [.close(code: 1011, reason: "boom")])
        // Global arming fires once, for whichever client sends the cid first.
        try h.sim.arm(.closeAbruptly, onCID: 7, client: nil)
        let d = h.ready(), e = h.ready()
        #expect(h.send(d, Msg.simple(7)).map(\.output) == [.abort])
        #expect(h.send(e, Msg.simple(7)).cids == [11])
    }

    @Test func halfOpenStopsAnswersPingsAndPushesButRecords() throws {
        var h = Harness(SimConfig(pingIntervalMs: 1000, pongTimeoutMs: 500))
        let c = h.ready()
        try h.sim.setFaults({ $0.halfOpen = true }, client: c)
        let before = h.sim.received.count
        #expect(h.send(c, Msg.simple(7)).isEmpty)
        #expect(h.send(c, Msg.simple(1)).isEmpty)
        #expect(h.sim.received.count == before + 2)
        #expect(h.sim.tick(now: t0 + 10_000).isEmpty)
        #expect(try h.sim.emit(kind: .engagement, to: .client(c), now: t0).actions.isEmpty)
        #expect(h.send(c, text: "not json").isEmpty)  // not even a close
        // Clearing it resumes everything (a PING is overdue at once).
        try h.sim.clearFaults(client: c)
        #expect(h.sim.tick(now: t0 + 10_000).cids == [1])
        #expect(h.send(c, Msg.simple(7)).cids == [11])
    }

    @Test func delayPostponesAnswersButNotPushesOrPings() throws {
        var h = Harness(SimConfig(pingIntervalMs: 1000))
        let c = h.ready()
        try h.sim.setFaults({ $0.delayMs = 250 }, client: nil)
        let a = h.send(c, Msg.simple(7), now: t0 + 10)
        #expect(a.first?.at == t0 + 260)
        #expect(a.first?.json?.int("ts") == t0 + 10)
        #expect(h.send(c, Msg.simple(1), now: t0 + 10).first?.at == t0 + 260)
        #expect(try h.sim.emit(kind: .props, to: .client(c), now: t0 + 10).actions.first?.at == t0 + 10)
        #expect(h.sim.tick(now: t0 + 1000).first?.at == t0 + 1000)
    }
}

@Suite struct BadInputTests {
    @Test func notJSONClosesWith1007AndIsRecorded() throws {
        var h = Harness()
        let c = h.connect()
        let a = h.send(c, text: "{\"cid\":3,")
        guard case .close(let code, let reason)? = a.first?.output else { Issue.record("no close: \(a)"); return }
        #expect(code == 1007 && reason.hasPrefix("invalid JSON") && reason.utf8.count <= 123)
        let e = try #require(h.sim.received.entries.last)
        #expect(e.raw == "{\"cid\":3," && e.message == nil && e.error?.hasPrefix("not JSON") == true)
        #expect(h.sim.sessions[c]?.state == .closed)
    }

    @Test func jsonWithoutAnIntegerCidClosesWith1008() {
        for text in ["[1,2]", "{\"a\":1}", "{\"cid\":\"3\"}", "{\"cid\":1.5}", "\"x\""] {
            var h = Harness()
            let c = h.connect()
            let a = h.send(c, text: text)
            guard case .close(let code, _)? = a.first?.output else { Issue.record("no close for \(text)"); continue }
            #expect(code == 1008)
            #expect(h.sim.received.entries.last?.error != nil)
        }
    }

    @Test func binaryFramesCloseWith1003() {
        var h = Harness()
        let c = h.connect()
        #expect(h.sim.receiveBinary(client: c, byteCount: 4, now: t0).map(\.output) == [.close(code: 1003, reason: "binary frames are not supported")])
    }

    @Test func requestsBeforeInitGetNotInitialized() throws {
        var h = Harness()
        let c = h.connect()
        let m = try #require(h.send(c, Msg.identify("alice")).first?.json)
        #expect(m.int("cid") == 6 && m.int("errCode") == SimErrorCode.notInitialized)
        #expect(h.send(c, Msg.simple(500)).first?.json?.int("errCode") == SimErrorCode.notInitialized)
        #expect(h.send(c, Msg.simple(4242)).cids == [99999])
        #expect(h.send(c, Msg.simple(103, ["engagement_uid": "e", "activityType": 30])).isEmpty)
        // The connection still works afterwards.
        #expect(h.send(c, Msg.initSession()).first?.json?.int("errCode") == 0)
    }

    @Test func emptyOrMissingSessionIDIsRefusedAndClosed() throws {
        for sid in ["", nil] as [String?] {
            var h = Harness()
            let c = h.connect()
            let a = h.send(c, Msg.initSession(sessionID: sid))
            #expect(a.count == 2)
            let m = try #require(a.first?.json)
            #expect(m.int("cid") == 4 && m.int("errCode") == SimErrorCode.emptySessionID)
            #expect(m.str("errMsg")?.contains("session_id") == true)
            #expect(a.last?.output == .close(code: 1008, reason: "empty session_id"))
            #expect(h.sim.sessions[c]?.state == .closed)
        }
    }

    @Test func initOrIdentifyTwiceIsAnErrCodeAndTheFirstStays() throws {
        var h = Harness()
        let c = h.ready(user: "alice")
        let i = try #require(h.send(c, Msg.initSession()).first?.json)
        #expect(i.int("cid") == 4 && i.int("errCode") == SimErrorCode.alreadyDone)
        let m = try #require(h.send(c, Msg.identify("bob")).first?.json)
        #expect(m.int("cid") == 6 && m.int("errCode") == SimErrorCode.alreadyDone)
        #expect(m.str("errMsg")?.contains("alice") == true)
        #expect(h.sim.sessions[c]?.user == "alice")
    }

    @Test func fieldErrorsAreAnsweredOnTheResponseCidNamingTheField() throws {
        var h = Harness()
        let c = h.ready(user: nil)
        let m = try #require(h.send(c, Msg.simple(5, ["ext_user_id": 7])).first?.json)
        #expect(m.int("cid") == 6 && m.int("errCode") == SimErrorCode.invalidMessage)
        #expect(m.str("errMsg")?.contains("ext_user_id") == true)
        #expect(h.send(c, Msg.simple(1003, ["token": "t"])).first?.json?.int("cid") == 2003)
        // A bad fire-and-forget report is recorded with its error and not answered.
        #expect(h.send(c, Msg.simple(103, ["activityType": 30])).isEmpty)
        #expect(h.sim.received.entries.last?.error?.contains("engagement_uid") == true)
        // Gamification requests need a user.
        #expect(h.send(c, Msg.simple(500)).first?.json?.int("errCode") == SimErrorCode.notIdentified)
    }

    @Test func unknownClientsAndGarbageNeverCrash() {
        var h = Harness()
        #expect(h.sim.receive(client: "c99", text: [0xFF, 0x00], now: t0).isEmpty)
        let c = h.connect()
        var g = SimRandom(seed: 1)
        for _ in 0..<200 {
            let n = Int(g.next() % 64)
            var b: [UInt8] = []
            for _ in 0..<n { b.append(UInt8(truncatingIfNeeded: g.next())) }
            _ = h.sim.receive(client: c, text: b, now: t0)
        }
        #expect(h.sim.received.count == 200)
    }
}
