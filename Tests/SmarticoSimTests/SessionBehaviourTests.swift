import Testing
import SmarticoProtocol
@testable import SmarticoSim

@Suite struct PushTests {
    @Test func engagementHasTheFieldsOfTheReferenceExampleAndTemplateSize() throws {
        var h = Harness(SimConfig(templateBytes: 5000))
        let c = h.ready()
        let r = try h.sim.emit(kind: .engagement, to: .client(c), now: t0 + 5)
        let m = try #require(r.deliveries.first?.message)
        #expect(m.keys == ["engagement_uid", "activityType", "engagement_id", "root_audience_id", "audience_id", "resource_id",
                           "resource_variation_id", "template_html", "template_engine", "params", "source_product_id", "cid", "ts", "uuid"])
        let e = try ClientEngagementEvent(json: m)
        #expect(UUIDv4.isValidV4(e.engagementUID ?? ""))
        #expect(e.activityType == .popup && e.engagementID != nil)
        #expect(m.str("template_html")?.utf8.count == 5000)
        #expect(m["params"]?.objectValue != nil && m.int("template_engine") == 1 && m.int("source_product_id") == 0)
        #expect(m.int("ts") == t0 + 5 && UUIDv4.isValidV4(m.str("uuid") ?? ""))
        // A second one has a fresh engagement_uid.
        let m2 = try #require(try h.sim.emit(kind: .engagement, to: .client(c), now: t0).deliveries.first?.message)
        #expect(m2.str("engagement_uid") != m.str("engagement_uid"))
    }

    @Test func templateHTMLHasExactlyTheAskedSize() {
        for n in [0, 1, 10, 120, 121, 2048, 100_000] {
            #expect(SimPushGenerator.templateHTML(bytes: n, engagementID: 7).utf8.count == n)
        }
    }

    @Test func everyPushKindDecodesWithItsFields() throws {
        var h = Harness()
        let c = h.ready()
        func one(_ k: SimPushKind) throws -> JSONObject {
            try #require(try h.sim.emit(kind: k, to: .client(c), now: t0).deliveries.first?.message)
        }
        let spin = try SawShowSpinPush(json: try one(.showSpin))
        #expect(spin.sawTemplateID == 5 && spin.pendingMessageID != nil && spin.sawGameTypeID == 1)
        let dl = try ExecuteDeepLinkEvent(json: try one(.deepLink))
        #expect(UUIDv4.isValidV4(dl.engagementUID ?? "") && dl.dp.hasPrefix("dp:"))
        let props = try PublicPropertiesChangedEvent(json: try one(.props))
        #expect(props.props["ach_points_balance"]?.int64Value != nil)
        for k in [SimPushKind.reloadAchievements, .spinsCount, .prizeDropWin, .jackpotWin] {
            let m = try one(k)
            #expect(m.int("cid") == k.classID.rawValue)
            #expect(try ServerMessage(json: m).cid == k.classID)
            #expect(m.int("ts") == t0 && m.str("uuid") != nil)
        }
        #expect(try one(.spinsCount).int("spin_count") == 3)
        #expect(try one(.prizeDropWin).int("pending_message_id") != nil)
        #expect(try one(.jackpotWin).int("winning_amount") == 1000)
    }

    @Test func kindNamesAndCidsParse() {
        #expect(SimPushKind(name: "110") == .engagement)
        #expect(SimPushKind(name: "show_spin") == .showSpin)
        #expect(SimPushKind(name: "707") == .showSpin)
        #expect(SimPushKind(name: "JP_WIN") == .jackpotWin)
        #expect(SimPushKind(name: "nope") == nil)
        #expect(SimPushKind(name: "111") == nil)
    }

    @Test func scheduledPushesGoToIdentifiedClientsInTurn() throws {
        var h = Harness(SimConfig(pingIntervalMs: 0, emitEveryMs: 1000, emitKinds: [.engagement, .showSpin]))
        let anon = h.ready(user: nil)
        let c = h.ready(user: "bob")
        #expect(h.sim.nextDeadline() == t0 + 1000)
        #expect(h.sim.tick(now: t0 + 999).isEmpty)
        let first = h.sim.tick(now: t0 + 1000)
        #expect(first.map(\.client) == [c] && first.cids == [110])
        let second = h.sim.tick(now: t0 + 2000)
        #expect(second.cids == [707])
        #expect(h.sim.tick(now: t0 + 3000).cids == [110])
        _ = anon
    }
}

