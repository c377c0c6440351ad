import SmarticoProtocol

/// Why a control request failed (the `error` of `{"ok":false,"error":…}`).
public enum SimControlError: Error, Sendable, Equatable, CustomStringConvertible {
    case notJSON(String)
    case invalid(String)
    case unknownOp(String)
    case unknownClient(String, known: [String])

    public var description: String {
        switch self {
        case .notJSON(let why): "request is not a JSON object: \(why)"
        case .invalid(let why): why
        case .unknownOp(let op):
            "unknown op \"\(op.truncatedUTF8(40))\"; ops are emit, fault, received, clients, pending"
        case .unknownClient(let id, let known):
            "no client \"\(id.truncatedUTF8(40))\"; connected: \(known.isEmpty ? "none" : known.prefix(20).joined(separator: ", "))"
        }
    }
}

/// The control socket protocol (NDJSON, one request per line, one response line per request):
/// `emit`, `fault`, `received`, `clients`, `pending`. See docs/simulator.md.
public enum SimControl {
    /// The most entries one `received` answer returns (use `since` to page).
    public static let maxReceivedPerAnswer = 10_000

    /// Handles one request line (without its `\n`); returns the response line (with `\n`) and the
    /// actions to perform on connections.
    public static func handle(line: [UInt8], server: inout SimServer, now: Int64) -> (response: [UInt8], actions: [SimAction]) {
        var response: JSONObject
        var actions: [SimAction] = []
        do throws(SimControlError) {
            let request: JSONObject
            do {
                guard case .object(let o) = try JSONValue(parsing: line) else { throw SimControlError.notJSON("not an object") }
                request = o
            } catch let e as SimControlError {
                throw e
            } catch {
                throw .notJSON("\(error)")
            }
            (response, actions) = try handle(request, server: &server, now: now)
        } catch {
            response = ["ok": false, "error": .string(error.description)]
        }
        var bytes = response.serialized()
        bytes.append(0x0A)
        return (bytes, actions)
    }

    static func handle(_ r: JSONObject, server: inout SimServer, now: Int64) throws(SimControlError) -> (JSONObject, [SimAction]) {
        guard let op = r["op"]?.stringValue else { throw .invalid("missing \"op\" (a string): emit, fault, received, clients, pending, data_fault") }
        switch op {
        case "emit": return try emit(r, server: &server, now: now)
        case "fault": return try fault(r, server: &server, now: now)
        case "received": return (try received(r, server: server), [])
        case "clients":
            let list = server.order.compactMap { server.sessions[$0]?.summary(server.context) }.map(JSONValue.object)
            return (["ok": true, "clients": .array(list)], [])
        case "data_fault":
            return (try dataFault(r, server: &server), [])
        case "pending":
            let user = try string(r, "user", required: true)!
            let list = server.context.pending.pending(for: user).map(JSONValue.object)
            return (["ok": true, "user": .string(user), "engagements": .array(list)], [])
        default:
            throw .unknownOp(op)
        }
    }

    // MARK: - data_fault

    /// `{"op":"data_fault","cid":N,"answer":"error"|"silent"|"replace", …}`: the next data API
    /// request with class id N (from any client) is answered with `errCode`/`errMsg`, not at all,
    /// or with `body` (the wire answer as given; `cid` is set) instead of the simulated data.
    /// `{"op":"data_fault","clear":true}` removes all.
    static func dataFault(_ r: JSONObject, server: inout SimServer) throws(SimControlError) -> JSONObject {
        if r["clear"]?.boolValue == true {
            server.context.dataFaults.removeAll()
            return ["ok": true]
        }
        guard let cid = r["cid"]?.int64Value else { throw .invalid("data_fault needs \"cid\" (an integer: the request's class id)") }
        guard SimData.routes[cid] != nil else {
            throw .invalid("data_fault: cid \(cid) is not a data API request the simulator answers; those are \(SimData.routes.keys.sorted().map(String.init).joined(separator: ", "))")
        }
        let fault: SimDataFault
        switch r["answer"]?.stringValue {
        case "error":
            guard let code = r["errCode"]?.int64Value, code != 0 else { throw .invalid("data_fault answer \"error\" needs a non-zero integer \"errCode\"") }
            fault = .error(code: code, message: r["errMsg"]?.stringValue)
        case "silent":
            fault = .silent
        case "replace":
            guard let body = r["body"]?.objectValue else { throw .invalid("data_fault answer \"replace\" needs \"body\" (a JSON object: the answer's fields)") }
            fault = .replace(body)
        default:
            throw .invalid("data_fault needs \"answer\": error (with errCode, errMsg), silent, or replace (with body)")
        }
        server.context.dataFaults[cid] = fault
        return ["ok": true]
    }

