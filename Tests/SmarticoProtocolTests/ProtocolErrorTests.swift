import Testing
import SmarticoProtocol

@Suite struct ProtocolErrorTests {
    func error(_ text: String) -> ProtocolError? {
        do { _ = try ServerMessage.decode(bytes(text)); return nil } catch { return error }
    }

    func clientError(_ text: String) -> ProtocolError? {
        do { _ = try ClientMessage.decode(bytes(text)); return nil } catch { return error }
    }

    @Test func notJSON() {
        let e = error(#"{"cid":1,}"#)
        guard case .notJSON(let p) = e else { Issue.record("got \(String(describing: e))"); return }
        #expect(p.offset == 9)
        #expect(e?.description == "not JSON: unexpected '}' at byte 9, expected a member name in double quotes")
    }

    @Test(arguments: [("[1,2]", JSONType.array), ("\"cid\"", .string), ("42", .number), ("null", .null), ("true", .bool)])
    func notAnObject(_ text: String, _ type: JSONType) {
        #expect(error(text) == .notAnObject(found: type))
    }

    @Test func classIDProblems() {
        #expect(error(#"{"ts":1}"#) == .missingClassID(field: "cid"))
        #expect(error(#"{"cid":"110"}"#) == .classIDNotInteger(field: "cid", found: #"string "110""#))
        #expect(error(#"{"cid":1.5}"#) == .classIDNotInteger(field: "cid", found: "number 1.5"))
        #expect(error(#"{"cid":null}"#) == .classIDNotInteger(field: "cid", found: "null"))
        #expect(error(#"{"cid":[1]}"#) == .classIDNotInteger(field: "cid", found: "array of 1"))
        #expect(error(#"{"cid":99999999999999999999999}"#)
                == .classIDNotInteger(field: "cid", found: "number 99999999999999999999999 (out of the 64-bit range)"))
        #expect(error(#"{"cid":1e400}"#)?.description == #""cid" must be an integer, found number 1e400"#)
    }

