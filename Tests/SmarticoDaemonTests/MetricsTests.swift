// The `metrics` op, `smarticoctl metrics` and `metrics.textfile` (docs/operations.md, "Metrics"):
// the real daemon and the real simulator, the output read by prometheus_client's text parser (the
// test venv's Python, Tests/python-requirements.txt).
import Foundation
import Testing
import SmarticoProtocol
import SmarticoTestSupport
@testable import SmarticoDaemon

/// What prometheus_client's parser made of an exposition text.
struct ParsedMetrics: Sendable {
    struct Sample: Sendable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    /// Family name → (type, help), as the parser names families (a counter without its `_total`).
    var families: [String: (type: String, help: String)]
    var samples: [Sample]

    /// The value of the one sample `name` with exactly `labels`, or nil.
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { $0.name == name && $0.labels == labels }?.value
    }

    /// `smarticod_events_published_total` by `event` label.
    var eventsPublished: [String: Int] {
        var out: [String: Int] = [:]
        for s in samples where s.name == "smarticod_events_published_total" { out[s.labels["event"] ?? "?"] = Int(s.value) }
        return out
    }

    /// The `state` label of the state gauge that is 1 (nil unless exactly one is).
    var state: String? {
        let on = samples.filter { $0.name == "smarticod_session_state" && $0.value == 1 }
        return on.count == 1 ? on[0].labels["state"] : nil
    }

    /// Parses `text` with `prometheus_client.parser.text_string_to_metric_families`; throws when the
    /// parser refuses it.
    static func parse(_ text: String) async throws -> ParsedMetrics {
        let script = """
            import json, sys
            from prometheus_client.parser import text_string_to_metric_families
            families, samples = {}, []
            for f in text_string_to_metric_families(sys.stdin.read()):
                families[f.name] = {"type": f.type, "help": f.documentation}
                for s in f.samples:
                    samples.append({"name": s.name, "labels": s.labels, "value": s.value})
            print(json.dumps({"families": families, "samples": samples}))
            """
        let r = try await BuiltExecutable.run(URL(fileURLWithPath: try testPython()), ["-c", script], stdin: Array(text.utf8))
        guard r.status == 0, let root = (try? JSONValue(parsing: Array(r.stdout.utf8)))?.objectValue else {
            throw EngineTestError("prometheus_client refused the metrics (\(r.status)): \(r.stderr)\n--- text:\n\(text)")
        }
        var families: [String: (type: String, help: String)] = [:]
        for (name, f) in root["families"]?.objectValue ?? [:] {
            families[name] = (f["type"]?.stringValue ?? "", f["help"]?.stringValue ?? "")
        }
        let samples = (root["samples"]?.arrayValue ?? []).compactMap { s -> Sample? in
            guard let name = s["name"]?.stringValue, let value = s["value"]?.doubleValue else { return nil }
            var labels: [String: String] = [:]
            for (k, v) in s["labels"]?.objectValue ?? [:] { labels[k] = v.stringValue ?? "" }
            return Sample(name: name, labels: labels, value: value)
        }
        return ParsedMetrics(families: families, samples: samples)
    }

    /// `SMARTICO_TEST_PYTHON`, else this checkout's `.venv-test/bin/python`, with prometheus_client.
    static func testPython() throws -> String {
        if let p = ProcessInfo.processInfo.environment["SMARTICO_TEST_PYTHON"], !p.isEmpty { return p }
        let local = ConfigTestSupport.packageRoot.appendingPathComponent(".venv-test/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: local) else {
            throw EngineTestError("SMARTICO_TEST_PYTHON is not set and \(local) does not exist: run `source scripts/deps.sh; setup_python_venv` (scripts/test.sh does it)")
        }
        return local
    }
}

@Suite(.serialized)
struct MetricsTests {
    /// The `metrics` op's text, checked for its content type.
    static func metricsText(_ client: DaemonClient) async throws -> String {
        let result = try await client.ok("metrics")
        #expect(result["content_type"]?.stringValue == "text/plain; version=0.0.4; charset=utf-8")
        return try #require(result["text"]?.stringValue)
    }

    static func metrics(_ client: DaemonClient) async throws -> ParsedMetrics {
        try await ParsedMetrics.parse(try await metricsText(client))
    }

