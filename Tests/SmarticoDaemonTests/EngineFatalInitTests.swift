import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The built `smarticod` against the built `smartico-sim` refusing INIT with a fatal errCode
/// (100001, a wrong label key): the long retry, a `warning` log line naming what to check,
/// `status.last_error`, and a SIGHUP with changed settings retrying at once.
@Suite("Engine: fatal INIT errCode")
struct EngineFatalInitTests {
    @Test func fatalInitCodeWaitsLongLogsAWarningAndSIGHUPRetriesAtOnce() async throws {
        let (setup, sim, client) = try await startAgainstSim { setup, sim in
            _ = try await sim.control(["op": "fault", "kind": "reject_init", "errCode": 100_001, "errMsg": "unknown label"])
            // At warning: the info lines are not written, the failure's line is.
            try setup.writeConfig(url: sim.serverURL, logLevel: "warning")
        }
        defer { client.close(); setup.remove() }

        var status: JSONValue = .null
        let backingOff = try await eventually {
            status = try await client.ok("status")
            return status["state"] == .string("backoff") && status["last_error"]?["code"] == .string("init_rejected")
        }
        #expect(backingOff, "status \(status); log:\n\(setup.log)")
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let retryAt = try #require(status["backoff"]?["retry_at_ms"]?.int64Value, "\(status)")
        // Ten minutes, not the configured 50–300 ms of the ordinary backoff.
        #expect(retryAt - now > 590_000 && retryAt - now <= 600_000, "retry in \(retryAt - now) ms")
        #expect(status["last_error"]?["message"]?.stringValue?.contains("errCode 100001") == true)
        let lines = setup.log.split(separator: "\n").filter { $0.contains("init_rejected") }
        #expect(!lines.isEmpty && lines.allSatisfy { $0.contains("warning") }, "log:\n\(setup.log)")
        #expect(lines.contains { $0.contains("100001") && $0.contains("server.label_key") }, "log:\n\(setup.log)")
        #expect(!setup.log.contains("6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f")) // the label key stays masked
        // One INIT, no hammering.
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await sim.received(cids: [3]).count == 1)

        // Fixed: the server accepts again, and a reload with changed settings connects at once.
        _ = try await sim.control(["op": "fault", "kind": "clear"])
        try setup.writeConfig(url: sim.serverURL, client: ["agent": "smarticod-fixed"], logLevel: "warning")
        setup.daemon?.signal(SIGHUP)
        let ready = try await eventually { try await client.ok("status")["state"] == .string("ready") }
        #expect(ready, "log:\n\(setup.log)")
        let after = try await client.ok("status")
        #expect(after["last_error"]?["code"] == .string("init_rejected")) // kept after recovery
        #expect(try await sim.received(cids: [3]).count == 2)
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }
}
