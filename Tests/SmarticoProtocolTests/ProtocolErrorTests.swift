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
        #expect(error(#"{"cid":"abc"}"#) == .classIDNotInteger(field: "cid", found: #"string "abc""#))
        #expect(error(#"{"cid":"1.5"}"#) == .classIDNotInteger(field: "cid", found: #"string "1.5""#))
        #expect(error(#"{"cid":1.5}"#) == .classIDNotInteger(field: "cid", found: "number 1.5"))
        #expect(error(#"{"cid":null}"#) == .classIDNotInteger(field: "cid", found: "null"))
        #expect(error(#"{"cid":[1]}"#) == .classIDNotInteger(field: "cid", found: "array of 1"))
        #expect(error(#"{"cid":99999999999999999999999}"#)
                == .classIDNotInteger(field: "cid", found: "number 99999999999999999999999 (out of the 64-bit range)"))
        #expect(error(#"{"cid":1e400}"#)?.description == #""cid" must be an integer, found number 1e400"#)
    }

    /// Issue 41: a class id sent as a string holding an integer is read as the SDK reads it; the
    /// message is kept as received.
    @Test func classIDAsDecimalStringIsReadAsTheNumber() throws {
        let text = #"{"cid":"110","engagement_uid":"e1","activityType":30}"#
        guard case .engagement(let e) = try ServerMessage.decode(bytes(text)) else { Issue.record("not a 110"); return }
        #expect(e.engagementUID == "e1" && e.cid == .clientEngagementEvent)
        #expect(e.json["cid"] == .string("110"))
        guard case .publicPropertiesChanged(let p) = try ServerMessage.decode(bytes(#"{"cid":" 108 ","props":{"a":1}}"#)) else {
            Issue.record("not a 108"); return
        }
        #expect(p.props == ["a": 1])
        let r = try ServerMessage.decode(bytes(#"{"cid":"2003","errCode":"7"}"#))
        guard case .registerPushTokenResponse(let a) = r else { Issue.record("not a 2003: \(r)"); return }
        #expect(a.errCode == 7 && r.cid == .registerPushTokenResponse)
        #expect(try BridgeMessage.decode(bytes(#"{"bcid":"4","dp":"dp:gf"}"#)) == .executeDeepLink(DeepLink("dp:gf")))
        // What a client sends (the daemon's own messages, as the simulator reads them) stays strict.
        #expect(clientError(#"{"cid":"9"}"#) == .classIDNotInteger(field: "cid", found: #"string "9""#))
    }

    @Test func unknownClassIDIsNotAnError() throws {
        let m = try ServerMessage.decode(bytes(#"{"cid":123456,"x":[1,{"y":null}],"big":18446744073709551615}"#))
        guard case .other(let cid, let json) = m else { Issue.record("\(m)"); return }
        #expect(cid.rawValue == 123_456 && cid.name == nil)
        #expect(json.serialized().text == #"{"cid":123456,"x":[1,{"y":null}],"big":18446744073709551615}"#)
    }

    /// Session rule 7: a server message of a known cid is never rejected over a field. Each of
    /// these decodes; what the daemon reads follows the SDK (a number for a string is its text,
    /// a string holding an integer is that integer, anything else is absent), and `problem` says
    /// when the daemon cannot act on the message.
    @Test func mistypedServerFieldsAreReadLoosely() throws {
        func decode(_ text: String) throws -> ServerMessage { try ServerMessage.decode(bytes(text)) }

        guard case .initSessionResponse(let r4) = try decode(#"{"cid":4,"errCode":"0","products":[100,0,"5",true,{}],"settings":{"FCM_SENDER_ID":123,"DYNAMIC_IMAGE_DOMAIN":7},"payload":{"country":1}}"#) else {
            Issue.record("not a 4"); return
        }
        #expect(r4.isSuccess && r4.errCode == 0 && r4.errCodeProblem == nil)
        #expect(r4.products == [.gamification, Product(rawValue: 0), Product(rawValue: 5)])
        #expect(r4.fcmSenderID == "123" && r4.dynamicImageDomain == nil && r4.country == "1")
        guard case .initSessionResponse(let bad4) = try decode(#"{"cid":4,"errCode":true,"products":100,"settings":[]}"#) else {
            Issue.record("not a 4"); return
        }
        #expect(bad4.products.isEmpty && bad4.settings == nil && !bad4.isSuccess)
        #expect(bad4.errCodeProblem == #""errCode" is boolean true, not an integer"#)

        guard case .identifyUserResponse(let r6) = try decode(#"{"cid":6,"errCode":0,"avatar_id":17,"public_username":42,"native_app_gf_url":true,"props":[]}"#) else {
            Issue.record("not a 6"); return
        }
        #expect(r6.isSuccess && r6.avatarID == "17" && r6.publicUsername == "42")
        #expect(r6.gamificationURL == nil && r6.props == nil)
        #expect(r6.avatarURL(imageDomain: "https://img.example/") == "https://img.example/avatar/17")

        guard case .executeDeepLink(let d) = try decode(#"{"cid":105,"engagement_uid":123,"payload":{"dp":"dp:gf"}}"#) else {
            Issue.record("not a 105"); return
        }
        #expect(d.engagementUID == "123" && d.dp == "dp:gf" && d.problem == nil)
        guard case .executeDeepLink(let top) = try decode(#"{"cid":105,"dp":"dp:cashier"}"#) else { Issue.record("not a 105"); return }
        #expect(top.dp == "dp:cashier" && top.problem == nil)
        for (text, problem) in [
            (#"{"cid":105,"payload":{"dp":7}}"#, #""payload.dp" is number 7, not a deep link"#),
            (#"{"cid":105,"payload":{"dp":""}}"#, #""payload.dp" is string "", not a deep link"#),
            (#"{"cid":105,"payload":{}}"#, #""payload.dp" is missing"#),
            (#"{"cid":105}"#, #""payload.dp" is missing"#),
            (#"{"cid":105,"payload":"dp:x"}"#, #""payload" is string "dp:x", not an object with a deep link "dp""#),
        ] {
            guard case .executeDeepLink(let e) = try decode(text) else { Issue.record("not a 105: \(text)"); continue }
            #expect(e.problem == problem, "\(text)")
        }

        guard case .publicPropertiesChanged(let p) = try decode(#"{"cid":108,"props":"x"}"#) else { Issue.record("not a 108"); return }
        #expect(p.props.isEmpty && p.problem == #""props" is string "x", not an object"#)

        guard case .engagement(let e) = try decode(#"{"cid":110,"engagement_uid":5,"activity_type":"30","engagement_id":"236356782","ts":"1632913275835","uuid":7}"#) else {
            Issue.record("not a 110"); return
        }
        #expect(e.engagementUID == "5" && e.activityType == .popup && e.engagementID == 236_356_782)
        #expect(e.ts == 1_632_913_275_835 && e.uuid == "7")
        guard case .engagement(let odd) = try decode(#"{"cid":110,"engagement_uid":"","activityType":30.5,"engagement_id":1.5}"#) else {
            Issue.record("not a 110"); return
        }
        #expect(odd.engagementUID == nil && odd.activityType == nil && odd.engagementID == nil)

        guard case .sawShowSpinPush(let none) = try decode(#"{"cid":707}"#),
              case .sawShowSpinPush(let text) = try decode(#"{"cid":707,"saw_template_id":"5","pending_message_id":"9"}"#),
              case .sawShowSpinPush(let junk) = try decode(#"{"cid":707,"saw_template_id":"five"}"#)
        else { Issue.record("not a 707"); return }
        #expect(none.sawTemplateID == nil && none.deepLink == nil && none.acknowledgement == nil)
        #expect(none.problem == #""saw_template_id" is missing"#)
        #expect(text.sawTemplateID == 5 && text.pendingMessageID == 9 && text.problem == nil)
        #expect(text.deepLink == "dp:gf_saw&id=5&standalone=true")
        #expect(junk.sawTemplateID == nil && junk.problem == #""saw_template_id" is string "five", not an integer"#)

        guard case .ping(let ping) = try decode(#"{"cid":1,"ts":"now"}"#) else { Issue.record("not a 1"); return }
        #expect(ping.json["ts"] == "now")
        guard case .registerPushTokenResponse(let r2003) = try decode(#"{"cid":2003,"errMsg":1,"errCode":"100001"}"#) else {
            Issue.record("not a 2003"); return
        }
        #expect(r2003.errMsg == "1" && r2003.errCode == 100_001 && r2003.isFatalError)
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
        guard case .sawShowSpinPush(let push) = try ServerMessage.decode(wrong) else { Issue.record("not 707"); return }
        #expect(push.sawTemplateID == nil)
        #expect(push.problem == "\"saw_template_id\" is string \"\(String(repeating: "x", count: 40))…\", not an integer")
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
        #expect(berr(#"{"bcid":"x"}"#) == #""bcid" must be an integer, found string "x""#)
        #expect(berr(#"{"bcid":"4"}"#) == #"bcid 4 (EXECUTE_DEEP_LINK): required field "dp" is missing"#)  // read as 4, as the SDK does
        #expect(berr(#"{"bcid":4}"#) == #"bcid 4 (EXECUTE_DEEP_LINK): required field "dp" is missing"#)
        #expect(berr(#"{"bcid":4,"dp":["x"]}"#) == #"bcid 4 (EXECUTE_DEEP_LINK): field "dp" must be a string, found array of 1"#)
        #expect(berr(#"{"bcid":6}"#) == #"bcid 6 (SEND_TO_SOCKET): required field "cid" is missing"#)
        #expect(berr(#"{"bcid":6,"cid":"9"}"#) == #"bcid 6 (SEND_TO_SOCKET): field "cid" must be an integer, found string "9""#)
        #expect(berr(#"{"bcid":8,"ach_game_id":"32"}"#) == #"bcid 8 (SEND_GAME_OPENING): field "ach_game_id" must be an integer, found string "32""#)
        #expect(berr(#"{"bcid":8,"ext_game_id":{}}"#) == #"bcid 8 (SEND_GAME_OPENING): field "ext_game_id" must be a string or a number, found object"#)
        #expect(berr("[]") == "expected a JSON object, found array")
    }
}
