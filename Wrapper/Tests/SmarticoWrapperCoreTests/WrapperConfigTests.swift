import SmarticoProtocol
import SmarticoWrapperCore
import Testing

@Suite("WrapperConfig.parse")
struct WrapperConfigTests {
    func parse(_ text: String) throws(WrapperConfig.Problems) -> WrapperConfig {
        try WrapperConfig.parse(Array(text.utf8), file: "/etc/smartico/wrapper.json")
    }

    /// The problem lines of a configuration that must be refused.
    func problems(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> [String] {
        do {
            let config = try parse(text)
            Issue.record("accepted: \(config)", sourceLocation: sourceLocation)
            return []
        } catch {
            #expect(error.file == "/etc/smartico/wrapper.json", sourceLocation: sourceLocation)
            return error.lines
        }
    }

    @Test("defaults: an empty object, and null for every key")
    func defaults() throws {
        let config = try parse("{}")
        #expect(config == WrapperConfig())
        #expect(config.socket == nil)
        #expect(config.durable == nil)
        #expect(config.durableName(uid: 1000) == "smartico-wrapper-1000")
        #expect(config.allowedOrigins.isEmpty)
        #expect(config.deepLinkCommands.isEmpty)
        #expect(config.openExternalLinks == nil)
        #expect(config.kiosk == false)
        #expect(config.readyTimeoutSeconds == 15)
        #expect(config.loadTimeoutSeconds == 60)
        #expect(config.releaseAfterSeconds == 60)
        #expect(config.widgetWidth == 480)
        #expect(config.widgetHeight == 800)
        #expect(config.maxQueuedPopups == 64)
        #expect(config.developerExtras == false)
        #expect(config.externalLinksAllowed)

        let nulls = """
            {"socket":null,"durable":null,"allowed_origins":null,"deep_link_commands":null,"open_external_links":null,
             "kiosk":null,"ready_timeout_s":null,"load_timeout_s":null,"release_after_s":null,"widget_width":null,"widget_height":null,
             "max_queued_popups":null,"developer_extras":null}
            """
        #expect(try parse(nulls) == WrapperConfig())
        #expect(try parse(" \n{ }\n") == WrapperConfig())
    }

    @Test("every key")
    func everyKey() throws {
        let config = try parse("""
            {
              "socket": "/run/user/1000/smarticod.sock",
              "durable": "kiosk-7",
              "allowed_origins": ["https://static.operator.example", "http://127.0.0.1:36807", "HTTPS://CDN.Example:8443/path"],
              "deep_link_commands": {"cashier": ["/usr/bin/my-cashier", "{dp}"], "Deposit": ["/opt/op/deposit"]},
              "open_external_links": true,
              "kiosk": true,
              "ready_timeout_s": 30,
              "release_after_s": 0,
              "widget_width": 1024,
              "widget_height": 768,
              "max_queued_popups": 5,
              "developer_extras": true
            }
            """)
        #expect(config.socket == "/run/user/1000/smarticod.sock")
        #expect(config.durable == "kiosk-7")
        #expect(config.durableName(uid: 1000) == "kiosk-7")
        #expect(config.allowedOrigins == [
            WebOrigin(scheme: "https", host: "static.operator.example", port: 443),
            WebOrigin(scheme: "http", host: "127.0.0.1", port: 36807),
            WebOrigin(scheme: "https", host: "cdn.example", port: 8443),
        ])
        #expect(config.deepLinkCommands == ["cashier": ["/usr/bin/my-cashier", "{dp}"], "deposit": ["/opt/op/deposit"]])
        #expect(config.openExternalLinks == true)
        #expect(config.kiosk)
        #expect(config.externalLinksAllowed, "open_external_links true wins over kiosk")
        #expect(config.readyTimeoutSeconds == 30)
        #expect(config.releaseAfterSeconds == 0)
        #expect(config.widgetWidth == 1024)
        #expect(config.widgetHeight == 768)
        #expect(config.maxQueuedPopups == 5)
        #expect(config.developerExtras)
    }

    @Test("external links: on by default, off in kiosk mode, open_external_links decides")
    func externalLinks() throws {
        #expect(try parse(#"{"kiosk":true}"#).externalLinksAllowed == false)
        #expect(try parse(#"{"kiosk":false}"#).externalLinksAllowed == true)
        #expect(try parse(#"{"open_external_links":false}"#).externalLinksAllowed == false)
        #expect(try parse(#"{"kiosk":true,"open_external_links":true}"#).externalLinksAllowed == true)
        #expect(try parse(#"{"kiosk":false,"open_external_links":false}"#).externalLinksAllowed == false)
    }

    @Test("range limits are inclusive", arguments: [
        ("ready_timeout_s", 1), ("ready_timeout_s", 600), ("load_timeout_s", 1), ("load_timeout_s", 600), ("release_after_s", 0), ("release_after_s", 86400),
        ("widget_width", 200), ("widget_width", 10000), ("widget_height", 200), ("widget_height", 10000),
        ("max_queued_popups", 1), ("max_queued_popups", 10000),
    ])
    func limits(_ key: String, _ value: Int) throws {
        let config = try parse(#"{"\#(key)":\#(value)}"#)
        let got = switch key {
        case "ready_timeout_s": config.readyTimeoutSeconds
        case "load_timeout_s": config.loadTimeoutSeconds
        case "release_after_s": config.releaseAfterSeconds
        case "widget_width": config.widgetWidth
        case "widget_height": config.widgetHeight
        default: config.maxQueuedPopups
        }
        #expect(got == value)
    }

    @Test("a durable name of 128 bytes is taken, 129 is not")
    func durableLength() throws {
        let name = String(repeating: "d", count: 128)
        #expect(try parse(#"{"durable":"\#(name)"}"#).durable == name)
        let lines = problems(#"{"durable":"\#(name)d"}"#)
        #expect(lines == [#""durable" is 129 bytes long; at most 128"#])
    }

    @Test("an unknown key is refused, with the known ones listed")
    func unknownKey() {
        let lines = problems(#"{"kiosk":true,"widht":480}"#)
        #expect(lines.count == 1)
        #expect(lines.first?.contains(#"unknown key "widht""#) == true)
        #expect(lines.first?.contains("widget_width") == true)
        #expect(problems(#"{"Kiosk":true}"#).first?.contains(#""Kiosk""#) == true, "keys are case-sensitive")
    }

    @Test("every wrong type names its key", arguments: [
        (#"{"socket":1}"#, #""socket" must be a non-empty string, got number"#),
        (#"{"socket":""}"#, #""socket" must be a non-empty string, got string"#),
        (#"{"durable":["x"]}"#, #""durable" must be a non-empty string, got array"#),
        (#"{"durable":""}"#, #""durable" must be a non-empty string"#),
        (#"{"allowed_origins":"https://a.example"}"#, #""allowed_origins" must be an array of origins, got string"#),
        (#"{"allowed_origins":{}}"#, #""allowed_origins" must be an array of origins, got object"#),
        (#"{"allowed_origins":["https://a.example",7]}"#, #""allowed_origins"[1] must be a string"#),
        (#"{"allowed_origins":["javascript:alert(1)"]}"#, #""allowed_origins"[0] "javascript:alert(1)" is a javascript: URL"#),
        (#"{"allowed_origins":["file:///etc"]}"#, #""allowed_origins"[0] "file:///etc" is a file: URL"#),
        (#"{"allowed_origins":["libs.smartico.ai"]}"#, #""allowed_origins"[0] "libs.smartico.ai" is a relative URL"#),
        (#"{"allowed_origins":["https://"]}"#, #""allowed_origins"[0] "https://" is a malformed URL"#),
        (#"{"allowed_origins":[""]}"#, #""allowed_origins"[0] "" is an empty URL"#),
        (#"{"deep_link_commands":["/bin/x"]}"#, #""deep_link_commands" must be an object of action → argv, got array"#),
        (#"{"deep_link_commands":"x"}"#, #""deep_link_commands" must be an object of action → argv, got string"#),
        (#"{"open_external_links":"true"}"#, #""open_external_links" must be true or false, got string"#),
        (#"{"kiosk":1}"#, #""kiosk" must be true or false, got number"#),
        (#"{"developer_extras":"yes"}"#, #""developer_extras" must be true or false, got string"#),
        (#"{"ready_timeout_s":"15"}"#, #""ready_timeout_s" must be an integer from 1 to 600, got string"#),
        (#"{"ready_timeout_s":0}"#, #""ready_timeout_s" must be an integer from 1 to 600, got 0"#),
        (#"{"ready_timeout_s":601}"#, #""ready_timeout_s" must be an integer from 1 to 600, got 601"#),
        (#"{"ready_timeout_s":1.5}"#, #""ready_timeout_s" must be an integer from 1 to 600, got 1.5"#),
        (#"{"ready_timeout_s":true}"#, #""ready_timeout_s" must be an integer from 1 to 600, got boolean"#),
        (#"{"load_timeout_s":0}"#, #""load_timeout_s" must be an integer from 1 to 600, got 0"#),
        (#"{"load_timeout_s":"60"}"#, #""load_timeout_s" must be an integer from 1 to 600, got string"#),
        (#"{"release_after_s":-1}"#, #""release_after_s" must be an integer from 0 to 86400, got -1"#),
        (#"{"release_after_s":86401}"#, #""release_after_s" must be an integer from 0 to 86400, got 86401"#),
        (#"{"widget_width":199}"#, #""widget_width" must be an integer from 200 to 10000, got 199"#),
        (#"{"widget_width":1e5}"#, #""widget_width" must be an integer from 200 to 10000, got 1e5"#),
        (#"{"widget_height":10001}"#, #""widget_height" must be an integer from 200 to 10000, got 10001"#),
        (#"{"widget_height":[]}"#, #""widget_height" must be an integer from 200 to 10000, got array"#),
        (#"{"max_queued_popups":0}"#, #""max_queued_popups" must be an integer from 1 to 10000, got 0"#),
        (#"{"max_queued_popups":99999999999999999999999}"#, #""max_queued_popups" must be an integer from 1 to 10000, got 99999999999999999999999"#),
    ])
    func wrongType(_ text: String, _ expected: String) {
        let lines = problems(text)
        #expect(lines.count == 1)
        #expect(lines.first?.hasPrefix(expected) == true, "\(lines)")
    }

    @Test("deep_link_commands: an argv array starting with an absolute path, never a shell string", arguments: [
        #"{"cashier":"/usr/bin/my-cashier {dp}"}"#,
        #"{"cashier":[]}"#,
        #"{"cashier":["my-cashier","{dp}"]}"#,
        #"{"cashier":["./my-cashier"]}"#,
        #"{"cashier":["~/bin/my-cashier"]}"#,
        #"{"cashier":["/usr/bin/my-cashier",1]}"#,
        #"{"cashier":["/usr/bin/my-cashier",null]}"#,
        #"{"cashier":[["/usr/bin/my-cashier"]]}"#,
        #"{"cashier":["/usr/bin/my\u0000cashier"]}"#,
        #"{"cashier":["/usr/bin/my-cashier","a\u0000b"]}"#,
        #"{"cashier":{"argv":["/usr/bin/my-cashier"]}}"#,
        #"{"cashier":null}"#,
    ])
    func badArgv(_ commands: String) {
        let lines = problems(#"{"deep_link_commands":\#(commands)}"#)
        #expect(lines.count == 1)
        #expect(lines.first?.hasPrefix(#""deep_link_commands"."cashier" must be an argv array"#) == true, "\(lines)")
        #expect(lines.first?.contains("absolute path") == true)
    }

    @Test("deep_link_commands: the key is an action name, without dp:", arguments: [#""dp:cashier""#, #""""#, #""DP:Cashier""#])
    func badAction(_ key: String) {
        let lines = problems(#"{"deep_link_commands":{\#(key):["/usr/bin/x"]}}"#)
        #expect(lines.count == 1)
        #expect(lines.first?.contains("must be an action name without dp:") == true, "\(lines)")
    }

    @Test("all problems at once, each naming its key, each line prefixed with the file")
    func allAtOnce() {
        let text = """
            {"socket":5,"durable":"","colour":"red","allowed_origins":["ftp://x",3],"deep_link_commands":{"cashier":"sh -c x","dp:x":["/bin/x"]},
             "open_external_links":"no","kiosk":"yes","ready_timeout_s":0,"release_after_s":"1","widget_width":1,"widget_height":1,
             "max_queued_popups":-5,"developer_extras":0}
            """
        let lines = problems(text)
        for key in ["socket", "durable", "colour", "allowed_origins\"[0]", "allowed_origins\"[1]", "\"cashier\"", "\"dp:x\"",
                    "open_external_links", "kiosk", "ready_timeout_s", "release_after_s", "widget_width", "widget_height",
                    "max_queued_popups", "developer_extras"] {
            #expect(lines.contains { $0.contains(key) }, "no line for \(key) in \(lines)")
        }
        #expect(lines.count == 15)
        do {
            _ = try parse(text)
        } catch {
            let description = error.description.split(separator: "\n")
            #expect(description.count == 15)
            #expect(description.allSatisfy { $0.hasPrefix("/etc/smartico/wrapper.json: ") })
        }
    }

    @Test("not JSON, or not an object")
    func notAnObject() {
        let notJSON = problems("{kiosk: true}")
        #expect(notJSON.count == 1)
        #expect(notJSON.first?.hasPrefix("not JSON: ") == true)
        #expect(problems("").first?.hasPrefix("not JSON") == true)
        #expect(problems(#"{"kiosk":true}{}"#).first?.hasPrefix("not JSON") == true)
        #expect(problems("[]") == ["the configuration must be a JSON object, not a array"])
        #expect(problems("null") == ["the configuration must be a JSON object, not a null"])
        #expect(problems(#""{}""#) == ["the configuration must be a JSON object, not a string"])
    }
}

@Suite("WrapperConfig.defaultPaths: the file read without --config")
struct WrapperConfigDefaultPathTests {
    @Test("the user's file (XDG_CONFIG_HOME, else ~/.config), then the machine's")
    func order() {
        #expect(WrapperConfig.defaultPaths(environment: ["HOME": "/home/ann"])
                == ["/home/ann/.config/smartico-wrapper/config.json", "/etc/smartico-wrapper/config.json"])
        #expect(WrapperConfig.defaultPaths(environment: ["HOME": "/home/ann", "XDG_CONFIG_HOME": "/srv/cfg"])
                == ["/srv/cfg/smartico-wrapper/config.json", "/etc/smartico-wrapper/config.json"])
        #expect(WrapperConfig.defaultPaths(environment: ["HOME": "/"])
                == ["/.config/smartico-wrapper/config.json", "/etc/smartico-wrapper/config.json"])
    }

    @Test("a relative or missing XDG_CONFIG_HOME or HOME is ignored (the XDG spec: absolute paths only)")
    func relative() {
        #expect(WrapperConfig.defaultPaths(environment: ["HOME": "/home/ann", "XDG_CONFIG_HOME": "cfg"])
                == ["/home/ann/.config/smartico-wrapper/config.json", "/etc/smartico-wrapper/config.json"])
        #expect(WrapperConfig.defaultPaths(environment: ["HOME": "home"]) == ["/etc/smartico-wrapper/config.json"])
        #expect(WrapperConfig.defaultPaths(environment: [:]) == ["/etc/smartico-wrapper/config.json"])
    }
}
