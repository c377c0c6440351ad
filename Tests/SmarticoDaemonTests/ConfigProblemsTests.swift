import Foundation
import Testing
@testable import SmarticoDaemon

@Suite("Config problems")
struct ConfigProblemsTests {
    private let key = ConfigTestSupport.validKey

    private func messages(_ problems: [ConfigProblem]) -> [String: [String]] {
        Dictionary(grouping: problems, by: \.key).mapValues { $0.map(\.message) }
    }

    @Test func everyProblemOfABadFileIsReportedInOneLoad() throws {
        let json = """
        {
          "server": {
            "url": "https://api.example.com/ws",
            "tls": {"ca_file": "/etc/ca.pem", "pinned": []},
            "compression": "yes"
          },
          "client": {"tracker_version": "1.2", "fp": "x"},
          "user": {"push": {"platform": 12, "status": 2, "tokn": "abc"}},
          "session": {
            "keepalive_s": "abc",
            "dead_after_s": 0,
            "keep_alive": 5,
            "login_policy": "sometimes",
            "reconnect": {"initial_ms": 5000, "max_ms": 100, "multiplier": 0.5}
          },
          "socket": {"path": "smarticod.sock", "mode": "0999", "control_uids": [1000, -1], "max_queue_bytes": 0, "max_queue_events": 10},
          "state_dir": 7,
          "log": {"level": "verbose"},
          "http": {"public_url": "ftp://papi.example.com/services/public"},
          "jurnal": {}
        }
        """
        let problems = ConfigTestSupport.problems(json)
        let byKey = messages(problems)
        // Missing label key (the server object has none).
        #expect(byKey["server.label_key"]?.first?.hasPrefix("required") == true)
        // Unknown keys at three levels.
        #expect(byKey["jurnal"] == ["unknown key (did you mean \"journal\"?)"])
        #expect(byKey["session.keep_alive"] == ["unknown key (did you mean \"keepalive_s\"?)"])
        #expect(byKey["server.tls.pinned"]?.first?.hasPrefix("unknown key") == true)
        #expect(byKey["user.push.tokn"] == ["unknown key (did you mean \"token\"?)"])
        // Wrong types, with what was found.
        #expect(byKey["session.keepalive_s"] == ["must be an integer ≥ 1, got \"abc\""])
        #expect(byKey["server.compression"] == ["must be true or false, got \"yes\""])
        #expect(byKey["client.fp"]?.first?.hasSuffix("got \"x\"") == true)
        #expect(byKey["state_dir"] == ["must be an absolute path, got 7"])
        #expect(byKey["socket.control_uids"]?.first?.contains("got [1000, -1]") == true)
        #expect(byKey["log.level"]?.first?.contains("\"verbose\"") == true)
        #expect(byKey["session.login_policy"] == ["must be \"logical_session\" or \"every_identify\", got \"sometimes\""])
        // Out of range and semantic problems.
        #expect(byKey["session.dead_after_s"] == ["must be an integer ≥ 1, got 0"])
        #expect(byKey["user.push.platform"]?.first?.hasPrefix("must be an integer 0…11") == true)
        #expect(byKey["session.reconnect.max_ms"]?.first?.contains("≥ session.reconnect.initial_ms") == true)
        #expect(byKey["session.reconnect.multiplier"] == ["must be a number ≥ 1, got 0.5"])
        #expect(byKey["socket.path"]?.first?.hasPrefix("must be an absolute path") == true)
        #expect(byKey["socket.mode"]?.first?.contains("\"0999\"") == true)
        #expect(byKey["socket.max_queue_bytes"] == ["must be an integer ≥ 4096, got 0"])
        // No longer in the spec: an unknown key.
        #expect(byKey["socket.max_queue_events"]?.first?.hasPrefix("unknown key") == true)
        #expect(byKey["client.tracker_version"]?.first?.contains("X.Y.Z") == true)
        // Bad URLs.
        #expect(byKey["server.url"]?.first?.contains("\"https\" is not ws or wss") == true)
        #expect(byKey["http.public_url"]?.first?.contains("\"ftp\" is not https or http") == true)
        // Exactly these keys, each once: nothing lost, nothing reported twice.
        let expectedKeys: Set<String> = [
            "server.label_key", "jurnal", "session.keep_alive", "server.tls.pinned", "user.push.tokn",
            "session.keepalive_s", "server.compression", "client.fp", "state_dir", "socket.control_uids",
            "log.level", "session.login_policy", "session.dead_after_s", "user.push.platform",
            "session.reconnect.max_ms", "session.reconnect.multiplier", "socket.path", "socket.mode",
            "socket.max_queue_bytes", "socket.max_queue_events", "client.tracker_version", "server.url", "http.public_url",
        ]
        #expect(Set(byKey.keys) == expectedKeys)
        #expect(problems.count == expectedKeys.count)
    }

