import ArgumentParser
import SmarticoClient
import SmarticoSocketAPI
import SmarticoProtocol

/// `smarticoctl`: the command-line client of smarticod's local socket (daemon.md, socket-api.md).
struct Smarticoctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "smarticoctl",
        abstract: "Talk to smarticod over its local socket: status, events, user, messages.",
        discussion: """
            Every subcommand connects to the socket (--socket PATH, else $SMARTICOD_SOCKET, else \
            \(SocketAPIDefaults.socketPath)), sends one request and prints the answer for \
            people, or with --json the daemon's JSON line as received.

            Exit codes: 0 success; 1 the daemon answered with an error (printed on stderr as \
            code: message) or an answer that cannot be used; 2 usage error; 69 the daemon's socket \
            is unreachable (missing, refused, permission denied, closed or silent past --timeout).

            Examples:
              smarticoctl status
              smarticoctl tail --types engagement,minigame
              smarticoctl identify user-42 --hash "$(my-hash-tool user-42)"
              smarticoctl send '{"cid":103,"engagement_uid":"e-1","activityType":30}'
              SMARTICOD_SOCKET=/tmp/dev.sock smarticoctl status --json | jq .result.state
            """,
        version: SmarticoVersion.string,
        subcommands: [
            Status.self, Metrics.self, Hello.self, Tail.self, Forget.self, Identify.self, Logout.self, Login.self, PushToken.self, Language.self, LogLevel.self,
            Event.self, Report.self, MinigameAck.self, PushReport.self, Send.self, Request.self, Bridge.self, Api.self,
        ]
    )

    /// Accepted before the subcommand name too (`smarticoctl --socket P status`); the
    /// subcommands read the same values through their own `@OptionGroup`.
    @OptionGroup(visibility: .hidden) var options: GlobalOptions

    /// No subcommand: a usage error (exit 2), not a silent success.
    func run() throws {
        throw ValidationError("a subcommand is required (status, tail, identify, …; see smarticoctl --help)")
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the session: state, server, user, counters, outbox, journal.",
        discussion: """
            Human output is an aligned summary; --json prints the daemon's answer line \
            ({"id":1,"ok":true,"result":{…the status object…}}).

            Examples:
              smarticoctl status
              smarticoctl status --json | jq -r .result.state
              smarticoctl status --socket /tmp/smarticod-dev.sock
            """)
    @OptionGroup var options: GlobalOptions
    func run() throws { try runOp(.status, options: options) }
}

struct Metrics: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the daemon's metrics in the Prometheus text format (version 0.0.4).",
        discussion: """
            Session state, reconnects, messages to and from the server, events published by \
            type, outbox depth, subscribers, last error, RSS, uptime and version, as the daemon \
            answers the metrics op; --json prints the answer line \
            ({"id":1,"ok":true,"result":{"content_type":…,"text":…}}). Any peer may read them.

            Examples:
              smarticoctl metrics
              smarticoctl metrics | grep '^smarticod_session_state'
            """)
    @OptionGroup var options: GlobalOptions
    func run() throws { try runOp(.metrics, options: options) }
}

struct Hello: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the daemon's version, socket API version and session state.",
        discussion: """
            Examples:
              smarticoctl hello
              smarticoctl hello --json
            """)
    @OptionGroup var options: GlobalOptions
    func run() throws { try runOp(.hello, options: options) }
}

struct Forget: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete a durable subscription name (its cursor) that tail --durable or an app created.",
        discussion: """
            Only the uid that created the name, or root, may delete it. A uid keeps at most \
            socket.max_durable_per_uid names: forget the ones no app uses any more.

            Examples:
              smarticoctl forget kiosk
            """)
    @Argument(help: ArgumentHelp("The durable subscription name.", valueName: "name"))
    var name: String
    @OptionGroup var options: GlobalOptions

    func validate() throws {
        if name.isEmpty { throw ValidationError("<name> must not be empty") }
    }

    func run() throws { try runOp(.forget(name), options: options) }
}

struct Identify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Log a user in (kept across reconnects and restarts).",
        discussion: """
            Waits for the server's answer to IDENTIFY and prints the user's public name, \
            avatar, gamification and popup URLs and props. Without --hash the daemon runs \
            user.hash_command; without that configured the daemon refuses (exit 1).

            Examples:
              smarticoctl identify user-42 --hash 5f1c…:1767225600000
              smarticoctl identify user-42            # with user.hash_command configured
            """)
    @Argument(help: ArgumentHelp("The user's ext_user_id.", valueName: "user"))
    var user: String
    @Option(name: .long, help: ArgumentHelp("The IDENTIFY hash (md5(lower(user:salt:validity_ms)):validity_ms).", valueName: "hash"))
    var hash: String?
    @OptionGroup var options: GlobalOptions

    func validate() throws {
        if user.isEmpty { throw ValidationError("<user> must not be empty") }
    }

    func run() throws { try runOp(.identify(extUserID: user, hash: hash), options: options) }
}

