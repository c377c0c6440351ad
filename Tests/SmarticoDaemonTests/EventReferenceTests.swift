// The event reference of docs/socket-api.md, kept true by a real run: the real smarticod against
// the real smartico-sim, driven (pushes, bridge messages, sim faults, a failing hash command, a full
// outbox, retention, a file-size limit, a damaged database at a restart) until it has emitted every event, and every error code the
// reference shows. One captured line per example key is compared with the documented example of that
// key: same event name, same envelope, same `data` keys (recursively, except inside the members that
// carry what the server or a page sent: `message`, `bridge`, `props`). Values are not compared, so
// an example may shorten a long string with "…".
//
// SMARTICO_WRITE_EVENT_EXAMPLES=/path: the captured lines are also written there, in the markdown
// form of the reference (`<!-- event-example: KEY -->` and a json fence), to refresh the docs.
import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

/// A connection to the daemon's socket that keeps every event as the line that arrived.
final class RawEventClient: @unchecked Sendable {  // `lines`, `nextID` and the socket are only used inside `lock`
    private let socket: LineSocket
    private let lock = NSLock()
    private var nextID = 1
    private var lines: [String] = []

    private init(socket: LineSocket) { self.socket = socket }

    static func connect(path: String) async throws -> RawEventClient {
        guard let s = await TestExecutables.onThread({ LineSocket.connect(path: path) }) else {
            throw EngineTestError("cannot connect to \(path)")
        }
        return RawEventClient(socket: s)
    }

    func close() { socket.close() }

    /// The event lines received so far, in arrival order.
    var eventLines: [String] { lock.withLock { lines } }

    /// Reads one line (≤ `timeoutMs`); an event line is kept and returned as such.
    private func readOne(timeoutMs: Int) -> (line: String, object: JSONObject)? {
        guard let line = socket.readLine(timeoutMs: timeoutMs),
              let object = (try? JSONValue(parsing: line))?.objectValue else { return nil }
        if object["event"] != nil { lines.append(line) }
        return (line, object)
    }

    /// Sends a request and returns its response; events arriving meanwhile are kept.
    func request(_ op: String, _ args: JSONObject = [:], timeoutMs: Int = 20_000) async throws -> JSONObject {
        let result: JSONObject? = await TestExecutables.onThread { [self] in
            lock.lock()
            defer { lock.unlock() }
            let id = nextID
            nextID += 1
            var o: JSONObject = ["id": .number(Int64(id)), "op": .string(op)]
            for (k, v) in args { o[k] = v }
            guard socket.writeLine(String(decoding: o.serialized(), as: UTF8.self)) else { return nil }
            let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000)
            while Date() < deadline {
                guard let r = readOne(timeoutMs: max(1, Int(deadline.timeIntervalSinceNow * 1000))) else { return nil }
                if r.object["event"] == nil, r.object["id"]?.int64Value == Int64(id) { return r.object }
            }
            return nil
        }
        guard let result else { throw EngineTestError("no answer to \(op) within \(timeoutMs) ms") }
        return result
    }

    func ok(_ op: String, _ args: JSONObject = [:]) async throws -> JSONValue {
        let r = try await request(op, args)
        guard r["ok"]?.boolValue == true, let result = r["result"] else { throw EngineTestError("\(op) failed: \(r.text)") }
        return result
    }

    /// The first event from the `from`-th one on (already received or arriving within `timeoutMs`)
    /// that `match` accepts, with its index.
    func event(from: Int = 0, timeoutMs: Int = 20_000, where match: @escaping @Sendable (JSONObject) -> Bool)
        async -> (index: Int, object: JSONObject)?
    {
        await TestExecutables.onThread { [self] in
            lock.lock()
            defer { lock.unlock() }
            var i = from
            let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000)
            while true {
                while i < lines.count {
                    if let o = (try? JSONValue(parsing: lines[i]))?.objectValue, match(o) { return (i, o) }
                    i += 1
                }
                let left = Int(deadline.timeIntervalSinceNow * 1000)
                guard left > 0 else { return nil }
                _ = readOne(timeoutMs: left)
            }
        }
    }
}

