/// Native Bridge class ids (`bcid`), 002 §3.
public enum BridgeClassID: Int64, Sendable, CaseIterable {
    case pageReady = 1, closeMe = 2, showEngagement = 3, executeDeepLink = 4, readyToBeShown = 5
    case sendToSocket = 6, sendPublicProps = 7, sendGameOpening = 8

    /// The protocol's name (`PAGE_READY`).
    public var name: String {
        switch self {
        case .pageReady: "PAGE_READY"
        case .closeMe: "CLOSE_ME"
        case .showEngagement: "SHOW_ENGAGEMENT"
        case .executeDeepLink: "EXECUTE_DEEP_LINK"
        case .readyToBeShown: "READY_TO_BE_SHOWN"
        case .sendToSocket: "SEND_TO_SOCKET"
        case .sendPublicProps: "SEND_PUBLIC_PROPS"
        case .sendGameOpening: "SEND_GAME_OPENING"
        }
    }
}

/// SEND_GAME_OPENING (bcid 8): the user wants to start a casino game from a mission or tournament.
public struct GameOpening: Sendable, Equatable {
    /// Every field except `bcid`.
    public let json: JSONObject

    public init(json: JSONObject) throws(ProtocolError) {
        let r = FieldReader(json, .bcid(BridgeClassID.sendGameOpening.rawValue))
        try r.integer("ach_game_id")
        try r.object("game_public_meta")
        try r.string("context")
        if let v = json["ext_game_id"], !v.isNull, v.stringValue == nil, v.numberValue == nil {
            throw .wrongFieldType(r.tag, path: "ext_game_id", expected: "a string or a number", found: describeForError(v))
        }
        self.json = json
    }

    /// Smartico's id of the game.
    public var achGameID: Int64? { json["ach_game_id"]?.int64Value }
    /// The provider's id of the game (a string, or a number written as its literal).
    public var extGameID: String? { json["ext_game_id"]?.stringValue ?? json["ext_game_id"]?.numberValue?.literal }
    /// `mission` or `tournament`.
    public var context: String? { json["context"]?.stringValue }
    /// `image`, `name`, `enabled`, ...
    public var gamePublicMeta: JSONObject? { json["game_public_meta"]?.objectValue }
}

/// A Native Bridge message (002 §3), web page ↔ native client.
public enum BridgeMessage: Sendable, Equatable, JSONObjectDecodable {
    /// 1, web → native: the page is loaded; only now may the native side send to it.
    case pageReady
    /// 2, web → native: close the web view.
    case closeMe
    /// 3, native → web: the full CLIENT_ENGAGEMENT_EVENT (every field, `bcid` not included here).
    case showEngagement(JSONObject)
    /// 4, web → native: run a deep link.
    case executeDeepLink(DeepLink)
    /// 5, web → native: the content is rendered, show the web view.
    case readyToBeShown
    /// 6, web → native: a socket message to forward; the object has no `bcid` and an integer `cid`.
    case sendToSocket(JSONObject)
    /// 7, web → native: public user properties changed (every field except `bcid`).
    case sendPublicProps(JSONObject)
    /// 8, web → native: open a casino game.
    case sendGameOpening(GameOpening)
    /// Any other `bcid`, every field kept.
    case other(bcid: Int64, json: JSONObject)

    /// Types a bridge object; errors name the `bcid` and the field.
    public init(json: JSONObject) throws(ProtocolError) {
        let bcid = try readServerClassID(json, field: "bcid") // "4" is read as 4, as the SDK does
        var rest = json
        rest.removeValue(forKey: "bcid")
        let tag = MessageTag.bcid(bcid)
        switch BridgeClassID(rawValue: bcid) {
        case .pageReady: self = .pageReady
        case .closeMe: self = .closeMe
        case .readyToBeShown: self = .readyToBeShown
        case .showEngagement: self = .showEngagement(rest)
        case .executeDeepLink:
            let dp = try FieldReader(json, tag).string("dp", required: true) ?? ""
            self = .executeDeepLink(DeepLink(dp))
        case .sendToSocket:
            guard let v = rest["cid"] else { throw .missingField(tag, path: "cid") }
            guard v.int64Value != nil else {
                throw .wrongFieldType(tag, path: "cid", expected: "an integer", found: describeForError(v))
            }
            self = .sendToSocket(rest)
        case .sendPublicProps: self = .sendPublicProps(rest)
        case .sendGameOpening: self = .sendGameOpening(try GameOpening(json: rest))
        case nil: self = .other(bcid: bcid, json: rest)
        }
    }

    /// SHOW_ENGAGEMENT for a CLIENT_ENGAGEMENT_EVENT.
    public init(showing event: ClientEngagementEvent) { self = .showEngagement(event.json) }

    /// SHOW_ENGAGEMENT's bytes for a 110 kept as the bytes that arrived: `{"bcid":3`, then the
    /// message's members copied as received except any `bcid` member (dropped, as `json`
    /// drops it), then `}`. The same JSON value as `BridgeMessage.showEngagement(message.parsed()).json`
    /// with `bcid` first; byte for byte its compact serialization when `message` is compact.
    /// A pure function of the message's bytes: live and replayed lines use it alike.
    public static func showEngagementBytes(_ message: RawJSONObject) -> [UInt8] {
        var out: [UInt8] = []
        appendShowEngagement(message, to: &out)
        return out
    }

    /// Appends ``showEngagementBytes(_:)`` to `out`.
    public static func appendShowEngagement(_ message: RawJSONObject, to out: inout [UInt8]) {
        out.reserveCapacity(out.count + message.objectRange.count + 10)
        message.appendObject(prefix: #""bcid":3"#, dropping: "bcid", to: &out)
    }

    public var bcid: Int64 {
        switch self {
        case .pageReady: 1
        case .closeMe: 2
        case .showEngagement: 3
        case .executeDeepLink: 4
        case .readyToBeShown: 5
        case .sendToSocket: 6
        case .sendPublicProps: 7
        case .sendGameOpening: 8
        case .other(let b, _): b
        }
    }

    /// The bridge object: `bcid` first, then the fields.
    public var json: JSONObject {
        var o: JSONObject
        switch self {
        case .pageReady, .closeMe, .readyToBeShown: o = [:]
        case .showEngagement(let f), .sendToSocket(let f), .sendPublicProps(let f), .other(_, let f): o = f
        case .executeDeepLink(let d): o = ["dp": .string(d.raw)]
        case .sendGameOpening(let g): o = g.json
        }
        o.removeValue(forKey: "bcid")
        o.insert(key: "bcid", value: .number(bcid), at: 0)
        return o
    }

    /// Compact JSON of the bridge object.
    public func serialized() -> [UInt8] { json.serialized() }
}
