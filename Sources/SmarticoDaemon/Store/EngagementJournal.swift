import SmarticoProtocol

/// The `data` of an `engagement` event kept as bytes: the 110 and the popup URL, the one shape of
/// an engagement from the frame to the line. The journal row and the line are copied from them
/// where they are written — the row into the store's batch, the line into each subscriber's
/// output (``EngagementJournal``). How the row is laid out is the store's: this file, beside it.
///
/// A class: an event's data is handed along the pipeline (the commit batch, the store's thread, the
/// subscribers' lines) as one immutable object.
final class EngagementData: Sendable, Equatable {
    /// The 110 as received, or its compact serialization when the received bytes cannot go
    /// into a line as they are (``EngagementJournal/data(for:popupURLJSON:)``).
    let message: RawJSONObject
    /// `popup_url`'s value as JSON: a string, or `null`.
    let popupURLJSON: [UInt8]

    init(message: RawJSONObject, popupURLJSON: [UInt8]) {
        self.message = message
        self.popupURLJSON = popupURLJSON
    }

    convenience init(message: RawJSONObject, popupURL: String?) {
        self.init(message: message, popupURLJSON: EngagementJournal.popupURLJSON(popupURL))
    }

    /// The journal row's size in bytes.
    var journalCount: Int { 25 + message.bytes.count + popupURLJSON.count }

