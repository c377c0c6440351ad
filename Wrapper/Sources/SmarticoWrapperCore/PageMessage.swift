import SmarticoProtocol

/// One message a Smartico page posted through the Native Bridge (`SmarticoBridge.postMessage`):
/// a JSON object with an integer `bcid`. The pages post a JSON string (`JSON.stringify({bcid, …})`);
/// a page that posts an object directly is accepted too (the glue hands its JSON over).
public struct PageMessage: Sendable, Equatable {
    /// The Native Bridge class ids (002 §3).
    public enum BCID: Int64, Sendable {
        case pageReady = 1, closeMe = 2, showEngagement = 3, executeDeepLink = 4
        case readyToBeShown = 5, sendToSocket = 6, sendPublicProps = 7, sendGameOpening = 8
    }

    /// The object as posted, every field kept.
    public let json: JSONObject
    public let bcid: Int64

    /// The largest message accepted from a page: SEND_TO_SOCKET speaks to the server, and the
    /// daemon's line limit is 1 MiB by default.
    public static let maxBytes = 512 * 1024

    /// Why a posted value is not a bridge message.
    public enum Problem: Error, Equatable, CustomStringConvertible {
        case tooLong(bytes: Int)
        case notJSON(String)
        case notAnObject(String)
        case noBCID

        public var description: String {
            switch self {
            case .tooLong(let n): "a bridge message of \(n) bytes (at most \(PageMessage.maxBytes))"
            case .notJSON(let why): "a bridge message that is not JSON (\(why))"
            case .notAnObject(let type): "a bridge message that is a JSON \(type), not an object"
            case .noBCID: "a bridge message without an integer \"bcid\""
            }
        }
    }

    public init(json: JSONObject) throws(Problem) {
        guard let bcid = json["bcid"]?.int64Value else { throw .noBCID }
        self.json = json
        self.bcid = bcid
    }

    /// Parses what a page posted: the JSON text of a string (`postMessage(JSON.stringify(m))`),
    /// or the JSON of an object posted as such (`postMessage(m)`, serialised by the glue), which
    /// arrives as an object at the top level.
    public init(posted text: String) throws(Problem) {
        let bytes = Array(text.utf8)
        guard bytes.count <= PageMessage.maxBytes else { throw .tooLong(bytes: bytes.count) }
        var value: JSONValue
        do {
            value = try JSONValue(parsing: bytes, options: JSONParseOptions(maxDepth: 64))
        } catch {
            throw .notJSON("\(error)")
        }
        // A string holding JSON (the glue serialised a posted string): parse once more.
        if let inner = value.stringValue {
            guard inner.utf8.count <= PageMessage.maxBytes else { throw .tooLong(bytes: inner.utf8.count) }
            do {
                value = try JSONValue(parsing: inner, options: JSONParseOptions(maxDepth: 64))
            } catch {
                throw .notJSON("\(error)")
            }
        }
        guard let object = value.objectValue else { throw .notAnObject(value.type.rawValue) }
        try self.init(json: object)
    }

    public var known: BCID? { BCID(rawValue: bcid) }

    /// `dp` of an EXECUTE_DEEP_LINK, trimmed; nil when absent or empty.
    public var deepLink: String? {
        guard let dp = json["dp"]?.stringValue else { return nil }
        let link = DeepLink(dp)
        return link.raw.isEmpty ? nil : link.raw
    }
}

/// The script that hands a popup page its engagement, as Smartico's own SDKs do: a
/// `MessageEvent` on `window` whose `data` is the JSON *string* of `{bcid: 3, …payload}`.
public enum BridgeScript {
    public static func showEngagement(_ bridgeObject: JSONObject) -> String {
        // The JSON text, then that text as a JavaScript string literal (JSON is a subset of JS
        // for strings once U+2028/U+2029 are escaped, which the serializer's output may contain).
        let json = String(decoding: JSONValue.object(bridgeObject).serialized(), as: UTF8.self)
        let literal = javaScriptStringLiteral(json)
        return "window.dispatchEvent(new MessageEvent('message',{data:\(literal)}));true;"
    }

    /// `s` as a double-quoted JavaScript string literal: quotes, backslashes, control characters,
    /// U+2028, U+2029 and `<` (so no `</script>` can appear) escaped.
    public static func javaScriptStringLiteral(_ s: String) -> String {
        var out = "\""
        out.reserveCapacity(s.utf8.count + 2)
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "<": out += "\\u003c"
            case "\u{2028}": out += "\\u2028"
            case "\u{2029}": out += "\\u2029"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
