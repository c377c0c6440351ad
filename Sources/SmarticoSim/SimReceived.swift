import SmarticoProtocol

/// One message the simulator received: a control `received` entry and a `--record` line.
public struct SimReceivedEntry: Sendable, Equatable {
    /// 1, 2, 3, … over the simulator's life.
    public var seq: Int64
    /// Receive time, ms since the epoch.
    public var at: Int64
    /// Client id (`c1`, …).
    public var client: String
    /// The client's user at receive time (after IDENTIFY), if any.
    public var user: String?
    /// The message when it was a JSON object.
    public var message: JSONObject?
    /// The text when it was not a JSON object (invalid UTF-8 replaced), else nil.
    public var raw: String?
    /// Why the message was refused (not JSON, a field error, unsupported cid, …), if it was.
    public var error: String?
    /// For public API calls over HTTP (client `http`): method, path, api_key, brand_key, version.
    public var http: JSONObject?
    /// What a server lets pass but 002 or the SDK do differently (`SimValidator`), if anything.
    public var warnings: [String] = []

    /// `cid` of the message, when it has an integer one.
    public var cid: Int64? { message?["cid"]?.int64Value }

    /// The entry as a JSON object: `{"seq","at","client","user"?,"http"?,"message"|"raw","error"?,"warnings"?}`.
    public var json: JSONObject {
        var o: JSONObject = ["seq": .number(seq), "at": .number(at), "client": .string(client)]
        if let user { o["user"] = .string(user) }
        if let http { o["http"] = .object(http) }
        if let message { o["message"] = .object(message) } else { o["raw"] = .string(raw ?? "") }
        if let error { o["error"] = .string(error) }
        if !warnings.isEmpty { o["warnings"] = .array(warnings.map(JSONValue.string)) }
        return o
    }

    /// One NDJSON line (compact JSON and `\n`), the `--record` file format.
    public var recordLine: [UInt8] {
        var b = json.serialized()
        b.append(0x0A)
        return b
    }
}

/// The last received entries, bounded by count (`capacity`) and by size (`maxBytes`, counted
/// as each entry's received text length): the oldest are dropped, so memory stays bounded
/// whatever clients send.
public struct SimReceivedLog: Sendable {
    public let capacity: Int
    public let maxBytes: Int
    private var storage: [(entry: SimReceivedEntry, size: Int)] = []
    private var start = 0
    public private(set) var byteCount = 0

    public init(capacity: Int, maxBytes: Int = 256 << 20) {
        self.capacity = max(1, capacity)
        self.maxBytes = max(1, maxBytes)
    }

    /// Appends an entry whose received text was `size` bytes.
    public mutating func append(_ e: SimReceivedEntry, size: Int = 0) {
        let item = (entry: e, size: max(0, size))
        if storage.count < capacity {
            storage.append(item)
        } else {
            byteCount -= storage[start].size
            storage[start] = item
            start = (start + 1) % capacity
        }
        byteCount += item.size
        while byteCount > maxBytes, count > 1 { dropOldest() }
    }

    private mutating func dropOldest() {
        // Compact into order first, then drop the head.
        if start != 0 {
            storage = Array(storage[start...] + storage[..<start])
            start = 0
        }
        byteCount -= storage.removeFirst().size
    }

    /// Oldest first.
    public var entries: [SimReceivedEntry] { (storage[start...] + storage[..<start]).map(\.entry) }

    public var count: Int { storage.count }
}