    @Test func theHTTPQueueKeysAndRegisterViaAreChecked() {
        let json = """
        {
          "server": {"label_key": "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2"},
          "user": {"push": {"register_via": "pigeon"}},
          "http": {"connect_timeout_s": 0, "response_timeout_s": "30", "retry_initial_ms": 5000, "retry_max_ms": 100, "max_queue": -1}
        }
        """
        let byKey = messages(ConfigTestSupport.problems(json))
        #expect(byKey["user.push.register_via"] == ["must be \"socket\" or \"http\", got \"pigeon\""])
        #expect(byKey["http.connect_timeout_s"] == ["must be an integer ≥ 1, got 0"])
        #expect(byKey["http.response_timeout_s"]?.first?.hasPrefix("must be an integer ≥ 1") == true)
        #expect(byKey["http.retry_max_ms"]?.first?.contains("≥ http.retry_initial_ms (5000)") == true)
        #expect(byKey["http.max_queue"] == ["must be an integer ≥ 1, got -1"])
        #expect(Set(byKey.keys) == ["user.push.register_via", "http.connect_timeout_s", "http.response_timeout_s",
                                    "http.retry_max_ms", "http.max_queue"])
    }

    @Test func theErrorLinesNameTheSourceAndTheKey() {
        guard case .failure(let error) = ConfigTestSupport.decode(#"{"server": {"label_key": "\#(key)"}, "session": {"keepalive_s": -3}}"#) else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.lines == ["test.json: session.keepalive_s: must be an integer ≥ 1, got -3"])
    }

    @Test func aMissingServerObjectReportsTheLabelKey() {
        let problems = ConfigTestSupport.problems("{}")
        #expect(problems.map(\.key) == ["server.label_key"])
        #expect(problems.first?.message.hasPrefix("required") == true)
    }

    @Test func aSectionOfTheWrongTypeIsReportedAndTheRestStillChecked() {
        let problems = ConfigTestSupport.problems(#"{"server": {"label_key": "\#(key)"}, "session": 5, "socket": {"mode": "abc"}}"#)
        #expect(messages(problems) == [
            "session": ["must be an object, got 5"],
            "socket.mode": ["must be an octal permission string such as \"0660\" (3 or 4 digits 0-7, at most 0777), got \"abc\""],
        ])
    }

    @Test func nullIsOnlyAcceptedWhereTheDefaultIsNull() {
        #expect(ConfigTestSupport.problems(#"{"server": {"label_key": "\#(key)", "url": null, "proxy": null}, "client": {"fp": null}}"#).isEmpty)
        let problems = ConfigTestSupport.problems(#"{"server": {"label_key": "\#(key)"}, "session": {"keepalive_s": null}}"#)
        #expect(messages(problems) == ["session.keepalive_s": ["must be an integer ≥ 1, got null"]])
        #expect(ConfigTestSupport.problems(#"{"server": {"label_key": null}}"#).map(\.key) == ["server.label_key"])
    }

    @Test func integersAreWrittenAsIntegers() {
        let problems = ConfigTestSupport.problems(#"{"server": {"label_key": "\#(key)"}, "session": {"keepalive_s": 29.5, "dead_after_s": 1e2}}"#)
        #expect(Set(problems.map(\.key)) == ["session.keepalive_s", "session.dead_after_s"])
        // A fractional multiplier is fine.
        #expect(ConfigTestSupport.problems(#"{"server": {"label_key": "\#(key)"}, "session": {"reconnect": {"multiplier": 1.5}}}"#).isEmpty)
    }

    @Test func aRepeatedKeyIsReported() {
        let problems = ConfigTestSupport.problems(#"{"server": {"label_key": "\#(key)"}, "log": {"level": "info", "level": "debug"}}"#)
        #expect(problems.map(\.key) == ["log.level"])
        #expect(problems.first?.message.contains("more than once") == true)
    }

    @Test func oddKeysAreQuotedSoEachProblemStaysOneLine() {
        let problems = ConfigTestSupport.problems(#"{"server": {"label_key": "\#(key)"}, "a\nb": 1, "": 2, "x.y": 3, "log": {"lev el": 1, "lev el": 2}}"#)
        #expect(problems.map(\.key) == ["log.\"lev el\"", "log.\"lev el\"", "\"a\\nb\"", "\"\"", "\"x.y\""])
        guard case .failure(let error) = ConfigTestSupport.decode(#"{"server": {"label_key": "\#(key)"}, "a\nb": 1}"#) else { return }
        #expect(error.lines.allSatisfy { !$0.contains("\n") })
    }

    @Test func anUnknownKeyInTheWrongObjectPointsToTheRightOne() {
        let problems = ConfigTestSupport.problems(#"{"server": {"label_key": "\#(key)"}, "keepalive_s": 3, "zzz": 1}"#)
        let byKey = messages(problems)
        #expect(byKey["keepalive_s"] == ["unknown key here (did you mean \"session.keepalive_s\"?)"])
        #expect(byKey["zzz"]?.first?.hasPrefix("unknown key (known keys here: \"server\"") == true)
    }

    @Test(arguments: [
        ("{\n  \"server\": {\"label_key\": \"x\",}\n}", 2, 31, "trailing comma before '}'"),
        ("{\n  \"a\": tru\n}", 2, 11, "unexpected '\\n'; did you mean true? (strings must be quoted)"),
        ("{\"a\": 0660}", 1, 8, "numbers must not have leading zeros (write \"0660\" as a string)"),
        ("{\"a\": \"abc}", 1, 12, "unexpected end of file; expected '\"' to end the string"),
        ("{\"a\" 1}", 1, 6, "expected ':' after the member name, found '1'"),
        ("{\"a\": 1} x", 1, 10, "unexpected 'x' after the end of the JSON value"),
        ("{\"a\": [1, 2,]}", 1, 13, "trailing comma before ']'"),
        ("{\"a\": \"\\q\"}", 1, 9, "invalid escape '\\q' (valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)"),
        ("{\"é\": x}", 1, 7, "unexpected 'x'; expected a value (object, array, string, number, true, false or null)"),
        ("", 1, 1, "the file is empty; expected a JSON object"),
        ("{", 1, 2, "unexpected end of file; expected a member name in double quotes"),
    ])
    func syntaxErrorsHaveLineAndColumn(text: String, line: Int, column: Int, reason: String) {
        let problems = ConfigTestSupport.problems(text)
        #expect(problems == [ConfigProblem(key: "line \(line), column \(column)", message: "invalid JSON: \(reason)")])
    }

    @Test func deepNestingIsRefusedNotACrash() {
        let text = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        let problems = ConfigTestSupport.problems(text)
        #expect(problems.count == 1)
        #expect(problems.first?.message.contains("nesting deeper than") == true)
    }

    @Test func theRootMustBeAnObject() {
        #expect(ConfigTestSupport.problems("[1]") == [ConfigProblem(key: "", message: "the file must contain one JSON object, found an array")])
    }

    @Test func aMissingFileIsNamed() throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        let path = dir.appendingPathComponent("nope.json").path
        do {
            _ = try ConfigLoader.load(path: path)
            Issue.record("expected a failure")
        } catch {
            #expect(error.source == path)
            #expect(error.lines == ["\(path): cannot open the configuration file: No such file or directory (errno 2)"])
        }
        do {
            _ = try ConfigLoader.load(path: dir.path)
            Issue.record("expected a failure")
        } catch {
            #expect(error.lines.first?.hasPrefix("\(dir.path): is not a regular file") == true)
        }
    }

    @Test(arguments: [
        ("6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f", nil as Int?),
        ("6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-1", 1),
        ("6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2", 2),
        ("6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-10", 10),
        ("6816F0C2-1A2B-4C3D-8E9F-0A1B2C3D4E5F-123", 123),
    ])
    func validLabelKeys(text: String, environment: Int?) throws {
        let parsed = try LabelKey(parsing: Secret(text))
        #expect(parsed.environment == environment)
        #expect(parsed.key.exposedValue == String(text.prefix(36)))
        #expect(DaemonConfig(labelKey: text).validate().isEmpty)
    }

    @Test(arguments: [
        "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5",       // 35
        "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f2",     // 37, no dash
        "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-",     // dash, no number
        "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-0",    // environment 0
        "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-02",   // leading zero
        "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-x",
        "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-1234",
        "6816f0c2 1a2b-4c3d-8e9f-0a1b2c3d4e5f-2",    // space
        "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4é5f-2",    // non-ASCII
        "",
    ])
    func invalidLabelKeys(text: String) {
        let problems = DaemonConfig(labelKey: text).validate()
        #expect(problems.map(\.key) == ["server.label_key"])
        #expect(problems.first?.message.hasPrefix("must be a 36-character key") == true)
    }

    @Test func socketModes() {
        var c = DaemonConfig(labelKey: key)
        for (mode, bits) in [("0660", 0o660 as UInt32?), ("600", 0o600), ("0777", 0o777), ("0999", nil), ("7777", nil), ("rw", nil), ("06600", nil), ("", nil)] {
            c.socket.mode = mode
            #expect(c.socket.modeBits == bits, "mode \(mode)")
            #expect(c.validate().map(\.key) == (bits == nil ? ["socket.mode"] : []), "mode \(mode)")
        }
    }

    @Test func socketPathMustFitSunPath() {
        var c = DaemonConfig(labelKey: key)
        c.socket.path = "/" + String(repeating: "a", count: 106)
        #expect(c.validate().isEmpty)
        c.socket.path = "/" + String(repeating: "a", count: 107)
        #expect(c.validate().map(\.key) == ["socket.path"])
    }

    @Test func tlsPins() {
        var c = DaemonConfig(labelKey: key)
        let good = Data(repeating: 7, count: 32).base64EncodedString()
        let short = Data(repeating: 7, count: 16).base64EncodedString()
        c.server.tls.pinnedSPKISHA256 = [good, short, "not base64!"]
        let problems = c.validate()
        #expect(problems.map(\.key) == ["server.tls.pinned_spki_sha256[1]", "server.tls.pinned_spki_sha256[2]"])
        #expect(problems.first?.message == "must decode to 32 bytes (a SHA-256 digest), got 16 bytes")
        #expect(c.server.tls.pinnedDigests == [[UInt8](repeating: 7, count: 32)])
    }

    @Test func userRules() {
        var c = DaemonConfig(labelKey: key)
        c.user.hash = Secret("0123456789abcdef0123456789abcdef:1700000000000")
        #expect(c.validate().map(\.key) == ["user.hash"])
        c.user.extUserID = "player-1"
        #expect(c.validate().isEmpty)
        c.user.hashCommand = []
        #expect(c.validate().map(\.key) == ["user.hash_command"])
        c.user.hashCommand = ["", "x"]
        #expect(c.validate().map(\.key) == ["user.hash_command[0]"])
        c.user.hashCommand = ["/usr/local/bin/smartico-hash", "--user", "player-1"]
        c.user.push.status = 5
        c.user.push.platform = -1
        #expect(c.validate().map(\.key) == ["user.push.platform", "user.push.status"])
        let decoded = ConfigTestSupport.problems(#"{"server": {"label_key": "\#(key)"}, "user": {"hash_command": "/bin/hash"}}"#)
        #expect(decoded.map(\.key) == ["user.hash_command"])
        #expect(decoded.first?.message == "must be a non-empty array of strings (program and arguments) or null, got \"/bin/hash\"")
    }

    @Test func urlsAndHeaders() {
        var c = DaemonConfig(labelKey: key)
        c.server.url = "ws://127.0.0.1:8080/websocket/services?master&domain=x&version=1.0.0"
        c.http.publicURL = "http://127.0.0.1:8081/services/public"
        c.server.headers = ["User-Agent": "kiosk/1", "Origin": "https://example.com"]
        #expect(c.validate().isEmpty)
        c.server.url = "wss://user:pw@example.com/"
        c.server.headers = ["Sec-WebSocket-Key": "x", "Bad Header": "y", "X-Ok": "a\r\nb"]
        c.http.publicURL = "https://papi.example.com/services/public?x=1"
        let keys = c.validate().map(\.key)
        #expect(keys == ["server.url", "server.headers.\"Bad Header\"", "server.headers.Sec-WebSocket-Key", "server.headers.X-Ok", "http.public_url"])
        #expect(!c.validate().description.contains("pw"))
    }

    @Test func clientRules() {
        var c = DaemonConfig(labelKey: key)
        c.client.language = "pt-br"
        c.client.trackerVersion = "1.23.546"
        c.client.domain = "demo.example.com"
        c.client.page = "https://demo.example.com/"
        #expect(c.validate().isEmpty)
        c.client.language = "portuguese!"
        c.client.trackerVersion = "1.2.x"
        c.client.domain = "a b"
        c.client.deviceType = ""
        #expect(c.validate().map(\.key) == ["client.tracker_version", "client.domain", "client.device_type", "client.language"])
    }

    @Test func validatedThrowsEveryProblem() {
        var c = DaemonConfig(labelKey: "short")
        c.session.keepaliveS = 0
        do {
            _ = try c.validated(source: "code")
            Issue.record("expected a failure")
        } catch {
            #expect(error.problems.map(\.key) == ["server.label_key", "session.keepalive_s"])
            #expect(error.lines.allSatisfy { $0.hasPrefix("code: ") })
        }
    }
}
