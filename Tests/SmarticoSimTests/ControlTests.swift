import Testing
import SmarticoProtocol
@testable import SmarticoSim

/// Sends one control line; returns the parsed response and the actions.
func control(_ h: inout Harness, _ line: String, now: Int64 = t0) throws -> (JSONObject, [SimAction]) {
    let (bytes, actions) = SimControl.handle(line: Array(line.utf8), server: &h.sim, now: now)
    #expect(bytes.last == 0x0A)
    #expect(bytes.dropLast().contains(0x0A) == false)  // one line
    guard case .object(let o) = try JSONValue(parsing: Array(bytes.dropLast())) else { throw SimControlError.invalid("not an object") }
    return (o, actions)
}

@Suite struct ControlTests {
    /// The data API's routes: each request cid is answered by one area only.
    @Test func eachDataRouteCidBelongsToOneArea() {
        let cids = SimData.allRoutes.map(\.request)
        #expect(Set(cids).count == cids.count, "routed twice: \(Dictionary(grouping: cids, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted())")
    }

    /// `data_fault`: the next answer to a data cid is an error, nothing, or the given body; once.
    @Test func dataFaultReplacesTheNextDataAnswerOnce() throws {
        var h = Harness()
        let c = h.ready(user: "alice")
        let cid = try #require(SimData.allRoutes.first { $0.response != nil })
        func answer() -> JSONObject? { h.send(c, Msg.simple(cid.request)).first?.json }

        #expect(try control(&h, #"{"op":"data_fault","cid":\#(cid.request),"answer":"error","errCode":30002,"errMsg":"short"}"#).0["ok"] == true)
        let refused = answer()
        #expect(refused?.int("errCode") == 30002 && refused?.str("errMsg") == "short" && refused?.int("cid") == cid.response)
        #expect(answer()?.int("errCode") == 0, "once only")

        _ = try control(&h, #"{"op":"data_fault","cid":\#(cid.request),"answer":"silent"}"#)
        #expect(h.send(c, Msg.simple(cid.request)).isEmpty)

        _ = try control(&h, #"{"op":"data_fault","cid":\#(cid.request),"answer":"replace","body":{"x":1}}"#)
        let replaced = answer()
        #expect(replaced?.int("x") == 1 && replaced?.int("errCode") == 0 && replaced?.int("cid") == cid.response)

        let unknown = try control(&h, #"{"op":"data_fault","cid":4242,"answer":"silent"}"#).0
        #expect(unknown["ok"] == false && (unknown.str("error") ?? "").contains("4242"))
        let noBody = try control(&h, #"{"op":"data_fault","cid":\#(cid.request),"answer":"replace"}"#).0
        #expect(noBody["ok"] == false && (noBody.str("error") ?? "").contains("body"))
        _ = try control(&h, #"{"op":"data_fault","cid":\#(cid.request),"answer":"silent"}"#)
        #expect(try control(&h, #"{"op":"data_fault","clear":true}"#).0["ok"] == true)
        #expect(answer()?.int("errCode") == 0, "cleared")
    }

    @Test func emitAMessageToAClientOrAUser() throws {
        var h = Harness()
        let c = h.ready(user: "alice")
        let (r, a) = try control(&h, #"{"op":"emit","message":{"cid":504},"to":"\#(c)"}"#)
        #expect(r["ok"] == true && r.int("sent") == 1)
        #expect(a.count == 1 && a[0].client == c && a[0].json?.int("cid") == 504 && a[0].json?.int("ts") == t0)
        let (r2, a2) = try control(&h, #"{"op":"emit","message":{"cid":108,"props":{"x":1}},"user":"alice"}"#)
        #expect(r2.int("sent") == 1 && a2.cids == [108])
        // `to` naming a user.
        let (r3, _) = try control(&h, #"{"op":"emit","kind":"show_spin","to":"alice"}"#)
        let d = try #require(r3["deliveries"]?.arrayValue?.first?.objectValue)
        #expect(d.str("client") == c && d["message"]?.objectValue?.int("cid") == 707)
    }

    @Test func emitKindDefaultsToIdentifiedClientsAndStarToAll() throws {
        var h = Harness()
        let anon = h.ready(user: nil), a = h.ready(user: "a"), b = h.ready(user: "b")
        let (r, acts) = try control(&h, #"{"op":"emit","kind":"engagement","count":2}"#)
        #expect(r.int("sent") == 4 && Set(acts.map(\.client)) == [a, b])
        let (_, all) = try control(&h, #"{"op":"emit","kind":"504","to":"*"}"#)
        #expect(all.map(\.client) == [anon, a, b])
    }

    @Test func bulkEmitCanLeaveTheBodiesOut() throws {
        var h = Harness(SimConfig(templateBytes: 10_000))
        let c = h.ready(user: "a")
        let (r, acts) = try control(&h, #"{"op":"emit","kind":"engagement","count":50,"bodies":false}"#)
        #expect(r.int("sent") == 50 && acts.count == 50)
        let first = try #require(r["deliveries"]?.arrayValue?.first?.objectValue)
        #expect(first.keys == ["client", "cid", "uuid", "engagement_uid"] && first.str("client") == c && first.int("cid") == 110)
        #expect(r.serialized().count < 10_000)
    }

    @Test func emitEngagementToAnOfflineUserQueuesItPending() throws {
        var h = Harness()
        let (r, a) = try control(&h, #"{"op":"emit","kind":"engagement","user":"carol"}"#)
        #expect(r["ok"] == true && r.int("sent") == 0 && a.isEmpty)
        let q = try #require(r["queued_pending"]?.arrayValue?.first?.objectValue)
        let (p, _) = try control(&h, #"{"op":"pending","user":"carol"}"#)
        #expect(p["engagements"]?.arrayValue?.first?.objectValue?.str("engagement_uid") == q.str("engagement_uid"))
        let c = h.connect()
        _ = h.send(c, Msg.initSession())
        #expect(h.send(c, Msg.identify("carol")).cids == [6, 110])
    }

    @Test func emitErrors() throws {
        var h = Harness()
        for (line, fragment) in [
            (#"{"op":"emit"}"#, "needs"),
            (#"{"op":"emit","kind":"nope"}"#, "unknown kind"),
            (#"{"op":"emit","message":{"x":1}}"#, "cid"),
            (#"{"op":"emit","message":[1]}"#, "object"),
            (#"{"op":"emit","kind":"props","client":"c9"}"#, "no client"),
            (#"{"op":"emit","kind":"props","count":0}"#, "count"),
            (#"{"op":"nope"}"#, "unknown op"),
            (#"{"nop":1}"#, "op"),
            ("not json", "not a JSON object"),
            ("", "not a JSON object"),
        ] {
            let (r, a) = try control(&h, line)
            #expect(r["ok"] == false && a.isEmpty)
            #expect(r.str("error")?.contains(fragment) == true, "\(line) → \(r)")
        }
    }

    @Test func faultOps() throws {
        var h = Harness()
        let c = h.ready(user: "alice")
        var (r, a) = try control(&h, #"{"op":"fault","kind":"reject_init","errCode":9,"errMsg":"no"}"#)
        #expect(r["ok"] == true && r.str("scope") == "global" && a.isEmpty)
        #expect(h.sim.context.globalFaults.rejectInit == 9)
        (r, _) = try control(&h, #"{"op":"fault","kind":"reject_identify","client":"\#(c)"}"#)
        #expect(r.str("scope") == c && h.sim.sessions[c]?.faults.rejectIdentify == 100_000)
        (r, _) = try control(&h, #"{"op":"fault","kind":"delay","ms":100,"user":"alice"}"#)
        #expect(h.sim.sessions[c]?.faults.delayMs == 100)
        (r, _) = try control(&h, #"{"op":"fault","kind":"half_open"}"#)
        #expect(h.sim.context.globalFaults.halfOpen == true)
        (r, _) = try control(&h, #"{"op":"fault","kind":"uuid_echo","enabled":false}"#)
        #expect(h.sim.context.globalFaults.echoUUID == false)
        (r, _) = try control(&h, #"{"op":"fault","kind":"clear"}"#)
        #expect(h.sim.context.globalFaults == SimFaultModes() && h.sim.sessions[c]?.faults == SimFaultModes())
        (r, a) = try control(&h, #"{"op":"fault","kind":"malformed_frame","client":"\#(c)"}"#)
        #expect(a.map(\.output) == [.malformedFrame] && r["applied_to"] == [.string(c)])
        (r, a) = try control(&h, #"{"op":"fault","kind":"malformed_json"}"#)
        #expect(a.map(\.output) == [.text(SimWire.malformedJSON)])
        (r, a) = try control(&h, #"{"op":"fault","kind":"close","code":4000,"reason":"later","on_cid":7}"#)
        #expect(a.isEmpty && r.int("armed_on_cid") == 7)
        #expect(h.send(c, Msg.simple(7)).map(\.output) == [.close(code: 4000, reason: "later")])
        let d = h.ready()
        (r, a) = try control(&h, #"{"op":"fault","kind":"close_abruptly"}"#)
        #expect(a.map(\.output) == [.abort] && a.map(\.client) == [d])
        for (line, fragment) in [
            (#"{"op":"fault"}"#, "kind"),
            (#"{"op":"fault","kind":"zap"}"#, "unknown fault kind"),
            (#"{"op":"fault","kind":"close","code":1006}"#, "1006"),
            (#"{"op":"fault","kind":"delay"}"#, "ms"),
            (#"{"op":"fault","kind":"uuid_echo"}"#, "enabled"),
            (#"{"op":"fault","kind":"reject_init","errCode":"x"}"#, "errCode"),
        ] {
            let (e, _) = try control(&h, line)
            #expect(e["ok"] == false && e.str("error")?.contains(fragment) == true, "\(line) → \(e)")
        }
    }

    @Test func receivedFiltersByCidClientAndSince() throws {
        var h = Harness()
        let c = h.ready(user: "alice")
        let d = h.ready(user: "bob")
        _ = h.send(d, Msg.simple(7))
        var (r, _) = try control(&h, #"{"op":"received"}"#)
        #expect(r["messages"]?.arrayValue?.count == 5)
        (r, _) = try control(&h, #"{"op":"received","cid":5}"#)
        let ids = r["messages"]?.arrayValue?.compactMap { $0.objectValue?.str("client") }
        #expect(ids == [c, d])
        (r, _) = try control(&h, #"{"op":"received","client":"\#(d)","cid":[3,7]}"#)
        #expect(r["messages"]?.arrayValue?.compactMap { $0.objectValue?["message"]?.objectValue?.int("cid") } == [3, 7])
        (r, _) = try control(&h, #"{"op":"received","since":4}"#)
        let last = try #require(r["messages"]?.arrayValue?.first?.objectValue)
        #expect(last.int("seq") == 5 && last.str("user") == "bob" && last.int("at") == t0)
    }

    @Test func clientsAndPending() throws {
        var h = Harness()
        let c = h.ready(user: "alice")
        _ = h.connect()
        let (r, _) = try control(&h, #"{"op":"clients"}"#)
        let list = try #require(r["clients"]?.arrayValue)
        #expect(list.count == 2)
        let first = try #require(list.first?.objectValue)
        #expect(first.str("id") == c && first.str("user") == "alice" && first.str("state") == "ready")
        #expect(first.str("session_id") == "a5719258-f6fc-4335-a4aa-a1e102e035ed")
        #expect(first.int("connected_at") == t0 && first.str("remote") == "127.0.0.1:50000")
        #expect(list[1].objectValue?.str("state") == "awaiting_init" && list[1].objectValue?["user"] == .null)
        _ = try control(&h, #"{"op":"emit","kind":"engagement","user":"alice"}"#)
        let (p, _) = try control(&h, #"{"op":"pending","user":"alice"}"#)
        #expect(p.str("user") == "alice" && p["engagements"]?.arrayValue?.count == 1)
        let (e, _) = try control(&h, #"{"op":"pending"}"#)
        #expect(e["ok"] == false)
    }
}

@Suite struct RecordTests {
    @Test func recordLineFormat() throws {
        var h = Harness()
        var lines: [[UInt8]] = []
        h.sim.onReceived = { lines.append($0.recordLine) }
        let c = h.ready(user: "alice")
        _ = h.send(c, text: "oops")
        #expect(lines.count == 3)
        let text = lines.map { String(decoding: $0, as: UTF8.self) }
        #expect(text.allSatisfy { $0.hasSuffix("\n") && $0.dropLast().contains("\n") == false })
        #expect(text[0].hasPrefix(#"{"seq":1,"at":1800000000000,"client":"c1","message":{"cid":3,"#))
        #expect(text[1].hasPrefix(#"{"seq":2,"at":1800000000000,"client":"c1","message":{"cid":5,"#))
        // Received before IDENTIFY succeeded → no user; afterwards the user is named.
        #expect(text[1].contains("\"user\"") == false)
        #expect(text[2].hasPrefix(#"{"seq":3,"at":1800000000000,"client":"c1","user":"alice","raw":"oops","error":"not JSON"#))
        let parsed = try JSONValue(parsing: Array(lines[0].dropLast()))
        #expect(parsed["message"]?["session_id"]?.stringValue == "a5719258-f6fc-4335-a4aa-a1e102e035ed")
    }

    @Test func receivedLogIsBounded() {
        var log = SimReceivedLog(capacity: 3)
        for k in 1...5 { log.append(SimReceivedEntry(seq: Int64(k), at: 0, client: "c1", message: ["cid": 1])) }
        #expect(log.entries.map(\.seq) == [3, 4, 5])
    }
}