    /// Events arriving until `done` holds for all of them (bounded), plus those buffered.
    static func collect(_ client: DaemonClient, timeout: Duration = .seconds(15), until done: ([JSONObject]) -> Bool) async -> [JSONObject] {
        var events: [JSONObject] = []
        let deadline = ContinuousClock.now + timeout
        while !done(events), ContinuousClock.now < deadline {
            events += await client.drainEvents(forMs: 200)
        }
        return events
    }

    static func countByName(_ events: [JSONObject]) -> [String: Int] {
        var out: [String: Int] = [:]
        for e in events { out[e["event"]?.stringValue ?? "?", default: 0] += 1 }
        return out
    }

    @Test func theMetricsOpCountsWhatReallyHappened() async throws {
        let (setup, sim, client) = try await startAgainstSim(ready: true) { setup, sim in
            try setup.writeConfig(url: sim.serverURL, logLevel: "info")
        }
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe")
        _ = await client.drainEvents(forMs: 300)

        let before = try await Self.metrics(client)
        // Events published before that answer came before it on the connection; they are not
        // in the count below.
        _ = await client.drainEvents(forMs: 0)
        #expect(before.state == "ready")
        #expect(before.families["smarticod_reconnects"]?.type == "counter")
        #expect(before.families["smarticod_events_published"]?.type == "counter")
        #expect(before.families["smarticod_session_state"]?.type == "gauge")
        #expect(before.families["smarticod_outbox_messages"]?.type == "gauge")
        #expect(before.value("smarticod_subscribers") == 1)
        #expect(before.value("smarticod_socket_connections") == 1)
        #expect(before.value("smarticod_outbox_messages") == 0)
        #expect(before.value("smarticod_reconnects_total") == 0)
        let version = try await client.ok("hello")["version"]?.stringValue
        #expect(before.value("smarticod_build_info", ["version": version ?? "?"]) == 1)
        let rss = try #require(before.value("smarticod_resident_memory_bytes"))
        #expect(rss > 1_000_000 && rss < 2_000_000_000, "RSS \(rss)")
        let start = try #require(before.value("smarticod_start_time_seconds"))
        #expect(abs(start - Date().timeIntervalSince1970) < 120)
        #expect(before.value("smarticod_uptime_seconds").map { $0 >= 0 && $0 < 120 } == true)
        #expect(before.value("smarticod_last_error_timestamp_seconds") == nil, "no failure yet")

        // Traffic: three engagements and props from the server, a deep link through the bridge.
        for _ in 0..<3 { _ = try await sim.emitEngagement(to: "alice") }
        _ = try await sim.control(["op": "emit", "kind": "props", "user": "alice"])
        _ = try await client.ok("bridge", ["message": ["bcid": 4, "dp": "dp:cashier"]])
        var received = await Self.collect(client) { events in
            let n = Self.countByName(events)
            return n["engagement", default: 0] >= 3 && n["props", default: 0] >= 1 && n["deeplink", default: 0] >= 1
        }
        received += await client.drainEvents(forMs: 500)
        let status = try await client.status()
        let after = try await Self.metrics(client)
        received += await client.drainEvents(forMs: 0)

        // Every event type: what the metrics counted since `before` is what this subscriber got.
        let got = Self.countByName(received)
        #expect(got["engagement"] == 3, "\(got)")
        let types = Set(got.keys).union(after.eventsPublished.keys)
        for type in types {
            let counted = after.eventsPublished[type, default: 0] - before.eventsPublished[type, default: 0]
            #expect(counted == got[type, default: 0], "\(type): counted \(counted), received \(got[type, default: 0])")
        }
        // The machine's counters, as status shows them (nothing was exchanged in between).
        #expect(after.value("smarticod_upstream_messages_received_total") == status["counters"]?["messages_in"]?.doubleValue)
        #expect(after.value("smarticod_upstream_messages_sent_total") == status["counters"]?["messages_out"]?.doubleValue)
        let receivedIn = try #require(after.value("smarticod_upstream_messages_received_total"))
        #expect(receivedIn >= (before.value("smarticod_upstream_messages_received_total") ?? 0) + 4)
        // Every message the daemon counted as sent reached the simulator, and nothing else did.
        let sent = try #require(after.value("smarticod_upstream_messages_sent_total"))
        var arrived = 0
        #expect(try await eventually {
            arrived = try await sim.receivedEntries().count
            return arrived == Int(sent)
        }, "sent \(sent), the simulator has \(arrived)")

        // Offline: the server is gone, messages wait in the outbox.
        await sim.child.kill9()
        #expect(try await eventually { try await client.status()["state"]?.stringValue != "ready" })
        for i in 0..<4 {
            let r = try await client.ok("event", ["event_type": .string("metrics_offline_\(i)")])
            #expect(r["queued"]?.boolValue == true)
        }
        let offline = try await Self.metrics(client)
        #expect(offline.value("smarticod_outbox_messages") == 4)
        #expect(offline.value("smarticod_session_state", ["state": "ready"]) == 0)
        #expect(offline.state != nil && offline.state != "ready", "exactly one state is 1: \(offline.samples.filter { $0.name == "smarticod_session_state" })")
        #expect(offline.value("smarticod_outbox_oldest_timestamp_seconds").map { abs($0 - Date().timeIntervalSince1970) < 60 } == true)
        // It keeps trying: reconnects are counted, the failure is the last error.
        #expect(try await eventually {
            try await Self.metrics(client).value("smarticod_reconnects_total") ?? 0 >= 2
        }, "log:\n\(setup.log.suffix(3000))")
        // The metrics and status show the same last error. It changes with every failed attempt,
        // every 50–300 ms so far; a reload with a 60 s backoff makes it hold still after the next
        // attempt, so that no attempt falls between the two reads (on a loaded machine one did,
        // however often they were read).
        try setup.writeConfig(url: sim.serverURL, session: [
            "reconnect": ["initial_ms": 60_000, "max_ms": 60_000, "multiplier": 2.0],
        ], logLevel: "info")
        setup.daemon?.signal(SIGHUP)
        var previous: Double?
        #expect(try await eventually {
            let at = try await Self.metrics(client).value("smarticod_last_error_timestamp_seconds")
            defer { previous = at }
            try await Task.sleep(for: .milliseconds(400))
            return at != nil && at == previous
        }, "the last error kept changing; log:\n\(setup.log.suffix(3000))")
        var shown = ""
        #expect(try await eventually {
            let failing = try await Self.metrics(client)
            let lastError = try await client.status()["last_error"]
            guard let code = lastError?["code"]?.stringValue, let atMs = lastError?["at_ms"]?.doubleValue else { return false }
            shown = "\(failing.samples.filter { $0.name.hasPrefix("smarticod_last_error") }) vs \(String(describing: lastError))"
            return failing.value("smarticod_last_error_info", ["code": code]) == 1
                && failing.value("smarticod_last_error_timestamp_seconds").map { abs($0 * 1000 - atMs) < 1 } == true
        }, "\(shown)")
        expectExitedZero(await setup.stop())
    }

    @Test func aPeerWithoutControlReadsMetricsAndSmarticoctlPrintsThem() async throws {
        let (setup, sim, client) = try await startAgainstSim(ready: true) { setup, sim in
            try setup.writeConfig(url: sim.serverURL, socket: ["mode": "0666"], logLevel: "info")
            chmod(setup.dir, 0o755)
        }
        defer { client.close(); setup.remove() }

        // uid 65534 has the read role only: control ops are refused, metrics answered.
        let answers = try await ForeignPeer(uid: 65534, gid: 65534).run(dir: setup.dir, [
            "calls", setup.socketPath, #"{"id":1,"op":"event","event_type":"probe"}"#, #"{"id":2,"op":"metrics"}"#,
        ])
        #expect(answers.first?["error"]?["code"] == "not_permitted", "\(answers)")
        let text = try #require(answers.last?["result"]?["text"]?.stringValue, "\(answers)")
        let parsed = try await ParsedMetrics.parse(text)
        #expect(parsed.state == "ready")
        #expect(parsed.value("smarticod_socket_connections") == 2, "this client and the foreign one")

        // smarticoctl prints the text as it is; --json the answer line.
        let ctl = try await runCtl(["metrics", "--socket", setup.socketPath])
        #expect(ctl.status == 0, "\(ctl)")
        #expect(ctl.stdout.hasPrefix("# HELP smarticod_build_info "), "\(ctl.stdout.prefix(300))")
        #expect(try await ParsedMetrics.parse(ctl.stdout).state == "ready")
        let json = try await runCtl(["metrics", "--json", "--socket", setup.socketPath])
        #expect(json.status == 0, "\(json)")
        let line = try JSONValue(parsing: Array(json.stdout.utf8))
        #expect(line["ok"] == true)
        #expect(line["result"]?["content_type"]?.stringValue == DaemonMetrics.contentType)
        #expect(line["result"]?["text"]?.stringValue?.contains("smarticod_session_state{state=\"ready\"} 1\n") == true)
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    @Test func theTextfileIsRewrittenEveryIntervalAndFollowsAReload() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir)
        // A directory that does not exist yet: the daemon creates it.
        let textfile = setup.dir + "/textfile/smarticod.prom"
        try setup.writeConfig(url: sim.serverURL, metrics: ["textfile": .string(textfile), "interval_s": 1], logLevel: "info")
        let client = try await setup.start()
        defer { client.close() }
        #expect(try await eventually { try await client.isReady() }, "log:\n\(setup.log)")

        func fileMetrics(_ path: String) async throws -> ParsedMetrics? {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8), !text.isEmpty else { return nil }
            return try await ParsedMetrics.parse(text)
        }
        var first: ParsedMetrics?
        #expect(try await eventually {
            first = try await fileMetrics(textfile)
            return first?.state == "ready"
        }, "no ready textfile at \(textfile); log:\n\(setup.log.suffix(2000))")
        let attributes = try FileManager.default.attributesOfItem(atPath: textfile)
        #expect((attributes[.posixPermissions] as? Int) == 0o644)
        let engagementsBefore = first?.eventsPublished["engagement", default: 0] ?? -1

        // More traffic: the next rewrite counts it.
        _ = try await sim.emitEngagement(to: "alice")
        _ = try await sim.emitEngagement(to: "alice")
        var later: ParsedMetrics?
        #expect(try await eventually {
            later = try await fileMetrics(textfile)
            return later?.eventsPublished["engagement"] == engagementsBefore + 2
        }, "the textfile never counted the two engagements: \(String(describing: later?.eventsPublished))")
        #expect((later?.value("smarticod_uptime_seconds") ?? 0) > (first?.value("smarticod_uptime_seconds") ?? .infinity))
        // Only the file itself in its directory: the temporary files were renamed over it.
        #expect(try FileManager.default.contentsOfDirectory(atPath: setup.dir + "/textfile") == ["smarticod.prom"])

        // SIGHUP with another path: the new one is written, the old one removed.
        let moved = setup.dir + "/textfile/moved.prom"
        try setup.writeConfig(url: sim.serverURL, metrics: ["textfile": .string(moved), "interval_s": 1], logLevel: "info")
        setup.daemon?.signal(SIGHUP)
        #expect(try await eventually { try await fileMetrics(moved)?.state == "ready" }, "log:\n\(setup.log.suffix(2000))")
        #expect(await eventually { !FileManager.default.fileExists(atPath: textfile) }, "the old textfile stayed")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    @Test func aTextfileThatCannotBeWrittenIsLoggedOnceAndTheDaemonGoesOn() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir)
        // Its directory is a regular file: every write fails the same way.
        let blocker = setup.dir + "/not-a-directory"
        _ = FileManager.default.createFile(atPath: blocker, contents: Data("x".utf8))
        try setup.writeConfig(url: sim.serverURL, metrics: ["textfile": .string(blocker + "/smarticod.prom"), "interval_s": 1], logLevel: "info")
        let client = try await setup.start()
        defer { client.close() }
        #expect(try await eventually { try await client.isReady() }, "log:\n\(setup.log)")
        #expect(await eventually { setup.log.contains("metrics.textfile: ") }, "log:\n\(setup.log)")
        try await Task.sleep(for: .milliseconds(3_500))  // three more intervals, three more failures
        let warnings = setup.log.split(separator: "\n").filter { $0.contains("metrics.textfile: ") }
        #expect(warnings.count == 1, "\(warnings)")
        #expect(warnings.first?.contains("warning") == true && warnings.first?.contains(blocker) == true, "\(warnings)")
        #expect(try await Self.metrics(client).state == "ready")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// `lstat(path)`: nil when there is nothing there.
    static func lstatOf(_ path: String) -> stat? {
        var info = stat()
        return lstat(path, &info) == 0 ? info : nil
    }

    /// Issue 43: in the collector directory docs/operations.md sets up (root's, writable by the
    /// daemon's group, whose members are socket users), a member plants links at the textfile's
    /// name and at the temporary name the daemon used to write (`<textfile>.<pid>.tmp`), pointing
    /// at a file only root may read. The daemon writes its metrics beside them: the file stays as
    /// it was (content and mode), and the textfile is a regular file of the daemon's.
    @Test func linksPlantedInTheCollectorDirectoryByAnotherUserRedirectNothing() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        #expect(chmod(setup.dir, 0o755) == 0)
        let collector = setup.dir + "/collector"
        #expect(mkdir(collector, 0o775) == 0 && chown(collector, 0, 65534) == 0 && chmod(collector, 0o775) == 0)
        let victim = setup.dir + "/victim"
        let secret = "root's own file: not for the collector\n"
        try Data(secret.utf8).write(to: URL(fileURLWithPath: victim))
        #expect(chmod(victim, 0o600) == 0)
        let sim = try await SimProcess.start(dir: setup.dir)
        try setup.writeConfig(url: sim.serverURL, logLevel: "info")
        let client = try await setup.start()
        defer { client.close() }
        #expect(try await eventually { try await client.isReady() }, "log:\n\(setup.log)")
        let pid = try #require(setup.daemon?.pid)
        let textfile = collector + "/smarticod.prom"
        let oldTemporary = "\(textfile).\(pid).tmp"
        for link in [textfile, oldTemporary] {
            let r = try await BuiltExecutable.run(
                URL(fileURLWithPath: "/usr/bin/setpriv"),
                ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/ln", "-s", victim, link])
            #expect(r.status == 0 && Self.lstatOf(link).map { $0.st_mode & S_IFMT == S_IFLNK && $0.st_uid == 65534 } == true, "\(r)")
        }

        // The textfile is turned on now: a reload writes it at once, then every second.
        try setup.writeConfig(url: sim.serverURL, metrics: ["textfile": .string(textfile), "interval_s": 1], logLevel: "info")
        setup.daemon?.signal(SIGHUP)
        func daemonsOwnTextfile() -> Bool {
            guard let info = Self.lstatOf(textfile), info.st_mode & S_IFMT == S_IFREG else { return false }
            return info.st_uid == 0 && info.st_mode & 0o7777 == 0o644
                && ((try? String(contentsOfFile: textfile, encoding: .utf8)) ?? "").contains("smarticod_session_state{state=\"ready\"} 1")
        }
        #expect(await eventually { daemonsOwnTextfile() }, "log:\n\(setup.log.suffix(2000))")
        try await Task.sleep(for: .milliseconds(2_500))  // two more rewrites
        #expect(daemonsOwnTextfile())

        #expect((try? String(contentsOfFile: victim, encoding: .utf8)) == secret, "the victim was written through a link")
        let victimInfo = try #require(Self.lstatOf(victim))
        #expect(victimInfo.st_mode & 0o7777 == 0o600 && victimInfo.st_uid == 0, "mode \(String(victimInfo.st_mode & 0o7777, radix: 8))")
        // Left: the textfile and the link at the old name (not the daemon's to remove); no temporary file.
        #expect(try FileManager.default.contentsOfDirectory(atPath: collector).sorted() == ["smarticod.prom", "smarticod.prom.\(pid).tmp"])
        #expect(!setup.log.contains("metrics.textfile: "), "log:\n\(setup.log)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// A collector directory every user may write without the sticky bit, or one another user
    /// owns, is refused: a warning naming it and why, nothing written, the daemon goes on. With
    /// the sticky bit it is written.
    @Test func aCollectorDirectoryOthersControlIsRefusedAndTheDaemonGoesOn() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        #expect(chmod(setup.dir, 0o755) == 0)
        let open = setup.dir + "/open"
        #expect(mkdir(open, 0o777) == 0 && chmod(open, 0o777) == 0)
        let textfile = open + "/smarticod.prom"
        let sim = try await SimProcess.start(dir: setup.dir)
        try setup.writeConfig(url: sim.serverURL, metrics: ["textfile": .string(textfile), "interval_s": 1], logLevel: "info")
        let client = try await setup.start()
        defer { client.close() }
        #expect(try await eventually { try await client.isReady() }, "log:\n\(setup.log)")
        let worldWritable = "metrics.textfile: \(textfile) not written: its directory \(open) (owner uid 0, mode 0777) is writable by every user and has no sticky bit, so anyone could replace the file; remove the write bit for others (chmod o-w) or set the sticky bit (chmod +t)"
        #expect(await eventually { setup.log.contains(worldWritable) }, "log:\n\(setup.log)")
        try await Task.sleep(for: .milliseconds(1_500))
        #expect(try FileManager.default.contentsOfDirectory(atPath: open) == [])
        #expect(setup.log.components(separatedBy: worldWritable).count == 2, "logged more than once:\n\(setup.log)")
        #expect(try await Self.metrics(client).state == "ready")

        // The sticky bit: written.
        #expect(chmod(open, 0o1777) == 0)
        #expect(await eventually { Self.lstatOf(textfile).map { $0.st_mode & S_IFMT == S_IFREG } == true }, "log:\n\(setup.log)")
        #expect(await eventually { setup.log.contains("metrics.textfile: \(textfile) written again") }, "log:\n\(setup.log)")

        // Another user's directory: refused again.
        #expect(chown(open, 65534, 65534) == 0 && chmod(open, 0o755) == 0)
        let othersDirectory = "metrics.textfile: \(textfile) not written: its directory \(open) (owner uid 65534, mode 0755) belongs to neither root nor the daemon's uid 0"
        #expect(await eventually { setup.log.contains(othersDirectory) }, "log:\n\(setup.log)")
        #expect(try await Self.metrics(client).state == "ready")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// The daemon needs write and search permission on the collector's directory, not read (an
    /// ACL or group of `-wx`): the directory is opened `O_PATH`. The daemon runs as uid 65534 here.
    @Test func aCollectorDirectoryTheDaemonCannotListIsStillWritten() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let collector = setup.dir + "/collector"
        #expect(mkdir(collector, 0o730) == 0 && chown(collector, 0, 65534) == 0 && chmod(collector, 0o730) == 0)
        let textfile = collector + "/smarticod.prom"
        let sim = try await SimProcess.start(dir: setup.dir)
        try setup.writeConfig(url: sim.serverURL, metrics: ["textfile": .string(textfile), "interval_s": 1], logLevel: "info")
        #expect(chown(setup.dir, 65534, 65534) == 0 && chmod(setup.dir, 0o755) == 0)
        let client = try await setup.start(launcher: ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
        defer { client.close() }
        #expect(await eventually { Self.lstatOf(textfile).map { $0.st_mode & S_IFMT == S_IFREG && $0.st_uid == 65534 } == true },
                "log:\n\(setup.log)")
        #expect(!setup.log.contains("metrics.textfile: "), "log:\n\(setup.log)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// A temporary name someone else took (here a link to a file of root's) is never opened: the
    /// next random name is used. When every name tried is taken, nothing is written and the error
    /// says so.
    @Test func aTakenTemporaryNameIsSkippedNeverOpened() throws {
        let dir = try ConfigTestSupport.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let victim = dir + "/victim"
        try Data("victim\n".utf8).write(to: URL(fileURLWithPath: victim))
        #expect(chmod(victim, 0o600) == 0)
        #expect(symlink(victim, dir + "/taken.tmp") == 0)
        let textfile = dir + "/smarticod.prom"
        var names = ["taken.tmp", "fresh.tmp"]
        #expect(MetricsTextfileWriter.writeAtomically(Array("a 1\n".utf8), to: textfile) { _ in names.removeFirst() } == nil)
        #expect(names.isEmpty)
        #expect((try? String(contentsOfFile: textfile, encoding: .utf8)) == "a 1\n")
        #expect(Self.lstatOf(textfile).map { $0.st_mode & 0o7777 } == 0o644)
        #expect((try? String(contentsOfFile: victim, encoding: .utf8)) == "victim\n")
        #expect(Self.lstatOf(victim).map { $0.st_mode & 0o7777 } == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["smarticod.prom", "taken.tmp", "victim"])

        let error = MetricsTextfileWriter.writeAtomically(Array("b 2\n".utf8), to: textfile) { _ in "taken.tmp" }
        #expect(error == "cannot create a temporary file in \(dir): 8 random names were all taken (last \(dir)/taken.tmp); is someone planting files there?")
        #expect((try? String(contentsOfFile: textfile, encoding: .utf8)) == "a 1\n")
        #expect((try? String(contentsOfFile: victim, encoding: .utf8)) == "victim\n")
        // The random names: 16 hex digits, never the same twice here.
        let random = (0..<100).map { _ in MetricsTextfileWriter.randomTemporaryName("smarticod.prom") }
        #expect(Set(random).count == 100)
        #expect(random.allSatisfy { $0.hasPrefix("smarticod.prom.") && $0.hasSuffix(".tmp") && $0.count == "smarticod.prom.".count + 16 + 4 })
    }

    @Test func checkConfigReportsABadIntervalAndAnUnwritableTextfileDirectory() async throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.path)
        let socket = "/tmp/smd-metrics-\(UUID().uuidString.prefix(8))/d.sock"
        func write(_ metrics: String) throws -> String {
            let path = dir.appendingPathComponent("config-\(UUID().uuidString.prefix(6)).json").path
            try Data("""
                {"server": {"label_key": "\(ConfigTestSupport.validKey)"}, "socket": {"path": "\(socket)"}, "metrics": \(metrics)}
                """.utf8).write(to: URL(fileURLWithPath: path))
            chmod(path, 0o644)
            return path
        }
        let badInterval = try write(#"{"interval_s": 0}"#)
        let r = try await ConfigExecutableTests.run(["--config", badInterval, "--check-config"])
        #expect(r.status == 78, "\(r)")
        #expect(r.stderr.contains("\(badInterval): metrics.interval_s: must be an integer 1…3600 (seconds between rewrites of metrics.textfile), got 0"), "\(r.stderr)")

        // A directory root owns, checked as nobody.
        let rootOnly = dir.appendingPathComponent("root-only")
        try FileManager.default.createDirectory(at: rootOnly, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        let unwritable = try write(#"{"textfile": "\#(rootOnly.path)/smarticod.prom"}"#)
        let nobody = try await BuiltExecutable.run(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            ["--reuid", "65534", "--regid", "65534", "--clear-groups", try ConfigExecutableTests.binary().path, "--config", unwritable, "--check-config"])
        #expect(nobody.status == 78, "\(nobody)")
        #expect(nobody.stderr == "\(unwritable): metrics.textfile: the directory of metrics.textfile \(rootOnly.path) is not writable: Permission denied; choose another metrics.textfile, fix the permissions, or set it to null\n", "\(nobody)")

        // Writable (root), but not a name the collector reads: a warning, the check passes.
        let notProm = try write(#"{"textfile": "\#(rootOnly.path)/smarticod.txt"}"#)
        let warned = try await ConfigExecutableTests.run(["--config", notProm, "--check-config"])
        #expect(warned.status == 0, "\(warned)")
        #expect(warned.stderr.contains("metrics.textfile: warning: \(rootOnly.path)/smarticod.txt does not end in .prom"), "\(warned.stderr)")
        #expect(warned.stdout.contains("metrics textfile: \(rootOnly.path)/smarticod.txt, rewritten every 15 s"), "\(warned.stdout)")

        // A directory every user may write, without the sticky bit: refused, as the daemon would.
        let open = dir.appendingPathComponent("open").path
        #expect(mkdir(open, 0o777) == 0 && chmod(open, 0o777) == 0)
        let refused = try write(#"{"textfile": "\#(open)/smarticod.prom"}"#)
        let o = try await ConfigExecutableTests.run(["--config", refused, "--check-config"])
        #expect(o.status == 78, "\(o)")
        #expect(o.stderr == "\(refused): metrics.textfile: \(open)/smarticod.prom would not be written: its directory \(open) (owner uid 0, mode 0777) is writable by every user and has no sticky bit, so anyone could replace the file; remove the write bit for others (chmod o-w) or set the sticky bit (chmod +t)\n", "\(o)")
    }

    @Test func theTextFormatEscapesLabelsAndKeepsMillisecondSeconds() {
        #expect(DaemonMetrics.seconds(1_700_000_000_123) == "1700000000.123")
        #expect(DaemonMetrics.seconds(5) == "0.005")
        #expect(DaemonMetrics.escaped("a\"b\\c\nd") == #"a\"b\\c\nd"#)
        #expect((DaemonMetrics.residentBytes() ?? 0) > 0)
    }
}