    /// Appends the journal row, `{"message":…,"popup_url":…}`.
    func appendJournal(to out: inout [UInt8]) {
        out.appendLiteral(#"{"message":"#)
        out.append(contentsOf: message.bytes)
        out.appendLiteral(#","popup_url":"#)
        out.append(contentsOf: popupURLJSON)
        out.append(UInt8(ascii: "}"))
    }

    /// About the line's data size (for backlog accounting and buffer sizing).
    var lineCountEstimate: Int { journalCount + message.objectRange.count + 20 }

    /// Appends the line's data, `{"message":…,"popup_url":…,"bridge":…}`: the journal row with
    /// `,"bridge":…` before its closing brace, as replay rebuilds it (``EngagementJournal/lineData(name:journaled:)``).
    func appendLine(to out: inout [UInt8]) {
        out.appendLiteral(#"{"message":"#)
        out.append(contentsOf: message.bytes)
        out.appendLiteral(#","popup_url":"#)
        out.append(contentsOf: popupURLJSON)
        out.appendLiteral(#","bridge":"#)
        BridgeMessage.appendShowEngagement(message, to: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// Same 110 bytes and popup URL.
    static func == (a: EngagementData, b: EngagementData) -> Bool {
        a === b || (a.message == b.message && a.popupURLJSON == b.popupURLJSON)
    }

    /// The journal row's bytes and the line's `data` bytes.
    func assemble() -> (journal: [UInt8], line: [UInt8]) {
        var journal: [UInt8] = []
        journal.reserveCapacity(journalCount)
        appendJournal(to: &journal)
        var line: [UInt8] = []
        line.reserveCapacity(lineCountEstimate)
        appendLine(to: &line)
        return (journal, line)
    }
}

/// How an `engagement` event's `data` is built, journaled and replayed (docs/store.md,
/// "Replay").
///
/// The line a subscriber gets carries the 110's payload twice: once in `message` (the 110 as
/// received) and once in `bridge` (SHOW_ENGAGEMENT, the same payload behind `bcid` 3), as
/// socket-api.md specifies. `bridge` is a pure function of `message`'s bytes
/// (`BridgeMessage.appendShowEngagement`), so the journal stores the data without it — half
/// the bytes every engagement writes to the WAL and again at the checkpoint — and replay puts
/// it back with the same function: byte for byte the line that was published live.
///
/// `message` is the 110's bytes exactly as they arrived (spaces, member order, escapes and
/// number spellings kept), spliced, never parsed into a tree and serialized again; `bridge`
/// is `{"bcid":3` followed by the message's members copied as received (a `bcid` member of
/// the message dropped). A line must stay one line, so a 110 whose bytes contain a line feed
/// or carriage return (legal between tokens) is spliced in its compact serialization instead.
enum EngagementJournal {
    /// The data object members of a live `engagement` event, in order.
    static let memberOrder = ["message", "popup_url", "bridge"]

    /// The engagement data for a 110: its bytes as received when they can go into a line as
    /// they are, else its compact serialization.
    static func data(for event: ClientEngagementEvent, popupURLJSON: [UInt8]) -> EngagementData {
        if let raw = event.raw, isSpliceable(raw) { return EngagementData(message: raw, popupURLJSON: popupURLJSON) }
        return EngagementData(message: RawJSONObject(compacting: event.json), popupURLJSON: popupURLJSON)
    }

    /// `popup_url`'s value as JSON bytes: the URL as a JSON string, or `null`.
    static func popupURLJSON(_ popupURL: String?) -> [UInt8] {
        guard let popupURL else { return Array("null".utf8) }
        var out: [UInt8] = []
        JSONValue.serializeString(popupURL, into: &out)
        return out
    }

    /// True when the bytes can be copied into an NDJSON line: valid JSON (checked when they were
    /// decoded) with no line break. Inside strings, control characters are escaped in valid
    /// JSON; between tokens only `\n`/`\r` would break the line.
    static func isSpliceable(_ message: RawJSONObject) -> Bool { !message.containsLineBreaks }

    /// The journal bytes `{"message":…,"popup_url":…}` and the line's data
    /// `{"message":…,"popup_url":…,"bridge":…}`.
    static func assemble(message: RawJSONObject, popupURL: String?) -> (journal: [UInt8], line: [UInt8]) {
        EngagementData(message: message, popupURL: popupURL).assemble()
    }

    /// The line's data for a journaled row that ends with `}` and whose `message` is `message`:
    /// the row with `,"bridge":…` put before that brace. Replay comes here; live lines are
    /// appended by ``EngagementData/appendLine(to:)``, the same bytes.
    private static func line(journal: [UInt8], message: RawJSONObject) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(journal.count + message.objectRange.count + 24)
        line.append(contentsOf: journal[..<(journal.count - 1)])
        line.appendLiteral(#","bridge":"#)
        BridgeMessage.appendShowEngagement(message, to: &line)
        line.append(UInt8(ascii: "}"))
        return line
    }

    /// For an `engagement` event's data built as a tree (`{"message":…,"popup_url":…,"bridge":…}`,
    /// in that order, `popup_url` a string or null): the engagement data of the message's compact
    /// serialization, journaled and shown as a live one is. nil for anything else: journal it as it is.
    static func engagementData(fromTree data: JSONValue) -> EngagementData? {
        guard case .object(let object) = data, object.keys == memberOrder,
              case .object(let message) = object.values[0], case .object = object.values[2]
        else { return nil }
        let popupURL: String?
        switch object.values[1] {
        case .string(let s): popupURL = s
        case .null: popupURL = nil
        default: return nil
        }
        return EngagementData(message: RawJSONObject(compacting: message), popupURL: popupURL)
    }

    /// The line's `data` bytes for a journal row: an `engagement` row journaled without its
    /// `bridge` (`{"message":{…},"popup_url":…}`, however `message` is spelled) gets it back,
    /// built from the message's bytes as on the live line; every other row (older rows that kept
    /// `bridge`, other events, anything unexpected) is returned as it is.
    static func lineData(name: String, journaled data: [UInt8]) -> [UInt8] {
        let trusted = JSONParseOptions(maxDepth: .max)
        guard name == EventKind.engagement.rawValue,
              let row = try? RawJSONObject(validating: data, options: trusted),
              row.objectRange.upperBound == data.count,
              row.members.count == 2,
              row.member(row.members[0], isNamed: "message"), row.member(row.members[1], isNamed: "popup_url"),
              let message = row.firstMemberObject()
        else { return data }
        return line(journal: data, message: message)
    }
}