    // MARK: - emit

    static func target(_ r: JSONObject, server: SimServer, default fallback: SimServer.Target?) throws(SimControlError) -> SimServer.Target? {
        if let c = try string(r, "client") { return .client(c) }
        if let u = try string(r, "user") { return .user(u) }
        if let to = try string(r, "to") {
            if to == "*" { return .all }
            if server.sessions[to] != nil { return .client(to) }
            return .user(to)
        }
        return fallback
    }

    static func emit(_ r: JSONObject, server: inout SimServer, now: Int64) throws(SimControlError) -> (JSONObject, [SimAction]) {
        let target = try target(r, server: server, default: .identified)!
        let count = try integer(r, "count") ?? 1
        guard (1...10_000).contains(count) else { throw .invalid("\"count\" must be 1…10000, got \(count)") }
        var results: [SimServer.EmitResult] = []
        if let m = r["message"] {
            guard case .object(let message) = m else { throw .invalid("\"message\" must be a JSON object, found \(m.type)") }
            for _ in 0..<count { results.append(try server.emit(message: message, to: target, now: now)) }
        } else if let kindName = try string(r, "kind") {
            guard let kind = SimPushKind(name: kindName) else {
                throw .invalid("unknown kind \"\(kindName.truncatedUTF8(40))\"; kinds: \(SimPushKind.namesList)")
            }
            for _ in 0..<count { results.append(try server.emit(kind: kind, to: target, now: now)) }
        } else {
            throw .invalid("emit needs \"message\" (an object with a cid) or \"kind\" (\(SimPushKind.namesList))")
        }
        // "bodies": false keeps the answer small for bulk emits: ids instead of whole messages.
        let bodies = try bool(r, "bodies") ?? true
        var deliveries: [JSONValue] = []
        var queued: [JSONValue] = []
        var actions: [SimAction] = []
        for res in results {
            actions += res.actions
            for d in res.deliveries {
                if bodies {
                    deliveries.append(["client": .string(d.client), "message": .object(d.message)])
                } else {
                    var brief: JSONObject = ["client": .string(d.client), "cid": d.message["cid"] ?? .null, "uuid": d.message["uuid"] ?? .null]
                    if let uid = d.message["engagement_uid"] { brief["engagement_uid"] = uid }
                    deliveries.append(.object(brief))
                }
            }
            if let q = res.queuedForUser { queued.append(.object(q)) }
        }
        var o: JSONObject = ["ok": true, "sent": .number(deliveries.count), "deliveries": .array(deliveries)]
        if !queued.isEmpty { o["queued_pending"] = .array(queued) }
        return (o, actions)
    }

    // MARK: - fault

    static let faultKinds = "reject_init, reject_identify, half_open, delay, uuid_echo, withhold_pong, quirks, answer_fields, close_abruptly, close, malformed_json, malformed_frame, clear"