    @Test func unknownClassIDIsNotAnError() throws {
        let m = try ServerMessage.decode(bytes(#"{"cid":123456,"x":[1,{"y":null}],"big":18446744073709551615}"#))
        guard case .other(let cid, let json) = m else { Issue.record("\(m)"); return }
        #expect(cid.rawValue == 123_456 && cid.name == nil)
        #expect(json.serialized().text == #"{"cid":123456,"x":[1,{"y":null}],"big":18446744073709551615}"#)
    }

    /// Known cid, wrong field type → the cid, the field path, the expected and found types.
    @Test(arguments: [
        (#"{"cid":4,"errCode":"0"}"#, #"cid 4 (INIT_SESSION_RESPONSE): field "errCode" must be an integer, found string "0""#),
        (#"{"cid":4,"products":[100,0,"5"]}"#, #"cid 4 (INIT_SESSION_RESPONSE): field "products[2]" must be an integer, found string "5""#),
        (#"{"cid":4,"products":100}"#, #"cid 4 (INIT_SESSION_RESPONSE): field "products" must be an array of integers, found number 100"#),
        (#"{"cid":4,"settings":{"FCM_SENDER_ID":123}}"#, #"cid 4 (INIT_SESSION_RESPONSE): field "settings.FCM_SENDER_ID" must be a string, found number 123"#),
        (#"{"cid":6,"native_app_gf_url":true}"#, #"cid 6 (IDENTIFY_USER_RESPONSE): field "native_app_gf_url" must be a string, found boolean true"#),
        (#"{"cid":6,"props":[]}"#, #"cid 6 (IDENTIFY_USER_RESPONSE): field "props" must be an object, found array of 0"#),
        (#"{"cid":105,"payload":{"dp":7}}"#, #"cid 105 (CLIENT_EXECUTE_DEEPLINK_EVENT): field "payload.dp" must be a string, found number 7"#),
        (#"{"cid":105,"payload":{}}"#, #"cid 105 (CLIENT_EXECUTE_DEEPLINK_EVENT): required field "payload.dp" is missing"#),
        (#"{"cid":105}"#, #"cid 105 (CLIENT_EXECUTE_DEEPLINK_EVENT): required field "payload" is missing"#),
        (#"{"cid":108,"props":"x"}"#, #"cid 108 (CLIENT_PUBLIC_PROPERTIES_CHANGED_EVENT): field "props" must be an object, found string "x""#),
        (#"{"cid":110,"engagement_uid":5}"#, #"cid 110 (CLIENT_ENGAGEMENT_EVENT): field "engagement_uid" must be a string, found number 5"#),
        (#"{"cid":110,"activityType":30.5}"#, #"cid 110 (CLIENT_ENGAGEMENT_EVENT): field "activityType" must be an integer, found number 30.5"#),
        (#"{"cid":707}"#, #"cid 707 (SAW_SHOW_SPIN_PUSH): required field "saw_template_id" is missing"#),
        (#"{"cid":707,"saw_template_id":"5"}"#, #"cid 707 (SAW_SHOW_SPIN_PUSH): field "saw_template_id" must be an integer, found string "5""#),
        (#"{"cid":1,"ts":"now"}"#, #"cid 1 (PING): field "ts" must be an integer, found string "now""#),
        (#"{"cid":2003,"errMsg":1}"#, #"cid 2003 (REGISTER_PUSH_NOTIFICATIONS_TOKEN_RESPONSE): field "errMsg" must be a string, found number 1"#),
    ])
    func wrongFieldTypesAreNamed(_ text: String, _ message: String) {
        #expect(error(text)?.description == message)
    }

    @Test(arguments: [
        (#"{"cid":3,"label_key":"k","device_id":"d","page":"p","tracker_version":"1","session_id":""}"#,
         #"cid 3 (INIT_SESSION_REQUEST): field "session_id" must not be empty"#),
        (#"{"cid":3,"label_key":"k","device_id":"d","page":"p","tracker_version":"1"}"#,
         #"cid 3 (INIT_SESSION_REQUEST): required field "session_id" is missing"#),
        (#"{"cid":3,"label_key":"k","device_id":"d","page":"p","tracker_version":"1","session_id":"s","ua":{"tzoffset":"-180"}}"#,
         #"cid 3 (INIT_SESSION_REQUEST): field "ua.tzoffset" must be an integer, found string "-180""#),
        (#"{"cid":5}"#, #"cid 5 (IDENTIFY_USER_REQUEST): required field "ext_user_id" is missing"#),
        (#"{"cid":5,"ext_user_id":"u","platform":12}"#, #"cid 5 (IDENTIFY_USER_REQUEST): field "platform" is 12, expected a PushClientPlatform (0...11)"#),
        (#"{"cid":7,"payload":{"ua_fp":"x"}}"#, #"cid 7 (LOGIN): field "payload.ua_fp" must be an integer, found string "x""#),
        (#"{"cid":9,"eventType":"core_language_changed","payload":{}}"#, #"cid 9 (EVENT): required field "payload.language" is missing"#),
        (#"{"cid":9}"#, #"cid 9 (EVENT): required field "eventType" is missing"#),
        (#"{"cid":9,"eventType":"core_language_changed"}"#, #"cid 9 (EVENT): required field "payload" is missing"#),
        (#"{"cid":9,"eventType":"core_language_changed","payload":{"language":""}}"#, #"cid 9 (EVENT): field "payload.language" must not be empty"#),
        (#"{"cid":104,"engagement_uid":"u","activityType":"30"}"#, #"cid 104 (CLIENT_ENGAGEMENT_ACTION_REQUEST): field "activityType" must be an integer, found string "30""#),
        (#"{"cid":1003,"token":"t","pushNotificationUserStatus":5}"#,
         #"cid 1003 (REGISTER_PUSH_NOTIFICATIONS_TOKEN_REQUEST): field "pushNotificationUserStatus" is 5, expected a PushNotificationUserStatus (0...4)"#),
    ])
    func clientMessageErrors(_ text: String, _ message: String) {
        #expect(clientError(text)?.description == message)
    }

    @Test func limitsBecomeTheirOwnCases() {
        let deep = [UInt8](repeating: UInt8(ascii: "["), count: 100_000)
        #expect(throws: ProtocolError.tooDeep(limit: 512, offset: 512)) { try ServerMessage.decode(deep) }
        let big = bytes(#"{"cid":110,"template_html":"\#(String(repeating: "x", count: 2000))"}"#)
        #expect(throws: ProtocolError.tooLarge(limit: 1024, size: big.count)) {
            try ServerMessage.decode(big, options: JSONParseOptions(maxBytes: 1024))
        }
    }

    @Test func tenMegabyteFields() throws {
        let big = String(repeating: "x", count: 10 * 1024 * 1024)
        let wrong = bytes(#"{"cid":707,"saw_template_id":"\#(big)"}"#)
        #expect(throws: ProtocolError.wrongFieldType(.cid(707), path: "saw_template_id", expected: "an integer",
                                                     found: "string \"\(String(repeating: "x", count: 40))…\"")) {
            try ServerMessage.decode(wrong)
        }
        let engagement = bytes(#"{"cid":110,"engagement_uid":"u","template_html":"\#(big)"}"#)
        guard case .engagement(let e) = try ServerMessage.decode(engagement) else { Issue.record("not 110"); return }
        #expect(e.json["template_html"]?.stringValue?.utf8.count == big.utf8.count)
        #expect(e.showEngagementBytes().count == engagement.count + #""bcid":3,"#.utf8.count)
    }

    @Test func specificTypeRejectsAnotherCID() {
        #expect(throws: ProtocolError.unexpectedClassID(expected: .cid(707), found: .cid(1))) {
            try SawShowSpinPush.decode(bytes(#"{"cid":1}"#))
        }
    }

    /// Every prefix of every fixture: a typed error or (for a complete prefix) a value; never a crash.
    @Test func truncationAtEveryOffset() throws {
        for name in try allFixtureNames() {
            let raw = try fixture(name)
            let complete = try JSONValue(parsing: raw)
            for cut in 0..<raw.count {
                let prefix = Array(raw[..<cut])
                do {
                    let v = try JSONValue(parsing: prefix)
                    // Only a prefix that still holds the whole value (trailing whitespace cut) may parse.
                    #expect(v == complete, "\(name) cut at \(cut) parsed to something else")
                } catch {
                    #expect(error.offset <= cut)
                }
                if name.hasPrefix("bridge") || name.hasPrefix("http") { continue }
                do { _ = try ServerMessage.decode(prefix) } catch {
                    switch error {
                    case .notJSON, .notAnObject: break
                    default: Issue.record("\(name) cut at \(cut): unexpected \(error)")
                    }
                }
            }
        }
    }

    @Test func bridgeErrors() {
        func berr(_ t: String) -> String? {
            do { _ = try BridgeMessage.decode(bytes(t)); return nil } catch { return error.description }
        }
        #expect(berr(#"{"cid":1}"#) == #"the object has no "bcid" field"#)
        #expect(berr(#"{"bcid":"4"}"#) == #""bcid" must be an integer, found string "4""#)
        #expect(berr(#"{"bcid":4}"#) == #"bcid 4 (EXECUTE_DEEP_LINK): required field "dp" is missing"#)
        #expect(berr(#"{"bcid":4,"dp":["x"]}"#) == #"bcid 4 (EXECUTE_DEEP_LINK): field "dp" must be a string, found array of 1"#)
        #expect(berr(#"{"bcid":6}"#) == #"bcid 6 (SEND_TO_SOCKET): required field "cid" is missing"#)
        #expect(berr(#"{"bcid":6,"cid":"9"}"#) == #"bcid 6 (SEND_TO_SOCKET): field "cid" must be an integer, found string "9""#)
        #expect(berr(#"{"bcid":8,"ach_game_id":"32"}"#) == #"bcid 8 (SEND_GAME_OPENING): field "ach_game_id" must be an integer, found string "32""#)
        #expect(berr(#"{"bcid":8,"ext_game_id":{}}"#) == #"bcid 8 (SEND_GAME_OPENING): field "ext_game_id" must be a string or a number, found object"#)
        #expect(berr("[]") == "expected a JSON object, found array")
    }
}
