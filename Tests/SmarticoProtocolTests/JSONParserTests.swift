import Testing
import SmarticoProtocol

@Suite struct JSONParserTests {
    @Test(arguments: ["9007199254740993", "18446744073709551615", "-9223372036854775808", "1632913275835",
                      "1e400", "0.1", "-0.0", "1E+2", "-1.5e-7", "0", "123456789012345678901234567890.000"])
    func numbersSurviveByteExactly(_ literal: String) throws {
        let v = try JSONValue(parsing: literal)
        #expect(v.serialized().text == literal)
        let inArray = try JSONValue(parsing: "[\(literal),{\"n\":\(literal)}]")
        #expect(inArray.serialized().text == "[\(literal),{\"n\":\(literal)}]")
    }

    @Test func numberAccessors() throws {
        #expect(try JSONValue(parsing: "9007199254740993").int64Value == 9_007_199_254_740_993)
        #expect(try JSONValue(parsing: "18446744073709551615").uint64Value == UInt64.max)
        #expect(try JSONValue(parsing: "18446744073709551615").int64Value == nil)
        #expect(try JSONValue(parsing: "-9223372036854775808").int64Value == Int64.min)
        #expect(try JSONValue(parsing: "-9223372036854775809").int64Value == nil)
        #expect(try JSONValue(parsing: "1e3").int64Value == 1000)
        #expect(try JSONValue(parsing: "1.5").int64Value == nil)
        #expect(try JSONValue(parsing: "-0.0").int64Value == 0)
        #expect(try JSONValue(parsing: "0.1").doubleValue == 0.1)
        #expect(try JSONValue(parsing: "1e400").doubleValue == .infinity)
        #expect(try JSONValue(parsing: "-1").uint64Value == nil)
    }

    @Test func numbersCompareExactly() throws {
        #expect(try JSONValue(parsing: "1") == JSONValue(parsing: "1.0"))
        #expect(try JSONValue(parsing: "1") == JSONValue(parsing: "10e-1"))
        #expect(try JSONValue(parsing: "-0") == JSONValue(parsing: "0"))
        #expect(try JSONValue(parsing: "9007199254740993") != JSONValue(parsing: "9007199254740992"))
        #expect(try JSONValue(parsing: "1e400") != JSONValue(parsing: "1e401"))
        #expect(try JSONValue(parsing: "0.1") != JSONValue(parsing: "0.10000000000000001"))
    }