    static func fault(_ r: JSONObject, server: inout SimServer, now: Int64) throws(SimControlError) -> (JSONObject, [SimAction]) {
        guard let kind = try string(r, "kind") else { throw .invalid("fault needs \"kind\": \(faultKinds)") }
        let target = try target(r, server: server, default: nil)
        // Persistent modes go to one client or are global.
        var client: String?
        switch target {
        case .client(let id)?: client = id
        case .user(let u)?:
            let ids = try server.resolve(.user(u))
            guard ids.count == 1 else { throw .invalid("user \"\(u.truncatedUTF8(40))\" has \(ids.count) connected clients; name one with \"client\"") }
            client = ids[0]
        case .all?, .identified?, nil: client = nil
        }
        let scope: JSONValue = client.map(JSONValue.string) ?? "global"

        func setMode(_ change: (inout SimFaultModes) -> Void) throws(SimControlError) -> (JSONObject, [SimAction]) {
            try server.setFaults(change, client: client)
            return (["ok": true, "kind": .string(kind), "scope": scope], [])
        }

        switch kind {
        case "reject_init":
            let code = try integer(r, "errCode") ?? SimErrorCode.invalidMessage
            let msg = try string(r, "errMsg")
            return try setMode { $0.rejectInit = code; $0.rejectInitMessage = msg }
        case "reject_identify":
            let code = try integer(r, "errCode") ?? SimErrorCode.invalidHash
            let msg = try string(r, "errMsg")
            return try setMode { $0.rejectIdentify = code; $0.rejectIdentifyMessage = msg }
        case "half_open":
            let on = try bool(r, "enabled") ?? true
            return try setMode { $0.halfOpen = on ? true : nil }
        case "delay":
            guard let ms = try integer(r, "ms"), ms >= 0, ms <= 3_600_000 else { throw .invalid("delay needs \"ms\": 0…3600000") }
            return try setMode { $0.delayMs = ms == 0 ? nil : ms }
        case "uuid_echo":
            guard let on = try bool(r, "enabled") else { throw .invalid("uuid_echo needs \"enabled\": true or false") }
            return try setMode { $0.echoUUID = on }
        case "withhold_pong":
            let on = try bool(r, "enabled") ?? true
            return try setMode { $0.withholdPong = on }
        case "quirks":
            let on = try bool(r, "enabled") ?? true
            return try setMode { $0.quirks = on }
        case "answer_fields":
            guard let cid = try integer(r, "cid") else { throw .invalid("answer_fields needs \"cid\" (an integer: the answer's class id, e.g. 4 or 6)") }
            guard let fields = r["fields"]?.objectValue else { throw .invalid("answer_fields needs \"fields\" (a JSON object: the fields to merge into the answer)") }
            return try setMode { m in
                var all = m.answerFields ?? [:]
                all[cid] = fields
                m.answerFields = all
            }
        case "clear":
            // "only": one persistent mode cleared, the others kept (a test can move from one
            // rejection to the next without a window in which neither holds).
            switch try string(r, "only") {
            case nil: try server.clearFaults(client: client)
            case "reject_init"?: return try setMode { $0.rejectInit = nil; $0.rejectInitMessage = nil }
            case "reject_identify"?: return try setMode { $0.rejectIdentify = nil; $0.rejectIdentifyMessage = nil }
            case let other?: throw .invalid("fault clear \"only\" must be reject_init or reject_identify, got \"\(other.truncatedUTF8(40))\"")
            }
            return (["ok": true, "kind": "clear", "scope": scope], [])
        case "close_abruptly", "close", "malformed_json", "malformed_frame":
            let action: SimFaultAction
            switch kind {
            case "close_abruptly": action = .closeAbruptly
            case "malformed_json": action = .malformedJSON
            case "malformed_frame": action = .malformedFrame
            default:
                let code = try integer(r, "code") ?? 1000
                guard code == 1000 || (1001...1003).contains(code) || (1007...1014).contains(code) || (3000...4999).contains(code) else {
                    throw .invalid("close \"code\" \(code) cannot be sent in a close frame (RFC 6455 §7.4): use 1000–1003, 1007–1014 or 3000–4999")
                }
                let reason = try string(r, "reason") ?? ""
                guard reason.utf8.count <= 123 else { throw .invalid("close \"reason\" is \(reason.utf8.count) bytes; at most 123") }
                action = .close(code: UInt16(code), reason: reason)
            }
            if let cid = try integer(r, "on_cid") {
                try server.arm(action, onCID: cid, client: client)
                return (["ok": true, "kind": .string(kind), "scope": scope, "armed_on_cid": .number(cid)], [])
            }
            let ids: [String]
            if let client { ids = [client] } else { ids = try server.resolve(target ?? .all) }
            let actions = server.perform(action, on: ids, now: now)
            return (["ok": true, "kind": .string(kind), "applied_to": .array(Set(actions.map(\.client)).sorted().map(JSONValue.string))], actions)
        default:
            throw .invalid("unknown fault kind \"\(kind.truncatedUTF8(40))\"; kinds: \(faultKinds)")
        }
    }

