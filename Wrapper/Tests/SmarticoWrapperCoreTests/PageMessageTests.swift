import SmarticoProtocol
import SmarticoWrapperCore
import Testing

@Suite("PageMessage: what a page posts through the Native Bridge")
struct PageMessageTests {
    @Test("the JSON text of a posted string (postMessage(JSON.stringify(m)))")
    func jsonText() throws {
        let m = try PageMessage(posted: #"{"bcid":1}"#)
        #expect(m.bcid == 1)
        #expect(m.known == .pageReady)
        #expect(m.json == (try object(#"{"bcid":1}"#)))
    }

    @Test("an object posted as such keeps every field, nested ones too")
    func objectJSON() throws {
        let text = #"{"bcid":6,"message":{"cid":103,"engagement_uid":"e-1","payload":{"a":[1,2,{"b":null}]}},"extra":"x"}"#
        let m = try PageMessage(posted: text)
        #expect(m.bcid == 6)
        #expect(m.known == .sendToSocket)
        #expect(m.json == (try object(text)))
        #expect(m.json["message"]?["payload"]?["a"]?[2]?["b"] == .null)
        #expect(m.json["extra"] == "x")
    }

    @Test("a JSON string holding JSON (the glue serialised a posted string) is parsed once more")
    func nestedJSONString() throws {
        let inner = #"{"bcid":4,"dp":"dp:gf_missions"}"#
        let outer = JSONValue.string(inner).serializedString()
        #expect(outer.hasPrefix("\"{\\\"bcid"))
        let m = try PageMessage(posted: outer)
        #expect(m.bcid == 4)
        #expect(m.known == .executeDeepLink)
        #expect(m.deepLink == "dp:gf_missions")
        #expect(m.json == (try object(inner)))
    }

    @Test("a string holding a string holding JSON is parsed only once more: not an object")
    func doublyNestedString() throws {
        let twice = JSONValue.string(JSONValue.string(#"{"bcid":1}"#).serializedString()).serializedString()
        #expect(throws: PageMessage.Problem.notAnObject("string")) { try PageMessage(posted: twice) }
    }

    @Test("a message of exactly maxBytes is taken; one byte more is too long")
    func tooLong() throws {
        let head = #"{"bcid":6,"pad":""#, tail = #""}"#
        let pad = String(repeating: "x", count: PageMessage.maxBytes - head.utf8.count - tail.utf8.count)
        let exact = head + pad + tail
        #expect(exact.utf8.count == PageMessage.maxBytes)
        let m = try PageMessage(posted: exact)
        #expect(m.bcid == 6)
        let over = head + pad + "y" + tail
        #expect(throws: PageMessage.Problem.tooLong(bytes: PageMessage.maxBytes + 1)) { try PageMessage(posted: over) }
        // Counted in UTF-8 bytes, not characters: 200,000 "é" are 400,000 bytes (taken); 300,000 are 600,000.
        let accents = #"{"bcid":6,"pad":""# + String(repeating: "é", count: 300_000) + tail
        #expect(throws: PageMessage.Problem.tooLong(bytes: accents.utf8.count)) { try PageMessage(posted: accents) }
        #expect(PageMessage.Problem.tooLong(bytes: 9).description.contains("9 bytes"))
    }

    @Test("not JSON", arguments: [
        "", "{bcid:1}", "{'bcid':1}", #"{"bcid":1"#, #"{"bcid":1}x"#, "undefined", "[object Object]",
        #""{bcid:1}""#, #""just text""#,  // strings, but what they hold is not JSON
    ])
    func notJSON(_ text: String) {
        #expect {
            try PageMessage(posted: text)
        } throws: { error in
            guard case .notJSON(let why) = error as? PageMessage.Problem else { return false }
            return !why.isEmpty
        }
    }

    @Test("nested deeper than 64 is not taken (the parser's depth limit)")
    func tooDeep() throws {
        let deep = #"{"bcid":1,"x":"# + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "}"
        #expect(throws: (any Error).self) { try PageMessage(posted: deep) }
        let fine = #"{"bcid":1,"x":"# + String(repeating: "[", count: 10) + String(repeating: "]", count: 10) + "}"
        #expect(try PageMessage(posted: fine).bcid == 1)
    }

    @Test("JSON that is not an object", arguments: [
        ("[1,2]", "array"), ("42", "number"), ("null", "null"), ("true", "boolean"),
        (#""42""#, "number"), (#""[{\"bcid\":1}]""#, "array"),
    ])
    func notAnObject(_ text: String, _ type: String) {
        #expect(throws: PageMessage.Problem.notAnObject(type)) { try PageMessage(posted: text) }
    }

    @Test("an object without an integer bcid", arguments: [
        "{}", #"{"BCID":1}"#, #"{"bcid":"1"}"#, #"{"bcid":1.5}"#, #"{"bcid":null}"#, #"{"bcid":true}"#,
        #"{"bcid":[1]}"#, #"{"bcid":{"v":1}}"#, #"{"bcid":1e100}"#, #"{"bcid":99999999999999999999}"#,
    ])
    func noBCID(_ text: String) {
        #expect(throws: PageMessage.Problem.noBCID) { try PageMessage(posted: text) }
        #expect(throws: PageMessage.Problem.noBCID) { try PageMessage(json: (try? object(text)) ?? [:]) }
    }

    @Test("an integral bcid written otherwise is still an integer; unknown ids are kept")
    func bcidForms() throws {
        #expect(try PageMessage(posted: #"{"bcid":5e0}"#).known == .readyToBeShown)
        #expect(try PageMessage(posted: #"{"bcid":-0}"#).bcid == 0)
        let unknown = try PageMessage(posted: #"{"bcid":99}"#)
        #expect(unknown.bcid == 99)
        #expect(unknown.known == nil)
        #expect(try PageMessage(posted: #"{"bcid":2}"#).known == .closeMe)
        #expect(try PageMessage(posted: #"{"bcid":3}"#).known == .showEngagement)
        #expect(try PageMessage(posted: #"{"bcid":7}"#).known == .sendPublicProps)
        #expect(try PageMessage(posted: #"{"bcid":8}"#).known == .sendGameOpening)
    }

    @Test("the last bcid of duplicate keys counts, as in JavaScript")
    func duplicateBCID() throws {
        #expect(try PageMessage(posted: #"{"bcid":1,"bcid":2}"#).bcid == 2)
    }

    @Test("deepLink is dp trimmed; nil when absent, empty, blank or not a string")
    func deepLinkTrimming() throws {
        #expect(try message(#"{"bcid":4,"dp":"  dp:gf_missions \n"}"#).deepLink == "dp:gf_missions")
        #expect(try message(#"{"bcid":4,"dp":"\t\r\ndp:cashier&amount=5\t"}"#).deepLink == "dp:cashier&amount=5")
        #expect(try message(#"{"bcid":4,"dp":"https://example.com/a b"}"#).deepLink == "https://example.com/a b")
        #expect(try message(#"{"bcid":4}"#).deepLink == nil)
        #expect(try message(#"{"bcid":4,"dp":""}"#).deepLink == nil)
        #expect(try message(#"{"bcid":4,"dp":" \n\t "}"#).deepLink == nil)
        #expect(try message(#"{"bcid":4,"dp":42}"#).deepLink == nil)
        #expect(try message(#"{"bcid":4,"dp":null}"#).deepLink == nil)
    }

    @Test("problems describe themselves")
    func descriptions() {
        #expect(PageMessage.Problem.noBCID.description.contains("bcid"))
        #expect(PageMessage.Problem.notAnObject("array").description.contains("array"))
        #expect(PageMessage.Problem.notJSON("why").description.contains("why"))
    }
}

@Suite("BridgeScript: SHOW_ENGAGEMENT as a MessageEvent")
struct BridgeScriptTests {
    static let prefix = "window.dispatchEvent(new MessageEvent('message',{data:"
    static let suffix = "}));true;"

    /// The JavaScript string literal the script hands the page as `data`.
    func literal(of script: String) throws -> String {
        try #require(script.hasPrefix(Self.prefix), "the script does not dispatch a MessageEvent: \(script.prefix(80))")
        try #require(script.hasSuffix(Self.suffix), "the script does not end as expected: \(script.suffix(40))")
        return String(script.dropFirst(Self.prefix.count).dropLast(Self.suffix.count))
    }

    /// The object a page's `JSON.parse(event.data)` would get.
    func roundTrip(_ bridge: JSONObject) throws -> JSONObject {
        let script = BridgeScript.showEngagement(bridge)
        let lit = try literal(of: script)
        #expect(lit.first == "\"", "data must be a string, not an object literal")
        let text = try JSStringLiteral.decode(lit)
        return try #require(try JSONValue(parsing: text).objectValue)
    }

    /// What a script must never contain raw, wherever the payload's text puts it.
    func expectSafe(_ script: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!script.contains("<"), "a raw < (</script>, <!--) in the script", sourceLocation: sourceLocation)
        #expect(!script.lowercased().contains("</script"), sourceLocation: sourceLocation)
        for scalar in script.unicodeScalars {
            #expect(scalar.value >= 0x20 && scalar != "\u{2028}" && scalar != "\u{2029}",
                    "a raw U+\(String(scalar.value, radix: 16)) in the script", sourceLocation: sourceLocation)
        }
    }

    @Test("data is the JSON string of the bridge object, parsed back to the same object")
    func plain() throws {
        let bridge = try object(#"{"bcid":3,"engagement_uid":"e-1","activityType":30,"body":{"title":"Hi","n":12.5,"ok":true,"none":null,"list":[1,"2"]}}"#)
        let script = BridgeScript.showEngagement(bridge)
        expectSafe(script)
        #expect(try literal(of: script) == BridgeScript.javaScriptStringLiteral(JSONValue.object(bridge).serializedString()))
        #expect(try roundTrip(bridge) == bridge)
        // Not an object literal (`{data:{bcid:3,…}}`): Smartico's pages JSON.parse a string.
        #expect(!script.contains("{data:{"))
    }

    @Test("hostile text in the payload cannot leave the literal, and comes back unchanged")
    func hostile() throws {
        let nasty = "\"quotes\" 'single' \\back\\slash\\ \\\" \n new\r\nline \t tab </script><script>alert(1)</script> <!-- "
            + "\u{2028}LS\u{2029}PS \u{0}\u{1}\u{8}\u{B}\u{C}\u{1B}\u{1F}\u{7F} é ✓ 😀 \u{FEFF} ${x} `tpl` \u{85}"
        var bridge = JSONObject()
        bridge.append(key: "bcid", value: .number(3))
        bridge.append(key: "body", value: .string(nasty))
        bridge.append(key: nasty, value: .array([.string(nasty), .object(["k": .string(nasty)])]))
        let script = BridgeScript.showEngagement(bridge)
        expectSafe(script)
        let back = try roundTrip(bridge)
        #expect(back == bridge)
        #expect(back["body"]?.stringValue == nasty)
    }

    @Test("javaScriptStringLiteral escapes exactly what it must", arguments: [
        ("", #""""#),
        ("plain text", #""plain text""#),
        ("a\"b", #""a\"b""#),
        ("a\\b", #""a\\b""#),
        ("\\\"", #""\\\"""#),
        ("line\nbreak", #""line\nbreak""#),
        ("cr\rlf", #""cr\rlf""#),
        ("tab\t", #""tab\t""#),
        ("</script>", #""\u003c/script>""#),
        ("<!--", #""\u003c!--""#),
        ("\u{2028}\u{2029}", #""\u2028\u2029""#),
        ("\u{0}", #""\u0000""#),
        ("\u{1}\u{1F}", #""\u0001\u001f""#),
        ("\u{8}\u{C}\u{B}", #""\u0008\u000c\u000b""#),
        ("'single'", #""'single'""#),
        ("/", #""/""#),
        ("é😀", "\"é😀\""),
    ])
    func literals(_ input: String, _ expected: String) throws {
        let lit = BridgeScript.javaScriptStringLiteral(input)
        #expect(lit == expected)
        #expect(try JSStringLiteral.decode(lit) == input)
    }

    @Test("every code point below U+0080, and the line separators, round-trip")
    func everyASCII() throws {
        var s = ""
        for v in UInt32(0)..<0x80 { s.unicodeScalars.append(Unicode.Scalar(v)!) }
        s += "\u{2028}\u{2029}\u{85}\u{A0}"
        let lit = BridgeScript.javaScriptStringLiteral(s)
        #expect(try JSStringLiteral.decode(lit) == s)
        expectSafe(lit)
    }

    @Test("the decoder used here refuses what is not one literal (so the checks above can fail)")
    func decoderRefuses() {
        #expect(throws: JSStringLiteral.Invalid.self) { try JSStringLiteral.decode(#""a"b""#) }
        #expect(throws: JSStringLiteral.Invalid.self) { try JSStringLiteral.decode("\"a\nb\"") }
        #expect(throws: JSStringLiteral.Invalid.self) { try JSStringLiteral.decode("\"a\u{2028}b\"") }
        #expect(throws: JSStringLiteral.Invalid.self) { try JSStringLiteral.decode(#""a\""#) }
        #expect(throws: JSStringLiteral.Invalid.self) { try JSStringLiteral.decode("'a'") }
        #expect((try? JSStringLiteral.decode(#""\x41\u0042\u{43}\uD83D\uDE00""#)) == "ABC😀")
    }
}
