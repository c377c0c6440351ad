// smarticoctl run for real, as a subprocess, against a SocketAPIServer on a Unix socket.
import Foundation
import Logging
import Testing
import SmarticoProtocol
import SmarticoTestSupport
import Transport
@testable import SmarticoDaemon

@Suite("smarticoctl", .awaitsCleanup)
struct CtlTests {
    static let subcommands = [
        "status", "hello", "tail", "identify", "logout", "login", "push-token", "language", "event", "report",
        "minigame-ack", "push-report", "send", "request", "bridge", "log-level", "metrics",
    ]

    @Test func everySubcommandHasHelpWithExamples() async throws {
        let top = try await runCtl(["--help"])
        #expect(top.status == 0)
        for name in Self.subcommands {
            #expect(top.stdout.contains("  \(name) "), "\(name) missing from the overview")
            let r = try await runCtl([name, "--help"])
            #expect(r.status == 0, "\(name) --help: \(r)")
            #expect(r.stdout.contains("Examples:"), "\(name) --help has no examples")
            #expect(r.stdout.contains("smarticoctl \(name)"), "\(name) --help has no example of itself")
            #expect(r.stdout.contains("--socket"), "\(name) --help lacks --socket")
        }
    }

    @Test func usageErrorsExit2BeforeAnyConnection() async throws {
        // The socket does not exist: a usage error must win over "unreachable" (69).
        let missing = "/nonexistent-\(UUID().uuidString)/d.sock"
        let cases: [([String], String)] = [
            ([], "a subcommand is required"),
            (["frobnicate"], "Unexpected argument 'frobnicate'"),
            (["status", "--bogus"], "Unknown option '--bogus'"),
            (["identify"], "Missing expected argument '<user>'"),
            (["push-token", "t", "--status", "9"], "--status must be in 0...4, got 9"),
            (["send", "{nope"], "<json> is not JSON"),
            (["send", "[1]"], "<json> must be a JSON object, got array"),
            (["tail", "--types", "engagement,nope"], "\"nope\" is not an event type"),
            (["tail", "--durable", String(repeating: "n", count: 129)], "--durable must be a name of 1 to 128 bytes"),
            (["report", "viewed", "e-1"], "viewed"),
            (["request", "{\"cid\":500}", "--timeout-ms", "0"], "--timeout-ms must be in 1...3600000"),
            (["status", "--timeout", "0"], "--timeout must be a number of seconds > 0"),
        ]
        for (arguments, message) in cases {
            let r = try await runCtl(arguments + ["--socket", missing])
            #expect(r.status == 2 && !r.signaled, "\(arguments): \(r)")
            #expect(r.stderr.contains(message), "\(arguments): stderr \(r.stderr)")
            #expect(r.stdout.isEmpty, "\(arguments): stdout \(r.stdout)")
        }
        let long = "/tmp/" + String(repeating: "s", count: 120)
        let tooLong = try await runCtl(["status", "--socket", long])
        #expect(tooLong.status == 2, "\(tooLong)")
        #expect(tooLong.stderr.contains("the socket path \(long) is 125 bytes long; a Unix socket path has at most 107"), "\(tooLong.stderr)")
    }

    @Test func anUnreachableDaemonExits69NamingTheSocketAndErrno() async throws {
        let dir = try makeSocketTempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }

        // No such file.
        let missing = dir + "/missing.sock"
        let noFile = try await runCtl(["status", "--socket", missing])
        #expect(noFile.status == 69, "\(noFile)")
        #expect(noFile.stderr.contains("cannot connect to \(missing): No such file or directory (ENOENT)"), "\(noFile.stderr)")
        #expect(noFile.stdout.isEmpty)

        // The path comes from SMARTICOD_SOCKET when --socket is absent.
        let fromEnv = try await runCtl(["hello"], environment: ["SMARTICOD_SOCKET": missing])
        #expect(fromEnv.status == 69)
        #expect(fromEnv.stderr.contains(missing), "\(fromEnv.stderr)")

        // A socket file nobody listens on (bound, never listening): ECONNREFUSED.
        let stale = dir + "/stale.sock"
        let staleFD = try bindUnix(stale, listen: false)
        defer { close(staleFD) }
        let refused = try await runCtl(["status", "--socket", stale])
        #expect(refused.status == 69, "\(refused)")
        #expect(refused.stderr.contains("cannot connect to \(stale): Connection refused (ECONNREFUSED)"), "\(refused.stderr)")