    // MARK: - received

    static func received(_ r: JSONObject, server: SimServer) throws(SimControlError) -> JSONObject {
        var cids: Set<Int64>?
        if let c = r["cid"] {
            if let one = c.int64Value {
                cids = [one]
            } else if let list = c.arrayValue {
                var s = Set<Int64>()
                for v in list {
                    guard let n = v.int64Value else { throw .invalid("\"cid\" must be an integer or an array of integers") }
                    s.insert(n)
                }
                cids = s
            } else {
                throw .invalid("\"cid\" must be an integer or an array of integers")
            }
        }
        let client = try string(r, "client")
        let since = try integer(r, "since") ?? 0
        var out: [JSONValue] = []
        for e in server.received.entries where e.seq > since {
            if let client, e.client != client { continue }
            if let cids, !(e.cid.map(cids.contains) ?? false) { continue }
            out.append(.object(e.json))
            if out.count >= maxReceivedPerAnswer { break }
        }
        return ["ok": true, "messages": .array(out)]
    }

    // MARK: - JSON helpers

    static func string(_ r: JSONObject, _ key: String, required: Bool = false) throws(SimControlError) -> String? {
        guard let v = r[key], !v.isNull else {
            if required { throw .invalid("missing \"\(key)\" (a string)") }
            return nil
        }
        guard let s = v.stringValue else { throw .invalid("\"\(key)\" must be a string, found \(v.type)") }
        return s
    }

    static func integer(_ r: JSONObject, _ key: String) throws(SimControlError) -> Int64? {
        guard let v = r[key], !v.isNull else { return nil }
        guard let n = v.int64Value else { throw .invalid("\"\(key)\" must be an integer, found \(v.type) \(v)") }
        return n
    }

    static func bool(_ r: JSONObject, _ key: String) throws(SimControlError) -> Bool? {
        guard let v = r[key], !v.isNull else { return nil }
        guard let b = v.boolValue else { throw .invalid("\"\(key)\" must be true or false, found \(v.type)") }
        return b
    }

    static func faultsJSON(_ m: SimFaultModes) -> JSONObject {
        var o = JSONObject()
        if let c = m.rejectInit { o["reject_init"] = .number(c) }
        if let c = m.rejectIdentify { o["reject_identify"] = .number(c) }
        if m.halfOpen == true { o["half_open"] = true }
        if let d = m.delayMs { o["delay_ms"] = .number(d) }
        if let e = m.echoUUID { o["uuid_echo"] = .bool(e) }
        if let w = m.withholdPong { o["withhold_pong"] = .bool(w) }
        if let q = m.quirks { o["quirks"] = .bool(q) }
        if let a = m.answerFields {
            var fields = JSONObject()
            for (cid, f) in a.sorted(by: { $0.key < $1.key }) { fields[String(cid)] = .object(f) }
            o["answer_fields"] = .object(fields)
        }
        return o
    }

    static func armedJSON(_ a: SimArmedFault) -> JSONObject {
        let kind: String
        switch a.action {
        case .closeAbruptly: kind = "close_abruptly"
        case .close: kind = "close"
        case .malformedJSON: kind = "malformed_json"
        case .malformedFrame: kind = "malformed_frame"
        }
        return ["kind": .string(kind), "on_cid": .number(a.cid)]
    }
}
