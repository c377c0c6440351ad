import Foundation
import SmarticoProtocol
import SmarticoSocketAPI
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

/// The built `smarticod` against the built `smartico-sim`, identified as a user: what the data API
/// tests call (`api` op) and check.
final class DataAPIFixture: @unchecked Sendable {  // immutable after start
    let setup: DaemonSetup
    let sim: SimProcess
    let client: DaemonClient

    private init(setup: DaemonSetup, sim: SimProcess, client: DaemonClient) {
        self.setup = setup
        self.sim = sim
        self.client = client
    }

    /// Starts both; with a `user`, waits until the session is ready and identified as them.
    static func start(user: String? = "alice", session: JSONObject = [:], simArguments: [String] = []) async throws -> DataAPIFixture {
        let (setup, sim, client) = try await startAgainstSim(sim: simArguments, inProcess: true) { setup, sim in
            try setup.writeConfig(url: sim.serverURL, user: user, hash: user == nil ? nil : "h", session: session,
                                  http: ["connect_timeout_s": 2, "response_timeout_s": 2])
        }
        let fixture = DataAPIFixture(setup: setup, sim: sim, client: client)
        let ready = try await eventually(timeout: .seconds(15)) {
            let s = try await client.ok("status")
            guard s["state"]?.stringValue == "ready" else { return false }
            return user == nil || s["user"]?["identified"]?.boolValue == true
        }
        if !ready { throw EngineTestError("the daemon did not become ready\(user.map { " as \($0)" } ?? ""); log:\n\(setup.log.suffix(3000))") }
        return fixture
    }

    /// `{"op":"api","call":name,"args":args}` expecting `ok: true`; returns `result`.
    func call(_ name: String, _ args: JSONObject = [:], raw: Bool = false, timeoutMs: Int? = nil) async throws -> JSONValue {
        try await client.ok("api", Self.op(name, args, raw: raw, timeoutMs: timeoutMs), timeoutMs: 30_000)
    }

    /// The same expecting `ok: false`; returns the `error` object (`code`, `message`, …).
    func failure(_ name: String, _ args: JSONObject = [:], timeoutMs: Int? = nil) async throws -> JSONObject {
        let response = try await client.request("api", Self.op(name, args, raw: false, timeoutMs: timeoutMs), timeoutMs: 30_000)
        guard response["ok"]?.boolValue == false, let error = response["error"]?.objectValue else {
            throw EngineTestError("api \(name) did not fail: \(String(decoding: response.serialized(), as: UTF8.self))")
        }
        return error
    }

    static func op(_ name: String, _ args: JSONObject, raw: Bool, timeoutMs: Int?) -> JSONObject {
        var o: JSONObject = ["call": .string(name), "args": .object(args)]
        if raw { o["raw"] = true }
        if let timeoutMs { o["timeout_ms"] = .number(timeoutMs) }
        return o
    }

    /// The messages the simulator received with these class ids (oldest first).
    func received(cids: [Int64]) async throws -> [JSONObject] { try await sim.received(cids: cids) }

    /// `data_fault`: the simulator's next answer to `cid` is `answer` (`error`, `silent`, `replace`).
    func dataFault(cid: Int64, _ answer: String, _ extra: JSONObject = [:]) async throws {
        var o: JSONObject = ["op": "data_fault", "cid": .number(cid), "answer": .string(answer)]
        for (k, v) in extra { o[k] = v }
        let r = try await sim.control(o)
        guard r["ok"]?.boolValue == true else { throw EngineTestError("data_fault refused: \(String(decoding: r.serialized(), as: UTF8.self))") }
    }

    func stop() async {
        client.close()
        _ = await setup.stop()
        _ = await sim.stop()
        setup.remove()
    }
}

extension JSONValue {
    /// The elements of an array result as objects (empty for anything else).
    var objects: [JSONObject] { (arrayValue ?? []).compactMap(\.objectValue) }
}

extension DataAPICallSpec {
    /// Values for the required arguments (for tests that only need a call to parse).
    var placeholderArgs: JSONObject {
        var args = JSONObject()
        for arg in self.args where arg.required {
            switch arg.type {
            case .string: args[arg.name] = "x"
            case .integer: args[arg.name] = .number(arg.range.map { max($0.lowerBound, min(1, $0.upperBound)) } ?? 1)
            case .number: args[arg.name] = 1
            case .boolean: args[arg.name] = true
            }
        }
        return args
    }
}
