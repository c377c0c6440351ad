// The sans-I/O half of the socket API: line framing and request validation for every op.
import Testing
import Logging
import SmarticoProtocol
@testable import SmarticoDaemon

@Suite("Socket API parsing")
struct SocketAPIParsingTests {
    private func request(_ line: String) throws -> SocketRequest {
        try SocketRequestParser.parse(line).request.get()
    }

    private func error(_ line: String) -> SocketAPIError? {
        if case .failure(let e) = SocketRequestParser.parse(line).request { return e }
        return nil
    }

    @Test func everyOpParsesWithItsDefaults() throws {
        #expect(try request(#"{"op":"hello"}"#) == .hello)
        #expect(try request(#"{"op":"status","id":1}"#) == .status)
        #expect(try request(#"{"op":"subscribe"}"#) == .subscribe(SubscribeRequest()))
        #expect(try request(#"{"op":"subscribe","types":["engagement","session"],"since":5,"durable":"kiosk"}"#)
            == .subscribe(SubscribeRequest(types: ["engagement", "session"], since: 5, durable: "kiosk")))
        #expect(try request(#"{"op":"subscribe","since":5,"journal":"3f0c8a1e-0000-4000-8000-000000000000"}"#)
            == .subscribe(SubscribeRequest(since: 5, journal: "3f0c8a1e-0000-4000-8000-000000000000")))
        #expect(try request(#"{"op":"unsubscribe"}"#) == .unsubscribe)
        #expect(try request(#"{"op":"ack","seq":12}"#) == .ack(seq: 12))
        #expect(try request(#"{"op":"forget","durable":"kiosk"}"#) == .forget(durable: "kiosk"))
        #expect(try request(#"{"op":"identify","ext_user_id":"u1"}"#) == .session(.identify(extUserID: "u1", hash: nil)))
        #expect(try request(#"{"op":"identify","ext_user_id":"u1","hash":"h:1"}"#) == .session(.identify(extUserID: "u1", hash: "h:1")))
        #expect(try request(#"{"op":"logout"}"#) == .session(.logout))
        #expect(try request(#"{"op":"login"}"#) == .session(.login))
        #expect(try request(#"{"op":"push_token","token":"t","status":4}"#)
            == .session(.pushToken(token: "t", platform: nil, status: 4, appPackageID: nil)))
        #expect(try request(#"{"op":"push_token","token":"t","status":0,"platform":5,"app_package_id":"com.x"}"#)
            == .session(.pushToken(token: "t", platform: 5, status: 0, appPackageID: "com.x")))
        #expect(try request(#"{"op":"language","language":"pt-br"}"#) == .session(.language("pt-br")))
        #expect(try request(#"{"op":"event","event_type":"x"}"#) == .session(.event(eventType: "x", payload: nil)))
        #expect(try request(#"{"op":"event","event_type":"x","payload":{"a":1}}"#) == .session(.event(eventType: "x", payload: ["a": 1])))
        #expect(try request(#"{"op":"report","kind":"impression","engagement_uid":"e1"}"#)
            == .session(.report(kind: .impression, engagementUID: "e1", activityType: 30, action: nil)))
        #expect(try request(#"{"op":"report","kind":"action","engagement_uid":"e1","activity_type":31,"action":"dp:ok"}"#)
            == .session(.report(kind: .action, engagementUID: "e1", activityType: 31, action: "dp:ok")))
        #expect(try request(#"{"op":"minigame_ack","saw_template_id":7,"pending_message_id":9}"#)
            == .session(.minigameAck(sawTemplateID: 7, pendingMessageID: 9)))
        #expect(try request(#"{"op":"push_report","kind":"delivered","engagement_uid":"e","message_id":"m"}"#)
            == .pushReport(PushReportRequest(kind: .delivered, engagementUID: "e", messageID: "m")))
        // message_id: optional; a number (as 002 §5 shows it) is taken as its decimal string.
        #expect(try request(#"{"op":"push_report","kind":"action","engagement_uid":"e","message_id":778,"action":"dp:x","user_ext_id":"bob"}"#)
            == .pushReport(PushReportRequest(kind: .action, engagementUID: "e", messageID: "778", action: "dp:x", userExtID: "bob")))
        #expect(try request(#"{"op":"push_report","kind":"failed","engagement_uid":"e"}"#)
            == .pushReport(PushReportRequest(kind: .failed, engagementUID: "e")))
        #expect(try request(#"{"op":"send","message":{"cid":500}}"#) == .session(.send(["cid": 500])))
        #expect(try request(#"{"op":"request","message":{"cid":500}}"#)
            == .session(.request(message: ["cid": 500], expectCid: nil, timeoutMs: nil)))
        #expect(try request(#"{"op":"request","message":{"cid":500},"expect_cid":501,"timeout_ms":1000}"#)
            == .session(.request(message: ["cid": 500], expectCid: 501, timeoutMs: 1000)))
        #expect(try request(#"{"op":"bridge","message":{"bcid":7,"props":{}}}"#) == .session(.bridge(["bcid": 7, "props": [:]])))
        #expect(try request(#"{"op":"log_level","level":"debug"}"#) == .logLevel(.debug))
        #expect(try request(#"{"op":"log_level","level":"critical"}"#) == .logLevel(.critical))
        #expect(try request(#"{"op":"metrics"}"#) == .metrics)
        #expect(try request(#"{"op":"api","call":"inbox.list","args":{"from":0,"to":5}}"#)
            == .api(DataAPIRequest(call: "inbox.list", args: DataAPIArgs(["from": 0, "to": 5]))))
        // null counts as absent for optional arguments
        #expect(try request(#"{"op":"identify","ext_user_id":"u","hash":null}"#) == .session(.identify(extUserID: "u", hash: nil)))
    }

    @Test func everyOpIsKnown() throws {
        #expect(SocketOp.allCases.count == 21)
        for op in SocketOp.allCases {
            let parsed = SocketRequestParser.parse(#"{"op":"\#(op.rawValue)"}"#)
            if case .failure(let e) = parsed.request { #expect(e.code == .badRequest, "\(op): \(e)") }
        }
    }

    @Test func missingAndWrongTypedFieldsAreNamed() {
        let cases: [(String, String)] = [
            (#"{"id":1}"#, #""op" is missing"#),
            (#"{"op":5}"#, #""op" must be a string"#),
            (#"{"op":"identify"}"#, #""ext_user_id" is required"#),
            (#"{"op":"identify","ext_user_id":5}"#, #""ext_user_id" of op "identify" must be a string, got number"#),
            (#"{"op":"identify","ext_user_id":""}"#, #""ext_user_id" of op "identify" must not be empty"#),
            (#"{"op":"identify","ext_user_id":"u","hash":[]}"#, #""hash" of op "identify" must be a string, got array"#),
            (#"{"op":"push_token","token":"t"}"#, #""status" is required"#),
            (#"{"op":"push_token","token":"t","status":5}"#, #""status" of op "push_token" must be in 0...4, got 5"#),
            (#"{"op":"push_token","token":"t","status":1.5}"#, #""status" of op "push_token" must be an integer"#),
            (#"{"op":"push_token","status":1}"#, #""token" is required"#),
            (#"{"op":"language"}"#, #""language" is required"#),
            (#"{"op":"log_level"}"#, #""level" is required"#),
            (#"{"op":"log_level","level":"verbose"}"#, #"field "level" must be one of trace, debug, info, notice, warning, error, critical, got "verbose""#),
            (#"{"op":"language","language":"en us!"}"#, #""language" must be an ISO 639-1 code"#),
            (#"{"op":"event"}"#, #""event_type" is required"#),
            (#"{"op":"event","event_type":"x","payload":[1]}"#, #""payload" of op "event" must be an object, got array"#),
            (#"{"op":"report","engagement_uid":"e"}"#, #""kind" is required"#),
            (#"{"op":"report","kind":"clicked","engagement_uid":"e"}"#, #""kind" must be "impression", "action" or "failed""#),
            (#"{"op":"report","kind":"failed"}"#, #""engagement_uid" is required"#),
            (#"{"op":"minigame_ack"}"#, #""saw_template_id" is required"#),
            (#"{"op":"minigame_ack","saw_template_id":"7"}"#, #""saw_template_id" of op "minigame_ack" must be an integer, got string"#),
            (#"{"op":"push_report","kind":"delivered"}"#, #""engagement_uid" is required"#),
            (#"{"op":"push_report","kind":"delivered","engagement_uid":"e","action":"dp:x"}"#, #""action" is only for kind "action""#),
            (#"{"op":"push_report","kind":"seen","engagement_uid":"e","message_id":"m"}"#, #""kind" must be "delivered""#),
            (#"{"op":"send"}"#, #""message" is required"#),
            (#"{"op":"send","message":"x"}"#, #""message" of op "send" must be an object, got string"#),
            (#"{"op":"send","message":{}}"#, #""message.cid" is required"#),
            (#"{"op":"send","message":{"cid":"500"}}"#, #""message.cid" of op "send" must be an integer, got string"#),
            (#"{"op":"request","message":{"cid":1.5}}"#, #""message.cid" of op "request" must be an integer, got 1.5"#),
            (#"{"op":"request","message":{"cid":500},"timeout_ms":0}"#, #""timeout_ms" of op "request" must be in 1...3600000"#),
            (#"{"op":"request","message":{"cid":500},"expect_cid":"x"}"#, #""expect_cid" of op "request" must be an integer"#),
            (#"{"op":"bridge","message":{"cid":1}}"#, #""message.bcid" is required"#),
            (#"{"op":"subscribe","types":"engagement"}"#, #""types" of op "subscribe" must be an array"#),
            (#"{"op":"subscribe","types":[1]}"#, #""types[0]" must be a string"#),
            (#"{"op":"subscribe","types":["engagment"]}"#, #""types[0]": unknown event "engagment""#),
            (#"{"op":"subscribe","since":-1}"#, #""since" of op "subscribe" must be in 0..."#),
            (#"{"op":"subscribe","durable":""}"#, #""durable" must be a name of 1 to 128 bytes"#),
            (#"{"op":"subscribe","since":3,"journal":""}"#, #"field "journal" must be the `journal` of an earlier subscribe answer (1 to 64 bytes), got 0 bytes"#),
            ("{\"op\":\"subscribe\",\"since\":3,\"journal\":\"\(String(repeating: "j", count: 65))\"}", "got 65 bytes"),
            (#"{"op":"subscribe","since":3,"journal":7}"#, #""journal" of op "subscribe" must be a string"#),
            (#"{"op":"ack"}"#, #""seq" is required"#),
            (#"{"op":"hello","extra":1}"#, #""extra" is not an argument of op "hello""#),
            (#"{"op":"status","id":{"a":1}}"#, #""id" must be a string or a number, got object"#),
            (#"[1,2]"#, "a request must be a JSON object, got array"),
        ]
        for (line, expected) in cases {
            let e = error(line)
            #expect(e?.code == .badRequest, "\(line) → \(String(describing: e))")
            #expect(e?.message.contains(expected) == true, "\(line) → \(e?.message ?? "no error"), expected to contain \(expected)")
        }
    }

    @Test func unknownOpAndBadJSON() {
        #expect(error(#"{"op":"frobnicate"}"#)?.code == .unknownOp)
        #expect(error(#"{"op":"frobnicate"}"#)?.message.contains("frobnicate") == true)
        #expect(error("{\"op\":").map(\.code) == .badJSON)
        #expect(error("not json").map(\.code) == .badJSON)
        #expect(error("\u{1}\u{2}").map(\.code) == .badJSON)
        #expect(error(String(repeating: "[", count: 200) + String(repeating: "]", count: 200)).map(\.code) == .badJSON)
    }

    @Test func idIsKeptExactly() throws {
        let big = SocketRequestParser.parse(#"{"op":"hello","id":12345678901234567890123}"#)
        #expect(big.id?.serializedString() == "12345678901234567890123")
        let fraction = SocketRequestParser.parse(#"{"op":"hello","id":1.50}"#)
        #expect(fraction.id?.serializedString() == "1.50")
        let text = SocketRequestParser.parse(#"{"op":"nope","id":"a\"b"}"#)
        #expect(text.id == .string("a\"b"))
        #expect(SocketRequestParser.parse(#"{"op":"hello","id":null}"#).id == nil)
    }

    @Test func framerSplitsLinesAcrossChunks() {
        var framer = LineFramer(maxLineBytes: 10)
        var lines: [String] = []
        let chunks = ["ab", "c\nde", "f\r\n\n", "0123456789\nx"]
        for chunk in chunks {
            let outcome = Array(chunk.utf8).withUnsafeBytes { bytes in
                framer.feed(bytes) { line in
                    lines.append(String(decoding: line, as: UTF8.self))
                    return true
                }
            }
            #expect(outcome == .ok)
        }
        #expect(lines == ["abc", "def", "", "0123456789"])
        #expect(framer.bufferedByteCount == 1)
    }

    @Test func framerRefusesALongLineWithoutBufferingIt() {
        var framer = LineFramer(maxLineBytes: 100)
        var delivered = 0
        let ok = Array("short\n".utf8).withUnsafeBytes { framer.feed($0) { _ in delivered += 1; return true } }
        #expect(ok == .ok)
        var outcome = LineFramer.Outcome.ok
        for _ in 0..<10 where outcome == .ok {
            outcome = [UInt8](repeating: 0x41, count: 30).withUnsafeBytes { framer.feed($0) { _ in delivered += 1; return true } }
            #expect(framer.bufferedByteCount <= 100)
        }
        #expect(outcome == .lineTooLong(offset: 6))
        #expect(delivered == 1)
        // A long line that arrives whole (with its newline) is refused too.
        var whole = LineFramer(maxLineBytes: 4)
        let refused = Array("12345\n".utf8).withUnsafeBytes { whole.feed($0) { _ in true } }
        #expect(refused == .lineTooLong(offset: 0))
    }

    /// Found by fuzz-socket-request (Fuzz/Corpus/fuzz-socket-request/regression-offset-after-lines):
    /// a long line after other lines of the same read was reported at twice its offset (the lines
    /// before it counted twice), so the error named a byte past the line; cut into other reads, the
    /// same stream gave another offset. It must be the line's start however the bytes arrive.
    @Test func framerNamesTheLongLinesOffsetAfterLinesOfTheSameRead() {
        let stream = Array(#"{"op">hello"}"#.utf8) + [0x0A] + Array(#"{"op":"event","event_type":""#.utf8)
            + [UInt8](repeating: 0x78, count: 300) + Array("\"}\n".utf8)
        let lineStart = 14
        for cut in [stream.count, 1, 7, 20, 64] {
            var framer = LineFramer(maxLineBytes: 256)
            var lines = 0
            var outcome = LineFramer.Outcome.ok
            var i = 0
            while i < stream.count, outcome == .ok {
                let end = min(stream.count, i + cut)
                outcome = stream[i..<end].withUnsafeBytes { framer.feed($0) { _ in lines += 1; return true } }
                i = end
            }
            #expect(outcome == .lineTooLong(offset: lineStart), "reads of \(cut) bytes")
            #expect(lines == 1, "reads of \(cut) bytes")
            // Once refused, it stays refused with the same offset.
            let again = Array("{}\n".utf8).withUnsafeBytes { framer.feed($0) { _ in lines += 1; return true } }
            #expect(again == .lineTooLong(offset: lineStart))
            #expect(lines == 1)
        }
    }
}