struct Logout: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Forget the user and open a new anonymous session.",
        discussion: """
            Examples:
              smarticoctl logout
            """)
    @OptionGroup var options: GlobalOptions
    func run() throws { try runOp(.logout, options: options) }
}

struct Login: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start a new logical session now (send LOGIN, cid 7).",
        discussion: """
            Examples:
              smarticoctl login
            """)
    @OptionGroup var options: GlobalOptions
    func run() throws { try runOp(.login, options: options) }
}

struct PushToken: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-token",
        abstract: "Register the device's push token (cid 1003, or inside the next IDENTIFY).",
        discussion: """
            --status is the push permission status (0…4); --platform defaults to \
            user.push.platform of the configuration.

            Examples:
              smarticoctl push-token fcm-token-abc --status 4
              smarticoctl push-token fcm-token-abc --status 4 --platform 5 --app-package-id com.example.app
            """)
    @Argument(help: ArgumentHelp("The push token.", valueName: "token"))
    var token: String
    @Option(name: .long, help: ArgumentHelp("Push notification status, 0…4.", valueName: "n"))
    var status: Int
    @Option(name: .long, help: ArgumentHelp("Platform number.", valueName: "n"))
    var platform: Int?
    @Option(name: .customLong("app-package-id"), help: ArgumentHelp("Application package id.", valueName: "id"))
    var appPackageID: String?
    @OptionGroup var options: GlobalOptions

    func validate() throws {
        if token.isEmpty { throw ValidationError("<token> must not be empty") }
        guard (0...4).contains(status) else { throw ValidationError("--status must be in 0...4, got \(status)") }
    }

    func run() throws {
        try runOp(.pushToken(token, status: status, platform: platform, appPackageID: appPackageID), options: options)
    }
}

struct Language: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change the user's language (cid 9, core_language_changed).",
        discussion: """
            Examples:
              smarticoctl language de
              smarticoctl language pt-br
            """)
    @Argument(help: ArgumentHelp("ISO 639-1 code or a custom code such as pt-br.", valueName: "code"))
    var code: String
    @OptionGroup var options: GlobalOptions
    func run() throws { try runOp(.language(code), options: options) }
}

struct LogLevel: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log-level",
        abstract: "Set the daemon's log level until its next restart or reload (SIGHUP re-applies log.level).",
        discussion: """
            Levels: trace, debug, info, notice, warning, error, critical. Needs the control role.
            Examples:
              smarticoctl log-level debug
              smarticoctl log-level info
            """)
    @Argument(help: ArgumentHelp("trace, debug, info, notice, warning, error or critical.", valueName: "level"))
    var level: String
    @OptionGroup var options: GlobalOptions
    func run() throws { try runOp(.logLevel(level), options: options) }
}

struct Event: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a client event (cid 9), queued durably while offline.",
        discussion: """
            Examples:
              smarticoctl event page_view
              smarticoctl event deposit '{"amount":10,"currency":"EUR"}'
              echo '{"level":3}' | smarticoctl event level_up -
            """)
    @Argument(help: ArgumentHelp("The event type.", valueName: "type"))
    var type: String
    @Argument(help: ArgumentHelp("The payload: a JSON object, or - to read it from stdin.", valueName: "payload"))
    var payload: String?
    @OptionGroup var options: GlobalOptions

    func run() throws {
        let object = try payload.map { try jsonObjectArgument($0, name: "<payload>", limit: options.maxLineBytes) }
        try runOp(.event(type, payload: object), options: options)
    }
}

extension ClientRequest.ReportKind: ExpressibleByArgument {}

struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Report an engagement's impression, action or failure (cid 103, 104, 106).",
        discussion: """
            Examples:
              smarticoctl report impression 9f0c-…-e1
              smarticoctl report action 9f0c-…-e1 --action dp:ok
              smarticoctl report failed 9f0c-…-e1 --activity-type 20
            """)
    @Argument(help: ArgumentHelp("impression, action or failed.", valueName: "kind"))
    var kind: ClientRequest.ReportKind
    @Argument(help: ArgumentHelp("The engagement's engagement_uid.", valueName: "engagement-uid"))
    var engagementUID: String
    @Option(name: .customLong("activity-type"), help: ArgumentHelp("The engagement's activityType (default 30, popup).", valueName: "n"))
    var activityType: Int?
    @Option(name: .long, help: ArgumentHelp("The action (a deep link such as dp:ok).", valueName: "action"))
    var action: String?
    @OptionGroup var options: GlobalOptions

    func run() throws {
        try runOp(.report(kind, engagementUID: engagementUID, activityType: activityType.map(Int64.init), action: action), options: options)
    }
}

struct MinigameAck: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "minigame-ack",
        abstract: "Acknowledge a handled mini-game push (cid 711).",
        discussion: """
            Examples:
              smarticoctl minigame-ack 1234 --pending-message-id 98765
            """)
    @Argument(help: ArgumentHelp("saw_template_id of the minigame event.", valueName: "saw-template-id"))
    var sawTemplateID: Int64
    @Option(name: .customLong("pending-message-id"), help: ArgumentHelp("pending_message_id of the push.", valueName: "n"))
    var pendingMessageID: Int64?
    @OptionGroup var options: GlobalOptions

    func run() throws { try runOp(.minigameAck(sawTemplateID: sawTemplateID, pendingMessageID: pendingMessageID), options: options) }
}

