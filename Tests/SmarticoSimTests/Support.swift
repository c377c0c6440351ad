import Foundation
import SmarticoProtocol
@testable import SmarticoSim

let t0: Int64 = 1_800_000_000_000

/// A simulator with a seeded random source and helpers to talk to it as a client would.
struct Harness {
    var sim: SimServer

    init(_ config: SimConfig = SimConfig(httpBaseURL: "http://127.0.0.1:8081"), now: Int64 = t0) {
        sim = SimServer(config: config, now: now, random: SimRandom(seed: 42))
    }

    mutating func connect(_ now: Int64 = t0) -> String { sim.connect(remote: "127.0.0.1:50000", now: now) }

    mutating func send(_ client: String, _ o: JSONObject, now: Int64 = t0) -> [SimAction] {
        sim.receive(client: client, text: o.serialized(), now: now)
    }

    mutating func send(_ client: String, text: String, now: Int64 = t0) -> [SimAction] {
        sim.receive(client: client, text: Array(text.utf8), now: now)
    }

    /// INIT and IDENTIFY; returns the client id.
    mutating func ready(user: String? = "alice", now: Int64 = t0) -> String {
        let c = connect(now)
        _ = send(c, Msg.initSession(), now: now)
        if let user { _ = send(c, Msg.identify(user), now: now) }
        return c
    }
}

enum Msg {
    static func initSession(sessionID: String? = "a5719258-f6fc-4335-a4aa-a1e102e035ed", label: String = "6816ba80-2967-4efb-a60c-694c72b03197",
                            uuid: String = "c7067eb9-38e7-4b74-8d5e-e17d52c99465") -> JSONObject {
        var o: JSONObject = ["cid": 3, "label_key": .string(label), "brand_key": "c24a284e",
                             "device_id": "2632f21a-cb84-4ce0-95ca-bf71debfc9c9", "page": "https://demo.smartico.ai/",
                             "tracker_version": "1.1.277", "ts": 1632832357494, "uuid": .string(uuid)]
        if let sessionID { o["session_id"] = .string(sessionID) }
        return o
    }

    static func identify(_ user: String, hash: String? = nil, uuid: String = "e172c925-272a-4004-81fe-b8177a240af5") -> JSONObject {
        var o: JSONObject = ["cid": 5, "ext_user_id": .string(user), "ts": 1632911887307, "uuid": .string(uuid)]
        o["hash"] = hash.map(JSONValue.string) ?? .null
        return o
    }

    static func simple(_ cid: Int64, uuid: String = "11111111-1111-4111-8111-111111111111", _ extra: JSONObject = [:]) -> JSONObject {
        var o: JSONObject = ["cid": .number(cid)]
        for (k, v) in extra { o[k] = v }
        o["ts"] = 1
        o["uuid"] = .string(uuid)
        return o
    }
}

extension Array where Element == SimAction {
    /// JSON objects of the text outputs, in order.
    var messages: [JSONObject] { compactMap(\.json) }
    var cids: [Int64] { messages.compactMap { $0["cid"]?.int64Value } }
}

extension JSONObject {
    func str(_ k: String) -> String? { self[k]?.stringValue }
    func int(_ k: String) -> Int64? { self[k]?.int64Value }
}

/// A unique temp directory for one test.
struct TempDir {
    let path: String
    init() throws {
        path = NSTemporaryDirectory() + "/smartico-sim-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
}
