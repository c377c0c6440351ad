// SmarticoProtocol's JSON and the decoding of every server message, as the daemon runs it on each
// WebSocket text message (ServerMessage.decode: RawJSONObject for a 110 kept as bytes, the typed
// messages read loosely), plus the serializer the daemon writes with.
//
// Input: the bytes of one message.
// Checks: parse → serialize → parse gives the same value and serializing again the same bytes;
// RawJSONObject accepts exactly the objects JSONValue accepts, parses them the same, its member
// ranges hold each member's name and value, and the object copied by member ranges (as a 110 is
// forwarded: `appendObject`, with "cid" dropped and a prefix) parses to the object without them;
// ServerMessage.decode accepts exactly the objects with an integer cid (or a string holding one,
// as the SDK reads it), and its JSON serialized
// decodes to the same message; the accessors the daemon reads do not trap.
import FuzzSupport
import SmarticoProtocol

func readAccessors(_ m: ServerMessage) {
    _ = (m.cid, m.uuid, m.engagementUID, m.json.count)
    switch m {
    case .initSessionResponse(let r):
        _ = (r.errCode, r.errMsg, r.errCodeProblem, r.isSuccess, r.isFatalError, r.products, r.hasGamification, r.country, r.city, r.ip,
             r.fcmSenderID, r.dynamicImageDomain)
    case .identifyUserResponse(let r):
        _ = (r.errCode, r.errMsg, r.isSuccess, r.props, r.publicUsername, r.avatarID, r.gamificationURL, r.popupURL, r.isTestAccount)
    case .eventResponse(let r), .loginResponse(let r), .logoutResponse(let r), .registerPushTokenResponse(let r):
        _ = (r.errCode, r.errMsg, r.isSuccess, r.isFatalError)
    case .executeDeepLink(let d):
        _ = (d.engagementUID, d.dp, d.problem, d.deepLink.clientAction, d.deepLink.description)
    case .publicPropertiesChanged(let p):
        _ = (p.props, p.problem)
    case .engagement(let e):
        _ = (e.engagementUID, e.activityType, e.engagementID, e.originalBytes?.count, e.showEngagementBytes())
    case .sawShowSpinPush(let s):
        _ = (s.sawTemplateID, s.pendingMessageID, s.sawGameTypeID, s.deepLink, s.acknowledgement, s.problem)
    case .ping, .pong:
        break
    case let .other(cid, _):
        _ = (cid.name, cid.eventName)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONProtocol(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = input(data, size)

    let value: JSONValue?
    do {
        value = try JSONValue(parsing: bytes)
    } catch {
        _ = (error.description, error.lineAndColumn(in: bytes))
        value = nil
    }
    if let value {
        let text = value.serialized()
        guard let again = try? JSONValue(parsing: text, options: JSONParseOptions(maxDepth: .max)) else {
            invariant(false, "the serialization does not parse: \(String(decoding: text, as: UTF8.self))")
            return 0
        }
        invariant(again == value, "parse → serialize → parse changed the value")
        invariant(again.serialized() == text, "serializing twice gave different bytes")
    }

    let raw = try? RawJSONObject(validating: bytes)
    if case .object(let object)? = value {
        guard let raw else {
            invariant(false, "RawJSONObject refused an object JSONValue parsed")
            return 0
        }
        invariant(raw.parsed() == object, "RawJSONObject parsed a different object")
        invariant(raw.members.count == object.count, "\(raw.members.count) member ranges for \(object.count) members")
        for (i, m) in raw.members.enumerated() {
            invariant(raw.member(m, isNamed: object.keys[i]), "member \(i) is named \(m.name), not \(object.keys[i])")
            let v = try? JSONValue(parsing: Array(raw.bytes[m.value]))
            invariant(v == object.values[i], "member \(i)'s range does not hold its value")
            invariant(raw.bytes[m.key.lowerBound - 1] == UInt8(ascii: "\""), "member \(i)'s key range does not follow a quote")
        }
        var copied: [UInt8] = []
        raw.appendObject(prefix: #""x_fuzz":1"#, dropping: "cid", to: &copied)
        var expected = JSONObject(keys: ["x_fuzz"], values: [.number(1)])
        for (k, v) in object where k != "cid" { expected.append(key: k, value: v) }
        let parsedCopy = try? JSONValue(parsing: copied, options: JSONParseOptions(maxDepth: .max))
        invariant(parsedCopy == .object(expected), "appendObject: \(String(decoding: copied, as: UTF8.self))")
    } else {
        invariant(raw == nil, "RawJSONObject accepted what is not a JSON object")
    }

    let message = try? ServerMessage.decode(bytes)
    if case .object(let object)? = value, let cid = object["cid"], cid.lenientInt64 != nil {
        guard let message else {
            invariant(false, "ServerMessage.decode refused an object with an integer cid")
            return 0
        }
        readAccessors(message)
        let back = try? ServerMessage.decode(message.serialized())
        invariant(back?.json == message.json, "a message serialized decodes differently")
        invariant(back?.cid == message.cid, "a message serialized decodes with another cid")
    } else {
        invariant(message == nil, "ServerMessage.decode accepted what is not an object with an integer (or integer-text) cid")
    }
    return 0
}

runFuzzer(fuzzJSONProtocol)
