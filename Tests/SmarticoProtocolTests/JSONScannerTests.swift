import Testing
import SmarticoProtocol

/// The parser's verdict on `input`: nil when it accepts it.
private func parserError(_ input: [UInt8], _ options: JSONParseOptions) -> JSONParseError? {
    do { _ = try JSONValue(parsing: input, options: options); return nil } catch { return error }
}

private func scannerError(_ input: [UInt8], _ options: JSONParseOptions) -> JSONParseError? {
    do { _ = try JSONScanner.scan(input, options: options); return nil } catch { return error }
}

/// Scanner and parser agree on `input`: same error (kind and offset), or both accept it and the
/// scan's type, value range and members match the parsed value.
private func expectAgreement(_ input: [UInt8], _ options: JSONParseOptions = JSONParseOptions(),
                             sourceLocation: SourceLocation = #_sourceLocation) {
    let p = parserError(input, options)
    let s = scannerError(input, options)
    #expect(p == s, "parser: \(p.map(String.init(describing:)) ?? "accepts"), scanner: \(s.map(String.init(describing:)) ?? "accepts") for \(input.text.debugDescription)",
            sourceLocation: sourceLocation)
    guard p == nil, s == nil, let value = try? JSONValue(parsing: input, options: options),
          let scan = try? JSONScanner.scan(input, options: options) else { return }
    #expect(scan.type == value.type, sourceLocation: sourceLocation)
    #expect((try? JSONValue(parsing: Array(input[scan.value]))) == value, "value range", sourceLocation: sourceLocation)
    #expect(scan.containsLineBreaks == (input.contains(0x0A) || input.contains(0x0D)), sourceLocation: sourceLocation)
    guard case .object(let o) = value else {
        #expect(scan.members.isEmpty, sourceLocation: sourceLocation)
        return
    }
    #expect(scan.members.count == o.keys.count, sourceLocation: sourceLocation)
    for (k, m) in zip(0..., scan.members) where k < o.keys.count {
        let key = try? JSONValue(parsing: Array(input[(m.key.lowerBound - 1)..<(m.key.upperBound + 1)]))
        #expect(key == .string(o.keys[k]), "member \(k) name", sourceLocation: sourceLocation)
        #expect(m.keyHasEscapes == input[m.key].contains(UInt8(ascii: "\\")), sourceLocation: sourceLocation)
        #expect((try? JSONValue(parsing: Array(input[m.value]))) == o.values[k], "member \(k) value", sourceLocation: sourceLocation)
        #expect(input[m.value.lowerBound] != 0x20 && input[m.value.upperBound - 1] != 0x20, sourceLocation: sourceLocation)
    }
}

@Suite struct JSONScannerTests {
    static let valid: [String] = [
        "{}", "[]", " {\"a\":1} ", "\"x\"", "0", "-0", "1.5e+10", "-12.5E-3", "1E2", "0.0001", "-0.0e-0",
        "123456789012345678901234567890", "1e400", "9007199254740993", "true", "false", "null", "  null\t",
        "[1,[2,[3,{\"a\":[]}]]]", #"{"a":{"b":{"c":[1,2,{"d":null}]}},"e":"f","g":[true,false,null,-1.5]}"#,
        #""\"\\\/\b\f\n\r\t""#, #""\u00e9\u20AC\uD83D\uDE00\ud83d\ude00""#, #"{"\u0063id":110,"c\"d":"\\"}"#,
        "\"Grüße 😀 € \u{7F}\"", "\t\n\r {\n \"a\" : [ 1 , 2 ] \r\n,\"b\":{ } }\n", #"{"a":1,"a":2,"a":{"a":3}}"#,
        #"{"long":"0123456789abcdefghij\"klmnopqrstuvwxyz0123456789\\ABCDEFGH\u0041IJKLMNOP","x":"é€😀é€😀é€😀é€😀"}"#,
        #"["",{"":""},[[]],{"a":[{}]}]"#, #"{"template_html":"<div class=\"x\">\u00e9</div>\n"}"#,
        #"{ "a" : "b" , "c" : 1.0e-5 , "d" : [ ] , "e" : { } , "f" : null }"#,
    ]