@Suite struct PendingTests {
    @Test func engagementsStayPendingAndAreResentAfterEveryIdentifyUntilReported() throws {
        var h = Harness()
        let c = h.ready(user: "alice")
        let e1 = try #require(try h.sim.emit(kind: .engagement, to: .user("alice"), now: t0).deliveries.first?.message)
        let e2 = try #require(try h.sim.emit(kind: .engagement, to: .client(c), now: t0).deliveries.first?.message)
        #expect(h.sim.context.pending.pending(for: "alice").map { $0.str("engagement_uid") } == [e1.str("engagement_uid"), e2.str("engagement_uid")])

        // Reconnect and identify: the 6 answer, then both engagements again.
        h.sim.disconnected(client: c)
        let d = h.connect()
        _ = h.send(d, Msg.initSession())
        let a = h.send(d, Msg.identify("alice"), now: t0 + 10)
        #expect(a.cids == [6, 110, 110])
        #expect(a.messages[1].str("engagement_uid") == e1.str("engagement_uid"))
        #expect(a.messages[2].str("engagement_uid") == e2.str("engagement_uid"))
        #expect(a.messages[1].str("template_html") == e1.str("template_html"))
        #expect(a.messages[1].int("ts") == t0 + 10)  // re-stamped

        // An impression of e1 clears it; the next IDENTIFY re-sends only e2.
        _ = h.send(d, Msg.simple(103, ["engagement_uid": e1["engagement_uid"]!, "activityType": 30]))
        #expect(h.sim.context.pending.pending(for: "alice").count == 1)
        let d2 = h.connect()
        _ = h.send(d2, Msg.initSession())
        #expect(h.send(d2, Msg.identify("alice")).messages.dropFirst().map { $0.str("engagement_uid") } == [e2.str("engagement_uid")])
        // Action and failed clear as well.
        _ = h.send(d2, Msg.simple(104, ["engagement_uid": e2["engagement_uid"]!, "activityType": 30]))
        #expect(h.sim.context.pending.pending(for: "alice").isEmpty)
        // Another user's pending engagements are not sent to alice.
        _ = try h.sim.emit(kind: .engagement, to: .user("bob"), now: t0)
        let d3 = h.connect()
        _ = h.send(d3, Msg.initSession())
        #expect(h.send(d3, Msg.identify("alice")).cids == [6])
        #expect(h.sim.context.pending.pending(for: "bob").count == 1)
    }

    @Test func anonymousClientsGetNoPendingAndReportsFromOthersDoNotClear() throws {
        var h = Harness()
        let anon = h.ready(user: nil)
        _ = try h.sim.emit(kind: .engagement, to: .client(anon), now: t0)
        #expect(h.sim.context.pending.byUser.isEmpty)
        let c = h.ready(user: "alice")
        let e = try #require(try h.sim.emit(kind: .engagement, to: .client(c), now: t0).deliveries.first?.message)
        _ = h.send(anon, Msg.simple(106, ["engagement_uid": e["engagement_uid"]!, "activityType": 30]))
        #expect(h.sim.context.pending.pending(for: "alice").count == 1)
    }

    @Test func pendingIsBoundedPerUser() {
        var p = SimPendingEngagements(maxPerUser: 3)
        for k in 0..<5 { p.add(["engagement_uid": .string("e\(k)"), "cid": 110], user: "u") }
        #expect(p.pending(for: "u").map { $0.str("engagement_uid") } == ["e2", "e3", "e4"])
        p.add(["engagement_uid": "e3", "cid": 110, "v": 2], user: "u")
        #expect(p.pending(for: "u").count == 3 && p.pending(for: "u")[1].int("v") == 2)
    }

    /// Far past the per-user bound (the queue drops from its head and compacts): still the newest
    /// 1,000 in order, replacement and removal by uid still work, and the byte count stays exact.
    @Test func pendingStaysExactFarPastTheBound() {
        var p = SimPendingEngagements(maxPerUser: 1000)
        for k in 0..<2_500 { p.add(["engagement_uid": .string("e\(k)"), "cid": 110], user: "u") }
        p.add(["engagement_uid": "e0", "cid": 110], user: "v")
        var uids = p.pending(for: "u").map { $0.str("engagement_uid") }
        #expect(uids.count == 1000 && uids.first == "e1500" && uids.last == "e2499")
        p.add(["engagement_uid": "e2000", "cid": 110, "v": 2], user: "u")
        #expect(p.pending(for: "u").count == 1000 && p.pending(for: "u")[500].int("v") == 2)
        #expect(!p.remove(uid: "e1499", user: "u") && p.remove(uid: "e1700", user: "u"))
        p.add(["engagement_uid": "e1500", "cid": 110], user: "u")  // still pending: replaced in place
        uids = p.pending(for: "u").map { $0.str("engagement_uid") }
        #expect(uids.count == 999 && uids.first == "e1500" && !uids.contains("e1700"))
        let sum = p.byUser.values.flatMap { $0 }.map { $0.serialized().count }.reduce(0, +)
        #expect(sum == p.byteCount && p.pending(for: "v").count == 1)
    }
}

