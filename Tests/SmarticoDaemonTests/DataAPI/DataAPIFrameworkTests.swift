import Foundation
import SmarticoProtocol
import SmarticoSocketAPI
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

/// The `api` op itself (docs/api.md): its parsing, and what every call shares against the built
/// daemon and simulator: `not_ready` while anonymous, `server_error`, timeouts, waiting for the
/// session while offline, `raw`, and lenient reading of answers with extra and missing fields.
/// (The role check is SocketAPIPermissionTests' `dataAPICallsTakeTheirCallsRole`.)
@Suite("Data API: the op", .awaitsCleanup)
struct DataAPIFrameworkTests {
    /// Read calls without required arguments that send one request: the ones these tests make.
    static var simpleReads: [DataAPICallSpec] {
        DataAPICatalog.calls.filter { $0.role == .read && !$0.args.contains(where: \.required) && $0.cids.count == 1 && $0.needsUser }
    }

    static func parse(_ line: String) -> Result<SocketRequest, SocketAPIError> { SocketRequestParser.parse(line).request }

    static func failure(_ line: String) -> String {
        if case .failure(let e) = parse(line) { return "\(e.code.rawValue): \(e.message)" }
        return "parsed"
    }

    // MARK: Parsing

    @Test func theCatalogIsWellFormedAndEveryCallHasAnImplementation() throws {
        let names = DataAPICatalog.calls.map(\.name)
        #expect(Set(names).count == names.count, "duplicate call names")
        for spec in DataAPICatalog.calls {
            #expect(spec.name.wholeMatch(of: /[a-z_]+\.[a-z_]+/) != nil, "\(spec.name) is not area.verb")
            #expect(!spec.summary.isEmpty && !spec.result.isEmpty && !spec.sdkMethod.isEmpty, "\(spec.name)")
            #expect(Set(spec.args.map(\.name)).count == spec.args.count, "\(spec.name): duplicate arguments")
            for arg in spec.args { #expect(arg.name.wholeMatch(of: /[a-z_]+/) != nil, "\(spec.name).\(arg.name)") }
        }
        #expect(Set(DataAPIImplementations.all.keys) == Set(names), "implementations without a spec or specs without one")
        #expect(!Self.simpleReads.isEmpty)
    }

    @Test func argumentsAreCheckedAgainstTheCallBeforeAnythingIsSent() throws {
        let unknown = Self.failure(#"{"op":"api","call":"missions.lst"}"#)
        #expect(unknown.hasPrefix("bad_request: unknown call \"missions.lst\"") && unknown.contains("smarticoctl api list"), "\(unknown)")
        #expect(Self.failure(#"{"op":"api"}"#).hasPrefix("bad_request: field \"call\" is required"))
        #expect(Self.failure(#"{"op":"api","call":7}"#).contains("must be a string"))
        let spec = try #require(DataAPICatalog.calls.first { c in c.args.contains { $0.type == .integer } })
        let intArg = try #require(spec.args.first { $0.type == .integer })
        let wrong = Self.failure(#"{"op":"api","call":"\#(spec.name)","args":{"\#(intArg.name)":"seven"}}"#)
        #expect(wrong == "bad_request: field \"args.\(intArg.name)\" of call \"\(spec.name)\" must be an integer, got string", "\(wrong)")
        let extra = Self.failure(#"{"op":"api","call":"\#(spec.name)","args":{"nonsense":1}}"#)
        #expect(extra.hasPrefix("bad_request: field \"args.nonsense\" is not an argument of call \"\(spec.name)\""), "\(extra)")
        if let required = spec.args.first(where: \.required) {
            let missing = Self.failure(#"{"op":"api","call":"\#(spec.name)","args":{}}"#)
            #expect(missing.hasPrefix("bad_request: field \"args.\(required.name)\" is required by call \"\(spec.name)\""), "\(missing)")
        }
        let read = try #require(Self.simpleReads.first)
        #expect(Self.failure(#"{"op":"api","call":"\#(read.name)","raw":"yes"}"#).contains("\"raw\""))
        #expect(Self.failure(#"{"op":"api","call":"\#(read.name)","timeout_ms":0}"#).contains("timeout_ms"))
        #expect(Self.failure(#"{"op":"api","call":"\#(read.name)","args":[]}"#).contains("must be an object"))
        guard case .success(.api(let r)) = Self.parse(#"{"op":"api","call":"\#(read.name)","raw":true,"timeout_ms":250}"#) else {
            Issue.record("a valid api op did not parse")
            return
        }
        #expect(r.call == read.name && r.raw && r.timeoutMs == 250)
    }

    @Test func theCacheIsBoundedByEntriesAndBytes() {
        let cache = DataAPICache(capacity: 3, maxBytes: 100)
        let body: JSONValue = .string(String(repeating: "x", count: 38))  // 40 bytes of JSON, + the key
        cache["a"] = body
        cache["b"] = body
        #expect(cache.usage.entries == 2 && cache["a"] == body)
        cache["c"] = body  // 3 × 41 > 100: the oldest goes
        #expect(cache["a"] == nil && cache["b"] == body && cache["c"] == body && cache.usage.bytes <= 100)
        cache["huge"] = .string(String(repeating: "y", count: 200))  // larger than the budget: not kept, nothing evicted
        #expect(cache["huge"] == nil && cache.usage.entries == 2)
        for i in 0..<10 { cache["k\(i)"] = 1 }
        #expect(cache.usage.entries == 3 && cache["k9"] == 1 && cache["k6"] == nil)
        cache["k9"] = nil
        #expect(cache.usage.entries == 2)
    }

    /// Issue 41: the SDK's lenient reading of a text field and of an integer list's elements.
    @Test func aBooleanInTextIsItsTextAndJunkInAnIntegerListIsZero() throws {
        let o = try #require(try JSONValue(parsing: Array(#"{"t":true,"f":false,"n":5,"s":"x","list":[1,"x",2.9,null,"7",true,{"a":1},3]}"#.utf8)).objectValue)
        #expect(o.string("t") == "true" && o.string("f") == "false" && o.string("n") == "5" && o.string("s") == "x")
        #expect(o.string("absent") == nil)
        // Every element keeps its position: the 3 is still the 8th.
        #expect(o.ints("list") == [1, 0, 2, 0, 7, 0, 0, 3])
        #expect(o.ints("absent") == nil)
    }

    // MARK: Against the daemon

    @Test func anonymousCallsAnswerNotReadyAtOnceAndSendNothing() async throws {
        let f = try await DataAPIFixture.start(user: nil)
        defer { cleanUpAfterTest { await f.stop() } }
        let cids = Set(DataAPICatalog.calls.flatMap(\.cids)).map(Int64.init)
        for spec in DataAPICatalog.calls where spec.needsUser {
            let started = ContinuousClock.now
            let e = try await f.failure(spec.name, spec.placeholderArgs)
            #expect(e["code"] == "not_ready", "\(spec.name): \(e)")
            let message = e["message"]?.stringValue ?? ""
            #expect(message.contains("identif"), "\(e)")
            #expect(ContinuousClock.now - started < .seconds(2), "\(spec.name) waited")
        }
        #expect(try await f.received(cids: cids).isEmpty)
    }

    @Test func aServerErrCodeIsServerErrorWithItsCodeAndASilentServerATimeout() async throws {
        let f = try await DataAPIFixture.start()
        defer { cleanUpAfterTest { await f.stop() } }
        let spec = try #require(Self.simpleReads.first)
        try await f.dataFault(cid: Int64(spec.cids[0]), "error", ["errCode": 30002, "errMsg": "not enough points"])
        let e = try await f.failure(spec.name)
        #expect(e["code"] == "server_error" && e["errCode"] == 30002 && e["errMsg"] == "not enough points", "\(e)")

        try await f.dataFault(cid: Int64(spec.cids[0]), "silent")
        let started = ContinuousClock.now
        let t = try await f.failure(spec.name, timeoutMs: 400)
        let waited = ContinuousClock.now - started
        #expect(t["code"] == "timeout", "\(t)")
        #expect(waited >= .milliseconds(350) && waited < .seconds(5), "\(waited)")
        // The next call is answered again.
        _ = try await f.call(spec.name)
    }

    @Test func aReadWhileOfflineWaitsForTheSessionWithinItsTimeout() async throws {
        let f = try await DataAPIFixture.start()
        defer { cleanUpAfterTest { await f.stop() } }
        let spec = try #require(Self.simpleReads.first)
        let port = try await Self.stopTheSimulator(f)
        // Answered after the simulator is back (same port), not refused while offline.
        async let answer = f.client.request("api", DataAPIFixture.op(spec.name, [:], raw: false, timeoutMs: 15_000), timeoutMs: 30_000)
        try await Task.sleep(for: .milliseconds(500))
        let sim = try await SimProcess.start(dir: f.setup.dir, port: port)
        defer { cleanUpAfterTest { _ = await sim.stop() } }
        let response = try await answer
        #expect(response["ok"] == true, "\(response)")
        #expect(try await sim.received(cids: [Int64(spec.cids[0])]).count == 1)
    }

    /// A call made for alice that is still waiting when the daemon switches to bob answers
    /// `not_ready` naming alice, and nothing of it is sent on bob's session.
    @Test func aCallNeverAnswersForAnotherUserThanItWasMadeFor() async throws {
        let f = try await DataAPIFixture.start()
        defer { cleanUpAfterTest { await f.stop() } }
        let spec = try #require(Self.simpleReads.first)
        let port = try await Self.stopTheSimulator(f)
        let other = try await DaemonClient.connect(path: f.setup.socketPath)
        defer { other.close() }
        async let answer = other.request("api", DataAPIFixture.op(spec.name, [:], raw: false, timeoutMs: 20_000), timeoutMs: 30_000)
        try await Task.sleep(for: .milliseconds(300))
        // Offline, identify waits for the server: its answer is not needed here.
        _ = try? await f.client.request("identify", ["ext_user_id": "bob", "hash": "h"], timeoutMs: 1_000)
        let sim = try await SimProcess.start(dir: f.setup.dir, port: port)
        defer { cleanUpAfterTest { _ = await sim.stop() } }
        let response = try await answer
        #expect(response["error"]?["code"] == "not_ready", "\(response)")
        let message = response["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("alice"), "\(response)")
        let bobReady = try await eventually(timeout: .seconds(10)) {
            try await f.client.ok("status")["user"]?["ext_user_id"] == "bob"
        }
        #expect(bobReady)
        #expect(try await sim.received(cids: [Int64(spec.cids[0])]).isEmpty)
    }

    /// Every simple read: `raw` is the server's message; extra fields added to that same answer change
    /// nothing in the public shape; with the items reduced to their ids every field is still there
    /// (null when unknown).
    @Test func answersWithExtraAndMissingFieldsAreStillDecoded() async throws {
        let f = try await DataAPIFixture.start()
        defer { cleanUpAfterTest { await f.stop() } }
        for spec in Self.simpleReads {
            let cid = Int64(spec.cids[0])
            let raw = try #require(try await f.call(spec.name, raw: true).objectValue, "\(spec.name) raw")
            #expect(raw["cid"]?.int64Value != nil && raw["errCode"] != nil, "\(spec.name): raw is the server's message: \(raw)")
            // The public shape of exactly this answer (the simulator's data moves with its clock:
            // dates, growing jackpots), to compare the altered answers with.
            var same = raw
            same.removeValue(forKey: "cid")
            try await f.dataFault(cid: cid, "replace", ["body": .object(same)])
            let normal = try await f.call(spec.name)

            var body = Self.withExtraFields(raw)
            body.removeValue(forKey: "cid")
            try await f.dataFault(cid: cid, "replace", ["body": .object(body)])
            let withExtras = try await f.call(spec.name)
            // The public shape's own fields are the same; fields it passes through untyped (as the
            // SDK does: meta maps, custom data) may carry the additions.
            for (a, b) in zip(Self.items(withExtras), Self.items(normal)) {
                #expect(Set(a.keys) == Set(b.keys), "\(spec.name): an added field changed the shape: \(a)")
            }
            let difference = Self.firstDifference(Self.shape(withExtras), Self.shape(normal))
            #expect(difference == nil, "\(spec.name): extra fields changed the result at \(difference ?? "")")

            var reduced = Self.reducedToIDs(raw)
            reduced.removeValue(forKey: "cid")
            try await f.dataFault(cid: cid, "replace", ["body": .object(reduced)])
            let sparse = try await f.call(spec.name)
            for (a, b) in zip(Self.items(sparse), Self.items(normal)) {
                #expect(Set(a.keys) == Set(b.keys), "\(spec.name): fields missing from the answer must be null, not absent: \(a)")
            }
        }
    }

    // MARK: Helpers

    /// Stops the simulator and waits until the daemon knows it is offline; returns the port to
    /// start it again on.
    static func stopTheSimulator(_ f: DataAPIFixture) async throws -> Int {
        let port = f.sim.port
        _ = await f.sim.stop()
        let offline = try await eventually(timeout: .seconds(10)) { try await f.client.ok("status")["state"] != "ready" }
        try #require(offline)
        return port
    }

    /// `value` with `"zz_extra": …` added to every object (the server adding fields).
    static func withExtraFields(_ o: JSONObject) -> JSONObject {
        var out = JSONObject()
        for (k, v) in o { out[k] = withExtraFields(v) }
        out["zz_extra"] = ["nested": [1, "two"]]
        return out
    }

    static func withExtraFields(_ v: JSONValue) -> JSONValue {
        switch v {
        case .object(let o): .object(withExtraFields(o))
        case .array(let a): .array(a.map(withExtraFields))
        default: v
        }
    }

    /// Objects inside arrays keep only their members whose name has "id" or "type" (what items are
    /// told apart by); the rest of the answer stays.
    static func reducedToIDs(_ o: JSONObject) -> JSONObject {
        var out = JSONObject()
        for (k, v) in o {
            if case .array(let a) = v {
                out[k] = .array(a.map { e in
                    guard case .object(let item) = e else { return e }
                    var kept = JSONObject()
                    for (ik, iv) in item where ik.contains("id") || ik.contains("type") { kept[ik] = iv }
                    return .object(kept)
                })
            } else {
                out[k] = v
            }
        }
        return out
    }

    /// The path of the first place where `a` and `b` differ, with both values there; nil when equal.
    static func firstDifference(_ a: JSONValue, _ b: JSONValue, path: String = "$") -> String? {
        switch (a, b) {
        case (.object(let x), .object(let y)):
            if Set(x.keys) != Set(y.keys) { return "\(path): members \(x.keys.sorted()) vs \(y.keys.sorted())" }
            for (k, v) in x { if let d = firstDifference(v, y[k] ?? .null, path: path + "." + k) { return d } }
            return nil
        case (.array(let x), .array(let y)):
            if x.count != y.count { return "\(path): \(x.count) elements vs \(y.count)" }
            for (i, (v, w)) in zip(x, y).enumerated() { if let d = firstDifference(v, w, path: path + "[\(i)]") { return d } }
            return nil
        default:
            return a == b ? nil : "\(path): \(String(decoding: a.serialized(), as: UTF8.self).prefix(200)) vs \(String(decoding: b.serialized(), as: UTF8.self).prefix(200))"
        }
    }

    static func items(_ v: JSONValue) -> [JSONObject] {
        if let a = v.arrayValue { return a.compactMap(\.objectValue) }
        return v.objectValue.map { [$0] } ?? []
    }

    /// The result with numbers that are times (names with ts, dt, date, time, ms) blanked, as two
    /// reads a few ms apart may compute them from different clocks, and without the `zz_extra`
    /// members that untyped pass-through fields carry.
    static func shape(_ v: JSONValue, key: String = "") -> JSONValue {
        switch v {
        case .object(let o):
            var out = JSONObject()
            for (k, x) in o where k != "zz_extra" { out[k] = shape(x, key: k) }
            return .object(out)
        case .array(let a): return .array(a.map { shape($0, key: key) })
        case .number where ["ts", "dt", "date", "time", "ms"].contains(where: key.lowercased().contains): return "time"
        default: return v
        }
    }
}

/// Issue 41: one rule for the host of avatar images, wherever an avatar URL is handed out.
@Suite struct ImageDomainTests {
    @Test func initsDomainElseTheLabelEnvironmentsHost() {
        #expect(ImageDomain.resolve(dynamic: "https://img3.example/", label: "img2.smr.vc") == "https://img3.example")
        #expect(ImageDomain.resolve(dynamic: "img3.example", label: "img2.smr.vc") == "https://img3.example")
        #expect(ImageDomain.resolve(dynamic: nil, label: "img2.smr.vc") == "https://img2.smr.vc", "the SDK's rule: the label's environment")
        #expect(ImageDomain.resolve(dynamic: "", label: "img.smr.vc") == "https://img.smr.vc")
        #expect(ImageDomain.avatarURL("av 1", domain: "https://img2.smr.vc") == "https://img2.smr.vc/avatar/av%201")
        #expect(ImageDomain.avatarURL("https://cdn.example/a.png", domain: "https://img2.smr.vc") == "https://cdn.example/a.png")
        #expect(ImageDomain.avatarURL("..", domain: "https://img2.smr.vc") == nil)
    }
}