    static let invalid: [String] = [
        "", "   ", "{\"a\":1} x", "{\"a\":1}}", "[1,]", "{\"a\":1,}", "{a:1}", "{\"a\" 1}", "{\"a\":}", "[1 2]",
        #""\x""#, #""\u12G4""#, #""\u12""#, #""\u12"#, #""\uD800""#, #""\uDC00""#, #""\uD800\u0041""#, #""\uD800\n""#,
        #""\uD800x""#, #""\uD800\uDBFF""#, #""\uD800\uDC0""#, #""\uD800\u""#, #""\uD800\"#, #""ok\"#,
        "01", "-01", "-", "-a", "1.", "1.e3", "1e", "1e+", ".5", "+1", "\"abc", "\"a\u{01}b\"", "\"a\nb\"", "\"a\tb\"",
        "tru", "nul", "fals", "truex", "[", "{", "{\"a\":", "{\"a\"", "[1,", "{\"a\":1", "\u{FEFF}{}", "é", "[é]",
        // Errors of the parser's first pass win over `\u` errors anywhere in the same string.
        "\"\\uZZZZ\u{01}\"", #""\uZZZZ\q""#, "\"\\uD800 \u{01}\"", #""\uDC00\x""#, "\"\\uZZZZ", "\"\\uD800\\uD800\\q\"",
        // ... but not over errors in a later string.
        #"["\uZZZZ","\q"]"#, #"{"\uD800":1}"#, #"{"a":"\uD800"} x"#,
    ]

    @Test func acceptsAndRejectsExactlyAsTheParser() {
        for s in Self.valid {
            #expect(parserError(bytes(s), JSONParseOptions()) == nil, "corpus: \(s.debugDescription) should be valid")
            expectAgreement(bytes(s))
        }
        for s in Self.invalid {
            #expect(parserError(bytes(s), JSONParseOptions()) != nil, "corpus: \(s.debugDescription) should be invalid")
            expectAgreement(bytes(s))
        }
    }