@Suite struct KeepaliveTests {
    @Test func pingsOnScheduleAndDropsAClientThatDoesNotPong() throws {
        var h = Harness(SimConfig(pingIntervalMs: 30_000, pongTimeoutMs: 10_000))
        let c = h.ready()
        #expect(h.sim.nextDeadline() == t0 + 30_000)
        #expect(h.sim.tick(now: t0 + 29_999).isEmpty)
        let ping = h.sim.tick(now: t0 + 30_000)
        #expect(ping.cids == [1] && ping.first?.client == c)
        #expect(UUIDv4.isValidV4(ping.messages.first?.str("uuid") ?? ""))
        #expect(h.sim.nextDeadline() == t0 + 40_000)
        // A PONG clears the deadline; the next PING comes one interval after the last.
        _ = h.send(c, Msg.simple(2), now: t0 + 30_100)
        #expect(h.sim.nextDeadline() == t0 + 60_000)
        #expect(h.sim.tick(now: t0 + 60_000).cids == [1])
        // No PONG this time: dropped at the deadline with a close 1001.
        #expect(h.sim.tick(now: t0 + 69_999).isEmpty)
        let drop = h.sim.tick(now: t0 + 70_000)
        #expect(drop.map(\.output) == [.close(code: 1001, reason: "no PONG within 10000 ms")])
        #expect(h.sim.sessions[c]?.state == .closed)
        #expect(h.sim.tick(now: t0 + 200_000).isEmpty)
        #expect(h.sim.sessions[c]?.pingsSent == 2 && h.sim.sessions[c]?.pongsReceived == 1)
    }

    @Test func zeroIntervalDisablesServerPings() {
        var h = Harness(SimConfig(pingIntervalMs: 0))
        _ = h.ready()
        #expect(h.sim.nextDeadline() == nil)
        #expect(h.sim.tick(now: t0 + 1_000_000).isEmpty)
    }
}

@Suite struct BoundsTests {
    @Test func pendingIsBoundedInBytesAcrossUsers() {
        var p = SimPendingEngagements(maxPerUser: 100, maxBytes: 1000)
        let body = String(repeating: "x", count: 300)
        for k in 0..<3 { p.add(["engagement_uid": .string("a\(k)"), "t": .string(body)], user: "a") }
        #expect(p.byteCount <= 1000 && p.pending(for: "a").count == 3)
        p.add(["engagement_uid": "a3", "t": .string(body)], user: "a")
        #expect(p.pending(for: "a").map { $0.str("engagement_uid") } == ["a1", "a2", "a3"])
        p.add(["engagement_uid": "b0", "t": .string(body)], user: "b")
        #expect(p.byteCount <= 1000 && p.pending(for: "b").count == 1 && p.pending(for: "a").count == 2)
        #expect(p.remove(uid: "b0", user: "b") && p.byUser["b"] == nil)
        let sum = p.byUser.values.flatMap { $0 }.map { $0.serialized().count }.reduce(0, +)
        #expect(sum == p.byteCount)
    }

    @Test func receivedLogIsBoundedInBytes() {
        var log = SimReceivedLog(capacity: 100, maxBytes: 1000)
        for k in 1...10 { log.append(SimReceivedEntry(seq: Int64(k), at: 0, client: "c1", message: ["cid": 1]), size: 300) }
        #expect(log.byteCount <= 1000 && log.entries.map(\.seq) == [8, 9, 10])
        // One entry larger than the budget is still kept (the newest always is).
        log.append(SimReceivedEntry(seq: 11, at: 0, client: "c1", message: ["cid": 1]), size: 5000)
        #expect(log.entries.map(\.seq) == [11])
        // The ring keeps order when it wraps and trims.
        var ring = SimReceivedLog(capacity: 3, maxBytes: 250)
        for k in 1...5 { ring.append(SimReceivedEntry(seq: Int64(k), at: 0, client: "c1", message: ["cid": 1]), size: 100) }
        #expect(ring.entries.map(\.seq) == [4, 5])
    }
}
