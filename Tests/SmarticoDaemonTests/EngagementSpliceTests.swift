import Foundation
import SmarticoProtocol
import Testing
@testable import SmarticoDaemon

/// An engagement's line and journal row are assembled from the 110's bytes as received.
@Suite struct EngagementSpliceTests {
    /// The Harness's `native_app_popup_url` as engagements carry it (force_mobile=true added).
    static let popup = "https://wrap.example/popup?x=1&force_mobile=true"
    /// Spaces, odd key order, escapes, exact numbers and a `bcid` member of its own.
    static let odd = #" { "template_html" : "<p class=\"x\">\u00e9 Gr\u00fc\u00dfe \ud83d\ude00 é\n</p>\/" , "bcid":7,"#
        + #" "activityType" : 30,"engagement_id":9007199254740993,"cid":110 , "engagement_uid":"e\u002d7","#
        + #""amount":1.50e3,"nested":{"a":[1,"b",null]}}  "#

    /// The event the machine emits for `text` arriving from the server.
    private func engagementEvent(_ text: [UInt8]) throws -> DaemonEvent {
        var h = Harness(SessionFixtures.config(user: "u1", hash: "h"))
        h.bringUp()
        switch h.feed(.received(h.conn!, text)).last {
        case .journalOnce(let user, _, let event)?:
            #expect(user == "u1")
            return event
        case .emit(let event)?: // no engagement_uid: nothing to de-duplicate on
            return event
        default:
            throw EngagementSpliceError("no engagement event for \(String(decoding: text, as: UTF8.self))")
        }
    }

    /// What the data was before: a tree with the bridge built by `BridgeMessage(showing:)`.
    private func treeData(_ message: JSONObject, popupURL: String?) throws -> JSONObject {
        let e = try ClientEngagementEvent(json: message)
        return ["message": .object(message), "popup_url": popupURL.map(JSONValue.string) ?? .null,
                "bridge": .object(BridgeMessage(showing: e).json)]
    }