    @Test func rejectsInvalidUTF8AsTheParser() {
        let bad: [[UInt8]] = [[0xC3], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82], [0xF0, 0x9F, 0x98],
                              [0x80], [0xFF], [0xE0, 0x80, 0x80], [0xF8, 0x88, 0x80, 0x80, 0x80]]
        for b in bad {
            expectAgreement([0x22] + b + [0x22])
            expectAgreement([0x22] + b)
            expectAgreement(bytes(#"{"k":"x"#) + b + bytes(#"y"}"#))
            expectAgreement(b)
        }
    }

    @Test func depthAndSizeLimitsAsTheParser() {
        let options = JSONParseOptions(maxDepth: 3, maxBytes: 40)
        for s in ["[[1]]", "[[[1]]]", "[[[[1]]]]", #"{"a":{"b":{"c":1}}}"#, #"{"a":{"b":{"c":{}}}}"#, "[[],[[]],[[[]]]]",
                  String(repeating: "1", count: 40), String(repeating: "1", count: 41), "[\"" + String(repeating: "x", count: 60) + "\"]"] {
            expectAgreement(bytes(s), options)
        }
        // Deeper than 64 (the scanner's inline nesting bits) and past the default limit.
        for depth in [63, 64, 65, 130, 511, 512, 513] {
            let mixed = (0..<depth).map { $0 % 3 == 0 ? #"{"k":"# : "[" }.joined() + "1"
                + (0..<depth).reversed().map { $0 % 3 == 0 ? "}" : "]" }.joined()
            expectAgreement(bytes(mixed))
            expectAgreement(bytes(mixed), JSONParseOptions(maxDepth: 100))
        }
    }

    /// Random edits of valid documents: the two agree on every one.
    @Test func agreesOnMutatedDocuments() {
        var g = SplitMix64(seed: 0x5EED_110)
        let alphabet = Array(#"{}[]":,\ u0aeE.-+19tfnlrs"#.utf8) + [0x00, 0x0A, 0xC3, 0xA9, 0xED, 0xA0, 0x80, 0xFF]
        var accepted = 0
        for _ in 0..<4000 {
            var doc = bytes(Self.valid[Int(g.next() % UInt64(Self.valid.count))])
            for _ in 0...(g.next() % 3) {
                let pos = doc.isEmpty ? 0 : Int(g.next() % UInt64(doc.count + 1))
                let b = alphabet[Int(g.next() % UInt64(alphabet.count))]
                switch g.next() % 3 {
                case 0: doc.insert(b, at: pos)
                case 1: if pos < doc.count { doc[pos] = b }
                default: if pos < doc.count { doc.remove(at: pos) }
                }
            }
            if parserError(doc, JSONParseOptions()) == nil { accepted += 1 }
            expectAgreement(doc)
        }
        #expect(accepted > 100 && accepted < 3900, "the mutations should give both verdicts (\(accepted) accepted)")
    }

    /// Strings are skipped 16 bytes at a time up to the first byte that needs a look
    /// (`JSONGrammar.skipPlain`): that byte — the closing quote, an escape, a non-ASCII sequence, a
    /// raw control character — at every place in and around a block, and after a tail of fewer
    /// than 16 bytes, is found where it is. Parsed values and error offsets are checked against
    /// what the text says, not against the parser (which skips with the same code).
    @Test func everyPlaceInABlockIsSeen() throws {
        for before in 0 ..< 40 {
            for after in [0, 1, 7, 15, 16, 17, 40] {
                let a = String(repeating: "a", count: before), b = String(repeating: "b", count: after)
                for (special, decoded) in [(#"\""#, "\""), (#"\n"#, "\n"), (#"\u00e9"#, "é"), ("é", "é"), ("😀", "😀"), ("", "")] {
                    let text = "\"" + a + special + b + "\""
                    let input = Array(text.utf8)
                    #expect(try JSONValue(parsing: input) == .string(a + decoded + b), "\(text.debugDescription)")
                    #expect(try JSONScanner.scan(input).value == 0 ..< input.count, "\(text.debugDescription)")
                    // The same string as a member name and value of an object, the scan's ranges exact.
                    let object = Array(("{" + text + ":" + text + "}").utf8)
                    let member = try #require(try JSONScanner.scan(object).members.first)
                    #expect(member.key == 2 ..< input.count, "\(text.debugDescription)")
                    #expect(member.value == input.count + 2 ..< object.count - 1, "\(text.debugDescription)")
                }
                // A raw control character is refused at its own offset; so is a lone continuation byte.
                for bad: UInt8 in [0x01, 0x1F, 0x80] {
                    let input = [0x22] + Array(a.utf8) + [bad] + Array(b.utf8) + [0x22]
                    #expect(throws: JSONParseError.self) { try JSONValue(parsing: input) }
                    do {
                        _ = try JSONScanner.scan(input)
                        Issue.record("byte \(bad) after \(before) bytes was accepted")
                    } catch {
                        #expect(error.offset == 1 + before, "byte \(bad) after \(before) bytes: \(error)")
                    }
                }
            }
        }
    }

    @Test func memberRanges() throws {
        let text = #"  { "a" : 1 , "b\u0063" :{"x":[1,2]},"a":"s","":[] } "#
        let doc = bytes(text)
        let scan = try JSONScanner.scan(doc)
        #expect(scan.type == .object)
        #expect(Array(doc[scan.value]).text == #"{ "a" : 1 , "b\u0063" :{"x":[1,2]},"a":"s","":[] }"#)
        #expect(scan.members.map { Array(doc[$0.key]).text } == ["a", #"b\u0063"#, "a", ""])
        #expect(scan.members.map(\.keyHasEscapes) == [false, true, false, false])
        #expect(scan.members.map { Array(doc[$0.value]).text } == ["1", #"{"x":[1,2]}"#, #""s""#, "[]"])
        #expect(scan.members.map { Array(doc[$0.whole]).text } == [#""a" : 1"#, #""b\u0063" :{"x":[1,2]}"#, #""a":"s""#, #""":[]"#])
        #expect(!scan.containsLineBreaks)
        #expect(try JSONScanner.scan(bytes("[{\"a\":1}]")).members.isEmpty, "only a top-level object's members")
    }

    @Test func rawObjectLooksUpAsJSONObjectDoes() throws {
        let raw = try RawJSONObject(validating: bytes(#" {"a":1,"b\u0063":"x","a":{"n":[1]},"cid":110} "#))
        let tree = try #require(try JSONValue(parsing: raw.bytes).objectValue)
        #expect(raw.parsed() == tree)
        #expect(raw.parsed().keys == tree.keys)
        for key in ["a", "bc", "cid", "nope"] { #expect(raw[key] == tree[key], "\(key)") }
        #expect(raw.members.map(raw.name(of:)) == ["a", "bc", "a", "cid"])
        #expect(raw.picking(["cid", "nope", "a"]) == ["cid": 110, "a": ["n": [1]]])
        #expect(raw.picking(["cid", "nope", "a"]).keys == ["cid", "a"])
        #expect(throws: ProtocolError.notAnObject(found: .array)) { try RawJSONObject(validating: bytes("[1]")) }
        #expect(throws: ProtocolError.tooDeep(limit: 1, offset: 5)) {
            try RawJSONObject(validating: bytes(#"{"a":[1]}"#), options: JSONParseOptions(maxDepth: 1))
        }
        #expect(throws: ProtocolError.tooLarge(limit: 3, size: 9)) {
            try RawJSONObject(validating: bytes(#"{"a":[1]}"#), options: JSONParseOptions(maxBytes: 3))
        }
    }
}