@Suite("Event reference (docs/socket-api.md)", .serialized) struct EventReferenceTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let docPath = packageRoot.appendingPathComponent("docs/socket-api.md").path
    static let salt = "evref-salt"
    /// Members whose content is what the server or a page sent: their keys are not compared.
    static let freeForm: Set<String> = ["message", "bridge", "props"]

    /// The example an event line illustrates: its name, `error/<code>` for an error, `session/backoff`
    /// for a session entering backoff (it carries more members).
    static func exampleKey(_ o: JSONObject) -> String? {
        guard let name = o["event"]?.stringValue else { return nil }
        switch name {
        case "error": return "error/" + (o["data"]?["code"]?.stringValue ?? "?")
        case "session": return o["data"]?["state"]?.stringValue == "backoff" ? "session/backoff" : "session"
        default: return name
        }
    }

    /// Among several lines of a key, the one the reference shows (the first otherwise).
    static func preferred(_ key: String, _ o: JSONObject) -> Bool {
        switch key {
        case "session": return o["data"]?["state"]?.stringValue == "ready"
        case "deeplink": return o["data"]?["source"]?.stringValue == "server" && o["data"]?["client_action"] != .null
        case "message": return o["data"]?["problem"] == .null
        default: return true
        }
    }

    /// One line per example key: the preferred one, else the first.
    static func examples(from lines: [String]) -> [String: String] {
        var first: [String: String] = [:]
        var best: [String: String] = [:]
        for line in lines {
            guard let o = (try? JSONValue(parsing: line))?.objectValue, let key = exampleKey(o) else { continue }
            if first[key] == nil { first[key] = line }
            if best[key] == nil, preferred(key, o) { best[key] = line }
        }
        return first.merging(best) { $1 }
    }

    /// The documented examples: `<!-- event-example: KEY -->`, then a ```json fence holding one line.
    static func documentedExamples(_ markdown: String) -> (examples: [String: String], problems: [String]) {
        let lines = markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var examples: [String: String] = [:]
        var problems: [String] = []
        for (i, line) in lines.enumerated() {
            let t = line.trimmingCharacters(in: .whitespaces)
            guard t.hasPrefix("<!-- event-example:"), t.hasSuffix("-->") else { continue }
            let key = t.dropFirst("<!-- event-example:".count).dropLast(3).trimmingCharacters(in: .whitespaces)
            guard i + 3 < lines.count, lines[i + 1] == "```json", lines[i + 3] == "```" else {
                problems.append("line \(i + 1): the marker of \(key) must be followed by ```json, one line, ```")
                continue
            }
            if examples[key] != nil { problems.append("line \(i + 1): a second example of \(key)") }
            examples[key] = lines[i + 2]
        }
        return (examples, problems)
    }

    /// Every key path of `value`, not descending into `freeForm` members.
    static func shape(_ value: JSONValue, _ prefix: String = "") -> Set<String> {
        guard let o = value.objectValue else { return [] }
        var out: Set<String> = []
        for (k, v) in o {
            let path = prefix.isEmpty ? k : prefix + "." + k
            out.insert(path)
            if !freeForm.contains(k) { out.formUnion(shape(v, path)) }
        }
        return out
    }

    static func isData(_ key: String, _ value: String) -> @Sendable (JSONObject) -> Bool {
        { $0["data"]?[key]?.stringValue == value }
    }

    static func pending(_ sim: SimProcess, _ user: String) async throws -> [String] {
        try await sim.control(["op": "pending", "user": .string(user)])["engagements"]?.arrayValue?
            .compactMap { $0["engagement_uid"]?.stringValue } ?? []
    }

    static func readyAs(_ ops: DaemonClient, _ user: String) async throws -> Bool {
        let s = try await ops.status()
        return s["state"]?.stringValue == "ready" && s["user"]?["ext_user_id"]?.stringValue == user
            && s["user"]?["identified"]?.boolValue == true
    }

    @Test func everyEventTheDaemonEmitsHasAMatchingExampleInTheReference() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir, extra: ["--hash-salt", Self.salt, "--template-bytes", "64"])
        let script = try writeHashScript(dir: setup.dir, salt: Self.salt, failWhenMarked: true)
        try setup.writeConfig(url: sim.serverURL, user: "alice", hash: nil, hashCommand: ["/bin/sh", script],
                              journal: ["retention_events": 2],
                              http: ["public_url": .string(sim.httpURL + "/services/public"), "retry_initial_ms": 20, "retry_max_ms": 200],
                              push: ["register_via": "http"])
        // outbox.max_messages small enough to fill.
        var config = try #require(try JSONValue(parsing: String(contentsOfFile: setup.configPath, encoding: .utf8)).objectValue)
        config["outbox"] = ["max_messages": 5]
        try Data(config.serialized()).write(to: URL(fileURLWithPath: setup.configPath))

        // The daemon runs with SIGXFSZ ignored (inherited through exec), so a file-size limit set
        // later makes its journal writes fail instead of killing it.
        let ops = try await setup.start(launcher: ["/bin/sh", "-c", "trap '' XFSZ; exec \"$0\" \"$@\""])
        defer { ops.close() }
        #expect(try await eventually(timeout: .seconds(20)) { try await Self.readyAs(ops, "alice") }, "log:\n\(setup.log)")

        // The app: a durable subscriber to every event.
        let app = try await RawEventClient.connect(path: setup.socketPath)
        defer { app.close() }
        _ = try await app.ok("subscribe", ["durable": "evref-app"])

        // A server close: session (backoff, then the states back to ready), identified.
        _ = try await sim.control(["op": "fault", "kind": "close", "code": 1000, "reason": "test"])
        #expect(await app.event(where: Self.isData("state", "backoff")) != nil, "log:\n\(setup.log)")
        #expect(await app.event(where: { $0["event"]?.stringValue == "identified" }) != nil, "log:\n\(setup.log)")
        #expect(try await eventually(timeout: .seconds(20)) { try await Self.readyAs(ops, "alice") })

        // Engagement lifecycle: show → report impression, tap → report action, then ack.
        let uid1 = try await sim.emitEngagement(to: "alice")
        let e1 = try #require(await app.event { $0["event"]?.stringValue == "engagement" && $0["data"]?["message"]?["engagement_uid"]?.stringValue == uid1 })
        let seq1 = try #require(e1.object["seq"]?.int64Value)
        #expect(e1.object["data"]?["bridge"]?["bcid"]?.int64Value == 3)
        #expect(try await Self.pending(sim, "alice").contains(uid1), "a shown engagement is pending until reported")
        _ = try await app.ok("report", ["kind": "impression", "engagement_uid": .string(uid1)])
        _ = try await app.ok("report", ["kind": "action", "engagement_uid": .string(uid1), "action": "dp:gf_missions"])
        #expect(try await app.ok("ack", ["seq": .number(seq1)])["cursor"]?.int64Value == seq1)
        #expect(try await eventually { try await Self.pending(sim, "alice").contains(uid1) == false }, "reports did not clear \(uid1) at the server")
        let reports = try await sim.received(cids: [103, 104, 106]).filter { $0["engagement_uid"]?.stringValue == uid1 }
        #expect(reports.compactMap { $0["cid"]?.int64Value } == [103, 104], "\(reports)")

        // An app that only acks leaves the engagement pending at the server; `failed` clears it.
        let uid2 = try await sim.emitEngagement(to: "alice")
        let e2 = try #require(await app.event { $0["data"]?["message"]?["engagement_uid"]?.stringValue == uid2 })
        _ = try await app.ok("ack", ["seq": .number(try #require(e2.object["seq"]?.int64Value))])
        #expect(try await Self.pending(sim, "alice").contains(uid2), "an acked, unreported engagement stays pending")
        _ = try await app.ok("report", ["kind": "failed", "engagement_uid": .string(uid2)])
        #expect(try await eventually { try await Self.pending(sim, "alice").contains(uid2) == false })
        #expect(try await sim.received(cids: [106]).contains { $0["engagement_uid"]?.stringValue == uid2 })

        // Deep links: a 105 with dp:action (reported by the daemon as client_action), a plain one.
        _ = try await sim.control(["op": "emit", "user": "alice",
                                   "message": ["cid": 105, "engagement_uid": "evref-dl-1", "payload": ["dp": "dp:action&action=claim_bonus"]]])
        #expect(await app.event(where: { $0["data"]?["client_action"]?.stringValue == "claim_bonus" }) != nil)
        #expect(try await eventually {
            try await sim.received(cids: [9]).contains { $0["eventType"]?.stringValue == "client_action" && $0["payload"]?["action"]?.stringValue == "claim_bonus" }
        }, "the daemon did not report client_action claim_bonus")
        _ = try await sim.control(["op": "emit", "kind": "deeplink", "user": "alice"])
        #expect(await app.event(where: Self.isData("dp", "dp:gf_missions")) != nil)

        // Props, a mini-game and its acknowledgement, a push the daemon passes on as a message.
        _ = try await sim.control(["op": "emit", "kind": "props", "user": "alice"])
        #expect(await app.event(where: { $0["event"]?.stringValue == "props" }) != nil)
        _ = try await sim.control(["op": "emit", "kind": "show_spin", "user": "alice"])
        let spin = try #require(await app.event { $0["event"]?.stringValue == "minigame" })
        let template = try #require(spin.object["data"]?["saw_template_id"]?.int64Value)
        let pendingID = try #require(spin.object["data"]?["message"]?["pending_message_id"]?.int64Value)
        #expect(spin.object["data"]?["url"]?.stringValue?.contains("dp=") == true, "\(spin.object.text)")
        _ = try await app.ok("minigame_ack", ["saw_template_id": .number(template), "pending_message_id": .number(pendingID)])
        #expect(try await eventually {
            try await sim.received(cids: [711]).contains { $0["pending_message_id"]?.int64Value == pendingID && $0["saw_template_id"]?.int64Value == template }
        }, "no 711 for the mini-game")
        _ = try await sim.control(["op": "emit", "kind": "reload_achievements", "user": "alice"])
        #expect(await app.event(where: Self.isData("name", "reload_achievements")) != nil)

        // What an embedded page sends through the bridge.
        _ = try await app.ok("bridge", ["message": ["bcid": 4, "dp": "dp:cashier"]])
        #expect(await app.event(where: Self.isData("source", "bridge")) != nil)
        _ = try await app.ok("bridge", ["message": ["bcid": 8, "ach_game_id": 32, "ext_game_id": "56", "context": "mission",
                                                    "game_public_meta": ["name": "Instant Football", "image": "https://img.example/1.jpg", "enabled": true]]])
        #expect(await app.event(where: { $0["event"]?.stringValue == "game_opening" }) != nil)
        _ = try await app.ok("bridge", ["message": ["bcid": 2]])
        #expect(await app.event(where: { $0["event"]?.stringValue == "bridge" }) != nil)
        #expect(try await eventually { try await ops.status()["outbox"]?["depth"]?.int64Value == 0 })

        // The public HTTP API refuses a push report and a push token (400): each is dropped with an error.
        _ = try await sim.control(["op": "http_fault", "answer": "status", "status": 400, "count": 2])
        _ = try await app.ok("push_report", ["kind": "action", "engagement_uid": "evref-push-1", "message_id": "42", "action": "dp:cashier"])
        #expect(await app.event(where: Self.isData("code", "push_report_dropped")) != nil, "log:\n\(setup.log)")
        _ = try await app.ok("push_token", ["token": "evref-token", "platform": 7, "status": 0])
        #expect(await app.event(where: Self.isData("code", "push_token_dropped")) != nil, "log:\n\(setup.log)")

        // Errors. INIT refused while the outbox fills; an identify of bob waits for the server.
        _ = try await sim.control(["op": "fault", "kind": "reject_init", "errCode": 7, "errMsg": "maintenance"])
        _ = try await sim.control(["op": "fault", "kind": "close", "code": 1000])
        #expect(await app.event(where: Self.isData("code", "init_rejected")) != nil, "log:\n\(setup.log)")
        for i in 0..<5 { _ = try await ops.ok("event", ["event_type": .string("evref_\(i)")]) }
        let full = try await ops.request("event", ["event_type": "evref_full"])
        #expect(full["error"]?["code"]?.stringValue == "queue_full", "\(full.text)")
        #expect(await app.event(where: Self.isData("code", "outbox_full")) != nil)
        // bob's identify is answered later; alice's messages must go under alice first, but her
        // hash command fails now: they are dropped.
        _ = try? await ops.request("identify", ["ext_user_id": "bob"], timeoutMs: 300)
        #expect(FileManager.default.createFile(atPath: setup.dir + "/fail-alice", contents: nil))
        _ = try await sim.control(["op": "fault", "kind": "clear"])
        #expect(await app.event(where: Self.isData("code", "hash_command_failed")) != nil, "log:\n\(setup.log)")
        let dropped = await app.event(where: Self.isData("code", "outbox_dropped"))
        #expect(dropped?.object["data"]?["user"]?.stringValue == "alice" && dropped?.object["data"]?["count"]?.int64Value == 5,
                "\(dropped?.object.text ?? "no outbox_dropped"); log:\n\(setup.log)")
        #expect(try await eventually(timeout: .seconds(20)) { try await Self.readyAs(ops, "bob") }, "log:\n\(setup.log)")

        // IDENTIFY failing (a code below 100000), then refused (a wrong hash).
        _ = try await sim.control(["op": "fault", "kind": "reject_identify", "errCode": 7, "errMsg": "try later"])
        _ = try await sim.control(["op": "fault", "kind": "close", "code": 1000])
        #expect(await app.event(where: Self.isData("code", "identify_failed")) != nil, "log:\n\(setup.log)")
        _ = try await sim.control(["op": "fault", "kind": "clear"])
        #expect(try await eventually(timeout: .seconds(20)) { try await Self.readyAs(ops, "bob") }, "log:\n\(setup.log)")
        let refused = try await ops.request("identify", ["ext_user_id": "mallory", "hash": "0123456789abcdef:1"])
        #expect(refused["error"]?["code"]?.stringValue == "server_error", "\(refused.text)")
        #expect(await app.event(where: Self.isData("code", "identify_rejected")) != nil, "log:\n\(setup.log)")
        #expect(try await eventually(timeout: .seconds(20)) { try await Self.readyAs(ops, "bob") }, "log:\n\(setup.log)")

        // A replay behind retention (journal.retention_events 2): gap.
        let late = try await RawEventClient.connect(path: setup.socketPath)
        defer { late.close() }
        _ = try await late.ok("subscribe", ["since": 0])
        let gap = await late.event { $0["event"]?.stringValue == "gap" }
        #expect(gap != nil)

        // The journal cannot be written (a file-size limit of 1 byte on the daemon): journal_write_failed,
        // and once for the state directory, storage_unavailable.
        let pid = try #require(setup.daemon?.pid)
        let limit = try await BuiltExecutable.run(URL(fileURLWithPath: "/usr/bin/prlimit"), ["--pid", String(pid), "--fsize=1"])
        #expect(limit.status == 0, "\(limit)")
        _ = try await sim.emitEngagement(to: "bob")
        #expect(await app.event(where: Self.isData("code", "journal_write_failed")) != nil, "log:\n\(setup.log)")
        #expect(await app.event(where: Self.isData("code", "storage_unavailable")) != nil, "log:\n\(setup.log)")

        // A damaged database at start: garbage over it and its WAL (killed, the daemon left one
        // whose pages SQLite would read instead) with the daemon stopped, started again;
        // store_damaged is the fresh journal's first event.
        await setup.kill9()
        for suffix in ["", "-wal"] {
            try Data(repeating: 0x5a, count: 8192).write(to: URL(fileURLWithPath: setup.stateDir + "/" + SmarticoStore.fileName + suffix))
        }
        let restarted = try await setup.start()
        defer { restarted.close() }
        let afterDamage = try await RawEventClient.connect(path: setup.socketPath)
        defer { afterDamage.close() }
        _ = try await afterDamage.ok("subscribe", ["since": 0])
        #expect(await afterDamage.event(where: Self.isData("code", "store_damaged")) != nil, "log:\n\(setup.log)")

        // Compare with the reference.
        let captured = Self.examples(from: app.eventLines + late.eventLines + afterDamage.eventLines)
        if let out = ProcessInfo.processInfo.environment["SMARTICO_WRITE_EVENT_EXAMPLES"], !out.isEmpty {
            let text = captured.keys.sorted().map { "<!-- event-example: \($0) -->\n```json\n\(captured[$0]!)\n```\n" }.joined(separator: "\n")
            try Data(text.utf8).write(to: URL(fileURLWithPath: out))
        }
        let markdown = try String(contentsOfFile: Self.docPath, encoding: .utf8)
        let (documented, problems) = Self.documentedExamples(markdown)
        #expect(problems.isEmpty, "\(problems)")
        let missing = Set(captured.keys).subtracting(documented.keys).sorted()
        let unproven = Set(documented.keys).subtracting(captured.keys).sorted()
        #expect(missing.isEmpty, "emitted in this run but without an example in docs/socket-api.md: \(missing)")
        #expect(unproven.isEmpty, "documented but not emitted in this run: \(unproven)")
        let documentedNames = Set(documented.keys.map { String($0.split(separator: "/")[0]) })
        #expect(SocketRequestParser.eventNames.subtracting(documentedNames).isEmpty,
                "event names without an example: \(SocketRequestParser.eventNames.subtracting(documentedNames).sorted())")
        for key in Set(captured.keys).intersection(documented.keys).sorted() {
            let real = try #require((try? JSONValue(parsing: captured[key]!))?.objectValue)
            guard let doc = (try? JSONValue(parsing: documented[key]!))?.objectValue else {
                Issue.record("the example of \(key) is not a JSON object: \(documented[key]!)")
                continue
            }
            #expect(doc["event"] == real["event"], "\(key): event \(doc["event"].map { "\($0)" } ?? "none") in the docs")
            #expect(Set(doc.keys) == Set(real.keys), "\(key): envelope \(doc.keys.sorted()) in the docs, \(real.keys.sorted()) emitted")
            let (d, r) = (Self.shape(doc["data"] ?? .null), Self.shape(real["data"] ?? .null))
            #expect(d == r, "\(key): data keys only in the docs \(d.subtracting(r).sorted()), only emitted \(r.subtracting(d).sorted()); emitted: \(captured[key]!.prefix(600))")
        }
        await setup.kill9()
        _ = await sim.stop()
    }
}