    @Test func messageIsTheBytesAsReceivedAndBridgeIsSpliced() throws {
        let raw = Array(Self.odd.utf8)
        let event = try engagementEvent(raw)
        #expect(event.name == "engagement" && event.journaled)
        let (row, line) = SessionDriver.journalRow(event, tsMs: 5)
        #expect(row.name == "engagement" && row.tsMs == 5)
        let expectedRow = Array(#"{"message":"#.utf8) + raw + Array(#","popup_url":"https://wrap.example/popup?x=1&force_mobile=true"}"#.utf8)
        #expect(row.data == expectedRow, "\(String(decoding: row.data, as: UTF8.self))")
        let bridge = #"{"bcid":3,"template_html" : "<p class=\"x\">\u00e9 Gr\u00fc\u00dfe \ud83d\ude00 é\n</p>\/","#
            + #""activityType" : 30,"engagement_id":9007199254740993,"cid":110 , "engagement_uid":"e\u002d7","#
            + #""amount":1.50e3,"nested":{"a":[1,"b",null]}}"#
        #expect(String(decoding: line, as: UTF8.self)
                == String(decoding: expectedRow.dropLast(), as: UTF8.self) + #","bridge":"# + bridge + "}")

        // The same JSON as the tree the daemon built before, `bcid` first in the bridge.
        let message = try #require(try JSONValue(parsing: raw).objectValue)
        let parsedLine = try #require(try JSONValue(parsing: line).objectValue)
        let before = try treeData(message, popupURL: Self.popup)
        #expect(parsedLine == before)
        #expect(parsedLine.keys == EngagementJournal.memberOrder)
        #expect(parsedLine["bridge"]?.objectValue?.keys == before["bridge"]?.objectValue?.keys)
        #expect(event.data == .object(before))
        #expect(event == DaemonEvent(kind: .engagement, data: .object(before), journaled: true))
        #expect(event.journalEvent(tsMs: 5) == row)
        #expect(!line.contains(0x0A) && !line.contains(0x0D))
    }

    /// Replay builds the line from the row with the same function: the same bytes as live.
    @Test func replayedLineIsTheLiveLine() throws {
        for text in [Self.odd, #"{"cid":110,"engagement_uid":"e-1","activityType":30,"engagement_id":1}"#, #"{"cid":110}"#,
                     #"{"bcid":1,"cid":110,"engagement_uid":"b"}"#, #"{"cid":110,"engagement_uid":"c","bcid":1}"#] {
            let event = try engagementEvent(Array(text.utf8))
            let (row, line) = SessionDriver.journalRow(event, tsMs: 1)
            #expect(EngagementJournal.lineData(name: "engagement", journaled: row.data) == line, "\(text)")
            #expect(try JSONValue(parsing: line) == event.data)
        }
        // Without a popup URL.
        let message = try RawJSONObject(validating: Array(Self.odd.utf8))
        let (journal, line) = EngagementJournal.assemble(message: message, popupURL: nil)
        #expect(String(decoding: journal, as: UTF8.self).hasSuffix(#","popup_url":null}"#))
        #expect(EngagementJournal.lineData(name: "engagement", journaled: journal) == line)
        #expect(try JSONValue(parsing: line) == .object(try treeData(message.parsed(), popupURL: nil)))
    }

    /// Rows journaled before: a re-serialized (compact) message without the bridge replays as it
    /// was published then; rows that kept the bridge, and other events, are left as they are.
    @Test func oldRowsStillReplay() throws {
        let message = try #require(try JSONValue(parsing: Array(Self.odd.utf8)).objectValue)
        let oldData = try treeData(message, popupURL: Self.popup)
        let oldLine = JSONValue.object(oldData).serialized()
        let oldRow = JSONObject(keys: ["message", "popup_url"], values: [oldData.values[0], oldData.values[1]]).serialized()
        #expect(EngagementJournal.lineData(name: "engagement", journaled: oldRow) == oldLine)
        #expect(EngagementJournal.lineData(name: "engagement", journaled: oldLine) == oldLine)
        // A tree-built engagement event (the old form) is journaled and lined as before too.
        let (row, line) = SessionDriver.journalRow(DaemonEvent(kind: .engagement, data: .object(oldData), journaled: true), tsMs: 1)
        #expect(row.data == oldRow && line == oldLine)
        for (name, data) in [("deeplink", #"{"message":{"a":1},"popup_url":null}"#), ("engagement", "not json"),
                             ("engagement", #"{"message":[1],"popup_url":null}"#), ("engagement", #"{"popup_url":null,"message":{}}"#),
                             ("engagement", #"{"message":{},"popup_url":null} "#)] {
            #expect(EngagementJournal.lineData(name: name, journaled: Array(data.utf8)) == Array(data.utf8), "\(data)")
        }
    }

    /// A 110 with line breaks between its tokens would break the NDJSON line: it goes into the
    /// line and the row compact, as before.
    @Test func lineBreaksFallBackToTheCompactForm() throws {
        for text in ["{\"cid\":110,\n\"engagement_uid\":\"e-9\",\r\n \"template_html\":\"<b>\\n</b>\"}", "{\"cid\":110}\n", "\r{\"cid\":110}"] {
            let raw = Array(text.utf8)
            let event = try engagementEvent(raw)
            let (row, line) = SessionDriver.journalRow(event, tsMs: 1)
            #expect(!row.data.contains(0x0A) && !row.data.contains(0x0D), "\(text.debugDescription)")
            #expect(!line.contains(0x0A) && !line.contains(0x0D), "\(text.debugDescription)")
            let message = try #require(try JSONValue(parsing: raw).objectValue)
            let compact = message.serialized()
            #expect(row.data == Array(#"{"message":"#.utf8) + compact + Array(#","popup_url":"https://wrap.example/popup?x=1&force_mobile=true"}"#.utf8))
            #expect(line == JSONValue.object(try treeData(message, popupURL: Self.popup)).serialized())
            #expect(EngagementJournal.lineData(name: "engagement", journaled: row.data) == line)
        }
    }

    /// Through the real store: the row read back replays to the live line.
    @Test func replayThroughTheStore() async throws {
        let event = try engagementEvent(Array(Self.odd.utf8))
        let (row, line) = SessionDriver.journalRow(event, tsMs: 3)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("smarticod-splice-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try await SmarticoStore.open(directory: dir)
        _ = try await store.journal([JournalWrite(row, once: "e-7", user: "u1")])
        let stored = try #require(try await store.events(after: 0, limit: 1).first)
        #expect(stored.data == row.data)
        #expect(EngagementJournal.lineData(name: stored.name, journaled: stored.data) == line)
        await store.close()
    }
}

struct EngagementSpliceError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