extension ClientRequest.PushReportKind: ExpressibleByArgument {}

struct PushReport: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-report",
        abstract: "Report a push notification's lifecycle over Smartico's HTTP API (stored durably, retried).",
        discussion: """
            Examples:
              smarticoctl push-report delivered --engagement-uid 9f0c-…-e1 --message-id 778
              smarticoctl push-report action --engagement-uid 9f0c-…-e1 --message-id 778 --action dp:cashier
              smarticoctl push-report impression --engagement-uid 9f0c-…-e1 --user 12345
            """)
    @Argument(help: ArgumentHelp("delivered, impression, action or failed.", valueName: "kind"))
    var kind: ClientRequest.PushReportKind
    @Option(name: .customLong("engagement-uid"), help: ArgumentHelp("The push's engagement_uid.", valueName: "uid"))
    var engagementUID: String
    @Option(name: .customLong("message-id"), help: ArgumentHelp("The push's message_id.", valueName: "id"))
    var messageID: String?
    @Option(name: .long, help: ArgumentHelp("The action taken (kind action only).", valueName: "action"))
    var action: String?
    @Option(name: .customLong("user"), help: ArgumentHelp("The user (default: the identified one; without one the report waits for one).", valueName: "user"))
    var userExtID: String?
    @OptionGroup var options: GlobalOptions

    func run() throws {
        try runOp(.pushReport(kind, engagementUID: engagementUID, messageID: messageID, action: action, userExtID: userExtID), options: options)
    }
}

struct Send: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Forward a message to the server, fire-and-forget (queued durably while offline).",
        discussion: """
            The message is a JSON object with an integer cid; ts and uuid are filled in when \
            absent. Prints the uuid and whether it went out at once or waits in the outbox.

            Examples:
              smarticoctl send '{"cid":103,"engagement_uid":"e-1","activityType":30}'
              smarticoctl send - < message.json
            """)
    @Argument(help: ArgumentHelp("A JSON object with an integer cid, or - to read it from stdin.", valueName: "json"))
    var message: String
    @OptionGroup var options: GlobalOptions

    func run() throws {
        try runOp(.send(try jsonObjectArgument(message, name: "<json>", limit: options.maxLineBytes)), options: options)
    }
}

struct Request: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a message and print the server's answer (not stored while offline).",
        discussion: """
            Waits for the answer with cid --expect-cid (default: the request's answer cid, else \
            cid + 1) for --timeout-ms (the daemon's default 30000). Prints the answer message as \
            one JSON line. An answer with errCode ≠ 0 exits 1 (server_error).

            Examples:
              smarticoctl request '{"cid":500}'
              smarticoctl request '{"cid":513}' --expect-cid 514 --timeout-ms 5000 | jq .
            """)
    @Argument(help: ArgumentHelp("A JSON object with an integer cid, or - to read it from stdin.", valueName: "json"))
    var message: String
    @Option(name: .customLong("expect-cid"), help: ArgumentHelp("The cid of the answer.", valueName: "cid"))
    var expectCid: Int?
    @Option(name: .customLong("timeout-ms"), help: ArgumentHelp("How long the daemon waits for the answer (1…3600000).", valueName: "ms"))
    var timeoutMs: Int?
    @OptionGroup var options: GlobalOptions

    func validate() throws {
        if let timeoutMs, !(1...3_600_000).contains(timeoutMs) { throw ValidationError("--timeout-ms must be in 1...3600000, got \(timeoutMs)") }
        if let expectCid, expectCid < 0 { throw ValidationError("--expect-cid must be ≥ 0, got \(expectCid)") }
    }

    func run() throws {
        let object = try jsonObjectArgument(message, name: "<json>", limit: options.maxLineBytes)
        try runOp(.request(object, expectCid: expectCid.map(Int64.init), timeoutMs: timeoutMs), options: options)
    }
}

struct Bridge: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Act as the native side of the Native Bridge (a message with bcid).",
        discussion: """
            bcid 6 is sent like send; 7 updates the public props (props event); 4 classifies a \
            deep link (deeplink event); 8 emits game_opening; 1, 2, 5 are emitted as bridge.

            Examples:
              smarticoctl bridge '{"bcid":4,"dp":"dp:gf_saw&id=12"}'
              smarticoctl bridge '{"bcid":7,"level":3,"vip":true}'
            """)
    @Argument(help: ArgumentHelp("A JSON object with an integer bcid, or - to read it from stdin.", valueName: "json"))
    var message: String
    @OptionGroup var options: GlobalOptions

    func run() throws {
        try runOp(.bridge(try jsonObjectArgument(message, name: "<json>", limit: options.maxLineBytes)), options: options)
    }
}
