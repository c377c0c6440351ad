import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon
#if canImport(Glibc)
import Glibc
#endif

/// `push_report` and push tokens over Smartico's public HTTP API (002 §4, §5): the built
/// `smarticod` against the built `smartico-sim`'s HTTP port, its faults set through the control
/// socket (`http_fault`).
@Suite("Engine: HTTP queue")
struct EngineHTTPQueueTests {
    static let labelKey = "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2"
    /// Short backoff: the retries of a test take milliseconds.
    static let fastHTTP: JSONObject = ["retry_initial_ms": 20, "retry_max_ms": 200, "connect_timeout_s": 2, "response_timeout_s": 2]

    /// `http` settings: quick retries and timeouts, the public API at the simulator's HTTP port.
    static func fastHTTP(at sim: SimProcess) -> JSONObject {
        fastHTTP.merging(["public_url": .string(sim.httpURL + "/services/public")])
    }

    // MARK: The exact requests

    @Test func eachKindsQueryAndThePushTokenPostAsSentAfterTheUserIsKnown() async throws {
        let (setup, sim, client) = try await startAgainstSim { setup, sim in
            // Anonymous at start: the reports and the token wait for a user.
            try setup.writeConfig(url: sim.serverURL, user: nil, hash: nil, server: ["brand_key": "brand-7"],
                                  http: Self.fastHTTP(at: sim),
                                  push: ["register_via": "http", "token": "cfg-token", "platform": 6, "status": 0])
        }
        defer { client.close(); setup.remove() }

        let before = Int64(Date().timeIntervalSince1970 * 1000)
        let token = try await client.ok("push_token", ["token": "tok-1", "platform": 7, "status": 0, "app_package_id": "com.example.app"])
        #expect(token["queued"] == true && token["via"] == "http" && token["waiting_for_user"] == true, "\(token)")
        var uuids: [String] = []
        let reports: [(kind: String, action: String?)] = [("delivered", nil), ("impression", nil), ("action", "dp:cashier"), ("failed", nil)]
        for (i, r) in reports.enumerated() {
            var args: JSONObject = ["kind": .string(r.kind), "engagement_uid": .string("eng-\(i)"), "message_id": .string("77\(i)")]
            if let a = r.action { args["action"] = .string(a) }
            let answer = try await client.ok("push_report", args)
            #expect(answer["queued"] == true && answer["waiting_for_user"] == true, "\(answer)")
            uuids.append(try #require(answer["uuid"]?.stringValue))
        }
        let after = Int64(Date().timeIntervalSince1970 * 1000)
        // Nothing goes while no user is known; status shows them waiting.
        try await Task.sleep(for: .milliseconds(1200))
        #expect(try await httpEntries(sim).isEmpty)
        let waiting = try await client.ok("status")
        #expect(waiting["http_queue"]?["depth"] == 5, "\(waiting)")
        #expect((waiting["http_queue"]?["oldest_ms"]?.int64Value ?? 0) >= before, "\(waiting)")

        _ = try await client.ok("identify", ["ext_user_id": "alice", "hash": "h"])
        var entries: [JSONObject] = []
        let all = try await eventually(timeout: .seconds(15)) {
            entries = try await httpEntries(sim)
            return entries.count >= 6
        }
        #expect(all, "received \(entries); log:\n\(setup.log)")
        #expect(entries.count == 6)
        guard entries.count == 6 else { return }
        // user.push.token from the file, registered when alice became the user (after what waited).
        #expect(canonical(entries[5]["message"]) == canonical(.object([
            "brand_key": "brand-7", "api_key": .string(Self.labelKey), "ext_user_id": "alice",
            "pushNotificationUserStatus": 0, "platform": 6, "cid": 1003, "token": "cfg-token",
        ])), "\(entries[5])")

        // The POST of 002 §4, for the user known now.
        #expect(entries[0]["http"]?["method"] == "POST")
        #expect(canonical(entries[0]["message"]) == canonical(.object([
            "app_package_id": "com.example.app", "brand_key": "brand-7", "api_key": .string(Self.labelKey), "ext_user_id": "alice",
            "pushNotificationUserStatus": 0, "platform": 7, "cid": 1003, "token": "tok-1",
        ])), "\(entries[0])")
        // The GETs of 002 §5, in order, with the SDK's field shapes.
        for (i, r) in reports.enumerated() {
            let e = entries[i + 1]
            #expect(e["error"] == nil, "\(e)")
            #expect(canonical(e["http"]) == canonical(.object([
                "method": "GET", "path": "/services/public", "api_key": .string(Self.labelKey), "brand_key": "brand-7", "version": "1.2.25",
            ])), "\(e)")
            let event = try #require(e["message"]?.objectValue)
            let ts = event["ts"]?.int64Value ?? 0
            #expect(ts >= before && ts <= after, "ts \(ts) not in [\(before), \(after)]")
            var payload: JSONObject = ["engagement_uid": .string("eng-\(i)"), "message_id": .string("77\(i)"), "activity_type": 40]
            if let a = r.action { payload["action"] = .string(a) }
            #expect(canonical(.object(event)) == canonical(.object([
                "uuid": .string(uuids[i]), "ts": .number(ts), "event_type": .string("engagement_" + r.kind), "user_ext_id": "alice",
                "payload": .object(payload),
            ])), "\(event)")
        }
        let done = try await client.ok("status")
        #expect(done["http_queue"]?["depth"] == 0 && done["http_queue"]?["delivered"] == 6, "\(done)")
        // Once per user and token: a restart does not register it again.
        expectExitedZero(await setup.stop())
        let again = try await setup.start()
        defer { again.close() }
        _ = try await again.ok("identify", ["ext_user_id": "alice", "hash": "h"])
        try await Task.sleep(for: .milliseconds(800))
        #expect(try await httpEntries(sim).count == 6)
        // The metrics op carries the queue's depth.
        let metrics = try await again.ok("metrics")["text"]?.stringValue ?? ""
        #expect(metrics.contains("\nsmarticod_http_queue_calls 0\n"), "\(metrics)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    // MARK: Retries

    @Test func retriesOn503AndARefusedConnectionButNotOn400() async throws {
        let (setup, sim, client) = try await startAgainstSim { setup, sim in
            try setup.writeConfig(url: sim.serverURL, http: Self.fastHTTP(at: sim))
        }
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe", ["types": ["error"]])

        // 503 three times, then 200: four requests for the same report, one delivery.
        _ = try await sim.control(["op": "http_fault", "answer": "status", "status": 503, "count": 3])
        let first = try #require(try await client.ok("push_report", ["kind": "delivered", "engagement_uid": "e-503"])["uuid"]?.stringValue)
        var attempts: [JSONObject] = []
        let retried = try await eventually {
            attempts = try await httpEntries(sim).filter { $0["message"]?["uuid"]?.stringValue == first }
            return attempts.contains { $0["error"] == nil }
        }
        #expect(retried, "\(attempts); log:\n\(setup.log)")
        #expect(attempts.map { $0["error"]?.stringValue } == ["http_fault status", "http_fault status", "http_fault status", nil], "\(attempts)")
        var status = try await client.ok("status")
        #expect(status["http_queue"]?["depth"] == 0, "\(status)")
        #expect(status["http_queue"]?["last_error"]?["message"]?.stringValue?.contains("HTTP 503") == true, "\(status)")

        // A refused connection: retried until the port listens again, then delivered once.
        _ = try await sim.control(["op": "http_fault", "answer": "refuse"])
        let second = try #require(try await client.ok("push_report", ["kind": "impression", "engagement_uid": "e-refused"])["uuid"]?.stringValue)
        let failing = try await eventually {
            status = try await client.ok("status")
            return (status["http_queue"]?["failed_attempts"]?.int64Value ?? 0) >= 5
                && status["http_queue"]?["last_error"]?["message"]?.stringValue?.contains("refused") == true
        }
        #expect(failing, "\(status)")
        #expect(status["http_queue"]?["depth"] == 1)
        _ = try await sim.control(["op": "http_fault", "answer": "clear"])
        let delivered = try await eventually {
            try await httpEntries(sim).contains { $0["message"]?["uuid"]?.stringValue == second }
        }
        #expect(delivered, "log:\n\(setup.log)")
        #expect(try await httpEntries(sim).filter { $0["message"]?["uuid"]?.stringValue == second }.count == 1)

        // A slow answer (longer than http.response_timeout_s) is a timeout, retried; the socket
        // API and the session do not wait for it.
        _ = try await sim.control(["op": "http_fault", "answer": "slow", "delay_ms": 3000, "count": 1])
        let third = try #require(try await client.ok("push_report", ["kind": "delivered", "engagement_uid": "e-slow"])["uuid"]?.stringValue)
        try await Task.sleep(for: .milliseconds(300))
        let clock = ContinuousClock()
        let started = clock.now
        let sent = try await client.ok("event", ["event_type": "while_http_is_slow"])
        #expect(clock.now - started < .milliseconds(1000), "the event op waited \(clock.now - started)")
        #expect(sent["queued"] != nil || sent != .null)
        let slowDelivered = try await eventually {
            try await httpEntries(sim).contains { $0["message"]?["uuid"]?.stringValue == third }
        }
        #expect(slowDelivered, "log:\n\(setup.log)")
        status = try await client.ok("status")
        #expect(status["state"] == "ready", "\(status)")
        #expect(status["http_queue"]?["last_error"]?["message"]?.stringValue?.contains("no complete HTTP response within the response timeout of 2s") == true,
                "\(status)")

        // Retries, backoff timers and timeouts ran on the daemon's own threads (no libdispatch).
        let threads = try EngineThreadsTests.threadNames(of: try #require(setup.daemon?.pid))
        #expect(threads.allSatisfy { EngineThreadsTests.ownThreads.contains($0) }, "\(threads)")

        // 400: dropped at once, with an error event carrying the status and the body's start.
        _ = try await sim.control(["op": "http_fault", "answer": "status", "status": 400, "count": 1])
        let fourth = try #require(try await client.ok("push_report", ["kind": "failed", "engagement_uid": "e-400"])["uuid"]?.stringValue)
        let event = await client.nextEvent { $0["data"]?["code"] == "push_report_dropped" }
        let data = try #require(event?["data"]?.objectValue, "no push_report_dropped event; log:\n\(setup.log)")
        #expect(data["status"] == 400 && data["uuid"] == .string(fourth), "\(data)")
        #expect(data["body"]?.stringValue?.contains("simulated fault: HTTP 400") == true, "\(data)")
        #expect(data["engagement_uid"] == "e-400" && data["event_type"] == "engagement_failed", "\(data)")
        try await Task.sleep(for: .milliseconds(800))
        #expect(try await httpEntries(sim).filter { $0["message"]?["uuid"]?.stringValue == fourth }.count == 1)
        status = try await client.ok("status")
        #expect(status["http_queue"]?["depth"] == 0 && status["http_queue"]?["dropped"] == 1, "\(status)")

        // A request hanging at shutdown does not hold up SIGTERM; the report stays stored.
        _ = try await sim.control(["op": "http_fault", "answer": "slow", "delay_ms": 20000])
        _ = try await client.ok("push_report", ["kind": "delivered", "engagement_uid": "e-at-shutdown"])
        try await Task.sleep(for: .milliseconds(300))
        let stopping = ContinuousClock.now
        expectExitedZero(await setup.stop())
        #expect(ContinuousClock.now - stopping < .seconds(5), "SIGTERM took \(ContinuousClock.now - stopping)")
        _ = await sim.stop()
    }

    // MARK: Durability

    @Test func aBacklogOf1000SurvivesKill9InOrderNoneTwice() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir)
        try setup.writeConfig(url: sim.serverURL, logLevel: "info",
                              http: Self.fastHTTP(at: sim))
        var client = try await setup.start()
        // The backlog builds up while the API refuses connections.
        _ = try await sim.control(["op": "http_fault", "answer": "refuse"])
        let count = 1000
        for i in 0..<count {
            _ = try await client.ok("push_report", ["kind": "delivered", "engagement_uid": .string(String(format: "e-%04d", i))])
        }
        #expect(try await client.ok("status")["http_queue"]?["depth"] == .number(Int64(count)))
        _ = try await sim.control(["op": "http_fault", "answer": "clear"])
        var delivered = 0
        let midway = try await eventually(timeout: .seconds(60)) {
            delivered = try await httpEntries(sim).count
            return delivered >= 200
        }
        #expect(midway, "delivered \(delivered); log:\n\(setup.log)")
        // The next answer hangs; the daemon is killed while it waits for it.
        _ = try await sim.control(["op": "http_fault", "answer": "slow", "delay_ms": 5000])
        try await Task.sleep(for: .milliseconds(300))
        client.close()
        await setup.kill9()
        _ = try await sim.control(["op": "http_fault", "answer": "clear"])
        let before = try await httpEntries(sim).count
        #expect(before < count, "all \(before) were delivered before the kill")

        client = try await setup.start()
        defer { client.close() }
        var entries: [JSONObject] = []
        let all = try await eventually(timeout: .seconds(90)) {
            entries = try await httpEntries(sim)
            return entries.count >= count
        }
        #expect(all, "\(entries.count) of \(count) delivered; log:\n\(setup.log)")
        try await Task.sleep(for: .milliseconds(500))
        entries = try await httpEntries(sim)
        let uids = entries.compactMap { $0["message"]?["payload"]?["engagement_uid"]?.stringValue }
        #expect(uids.count == count, "\(uids.count) deliveries for \(count) reports")
        #expect(Set(uids).count == uids.count, "a report was delivered twice")
        #expect(uids == (0..<count).map { String(format: "e-%04d", $0) }, "not in order")
        #expect(try await client.ok("status")["http_queue"]?["depth"] == 0)
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    // MARK: TLS

    @Test func httpsWithTheTestsCA() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let ca = try await EngineTLSFailureTests.selfSigned(dir: setup.dir, name: "ca")
        let sim = try await SimProcess.start(dir: setup.dir, extra: ["--tls-cert", ca.cert, "--tls-key", ca.key, "--http-tls"])
        #expect(sim.httpURL.hasPrefix("https://"), "\(sim.httpURL)")
        try setup.writeConfig(url: sim.serverURL, server: ["tls": ["ca_file": .string(ca.cert)]],
                              http: Self.fastHTTP(at: sim))
        let client = try await setup.start()
        defer { client.close() }
        let uuid = try #require(try await client.ok("push_report", ["kind": "impression", "engagement_uid": "e-tls", "message_id": "5"])["uuid"]?.stringValue)
        var entries: [JSONObject] = []
        let delivered = try await eventually {
            entries = try await httpEntries(sim)
            return entries.contains { $0["message"]?["uuid"]?.stringValue == uuid }
        }
        #expect(delivered, "\(entries); log:\n\(setup.log)")
        #expect(entries.count == 1)
        // smarticoctl push-report, for a named user.
        let ctl = try await runCtl(["push-report", "action", "--engagement-uid", "e-ctl", "--message-id", "9", "--action", "dp:ok",
                                    "--user", "bob", "--socket", setup.socketPath])
        #expect(ctl.status == 0 && ctl.stdout.contains("push report queued"), "\(ctl)")
        let byCtl = try await eventually {
            entries = try await httpEntries(sim)
            return entries.contains { $0["message"]?["payload"]?["engagement_uid"] == "e-ctl" }
        }
        #expect(byCtl, "\(entries)")
        // HTTPS requests and the queue's task ran on the daemon's own threads (no libdispatch).
        let threads = try EngineThreadsTests.threadNames(of: try #require(setup.daemon?.pid))
        #expect(threads.allSatisfy { EngineThreadsTests.ownThreads.contains($0) }, "\(threads)")
        let report = entries.first { $0["message"]?["payload"]?["engagement_uid"] == "e-ctl" }?["message"]
        #expect(report?["user_ext_id"] == "bob" && report?["event_type"] == "engagement_action"
                && report?["payload"]?["action"] == "dp:ok" && report?["payload"]?["message_id"] == "9", "\(String(describing: report))")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    // MARK: Malformed answers

    @Test(arguments: [
        ("garbage_status", "malformed HTTP start line"),
        ("long_body", "longer than it announced"),
        ("endless_chunked", "larger than the limit"),
        ("huge_header", "HTTP head larger than"),
    ])
    func aMalformedAnswerEndsTheRequestWithAClearErrorAndTheDaemonRuns(_ answer: String, _ expected: String) async throws {
        let (setup, sim, client) = try await startAgainstSim { setup, sim in
            try setup.writeConfig(url: sim.serverURL, http: Self.fastHTTP(at: sim))
        }
        defer { client.close(); setup.remove() }
        _ = try await sim.control(["op": "http_fault", "answer": .string(answer), "count": 1])
        let uuid = try #require(try await client.ok("push_report", ["kind": "delivered", "engagement_uid": "e-bad"])["uuid"]?.stringValue)
        // The bad answer is an error of that request (retried like a network error), then the
        // next attempt gets a good one.
        var status: JSONValue = .null
        let recovered = try await eventually(timeout: .seconds(20)) {
            status = try await client.ok("status")
            return status["http_queue"]?["depth"] == 0 && status["http_queue"]?["delivered"] == 1
        }
        #expect(recovered, "\(status); log:\n\(setup.log)")
        let message = status["http_queue"]?["last_error"]?["message"]?.stringValue ?? ""
        #expect(message.contains(expected) && message.contains(uuid), "last_error: \(message)")
        #expect(status["state"] == "ready", "\(status)")
        #expect(setup.log.contains(expected), "log:\n\(setup.log.suffix(2000))")
        let attempts = try await httpEntries(sim).filter { $0["message"]?["uuid"]?.stringValue == uuid }
        #expect(attempts.map { $0["error"]?.stringValue } == ["http_fault \(answer)", nil], "\(attempts)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    // MARK: Backoff

    @Test func backoffDoublesToTheMaximumWithTheUpperHalfJittered() {
        for attempt in [0, 1, 2, 5, 40, Int.max / 2] {
            let ceiling = min(300_000, 1000 << min(attempt, 20))
            for _ in 0..<50 {
                let d = HTTPReportQueue.backoffMs(attempt: attempt, initialMs: 1000, maxMs: 300_000)
                #expect(d >= Int64(ceiling / 2) && d <= Int64(ceiling), "attempt \(attempt): \(d)")
            }
        }
        // No overflow with large settings.
        let huge = HTTPReportQueue.backoffMs(attempt: 80, initialMs: Int.max / 4, maxMs: Int.max / 2)
        #expect(huge > 0)
    }

    // MARK: Helpers

    /// The public API calls the simulator recorded, oldest first.
    private func httpEntries(_ sim: SimProcess) async throws -> [JSONObject] {
        try await sim.receivedEntries().filter { $0["client"] == "http" }
    }
}

/// Compact JSON with every object's keys sorted: two values compare as JSON whatever their key order.
func canonical(_ value: JSONValue?) -> String {
    guard let value else { return "<absent>" }
    switch value {
    case .object(let o):
        let parts = o.map { (key: $0.key, value: $0.value) }.sorted { $0.key < $1.key }
            .map { String(decoding: JSONValue.string($0.key).serialized(), as: UTF8.self) + ":" + canonical($0.value) }
        return "{" + parts.joined(separator: ",") + "}"
    case .array(let a):
        return "[" + a.map { canonical($0) }.joined(separator: ",") + "]"
    default:
        return String(decoding: value.serialized(), as: UTF8.self)
    }
}

extension JSONObject {
    func merging(_ other: JSONObject) -> JSONObject {
        var out = self
        for (k, v) in other { out[k] = v }
        return out
    }
}
