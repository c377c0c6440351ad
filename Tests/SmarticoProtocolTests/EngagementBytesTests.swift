import Testing
import SmarticoProtocol

/// The object path: the whole message parsed, then typed (no bytes kept).
private func treeDecode(_ input: [UInt8]) -> Result<ServerMessage, ProtocolError> {
    let value: JSONValue
    do { value = try JSONValue(parsing: input) } catch { return .failure(ProtocolError(error)) }
    guard case .object(let o) = value else { return .failure(.notAnObject(found: value.type)) }
    do { return .success(try ServerMessage(json: o)) } catch { return .failure(error) }
}

private func fastDecode(_ input: [UInt8]) -> Result<ServerMessage, ProtocolError> {
    do { return .success(try ServerMessage.decode(input)) } catch { return .failure(error) }
}

/// A 110 decoded from bytes keeps them (forwarded as received) and types as the object path does.
@Suite struct EngagementBytesTests {
    static let odd = #"  { "template_html" : "<p class=\"x\">\u00e9 Gr\u00fc\u00dfe \ud83d\ude00 é</p>\/" , "cid":110 ,"bcid":9,"#
        + #" "engagement_uid":"e\u002d1", "activityType" : 30,"engagement_id":9007199254740993, "ts":1632913275835,"#
        + #""uuid":"u-1","params":{"a":[1,2.50,-0e0]},"bcid":{"x":1}} "#