    @Test func objectsKeepOrderAndCompareAsSets() throws {
        let a = try JSONValue(parsing: #"{"z":1,"a":{"y":[1,2],"b":null},"m":"x"}"#)
        #expect(a.serialized().text == #"{"z":1,"a":{"y":[1,2],"b":null},"m":"x"}"#)
        let b = try JSONValue(parsing: #"{"m":"x","a":{"b":null,"y":[1,2]},"z":1.0}"#)
        #expect(a == b)
        #expect(try JSONValue(parsing: #"{"a":[1,2]}"#) != JSONValue(parsing: #"{"a":[2,1]}"#))
        #expect(try JSONValue(parsing: #"{"a":1}"#) != JSONValue(parsing: #"{"a":1,"b":2}"#))
        // Strings and names compare by code points, not by Swift's canonical equivalence.
        #expect(JSONValue.string("\u{E9}") != JSONValue.string("e\u{301}"))
        #expect(try JSONValue(parsing: #"{"\u00e9":1,"e\u0301":2}"#)["\u{E9}"]?.int64Value == 1)
        #expect(try JSONValue(parsing: #"{"\u00e9":1,"e\u0301":2}"#) != JSONValue(parsing: #"{"e\u0301":1,"\u00e9":2}"#))
        // Duplicate keys are kept for forwarding; lookups see the last one.
        let d = try JSONValue(parsing: #"{"k":1,"k":2}"#)
        #expect(d.serialized().text == #"{"k":1,"k":2}"#)
        #expect(d["k"]?.int64Value == 2)
    }

    @Test func stringsEscapesAndUnicode() throws {
        let v = try JSONValue(parsing: #""a\"b\\c\/d\b\f\n\r\t\u0001\u00e9\u20ac\ud83d\ude00é€😀""#)
        #expect(v.stringValue == "a\"b\\c/d\u{8}\u{c}\n\r\t\u{1}é€😀é€😀")
        // Serializer: escapes what it must, writes the rest as UTF-8.
        #expect(v.serialized().text == #""a\"b\\c/d\b\f\n\r\t\u0001é€😀é€😀""#)
        #expect(try JSONValue(parsing: v.serialized()) == v)
    }

    /// Input → the error text the parser must give.
    @Test(arguments: [
        ("", "unexpected end of input at byte 0, expected a value"),
        ("   ", "unexpected end of input at byte 3, expected a value"),
        (#"{"a":1,}"#, "unexpected '}' at byte 7, expected a member name in double quotes"),
        ("[1,2,]", "unexpected ']' at byte 5, expected a value"),
        ("[1 2]", "unexpected '2' at byte 3, expected ',' or ']'"),
        (#"{"a" 1}"#, "unexpected '1' at byte 5, expected ':' after the member name"),
        (#"{"a":1 "b":2}"#, "unexpected '\"' at byte 7, expected ',' or '}'"),
        ("{a:1}", "unexpected 'a' at byte 1, expected a member name in double quotes"),
        ("// c\n{}", "unexpected '/' at byte 0, expected a value"),
        ("{} /* */", "unexpected '/' at byte 3, expected end of input"),
        ("NaN", "unexpected 'N' at byte 0, expected a value"),
        ("-Infinity", "invalid number at byte 1: expected a digit after '-'"),
        ("01", "invalid number at byte 1: leading zeros are not allowed"),
        ("-012", "invalid number at byte 2: leading zeros are not allowed"),
        ("1.", "invalid number at byte 2: expected a digit after '.'"),
        (".5", "unexpected '.' at byte 0, expected a value"),
        ("1e", "invalid number at byte 2: expected a digit in the exponent"),
        ("+1", "unexpected '+' at byte 0, expected a value"),
        ("tru", "unexpected end of input at byte 3, expected 'true'"),
        ("nulL", "unexpected 'L' at byte 3, expected 'null'"),
        (#"'a'"#, "unexpected ''' at byte 0, expected a value"),
        (#""abc"#, "unexpected end of input at byte 4, expected '\"' to end the string"),
        ("\"a\tb\"", "unescaped control character byte 0x09 in string at byte 2, expected it escaped (e.g. \\n or \\u00XX)"),
        (#""\x""#, "invalid escape \\'x' at byte 2, expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX"),
        (#""\u12G4""#, "invalid \\u escape at byte 5, expected four hex digits"),
        (#""\ud83d""#, "lone surrogate \\uD83D at byte 1, expected a high surrogate followed by a low surrogate"),
        (#""\ude00""#, "lone surrogate \\uDE00 at byte 1, expected a high surrogate followed by a low surrogate"),
        (#""\ud83d\u0041""#, "lone surrogate \\uD83D at byte 1, expected a high surrogate followed by a low surrogate"),
        ("[1]]", "unexpected ']' at byte 3, expected end of input"),
        ("\"\\", "unexpected end of input at byte 2, expected an escape character after '\\'"),
        (#""abc\""#, "unexpected end of input at byte 6, expected '\"' to end the string"),
        (#""\u00""#, "invalid \\u escape at byte 5, expected four hex digits"),
        ("\"\\\u{e9}\"", "invalid escape \\byte 0xC3 at byte 2, expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX"),
        (#"["ok","\q"]"#, "invalid escape \\'q' at byte 8, expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX"),
    ])
    func rejectsWithPreciseErrors(_ input: String, _ message: String) {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: input) }
        do {
            _ = try JSONValue(parsing: input)
        } catch {
            #expect(error.description == message)
        }
    }

    @Test(arguments: [
        [0x22, 0xC3, 0x22],                   // truncated 2-byte sequence
        [0x22, 0xC0, 0xAF, 0x22],             // overlong '/'
        [0x22, 0xE0, 0x80, 0xAF, 0x22],       // overlong 3-byte
        [0x22, 0xED, 0xA0, 0x80, 0x22],       // UTF-8 encoded surrogate
        [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], // > U+10FFFF
        [0x22, 0xFF, 0x22],
        [0x22, 0x80, 0x22],                   // lone continuation byte
        [0x22, 0x61, 0xE2, 0x82, 0x22],       // truncated 3-byte
    ] as [[UInt8]])
    func rejectsInvalidUTF8(_ input: [UInt8]) {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: input) }
        do { _ = try JSONValue(parsing: input) } catch {
            #expect(error.kind == .invalidUTF8)
            #expect(error.offset >= 1)
        }
    }

    @Test func acceptsValidUTF8Boundaries() throws {
        let s = "\u{7F}\u{80}\u{7FF}\u{800}\u{D7FF}\u{E000}\u{FFFF}\u{10000}\u{10FFFF}"
        let v = try JSONValue(parsing: Array("\"\(s)\"".utf8))
        #expect(v.stringValue == s)
    }

    @Test func deepNestingIsRefusedWithoutRecursion() {
        let deep = [UInt8](repeating: UInt8(ascii: "["), count: 100_000)
        do {
            _ = try JSONValue(parsing: deep)
            Issue.record("accepted 100,000 '['")
        } catch {
            #expect(error.kind == .tooDeep(limit: 512))
            #expect(error.offset == 512)
        }
        // Exactly at the limit is fine; one more is not.
        let ok = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        #expect((try? JSONValue(parsing: ok)) != nil)
        let objects = String(repeating: #"{"a":"#, count: 513) + "1" + String(repeating: "}", count: 513)
        #expect(throws: JSONParseError(.tooDeep(limit: 512), at: 2560)) { try JSONValue(parsing: objects) }
        let custom = JSONParseOptions(maxDepth: 3)
        #expect(throws: JSONParseError(.tooDeep(limit: 3), at: 3)) { try JSONValue(parsing: "[[[[]]]]", options: custom) }
    }

    @Test func maxBytesLimit() {
        let opts = JSONParseOptions(maxBytes: 10)
        #expect(throws: JSONParseError(.tooLarge(limit: 10, size: 11), at: 10)) { try JSONValue(parsing: "[1,2,3,4,5]", options: opts) }
        #expect((try? JSONValue(parsing: "[1,2,3,45]", options: opts)) != nil)
    }

    @Test func tenMegabyteStrings() throws {
        let size = 10 * 1024 * 1024
        // Plain ASCII.
        var doc = [UInt8](repeating: UInt8(ascii: "x"), count: size + 2)
        doc[0] = 0x22
        doc[size + 1] = 0x22
        let v = try JSONValue(parsing: doc)
        #expect(v.stringValue?.utf8.count == size)
        #expect(v.serialized() == doc)
        // Escapes spread all over the string (the slow path stays linear).
        var esc: [UInt8] = [0x22]
        esc.reserveCapacity(size + 2)
        while esc.count < size { esc.append(contentsOf: Array(#"ab\n\u00e9\"€"#.utf8)) }
        esc.append(0x22)
        let e = try JSONValue(parsing: esc)
        #expect(e.stringValue?.hasPrefix("ab\né\"€") == true)
        #expect(try JSONValue(parsing: e.serialized()) == e)
        // Unterminated 10 MB string: an error at the end, not a hang.
        #expect(throws: JSONParseError(.unexpectedEnd(expected: "'\"' to end the string"), at: size + 1)) {
            try JSONValue(parsing: Array(doc.dropLast()))
        }
    }

    @Test func whitespaceAndScalarsAtTopLevel() throws {
        #expect(try JSONValue(parsing: " \t\r\n true \n") == .bool(true))
        #expect(try JSONValue(parsing: "null") == .null)
        #expect(try JSONValue(parsing: #""s""#) == .string("s"))
        #expect(try JSONValue(parsing: "[]").serialized().text == "[]")
        #expect(try JSONValue(parsing: "{ }").serialized().text == "{}")
        // A byte-order mark is not JSON text (RFC 8259 §8.1: must not be added).
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: [0xEF, 0xBB, 0xBF, 0x7B, 0x7D] as [UInt8]) }
    }

    @Test func serializerEscapesControlCharacters() {
        let v = JSONValue.string("\u{0}\u{1F}\u{7F}\u{2028}")
        #expect(v.serialized().text == "\"\\u0000\\u001f\u{7F}\u{2028}\"")
    }

    @Test func literalsAndConstruction() {
        let v: JSONValue = ["b": true, "n": nil, "i": 42, "d": 0.5, "s": "x", "a": [1, "two"]]
        #expect(v.serialized().text == #"{"b":true,"n":null,"i":42,"d":0.5,"s":"x","a":[1,"two"]}"#)
        #expect(JSONNumber(3.0)?.literal == "3")
        #expect(JSONNumber(Double.nan) == nil)
        #expect(JSONNumber(literal: "01") == nil)
        #expect(JSONNumber(literal: "-1.5e+3")?.literal == "-1.5e+3")
    }

    @Test func objectMutationKeepsOrder() {
        var o: JSONObject = ["a": 1, "b": 2, "c": 3]
        o["b"] = "x"
        o["d"] = 4
        o["a"] = nil
        o.insert(key: "first", value: true, at: 0)
        #expect(JSONValue.object(o).serialized().text == #"{"first":true,"b":"x","c":3,"d":4}"#)
    }

    /// A top-level object's members as byte ranges of the input (what forwards a message as received).
    @Test func rawObjectKeepsItsMembersRanges() throws {
        let text = #"  { "a" : 1 , "b\u0063" :{"x":[1,2]},"a":"s","":[] } "#
        let doc = bytes(text)
        let raw = try RawJSONObject(validating: doc)
        #expect(Array(doc[raw.objectRange]).text == #"{ "a" : 1 , "b\u0063" :{"x":[1,2]},"a":"s","":[] }"#)
        #expect(raw.members.map(\.name) == ["a", "bc", "a", ""])
        #expect(raw.members.map { Array(doc[$0.key]).text } == ["a", #"b\u0063"#, "a", ""])
        #expect(raw.members.map(\.keyHasEscapes) == [false, true, false, false])
        #expect(raw.members.map { Array(doc[$0.value]).text } == ["1", #"{"x":[1,2]}"#, #""s""#, "[]"])
        #expect(raw.members.map { Array(doc[$0.whole]).text } == [#""a" : 1"#, #""b\u0063" :{"x":[1,2]}"#, #""a":"s""#, #""":[]"#])
        #expect(!raw.containsLineBreaks)
        #expect(raw.parsed() == (try JSONValue(parsing: doc)).objectValue)
        #expect(raw["a"] == "s", "the last of a repeated name, as JSONObject")
        #expect(throws: ProtocolError.notAnObject(found: .array)) { try RawJSONObject(validating: bytes("[{\"a\":1}]")) }
        #expect(throws: ProtocolError.tooDeep(limit: 1, offset: 5)) {
            try RawJSONObject(validating: bytes(#"{"a":[1]}"#), options: JSONParseOptions(maxDepth: 1))
        }
        #expect(throws: ProtocolError.tooLarge(limit: 3, size: 9)) {
            try RawJSONObject(validating: bytes(#"{"a":[1]}"#), options: JSONParseOptions(maxBytes: 3))
        }
    }

    /// Validating an object (RawJSONObject, which builds no tree) fails where and as parsing it does,
    /// and reads a member's value as the parsed object has it.
    @Test func validatingFailsAsParsingDoes() throws {
        let texts = [#"{"a":1,}"#, #"{"a":"\x"}"#, "{\"a\":\"\u{01}\"}", #"{"a":01}"#, #"{"a":"\ud800"}"#,
                     #"{"a":"\udc00x"}"#, #"{"a":"\u12"}"#, #"{"a":[1,2}"#, #"{"a":1} x"#, #"{"a":-}"#, #"{"a":1.e5}"#,
                     #"{"a":1e}"#, #"{"a":tru}"#, #"{"a":"#, #"{"a" 1}"#, #"{a:1}"#, #"{"a":{"b":[{"c":"\/\n"}]}} ]"#]
        var documents = texts.map(bytes)
        documents.append(bytes(#"{"a":"x"#) + [0xC3, 0x28] + bytes(#""}"#))  // a broken UTF-8 sequence
        documents.append(bytes(#"{"é":"#) + [0xED, 0xA0, 0x80] + bytes("}"))   // an encoded surrogate
        for doc in documents {
            do {
                _ = try JSONValue(parsing: doc)
                Issue.record("parsed \(doc.text)")
            } catch {
                #expect(throws: ProtocolError(error), "\(doc.text)") { try RawJSONObject(validating: doc) }
            }
        }
        let doc = bytes(#"{"s":"a\u00e9\"","n":-1.50e3,"a":[true,null,{"k":"v"}],"s":"last"}"#)
        let raw = try RawJSONObject(validating: doc)
        let parsed = try #require(try JSONValue(parsing: doc).objectValue)
        #expect(raw.parsed() == parsed)
        for name in ["s", "n", "a", "missing"] { #expect(raw[name] == parsed[name], "\(name)") }
        #expect(raw["n"]?.serialized().text == "-1.50e3")
    }

    /// The first member's object value, read from the one validation of the whole: the same as
    /// validating its bytes alone.
    @Test func firstMemberObjectIsTheValueValidatedAlone() throws {
        let doc = bytes(#" {"m" : { "a\u0062":[1,{"x":2}], "s":"\"}", "e":{} } ,"n":{"k":1}}"#)
        let raw = try RawJSONObject(validating: doc)
        let first = try #require(raw.firstMemberObject())
        let alone = try RawJSONObject(validating: Array(doc[raw.members[0].value]))
        #expect(first.bytes == alone.bytes && first.members == alone.members && first.objectRange == alone.objectRange)
        #expect(first.members.map(\.name) == ["ab", "s", "e"])
        #expect(first.parsed() == alone.parsed())
        var bridged: [UInt8] = [], expected: [UInt8] = []
        first.appendObject(prefix: "", dropping: "s", to: &bridged)
        alone.appendObject(prefix: "", dropping: "s", to: &expected)
        #expect(bridged == expected)
        #expect(try RawJSONObject(validating: bytes(#"{"m":[{"a":1}],"n":{}}"#)).firstMemberObject() == nil)
        #expect(try RawJSONObject(validating: bytes(#"{}"#)).firstMemberObject() == nil)
        #expect(try RawJSONObject(validating: bytes(#"{"m":{}}"#)).firstMemberObject()?.bytes == bytes("{}"))
    }

    /// An error's byte offset as a line and a column (columns count scalars), for config files.
    @Test func errorsGiveLineAndColumn() {
        let text = bytes("{\n  \"é\": 1,\n  \"b\": x\n}")
        do {
            _ = try JSONValue(parsing: text)
            Issue.record("accepted")
        } catch {
            #expect(error.offset == 20)
            #expect(error.lineAndColumn(in: text) == (3, 8))
            #expect(error.reason == "unexpected 'x', expected a value")
        }
    }
}