        // Listening but never answering: the --timeout bounds the wait.
        let silent = dir + "/silent.sock"
        let silentFD = try bindUnix(silent, listen: true)
        defer { close(silentFD) }
        let started = ContinuousClock.now
        let mute = try await runCtl(["status", "--socket", silent, "--timeout", "0.5"])
        #expect(mute.status == 69, "\(mute)")
        #expect(mute.stderr.contains("no answer from smarticod on \(silent) within 0.5 s"), "\(mute.stderr)")
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    /// `backoff`: the next try while backing off; while ready, the failed attempts still counted
    /// (they set the next delay until a healthy minute resets them); no line when there are none.
    @Test func statusShowsBackoffOnlyWhenItSaysSomething() async throws {
        func backoffLine(state: String, attempt: Int64, retryAtMs: Int64?) async throws -> String? {
            var status = try #require(ctlCannedStatus.objectValue)
            status["state"] = .string(state)
            status["backoff"] = ["attempt": .number(attempt), "retry_at_ms": retryAtMs.map { JSONValue.number($0) } ?? .null]
            let rig = try await CtlRig.start(status: .object(status))
            defer { cleanUpAfterTest { await rig.stop() } }
            let run = try await rig.ctl(["status"])
            #expect(run.status == 0, "\(run)")
            return run.stdoutLines.first { $0.hasPrefix("backoff:") }
                .map { String($0.dropFirst("backoff:".count)).trimmingCharacters(in: .whitespaces) }
        }
        #expect(try await backoffLine(state: "backoff", attempt: 3, retryAtMs: 1_700_000_200_000)
            == "attempt 3, next try at 2023-11-14 22:16:40.000")
        #expect(try await backoffLine(state: "ready", attempt: 3, retryAtMs: nil)
            == "none pending (3 failed attempts in a row; the count resets after a healthy minute)")
        #expect(try await backoffLine(state: "ready", attempt: 0, retryAtMs: nil) == nil)
    }

    @Test func statusPrintsAnAlignedSummaryOrTheLineAsReceived() async throws {
        let rig = try await CtlRig.start()
        defer { cleanUpAfterTest { await rig.stop() } }

        let human = try await rig.ctl(["status"])
        #expect(human.status == 0, "\(human)")
        let lines = human.stdoutLines
        // Every line is "name:" padded so that the values start in one column.
        let columns = Set(lines.map { line -> Int in
            let colon = line.firstIndex(of: ":")!
            let afterColon = line[line.index(after: colon)...]
            return line.distance(from: line.startIndex, to: colon) + 1 + afterColon.prefix { $0 == " " }.count
        })
        #expect(columns.count == 1, "values not aligned:\n\(human.stdout)")
        let expected = [
            "state", "server", "session", "user", "rejected", "props", "messages", "keepalive", "reconnects", "outbox", "journal", "subscribers",
            "last error",
        ]
        #expect(lines.map { String($0.prefix { $0 != ":" }) } == expected, "\(human.stdout)")
        func value(_ name: String) -> String {
            let line = lines.first { $0.hasPrefix(name + ":") } ?? ""
            return String(line.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces)
        }
        #expect(value("state").hasPrefix("ready for "))
        #expect(value("state").hasSuffix("(since 2023-11-14 22:13:20.000)"))
        #expect(value("server") == "wss://api.example.test/websocket/services?master&domain=demo&version=0.1.0, connected at 2023-11-14 22:13:21.000")
        #expect(value("session") == "id s-1234, products 100 101")
        #expect(value("user") == "user-42 (Player One), identified")
        #expect(value("rejected") == "mallory: errCode 100000 (bad hash)")
        #expect(value("props") == #"{"level":3}"#)
        #expect(value("messages") == "in 120, out 98")
        #expect(value("keepalive").hasPrefix("pings 4, pongs 5, last "))
        #expect(value("keepalive").hasSuffix("ago (2023-11-14 22:15:00.000)"))
        #expect(value("reconnects") == "2")
        #expect(value("outbox").hasPrefix("3 waiting, oldest "))
        #expect(value("journal") == "seq 1…57")
        #expect(value("subscribers") == "2")
        #expect(value("last error").hasPrefix("init_rejected: the server rejected INIT_SESSION_REQUEST: errCode 100001, "))
        #expect(value("last error").hasSuffix(" ago (2023-11-14 22:14:50.000)"))

        let json = try await rig.ctl(["status", "--json"])
        #expect(json.status == 0, "\(json)")
        #expect(json.stdoutLines.count == 1)
        let answer = try JSONValue(parsing: json.stdoutLines[0])
        #expect(answer == ["id": 1, "ok": true, "result": ctlCannedStatus])
        #expect(json.stdoutLines[0] == (["id": 1, "ok": true, "result": ctlCannedStatus] as JSONValue).serializedString())

        // Options before the subcommand work too.
        let before = try await runCtl(["--socket", rig.path, "--json", "hello"])
        #expect(before.status == 0, "\(before)")
        #expect(before.stdout == #"{"id":1,"ok":true,"result":{"api":1,"version":"9.9.9","state":"ready"}}"# + "\n")
    }

    @Test func everyOpSendsItsArgumentsAndPrintsItsResult() async throws {
        let rig = try await CtlRig.start()
        defer { cleanUpAfterTest { await rig.stop() } }
        let uuid = "00000000-0000-4000-8000-00000000abcd"
        let cases: [(args: [String], stdin: String?, call: SocketAPICall, out: String)] = [
            (["hello"], nil, .hello, "smarticod 9.9.9, socket API 1, session ready"),
            (["identify", "user-42", "--hash", "abc:1767225600000"], nil,
             .session(.identify(extUserID: "user-42", hash: "abc:1767225600000")), "identified:"),
            (["identify", "user-43"], nil, .session(.identify(extUserID: "user-43", hash: nil)), "user-43"),
            (["logout"], nil, .session(.logout), "logged out; a new anonymous session opens"),
            (["login"], nil, .session(.login), "LOGIN sent"),
            (["push-token", "tok-1", "--status", "4", "--platform", "5", "--app-package-id", "com.example"], nil,
             .session(.pushToken(token: "tok-1", platform: 5, status: 4, appPackageID: "com.example")),
             "not identified yet: remembered, sent inside the next IDENTIFY"),
            (["language", "pt-br"], nil, .session(.language("pt-br")), "sent (uuid \(uuid))"),
            (["event", "deposit", #"{"amount":10,"currency":"EUR"}"#], nil,
             .session(.event(eventType: "deposit", payload: ["amount": 10, "currency": "EUR"])),
             "queued (uuid \(uuid)): stored, sent once the session is ready"),
            (["event", "level_up", "-"], #"{"level":3}"#, .session(.event(eventType: "level_up", payload: ["level": 3])), "queued"),
            (["event", "page_view"], nil, .session(.event(eventType: "page_view", payload: nil)), "queued"),
            (["report", "action", "e-1", "--activity-type", "20", "--action", "dp:ok"], nil,
             .session(.report(kind: .action, engagementUID: "e-1", activityType: 20, action: "dp:ok")), "sent (uuid"),
            (["report", "impression", "e-2"], nil,
             .session(.report(kind: .impression, engagementUID: "e-2", activityType: 30, action: nil)), "sent (uuid"),
            (["minigame-ack", "12", "--pending-message-id", "34"], nil,
             .session(.minigameAck(sawTemplateID: 12, pendingMessageID: 34)), "sent (uuid"),
            (["send", #"{"cid":103,"engagement_uid":"e-1","activityType":30}"#], nil,
             .session(.send(["cid": 103, "engagement_uid": "e-1", "activityType": 30])), "sent (uuid \(uuid))"),
            (["send", "-"], #"{"cid":9,"eventType":"x"}"#, .session(.send(["cid": 9, "eventType": "x"])), "sent (uuid"),
            (["request", #"{"cid":500}"#, "--expect-cid", "501", "--timeout-ms", "2000"], nil,
             .session(.request(message: ["cid": 500], expectCid: 501, timeoutMs: 2000)),
             #"{"cid":501,"levels":[{"id":1,"name":"Bronze"}]}"#),
            (["bridge", #"{"bcid":4,"dp":"dp:ok"}"#], nil, .session(.bridge(["bcid": 4, "dp": "dp:ok"])), "ok"),
            (["log-level", "debug"], nil, .logLevel(.debug), "log level debug (was info) until the next restart or reload"),
        ]
        for c in cases {
            let before = rig.daemon.recorded.count
            let r = try await rig.ctl(c.args, stdin: c.stdin)
            #expect(r.status == 0, "\(c.args): \(r)")
            #expect(r.stdout.contains(c.out), "\(c.args): stdout \(r.stdout)")
            #expect(r.stderr.isEmpty, "\(c.args): stderr \(r.stderr)")
            let calls = rig.daemon.recorded.dropFirst(before)
            #expect(Array(calls) == [c.call], "\(c.args)")
        }
        // `request` prints exactly the answer message, one JSON line (for jq).
        let request = try await rig.ctl(["request", #"{"cid":500}"#])
        #expect(request.stdout == #"{"cid":501,"levels":[{"id":1,"name":"Bronze"}]}"# + "\n")
        // identify prints an aligned block.
        let identify = try await rig.ctl(["identify", "user-42", "--hash", "h"])
        #expect(identify.stdoutLines.contains("identified:       user-42"), "\(identify.stdout)")
        #expect(identify.stdoutLines.contains("public_username:  Player One"), "\(identify.stdout)")
        #expect(identify.stdoutLines.contains("gf_url:           https://gf.example.test/w"), "\(identify.stdout)")
    }

    @Test func errorAnswersExit1WithCodeAndMessage() async throws {
        let rig = try await CtlRig.start()
        defer { cleanUpAfterTest { await rig.stop() } }

        let rejected = try await rig.ctl(["identify", "bad-hash", "--hash", "x"])
        #expect(rejected.status == 1, "\(rejected)")
        #expect(rejected.stdout.isEmpty)
        #expect(rejected.stderr == "smarticoctl: identify refused: server_error: the server refused IDENTIFY (errCode 100000, errMsg hash is not valid)\n")

        // --json: the error line as received on stdout, still exit 1.
        let json = try await rig.ctl(["identify", "bad-hash", "--hash", "x", "--json"])
        #expect(json.status == 1)
        #expect(json.stdout == #"{"id":1,"ok":false,"error":{"code":"server_error","message":"the server refused IDENTIFY","errCode":100000,"errMsg":"hash is not valid"}}"# + "\n")

        let notImplemented = try await rig.ctl(["push-report", "delivered", "--engagement-uid", "e-1", "--message-id", "m-1"])
        #expect(notImplemented.status == 1)
        #expect(notImplemented.stderr.contains("push_report refused: not_implemented: push_report needs the HTTP API"))
        #expect(rig.daemon.recorded.last == .pushReport(PushReportRequest(kind: .delivered, engagementUID: "e-1", messageID: "m-1", action: nil, userExtID: nil)))

        let timeout = try await rig.ctl(["request", #"{"cid":999}"#])
        #expect(timeout.status == 1)
        #expect(timeout.stderr.contains("request refused: timeout: no answer with cid 1000"))

        let notReady = try await rig.ctl(["event", "needs_session"])
        #expect(notReady.status == 1)
        #expect(notReady.stderr.contains("event refused: not_ready: no session within 10 s"))

        // Refused by the real server's parser: the handler never sees it.
        let calls = rig.daemon.recorded.count
        let badRequest = try await rig.ctl(["send", #"{"nocid":1}"#])
        #expect(badRequest.status == 1, "\(badRequest)")
        #expect(badRequest.stderr.contains("send refused: bad_request: "), "\(badRequest.stderr)")
        #expect(badRequest.stderr.contains("message.cid"), "\(badRequest.stderr)")
        #expect(rig.daemon.recorded.count == calls)
    }

    /// Publishes one of each kind of event the way the driver does.
    static func publishSample(_ server: SocketAPIServer) {
        let ts: Int64 = 1_700_000_000_000
        let events: [(String, JSONValue, JournalSeq?)] = [
            ("message", ["message": ["cid": 504], "name": "reload_achievements"], 1),
            ("engagement", ["message": ["cid": 110, "engagement_uid": "e-1", "activityType": 30, "engagement_id": 7],
                            "popup_url": nil, "bridge": ["bcid": 3]], 2),
            ("minigame", ["message": ["cid": 707], "saw_template_id": 12,
                          "url": "https://gf.example.test/w?dp=dp%3Agf_saw%26id%3D12%26standalone%3Dtrue"], 3),
            ("deeplink", ["source": "server", "engagement_uid": "e-1", "dp": "dp:gf_saw&id=12", "kind": "gamification",
                          "url": "https://gf.example.test/w?dp=dp%3Agf_saw%26id%3D12"], 4),
            ("session", ["state": "backoff", "reason": "heartbeat_timeout", "message": "no message for 44 s", "attempt": 2, "retry_in_ms": 412], nil),
            ("identified", ["ext_user_id": "user-42", "public_username": "Player One", "gf_url": "https://gf.example.test/w"], nil),
            ("props", ["level": 3, "vip": false], nil),
            ("props", ["level": 4, "vip": false], nil),
            ("error", ["code": "identify_rejected", "message": "line one\nline two"], nil),
            ("game_opening", ["bcid": 8, "game_id": 55], nil),
        ]
        for (i, (name, data, seq)) in events.enumerated() {
            server.publish(DaemonEvent(kind: EventKind(rawValue: name)!, data: data, journaled: seq != nil), seq: seq, tsMs: ts + Int64(i))
        }
    }

    @Test func tailPrintsOneLinePerEventWithTheEssentials() async throws {
        let rig = try await CtlRig.start()
        defer { cleanUpAfterTest { await rig.stop() } }
        async let run = rig.ctl(["tail", "--count", "10"])
        try await rig.waitForSubscribers(1)
        Self.publishSample(rig.server)
        let r = try await run
        #expect(r.status == 0, "\(r)")
        #expect(r.stdoutLines == [
            "2023-11-14 22:13:20.000  message      cid=504 name=reload_achievements  [seq 1]",
            "2023-11-14 22:13:20.001  engagement   uid=e-1 activity_type=30(popup) engagement_id=7  [seq 2]",
            "2023-11-14 22:13:20.002  minigame     saw_template_id=12 url=https://gf.example.test/w?dp=dp%3Agf_saw%26id%3D12%26standalone%3Dtrue  [seq 3]",
            "2023-11-14 22:13:20.003  deeplink     server gamification dp=dp:gf_saw&id=12 engagement_uid=e-1 url=https://gf.example.test/w?dp=dp%3Agf_saw%26id%3D12  [seq 4]",
            "2023-11-14 22:13:20.004  session      state=backoff reason=heartbeat_timeout attempt=2 retry_in=412ms — no message for 44 s  [seq 4]",
            "2023-11-14 22:13:20.005  identified   ext_user_id=user-42 public_username=Player One gf_url=https://gf.example.test/w  [seq 4]",
            "2023-11-14 22:13:20.006  props        level=3 vip=false  [seq 4]",
            "2023-11-14 22:13:20.007  props        changed level=4  [seq 4]",
            "2023-11-14 22:13:20.008  error        identify_rejected: line one\\nline two  [seq 4]",
            #"2023-11-14 22:13:20.009  game_opening bcid=8 {"bcid":8,"game_id":55}  [seq 4]"#,
        ], "\(r.stdout)")
    }

    @Test func tailJSONPrintsTheLinesAsReceivedAndFiltersTypes() async throws {
        let rig = try await CtlRig.start()
        defer { cleanUpAfterTest { await rig.stop() } }
        // A raw client subscribed to the same types sees exactly what the daemon sends.
        let clientLoop = try EventLoop(name: "ctl-test-client")
        let raw = try await SocketTestClient.connect(rig.path, loop: clientLoop)
        _ = try await raw.call(#"{"id":1,"op":"subscribe","types":["engagement","props"]}"#, id: 1)
        async let run = rig.ctl(["tail", "--json", "--types", "engagement,props", "--count", "3"])
        try await rig.waitForSubscribers(2)
        Self.publishSample(rig.server)
        let r = try await run
        #expect(r.status == 0, "\(r)")
        try await waitUntil("the raw client's events") { raw.eventCount == 3 }
        let expected = raw.lines.dropFirst().map { String(decoding: $0, as: UTF8.self) }
        #expect(r.stdoutLines == Array(expected))
        #expect(r.stdoutLines.first?.hasPrefix(#"{"event":"engagement","seq":2,"#) == true, "\(r.stdout)")
        await raw.close()
        await clientLoop.shutdown()
    }

    @Test func tailReplaysWithSinceAndAcknowledgesADurableName() async throws {
        let dir = try makeSocketTempDir()
        let store = try await SmarticoStore.open(directory: dir + "/state")
        let rig = try await CtlRig.start(store: store, dir: dir)
        defer { cleanUpAfterTest { await rig.stop(); await store.close() } }
        let seqs = try await journalAndPublish(5, name: "deeplink", store: store, server: rig.server)
        #expect(seqs == [1, 2, 3, 4, 5])

        // --since replays what was journaled after it.
        let replay = try await rig.ctl(["tail", "--since", "3", "--count", "2", "--json"])
        #expect(replay.status == 0, "\(replay)")
        #expect(replay.stdoutLines.map { try? JSONValue(parsing: $0)["seq"]?.int64Value } == [4, 5])

        // --durable: a new name starts at --since, acknowledges what it printed before exiting 0.
        let first = try await rig.ctl(["tail", "--durable", "kiosk", "--since", "1", "--count", "3"])
        #expect(first.status == 0, "\(first)")
        #expect(first.stdoutLines.map { $0.hasSuffix("[seq 2]") || $0.hasSuffix("[seq 3]") || $0.hasSuffix("[seq 4]") } == [true, true, true], "\(first.stdout)")
        #expect(try await store.cursor("kiosk") == 4)
        // The next run resumes after the cursor.
        let second = try await rig.ctl(["tail", "--durable", "kiosk", "--count", "1", "--json"])
        #expect(second.status == 0, "\(second)")
        #expect(second.stdoutLines.map { try? JSONValue(parsing: $0)["seq"]?.int64Value } == [5])
        #expect(try await store.cursor("kiosk") == 5)
    }

    @Test func tailEndsWith69WhenTheDaemonGoesAwayAnd1OnATooLongLine() async throws {
        let rig = try await CtlRig.start()
        defer { cleanUpAfterTest { await rig.stop() } }
        async let run = rig.ctl(["tail"])
        try await rig.waitForSubscribers(1)
        rig.server.publish(DaemonEvent(kind: .message, data: ["message": ["cid": 504], "name": nil], journaled: true), seq: 7, tsMs: 1_700_000_000_000)
        try await Task.sleep(for: .milliseconds(200))
        await rig.server.close()
        let r = try await run
        #expect(r.status == 69, "\(r)")
        #expect(r.stdoutLines.count == 1)
        #expect(r.stderr.contains("smarticod closed the connection on \(rig.path) while following events (last seq 7; continue with --since 7)"), "\(r.stderr)")

        let other = try await CtlRig.start()
        defer { cleanUpAfterTest { await other.stop() } }
        async let long = other.ctl(["tail", "--max-line-bytes", "1024"])
        try await other.waitForSubscribers(1)
        other.server.publish(DaemonEvent(kind: .message, data: ["blob": .string(String(repeating: "x", count: 4096))], journaled: false), seq: nil, tsMs: 1)
        let l = try await long
        #expect(l.status == 1, "\(l)")
        #expect(l.stderr.contains("smarticod sent a line longer than 1024 bytes on \(other.path) (raise --max-line-bytes)"), "\(l.stderr)")
    }

    @Test func tailPrintsAGapAndGoesOnAndExits1OnARefusedSubscription() async throws {
        let rig = try await CtlRig.start()
        defer { cleanUpAfterTest { await rig.stop() } }
        async let run = rig.ctl(["tail", "--count", "2"])
        try await rig.waitForSubscribers(1)
        rig.server.publish(DaemonEvent(kind: .gap, data: ["first_available_seq": 42, "missed": 41], journaled: false), seq: nil, tsMs: 1_700_000_000_000)
        rig.server.publish(DaemonEvent(kind: .error, data: ["code": "x", "message": "after the gap"], journaled: false), seq: nil, tsMs: 1_700_000_000_000)
        let r = try await run
        #expect(r.status == 0, "\(r)")
        #expect(r.stdoutLines.first == "2023-11-14 22:13:20.000  gap          41 event(s) were no longer in the journal (retention); continuing from seq 42  [seq 0]", "\(r.stdout)")
        #expect(r.stdoutLines.count == 2 && r.stdoutLines[1].contains("after the gap"), "\(r.stdout)")

        // This server has no journal: `since` is refused (internal), exit 1; --json prints the answer.
        let refused = try await rig.ctl(["tail", "--since", "3", "--json"])
        #expect(refused.status == 1, "\(refused)")
        let answer = try JSONValue(parsing: try #require(refused.stdoutLines.first))
        #expect(answer["ok"] == false)
        #expect(answer["error"]?["code"] == "internal")
        #expect(refused.stderr.contains("subscribe refused: internal: "), "\(refused.stderr)")
    }

    @Test func tailStopsAfterDuration() async throws {
        let rig = try await CtlRig.start()
        defer { cleanUpAfterTest { await rig.stop() } }
        let started = ContinuousClock.now
        let r = try await rig.ctl(["tail", "--duration", "0.3"])
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.isEmpty)
        #expect(ContinuousClock.now - started >= .milliseconds(300))
    }
}

/// A Unix stream socket bound at `path`, listening (backlog 1, never accepting) or not.
func bindUnix(_ path: String, listen shouldListen: Bool) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw SocketTestFailure("socket: errno \(errno)") }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard rc == 0 else { throw SocketTestFailure("bind \(path): errno \(errno)") }
    if shouldListen { guard listen(fd, 1) == 0 else { throw SocketTestFailure("listen: errno \(errno)") } }
    return fd
}