    @Test func fieldsEqualTheTreePath() throws {
        for text in [Self.odd, #"{"cid":110}"#, #"{"cid":1.1e2,"engagement_uid":null,"activityType":null}"#,
                     #"{"engagement_uid":"a","engagement_uid":"b","cid":110,"activityType":20,"engagement_id":-1}"#,
                     #"{"cid":110,"\u0065ngagement_uid":"escaped-key","activityType":1e1}"#,
                     // Plainly spelled (read from the bytes), and the edges of that reading.
                     #"{"cid":110,"ts":-0,"uuid":"","engagement_uid":"é ☃","activityType":-7,"engagement_id":999999999999999999}"#,
                     #"{"cid":110,"engagement_id":9223372036854775807,"uuid":null,"ts":null,"engagement_uid":"a\"b"}"#,
                     #"{"cid":110,"engagement_id":-9223372036854775808,"activityType":30,"activityType":31}"#,
                     #"{"cid":110,"ts":1e3,"engagement_uid":"x","cid":110}"#] {
            let input = bytes(text)
            guard case .engagement(let fast) = try ServerMessage.decode(input),
                  case .success(.engagement(let tree)) = treeDecode(input) else {
                Issue.record("not an engagement on both paths: \(text)"); continue
            }
            #expect(fast.raw != nil && tree.raw == nil)
            #expect(fast.originalBytes == input)
            #expect(fast.engagementUID == tree.engagementUID)
            #expect(fast.activityType == tree.activityType)
            #expect(fast.engagementID == tree.engagementID)
            #expect(fast.uuid == tree.uuid && fast.ts == tree.ts)
            #expect(fast.json == tree.json)
            #expect(fast.json.keys == tree.json.keys, "the json keeps every member in order")
            #expect(fast == tree && tree == fast)
            #expect(ServerMessage.engagement(fast) == ServerMessage.engagement(tree))
            #expect(ServerMessage.engagement(fast).cid == .clientEngagementEvent)
            #expect(ServerMessage.engagement(fast).uuid == tree.uuid)
            #expect(try ClientEngagementEvent.decode(input) == tree)
            let viaBuffer = try input.withUnsafeBytes { try ServerMessage.decode($0) }
            #expect(viaBuffer == .engagement(tree))
        }
        guard case .engagement(let e) = try ServerMessage.decode(bytes(Self.odd)) else { Issue.record("not 110"); return }
        #expect(e.engagementUID == "e-1" && e.engagementID == 9_007_199_254_740_993 && e.activityType == .popup)
        #expect(e.json["engagement_id"]?.numberValue?.literal == "9007199254740993")
        // Equal values spelled differently are equal messages; different values are not.
        let compact = try ServerMessage.decode(try JSONValue(parsing: bytes(Self.odd)).serialized())
        #expect(compact == .engagement(e))
        let other = try ServerMessage.decode(bytes(#"{"cid":110,"engagement_uid":"e-2"}"#))
        #expect(other != .engagement(e))
    }

    @Test func errorsAreTheTreePathErrors() {
        // Mistyped fields are read loosely, the same way on both paths (session rule 7): never an error.
        let tolerated: [(String, uid: String?, activityType: Int64?, engagementID: Int64?)] = [
            (#"{"cid":110,"engagement_uid":5}"#, "5", nil, nil),
            (#"{"cid":110,"activityType":"30"}"#, nil, 30, nil),
            (#"{"cid":110,"engagement_id":1.5}"#, nil, nil, nil),
            (#"{"cid":110,"ts":"now"}"#, nil, nil, nil),
            (#"{"cid":110,"uuid":[1]}"#, nil, nil, nil),
            (#"{"cid":110,"engagement_uid":"ok","engagement_uid":{}}"#, nil, nil, nil),
            (#"{"cid":110,"engagement\u005fuid":true}"#, nil, nil, nil),
            (#"{"engagement_id":"x","activityType":"y","cid":110}"#, nil, nil, nil),
            (#"{"cid":110,"engagement_id":99999999999999999999}"#, nil, nil, nil),
            (#"{"cid":110,"activityType":null,"activity_type":31,"engagement_uid":null,"ts":[]}"#, nil, 31, nil),
        ]
        for (text, uid, activityType, engagementID) in tolerated {
            let input = bytes(text)
            guard case .success(.engagement(let tree)) = treeDecode(input), case .success(.engagement(let fast)) = fastDecode(input) else {
                Issue.record("not decoded as a 110: \(text)"); continue
            }
            for e in [tree, fast] {
                #expect(e.engagementUID == uid && e.activityType?.rawValue == activityType && e.engagementID == engagementID, "\(text)")
            }
        }
        let cases: [(String, ProtocolError)] = [
            (#"{"cid":"1l0"}"#, .classIDNotInteger(field: "cid", found: "string \"1l0\"")),
            (#"{"cid":110.5}"#, .classIDNotInteger(field: "cid", found: "number 110.5")),
            (#"{"cid":110,"cid":null}"#, .classIDNotInteger(field: "cid", found: "null")),
            (#"{"engagement_uid":"e"}"#, .missingClassID(field: "cid")),
            (#"[{"cid":110}]"#, .notAnObject(found: .array)),
            (#""cid""#, .notAnObject(found: .string)),
        ]
        for (text, expected) in cases {
            let input = bytes(text)
            guard case .failure(let tree) = treeDecode(input) else { Issue.record("the tree path accepts \(text)"); continue }
            #expect(tree == expected, "\(text)")
            guard case .failure(let fast) = fastDecode(input) else { Issue.record("the fast path accepts \(text)"); continue }
            #expect(fast == expected, "\(text)")
        }
        // Not JSON, too deep, too large: the parser's errors.
        for (text, options) in [(#"{"cid":110,"engagement_uid":"e"#, JSONParseOptions()),
                                (#"{"cid":110,"x":"\uD800"}"#, JSONParseOptions()),
                                (#"{"cid":110,"x":[[1]]}"#, JSONParseOptions(maxDepth: 2)),
                                (#"{"cid":110}"#, JSONParseOptions(maxBytes: 5))] {
            let input = bytes(text)
            var treeError: ProtocolError?
            do { _ = try JSONValue(parsing: input, options: options) } catch { treeError = ProtocolError(error) }
            var fastError: ProtocolError?
            do { _ = try ServerMessage.decode(input, options: options) } catch { fastError = error }
            #expect(treeError != nil && fastError == treeError, "\(text)")
        }
        // The typed entry point names the wrong cid as before.
        #expect(throws: ProtocolError.unexpectedClassID(expected: .cid(110), found: .cid(105))) {
            try ClientEngagementEvent.decode(bytes(#"{"cid":105,"engagement_uid":"e"}"#))
        }
        #expect(throws: ProtocolError.missingClassID(field: "cid")) { try ClientEngagementEvent.decode(bytes("{}")) }
    }

    @Test func otherClassIDsStillParse() throws {
        #expect(try ServerMessage.decode(bytes(#"{"cid":2,"ts":1}"#)) == .pong(try Pong(json: ["cid": 2, "ts": 1])))
        guard case .other(let cid, let json) = try ServerMessage.decode(bytes(#" {"cid":504,"x":[1]} "#)) else {
            Issue.record("not other"); return
        }
        #expect(cid == ClassID(504) && json == ["cid": 504, "x": [1]])
    }

    /// The verdict on the cid is the tree path's, for cids next to 110 and for cids that are not integers.
    @Test func theClassIDIsReadAsTheTreePathReadsIt() {
        for cid in ["110", "1100", "11", "-110", "0", "-0", "110.0", "1.1e2", "110.5", "null", #""110""#, "true",
                    "9223372036854775807", "99999999999999999999", "[110]", #"" 110 ""#, #""abc""#] {
            let input = bytes(#"{"cid":"# + cid + #","engagement_uid":"e","ts":1}"#)
            let fast = fastDecode(input), tree = treeDecode(input)
            #expect(fast == tree, "cid \(cid)")
            if case .success(let message) = fast {
                let isEngagement = if case .engagement = message { true } else { false }
                // A string holding an integer is that integer (issue 41, as the SDK reads it).
                #expect(isEngagement == ["110", "110.0", "1.1e2", #""110""#, #"" 110 ""#].contains(cid), "cid \(cid)")
            }
        }
    }

    /// `{"bcid":3` + the members as received, a `bcid` member dropped: the same JSON as
    /// `BridgeMessage(showing:)` built from the tree, `bcid` first.
    @Test func showEngagementIsSplicedFromTheBytes() throws {
        let raw = try RawJSONObject(validating: bytes(Self.odd))
        let spliced = BridgeMessage.showEngagementBytes(raw)
        #expect(spliced.text == #"{"bcid":3,"template_html" : "<p class=\"x\">\u00e9 Gr\u00fc\u00dfe \ud83d\ude00 é</p>\/" , "cid":110,"#
            + #""engagement_uid":"e\u002d1", "activityType" : 30,"engagement_id":9007199254740993, "ts":1632913275835,"#
            + #""uuid":"u-1","params":{"a":[1,2.50,-0e0]}}"#)
        let tree = try ClientEngagementEvent(json: try #require(try JSONValue(parsing: bytes(Self.odd)).objectValue))
        let expected = BridgeMessage(showing: tree).json
        let parsed = try #require(try JSONValue(parsing: spliced).objectValue)
        #expect(parsed == expected)
        #expect(parsed.keys == expected.keys)
        var fields = tree.json
        fields.removeValue(forKey: "bcid")
        #expect(try BridgeMessage.decode(spliced) == .showEngagement(fields))
        let event = try ClientEngagementEvent.decode(bytes(Self.odd))
        #expect(event.showEngagementBytes() == spliced)

        // A compact message gives exactly the serialization of the tree-built bridge.
        let compact = try JSONValue(parsing: bytes(Self.odd)).serialized()
        #expect(BridgeMessage.showEngagementBytes(try RawJSONObject(validating: compact)) == expected.serialized())

        for (text, bridge) in [("{}", #"{"bcid":3}"#), (" { \t} ", #"{"bcid":3}"#), (#"{"bcid":1}"#, #"{"bcid":3}"#),
                               (#"{"b\u0063id":1,"bcid":2}"#, #"{"bcid":3}"#), (#"{"a":1,"bcid":2}"#, #"{"bcid":3,"a":1}"#),
                               (#"{"bcid":2, "a" :1 , "b":2}"#, #"{"bcid":3,"a" :1 , "b":2}"#),
                               (#"{"a":1,"bcid":2,"b":[],"bcid":4,"c":{}}"#, #"{"bcid":3,"a":1,"b":[],"c":{}}"#),
                               (#"{"bcidx":1}"#, #"{"bcid":3,"bcidx":1}"#)] {
            let r = try RawJSONObject(validating: bytes(text))
            let out = BridgeMessage.showEngagementBytes(r)
            #expect(out.text == bridge, "\(text)")
            #expect(try JSONValue(parsing: out) == .object(BridgeMessage.showEngagement(r.parsed()).json), "\(text)")
        }
    }

    @Test func lineBreaksAreReported() throws {
        #expect(try !RawJSONObject(validating: bytes(Self.odd)).containsLineBreaks)
        #expect(try RawJSONObject(validating: bytes("{\"cid\":110,\n\"a\":1}")).containsLineBreaks)
        #expect(try RawJSONObject(validating: bytes("{\"cid\":110}\r")).containsLineBreaks)
        #expect(try !RawJSONObject(validating: bytes(#"{"t":"a\nb\r"}"#)).containsLineBreaks, "escaped in a string: not a line break")
        #expect(!RawJSONObject(compacting: ["t": "a\nb", "n": [1]]).containsLineBreaks)
    }
}
