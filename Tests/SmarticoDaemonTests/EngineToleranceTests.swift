import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing

/// Issue 41, against the built `smarticod` and `smartico-sim`: what the official SDK tolerates in
/// the server's messages the daemon tolerates too, and what the SDK drops unread is made visible.
@Suite("Engine: server tolerance (issue 41)")
struct EngineToleranceTests {
    /// A `cid` sent as a decimal string is read as the number (the SDK's `int`), so a 110 with
    /// `"cid":"110"` is an `engagement`; a `cid` that is no number is a `message` with its
    /// problem. Neither ends the connection.
    @Test func cidAsStringIsReadAsTheNumberAndNothingReconnects() async throws {
        let (setup, sim, client) = try await startAgainstSim(ready: true, inProcess: true)
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe")
        let before = try #require(try await client.status()["counters"]?["reconnects"]?.int64Value)

        _ = try await sim.control(["op": "emit", "user": "alice", "message": [
            "cid": "110", "engagement_uid": "string-cid-1", "activityType": 30, "engagement_id": 5,
        ]])
        let engagement = await client.nextEvent { $0["event"] == "engagement" || $0["event"] == "message" }
        #expect(engagement?["event"] == "engagement", "\(engagement.map { String(decoding: $0.serialized(), as: UTF8.self) } ?? "none"); log:\n\(setup.log)")
        // Forwarded as received: the page gets the server's message unchanged.
        #expect(engagement?["data"]?["message"]?["engagement_uid"] == "string-cid-1", "\(String(describing: engagement))")
        #expect(engagement?["data"]?["message"]?["cid"] == "110")

        _ = try await sim.control(["op": "emit", "user": "alice", "message": ["cid": "abc", "x": 1]])
        let message = await client.nextEvent { $0["event"] == "message" }
        #expect(message?["data"]?["message"]?["cid"] == "abc", "\(String(describing: message))")
        let problem = message?["data"]?["problem"]?.stringValue ?? ""
        #expect(problem.contains(#""cid""#) && problem.contains("abc"), "\(problem)")

        try await Task.sleep(for: .milliseconds(300))
        let s = try await client.status()
        #expect(s["state"] == "ready")
        #expect(s["counters"]?["reconnects"]?.int64Value == before, "no reconnect over a string cid: \(s)")
        let clients = try await sim.control(["op": "clients"])["clients"]?.arrayValue ?? []
        #expect(clients.count == 1, "one connection all along: \(clients)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// The SDK merges a `props` object from any server message: so does the daemon, with a
    /// `props` event and the props in `status`.
    @Test func propsFromA504AreMerged() async throws {
        let (setup, sim, client) = try await startAgainstSim(ready: true, inProcess: true)
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe")
        let earlier = try await client.status()["user"]?["props"]?.objectValue ?? [:]
        #expect(!earlier.isEmpty, "IDENTIFY's answer carries props")

        _ = try await sim.control(["op": "emit", "user": "alice", "message": [
            "cid": 504, "props": ["ach_points_balance": 4242, "issue41_marker": "from-504"],
        ]])
        let props = await client.nextEvent { $0["event"] == "props" && $0["data"]?["issue41_marker"] != nil }
        #expect(props?["data"]?["issue41_marker"] == "from-504", "log:\n\(setup.log)")
        #expect(props?["data"]?["ach_points_balance"] == 4242)
        // Merged, not replaced: the earlier props stay.
        for key in earlier.keys where key != "ach_points_balance" {
            #expect(props?["data"]?[key] == earlier[key], "\(key) kept")
        }
        let s = try await client.status()
        #expect(s["user"]?["props"]?["issue41_marker"] == "from-504", "\(s)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// A 2003 with `errCode` ≠ 0 (the server refused the push token) is an `error` event
    /// `push_token_refused` with the server's code and message, `status.last_error`, and a line
    /// at warning.
    @Test func refusedPushTokenIsAnErrorEventAndTheLastError() async throws {
        let (setup, sim, client) = try await startAgainstSim(ready: true, inProcess: true) { setup, sim in
            _ = try await sim.control(["op": "fault", "kind": "answer_fields", "cid": 2003,
                                       "fields": ["errCode": 4711, "errMsg": "token refused by test"]])
            try setup.writeConfig(url: sim.serverURL, logLevel: "warning")
        }
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe")

        _ = try await client.ok("push_token", ["token": "tok-refused-41", "platform": 7, "status": 0])
        let error = await client.nextEvent { $0["event"] == "error" }
        #expect(error?["data"]?["code"] == "push_token_refused", "\(String(describing: error)); log:\n\(setup.log)")
        #expect(error?["data"]?["errCode"] == 4711)
        #expect(error?["data"]?["errMsg"] == "token refused by test")
        let s = try await client.status()
        #expect(s["last_error"]?["code"] == "push_token_refused", "\(s)")
        #expect(s["last_error"]?["message"]?.stringValue?.contains("4711") == true, "\(s)")
        let lines = setup.log.split(separator: "\n").filter { $0.contains("push_token_refused") }
        #expect(!lines.isEmpty && lines.allSatisfy { $0.contains("warning") }, "log:\n\(setup.log)")
        #expect(!setup.log.contains("tok-refused-41"), "the token stays out of the log")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }
}
