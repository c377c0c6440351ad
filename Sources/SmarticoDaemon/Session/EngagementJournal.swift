import SmarticoProtocol

/// How an `engagement` event's `data` is journaled (docs/store.md, "Engagement rows").
///
/// The line a subscriber gets carries the 110's payload twice: once in `message` (the 110 as
/// received) and once in `bridge` (SHOW_ENGAGEMENT, the same payload behind `bcid` 3), as
/// socket-api.md specifies. `bridge` is a pure function of `message`, so the journal stores the
/// data without it — half the bytes every engagement writes to the WAL and again at the
/// checkpoint, and rows small enough to share B-tree pages — and replay puts it back, byte for
/// byte the line that was published live.
enum EngagementJournal {
    /// The data object members of a live `engagement` event, in order.
    static let memberOrder = ["message", "popup_url", "bridge"]

    /// For an `engagement` event's data (`{"message":…,"popup_url":…,"bridge":…}`, in that order):
    /// the bytes to journal (without `bridge`) and the bytes of the line's `data` (all three,
    /// exactly `data.serialized()`). nil for anything else: journal it as it is.
    static func split(_ data: JSONValue) -> (journal: [UInt8], line: [UInt8])? {
        guard case .object(let object) = data, object.keys == memberOrder,
              case .object = object.values[0], case .object(let bridge) = object.values[2]
        else { return nil }
        var journal: [UInt8] = []
        journal.reserveCapacity(4096)
        JSONObject(keys: Array(object.keys[0...1]), values: Array(object.values[0...1])).serialize(into: &journal)
        var line = journal
        line.removeLast()  // the object's closing brace
        appendBridge(bridge, to: &line)
        return (journal, line)
    }

    /// The line's `data` bytes for a journal row: an `engagement` row journaled by ``split(_:)``
    /// gets its `bridge` back; every other row (older rows that kept `bridge`, other events) is
    /// returned as it is.
    static func lineData(name: String, journaled data: [UInt8]) -> [UInt8] {
        guard name == "engagement",
              case .object(let object)? = try? JSONValue(parsing: data),
              object.keys == Array(memberOrder[0...1]),
              case .object(let message) = object.values[0]
        else { return data }
        var line = data
        line.removeLast()
        appendBridge(BridgeMessage.showEngagement(message).json, to: &line)
        return line
    }

    private static func appendBridge(_ bridge: JSONObject, to line: inout [UInt8]) {
        line.append(contentsOf: #","bridge":"#.utf8)
        bridge.serialize(into: &line)
        line.append(UInt8(ascii: "}"))
    }
}
