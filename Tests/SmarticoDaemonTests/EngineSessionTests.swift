import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The built `smarticod` against the built `smartico-sim`, through real sockets: the daemon's
/// Unix socket (NDJSON) and the simulator's control socket. Short timings are configured
/// (backoff 50–300 ms, keepalive 1 s where it matters) so each test takes seconds.
@Suite("Engine: smarticod against smartico-sim")
struct EngineSessionTests {
    @Test func fullFlowIdentifiesDeliversJournalsAndStopsCleanly() async throws {
        let (setup, sim, client) = try await startAgainstSim(sim: ["--hash-salt", "s3cret"]) { setup, sim in
            let hashCommand = try writeHashScript(dir: setup.dir, salt: "s3cret")
            try setup.writeConfig(url: sim.serverURL, hash: nil, hashCommand: ["/bin/sh", hashCommand],
                                  http: ["public_url": .string(sim.httpURL + "/services/public")])
        }
        defer { client.close(); setup.remove() }

        let ready = try await eventually { try await client.isReady() }
        #expect(ready, "never ready; log:\n\(setup.log)")
        let hello = try await client.ok("hello")
        #expect(hello["api"]?.int64Value == 1)
        #expect(hello["state"]?.stringValue == "ready")
        let status = try await client.status()
        #expect(status["user"]?["ext_user_id"]?.stringValue == "alice")
        #expect(status["session"]?["products"]?.arrayValue?.isEmpty == false)

        // INIT, IDENTIFY with the hash command's valid hash, LOGIN (new logical session).
        let lifecycle = try await sim.received(cids: [3, 5, 7])
        #expect(lifecycle.compactMap { $0["cid"]?.int64Value } == [3, 5, 7])
        #expect(lifecycle.first?["session_id"]?.stringValue?.isEmpty == false)
        #expect(lifecycle.first?["label_key"]?.stringValue == "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f")

        let subscribed = try await client.ok("subscribe")
        let lastSeq = subscribed["last_seq"]?.int64Value ?? -1
        let uid = try await sim.emitEngagement(to: "alice")
        let event = await client.nextEvent { $0["event"]?.stringValue == "engagement" }
        let received = try #require(event, "no engagement event; log:\n\(setup.log)")
        #expect(received["data"]?["message"]?["engagement_uid"]?.stringValue == uid)
        #expect(received["data"]?["bridge"]?["bcid"]?.int64Value == 3)
        #expect(received["data"]?["popup_url"]?.stringValue?.contains("wrapper-popup.html") == true)
        let seq = try #require(received["seq"]?.int64Value)
        #expect(seq == lastSeq + 1)

        // Journaled: another peer replays it with the same seq.
        let replayer = try await DaemonClient.connect(path: setup.socketPath)
        defer { replayer.close() }
        _ = try await replayer.ok("subscribe", ["since": .number(lastSeq), "types": ["engagement"]])
        let replayed = await replayer.nextEvent { $0["event"]?.stringValue == "engagement" }
        #expect(replayed?["seq"]?.int64Value == seq)
        #expect(replayed?["data"]?["message"]?["engagement_uid"]?.stringValue == uid)
        // Journaled without its bridge, replayed with it: the same data as the live line.
        #expect(replayed?["data"] != nil && replayed?["data"] == received["data"])

        // A client event goes out at once with its uuid.
        let sent = try await client.ok("event", ["event_type": "engine_test", "payload": ["n": 1]])
        #expect(sent["queued"]?.boolValue == false)
        let uuid = try #require(sent["uuid"]?.stringValue)
        let arrived = try await eventually { try await sim.received(cids: [9]).contains { $0["uuid"]?.stringValue == uuid } }
        #expect(arrived)

        // push_report: queued, then delivered to the simulator's public API.
        let pushReport = try await client.ok("push_report", ["kind": "delivered", "engagement_uid": "u", "message_id": "m"])
        #expect(pushReport["queued"] == true, "\(pushReport)")
        let reported = try await eventually {
            try await sim.receivedEntries().contains { $0["client"] == "http" && $0["message"]?["uuid"] == pushReport["uuid"] }
        }
        #expect(reported, "log:\n\(setup.log)")

        // SIGTERM: graceful (close 1000), exit 0, the socket file removed.
        let exit = await setup.stop()
        #expect(exit == 0, "log:\n\(setup.log)")
        #expect(!FileManager.default.fileExists(atPath: setup.socketPath))
        #expect(setup.log.contains("session stopped"))
        #expect(!setup.log.contains("s3cret"))
        _ = await sim.stop()
    }

    @Test func serverRestartReconnectsReinitsReidentifiesWithoutLoginAndFlushesTheOutboxInOrder() async throws {
        let (setup, sim1, client) = try await startAgainstSim(sim: ["--hash-salt", "s3cret"], ready: true) { setup, sim1 in
            let hashCommand = try writeHashScript(dir: setup.dir, salt: "s3cret")
            try setup.writeConfig(url: sim1.serverURL, hash: nil, hashCommand: ["/bin/sh", hashCommand])
        }
        defer { client.close(); setup.remove() }
        let first = try await sim1.received(cids: [3, 5])
        let firstSession = try #require(first.first { $0["cid"]?.int64Value == 3 }?["session_id"]?.stringValue)
        let firstHash = try #require(first.first { $0["cid"]?.int64Value == 5 }?["hash"]?.stringValue)

        // The server dies mid-session.
        await sim1.child.kill9()
        #expect(try await eventually { try await client.status()["state"]?.stringValue != "ready" })

        // Accepted while the server is down: stored, answered queued.
        var uuids: [String] = []
        for i in 0..<5 {
            let r = try await client.ok("event", ["event_type": .string("offline_\(i)")])
            #expect(r["queued"]?.boolValue == true)
            uuids.append(try #require(r["uuid"]?.stringValue))
        }
        #expect(try await client.status()["outbox"]?["depth"]?.int64Value == 5)

        // It comes back on the same port.
        let sim2 = try await SimProcess.start(dir: setup.dir, port: sim1.port, extra: ["--hash-salt", "s3cret"])
        let back = try await eventually(timeout: .seconds(20)) {
            let s = try await client.status()
            return s["state"]?.stringValue == "ready" && s["outbox"]?["depth"]?.int64Value == 0
        }
        #expect(back, "log:\n\(setup.log)")
        let second = try await sim2.received()
        let cids = second.compactMap { $0["cid"]?.int64Value }
        #expect(cids.filter { $0 == 3 }.count == 1)
        #expect(cids.filter { $0 == 5 }.count == 1)
        #expect(!cids.contains(7), "a reconnect within the inactivity window sends no LOGIN: \(cids)")
        let session = second.first { $0["cid"]?.int64Value == 3 }?["session_id"]?.stringValue
        #expect(session != nil && session != firstSession)
        let hash = second.first { $0["cid"]?.int64Value == 5 }?["hash"]?.stringValue
        #expect(hash != nil && hash != firstHash, "the hash command runs before every IDENTIFY")
        // In order, exactly once per uuid, after IDENTIFY.
        let events = second.filter { $0["cid"]?.int64Value == 9 }.compactMap { $0["uuid"]?.stringValue }
        #expect(events == uuids)
        let identifyIndex = cids.firstIndex(of: 5) ?? Int.max
        let firstEventIndex = cids.firstIndex(of: 9) ?? -1
        #expect(firstEventIndex > identifyIndex)

        expectExitedZero(await setup.stop())
        _ = await sim2.stop()
    }

    @Test func reDeliveredEngagementsProduceNoDuplicateEvent() async throws {
        let (setup, sim, client) = try await startReadyAgainstSim()
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe", ["types": ["engagement"]])
        let uid1 = try await sim.emitEngagement(to: "alice")
        let e1 = await client.nextEvent()
        #expect(e1?["data"]?["message"]?["engagement_uid"]?.stringValue == uid1)

        // Drop the connection: the daemon re-identifies and the server re-sends uid1 (still pending).
        _ = try await sim.control(["op": "fault", "kind": "close_abruptly", "user": "alice"])
        #expect(try await eventually { try await sim.received(cids: [5]).count == 2 }, "log:\n\(setup.log)")
        #expect(try await eventually { try await client.isReady() })
        let pending = try await sim.control(["op": "pending", "user": "alice"])
        #expect(pending["engagements"]?.arrayValue?.count == 1, "uid1 is still pending, so it was re-sent")
        let uid2 = try await sim.emitEngagement(to: "alice")
        let e2 = await client.nextEvent()
        #expect(e2?["data"]?["message"]?["engagement_uid"]?.stringValue == uid2, "the re-delivered \(uid1) came out again")
        #expect(e2?["seq"]?.int64Value == (e1?["seq"]?.int64Value ?? 0) + 1)

        // After a restart too (the seen-set is on disk).
        expectExitedZero(await setup.stop())
        let again = try await setup.start()
        defer { again.close() }
        #expect(try await eventually { try await again.isReady() })
        _ = try await again.ok("subscribe", ["since": 0, "types": ["engagement"]])
        let all = await again.drainEvents(forMs: 1000)
        #expect(all.compactMap { $0["data"]?["message"]?["engagement_uid"]?.stringValue } == [uid1, uid2])
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    @Test func halfOpenConnectionIsDetectedWithinKeepalivePlusDeadAfter() async throws {
        let (setup, sim, client) = try await startAgainstSim(ready: true) { setup, sim in
            try setup.writeConfig(url: sim.serverURL, session: ["keepalive_s": 1, "dead_after_s": 1])
        }
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe", ["types": ["session"]])
        let clients = try await sim.control(["op": "clients"])
        let id = try #require(clients["clients"]?[0]?["id"]?.stringValue)

        let start = ContinuousClock.now
        _ = try await sim.control(["op": "fault", "kind": "half_open", "client": .string(id)])
        // Written to the silent server: not proven received (no PONG to the PING behind it), so
        // it stays in the outbox and goes again, same uuid, on the next connection.
        let written = try await client.ok("event", ["event_type": "into_the_void"])
        #expect(written["queued"]?.boolValue == false)
        let uuid = try #require(written["uuid"]?.stringValue)
        // (It stays in the outbox: the second copy below, on the next connection, shows it. Its
        // depth is not checked here, as on a loaded machine the reconnect may already be done.)
        let dead = await client.nextEvent(timeoutMs: 10_000) { $0["data"]?["reason"]?.stringValue == "heartbeat_timeout" }
        let elapsed = ContinuousClock.now - start
        #expect(dead?["data"]?["state"]?.stringValue == "backoff", "log:\n\(setup.log)")
        // Silence of keepalive (1 s) then dead_after (1 s): detected after at most ~2 s, plus slack.
        #expect(elapsed < .milliseconds(4500), "detected after \(elapsed)")
        // The server is still there: a new connection (unaffected by the per-client fault).
        #expect(try await eventually { try await client.isReady() })
        // Our PINGs went out while the server was silent.
        #expect(try await sim.received(cids: [1]).count >= 1)
        let copies = try await eventually {
            try await sim.receivedEntries(cids: [9]).filter { $0["message"]?["uuid"]?.stringValue == uuid }.count == 2
        }
        let clientsOfCopies = try await sim.receivedEntries(cids: [9]).filter { $0["message"]?["uuid"]?.stringValue == uuid }
            .compactMap { $0["client"]?.stringValue }
        #expect(copies && Set(clientsOfCopies).count == 2, "once on the silent connection, once on the next: \(clientsOfCopies)")
        #expect(try await eventually { try await client.status()["outbox"]?["depth"]?.int64Value == 0 })
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    @Test func initAndIdentifyRejections() async throws {
        let (setup, sim, client) = try await startAgainstSim { setup, sim in
            _ = try await sim.control(["op": "fault", "kind": "reject_init", "errCode": 7, "errMsg": "maintenance"])
            try setup.writeConfig(url: sim.serverURL, hash: "rejected-hash")
        }
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe", ["types": ["error", "session"]])
        let rejected = await client.nextEvent { $0["data"]?["code"]?.stringValue == "init_rejected" }
        #expect(rejected?["data"]?["errCode"]?.int64Value == 7, "log:\n\(setup.log)")
        let backingOff = await client.nextEvent { $0["data"]?["state"]?.stringValue == "backoff" }
        #expect(backingOff?["data"]?["retry_in_ms"]?.int64Value != nil)
        #expect(try await sim.received(cids: [5]).isEmpty)

        // IDENTIFY rejected with a fatal errCode: the session stays up, anonymous, and that hash
        // is never sent again, reconnects included.
        _ = try await sim.control(["op": "fault", "kind": "reject_identify", "errCode": 100000, "errMsg": "bad hash"])
        _ = try await sim.control(["op": "fault", "kind": "clear", "only": "reject_init"])
        let identifyRejected = await client.nextEvent { $0["data"]?["code"]?.stringValue == "identify_rejected" }
        #expect(identifyRejected?["data"]?["errCode"]?.int64Value == 100000, "log:\n\(setup.log)")
        #expect(try await eventually { try await client.isReady(identified: false) })
        let initsBefore = try await sim.received(cids: [3]).count
        _ = try await sim.control(["op": "fault", "kind": "close_abruptly"])
        #expect(try await eventually { try await sim.received(cids: [3]).count == initsBefore + 1 })
        #expect(try await eventually { try await client.isReady(identified: false) })
        #expect(try await sim.received(cids: [5]).count == 1, "the rejected hash was sent again")

        // A new hash identifies.
        _ = try await sim.control(["op": "fault", "kind": "clear"])
        let identified = try await client.ok("identify", ["ext_user_id": "alice", "hash": "fresh-hash"])
        #expect(identified["ext_user_id"]?.stringValue == "alice")
        #expect(try await client.isReady(identified: true))
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    @Test func aFailingHashCommandIsAnErrorAndBackoff() async throws {
        let (setup, sim, client) = try await startAgainstSim { setup, sim in
            try setup.writeConfig(url: sim.serverURL, hash: nil, hashCommand: ["/bin/sh", "-c", "echo no hash today >&2; exit 3"])
        }
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe", ["types": ["error", "session"]])
        let failed = await client.nextEvent { $0["data"]?["code"]?.stringValue == "hash_command_failed" }
        let message = failed?["data"]?["message"]?.stringValue ?? ""
        // The exit status, never the stderr (HostileInputEngineTests: it goes to the debug log).
        #expect(message.contains("exited with status 3") && !message.contains("no hash today"), "message: \(message); log:\n\(setup.log)")
        let backoff = await client.nextEvent { $0["data"]?["state"]?.stringValue == "backoff" }
        #expect(backoff != nil)
        #expect(try await sim.received(cids: [5]).isEmpty, "IDENTIFY without a hash")
        #expect(try await sim.received(cids: [3]).count >= 1)
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    @Test func aHangingHashCommandIsKilledAfterItsTimeoutWhileTheDaemonStaysResponsive() async throws {
        let (setup, sim, client) = try await startAgainstSim { setup, sim in
            try setup.writeConfig(url: sim.serverURL, hash: nil, hashCommand: ["/bin/sleep", "60"])
        }
        defer { client.close(); setup.remove() }
        _ = try await client.ok("subscribe", ["types": ["error"]])
        #expect(try await eventually { try await client.status()["state"]?.stringValue == "identifying" }, "log:\n\(setup.log)")
        // Responsive while the command runs.
        let start = ContinuousClock.now
        _ = try await client.ok("hello")
        #expect(ContinuousClock.now - start < .seconds(2))
        // HashCommandRunner's timeout is 10 s.
        let failed = await client.nextEvent(timeoutMs: 20_000) { $0["data"]?["code"]?.stringValue == "hash_command_failed" }
        #expect(failed != nil, "log:\n\(setup.log)")
        #expect(try await sim.received(cids: [5]).isEmpty)
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    @Test func aHashCommandStillRunningAtShutdownIsKilled() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir)
        let pidFile = setup.dir + "/hash.pid"
        try setup.writeConfig(url: sim.serverURL, hash: nil, hashCommand: ["/bin/sh", "-c", "echo $$ > \(pidFile); exec sleep 60"])
        let client = try await setup.start()
        defer { client.close() }
        #expect(await eventually { (try? String(contentsOfFile: pidFile, encoding: .utf8))?.hasSuffix("\n") ?? false }, "log:\n\(setup.log)")
        let pid = try #require(Int32(String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        // SIGTERM while the command runs (its timeout is 10 s): the daemon exits at once and the
        // command with it.
        expectExitedZero(await setup.stop())
        #expect(await processEnds(pid), "the hash command \(pid) outlived the daemon")
        #expect(setup.log.contains("killed 1 hash command(s) still running"), "log:\n\(setup.log)")
        _ = await sim.stop()
    }

    @Test func sighupReloadsKeepingTheConnectionUnlessTheServerSettingsChanged() async throws {
        let (setup, sim, client) = try await startReadyAgainstSim()
        defer { client.close(); setup.remove() }
        let pid = try #require(setup.daemon?.pid)

        // Only the log level and the language change: no reconnect.
        try setup.writeConfig(url: sim.serverURL, client: ["language": "de"], logLevel: "info")
        kill(pid, SIGHUP)
        #expect(await eventually { setup.log.contains("configuration reloaded") })
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await sim.received(cids: [3]).count == 1)
        #expect(try await client.isReady())

        // An invalid file is refused; the daemon keeps running.
        try Data("{\"server\": {}}".utf8).write(to: URL(fileURLWithPath: setup.configPath))
        kill(pid, SIGHUP)
        #expect(await eventually { setup.log.contains("reload refused") })
        #expect(try await client.isReady())

        // So is a file whose CA file cannot be read (the checks of the machine, as at start).
        try setup.writeConfig(url: sim.serverURL, client: ["language": "de"], logLevel: "info")
        var config = try JSONValue(parsing: Array(try Data(contentsOf: URL(fileURLWithPath: setup.configPath)))).objectValue!
        var server = config["server"]!.objectValue!
        server["tls"] = ["ca_file": .string(setup.dir + "/absent-ca.pem")]
        config["server"] = .object(server)
        try Data(config.serialized()).write(to: URL(fileURLWithPath: setup.configPath))
        kill(pid, SIGHUP)
        #expect(await eventually { setup.log.contains("server.tls.ca_file: cannot read \(setup.dir)/absent-ca.pem: No such file or directory") }, "log:\n\(setup.log)")
        #expect(try await client.isReady())

        // What INIT carries changed: close 1000 and reconnect.
        try setup.writeConfig(url: sim.serverURL, client: ["device_type": "MOBILE"])
        kill(pid, SIGHUP)
        #expect(try await eventually { try await sim.received(cids: [3]).count == 2 })
        let inits = try await sim.received(cids: [3])
        #expect(inits.last?["ua"]?["device_type"]?.stringValue == "MOBILE")
        #expect(try await eventually { try await client.isReady() })
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    @Test func systemdNotificationsReadyStatusWatchdogStopping() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir)
        try setup.writeConfig(url: sim.serverURL)
        let notify = try NotifySocket(path: setup.dir + "/notify.sock")
        let client = try await setup.start(environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "400000"])
        defer { client.close() }
        let early = await notify.datagrams(forMs: 10_000) { got in
            got.contains { $0.contains("STATUS=ready") } && got.filter { $0 == "WATCHDOG=1" }.count >= 3
        }
        let ready = early.firstIndex { $0.hasPrefix("READY=1") }
        let statusReady = early.firstIndex { $0.contains("STATUS=ready") }
        #expect(ready != nil, "datagrams: \(early)")
        #expect(ready != nil && statusReady != nil && ready! < statusReady!, "READY=1 when the socket listens, before the session is ready: \(early)")
        #expect(early.filter { $0 == "WATCHDOG=1" }.count >= 3, "WATCHDOG=1 every WATCHDOG_USEC/2: \(early)")
        setup.daemon?.signal(SIGTERM)
        let late = await notify.datagrams(forMs: 10_000) { got in got.contains { $0.contains("STATUS=disconnected") } }
        #expect(late.contains { $0.hasPrefix("STOPPING=1") }, "datagrams: \(late)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    static let socketActivate = "/usr/bin/systemd-socket-activate"

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: socketActivate), "needs systemd-socket-activate"))
    func usesTheListeningSocketSystemdPasses() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir)
        try setup.writeConfig(url: sim.serverURL)
        let activated = setup.dir + "/activated.sock"
        // systemd-socket-activate listens, then execs smarticod with LISTEN_FDS=1 on the first connection.
        let client = try await setup.start(launcher: [Self.socketActivate, "-l", activated] + SanitizerEnvironment.socketActivateArguments, socketPath: activated)
        defer { client.close() }
        #expect(try await eventually { try await client.isReady() }, "log:\n\(setup.log)")
        #expect(!FileManager.default.fileExists(atPath: setup.socketPath), "socket.path must not be used when a socket is passed")
        #expect(setup.log.contains("(socket passed by systemd)"))
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    @Test func userSwitchReconnectsAndLogoutGoesAnonymous() async throws {
        let (setup, sim, client) = try await startReadyAgainstSim()
        defer { client.close(); setup.remove() }
        let sent = try await client.ok("event", ["event_type": "before_switch"])
        let uuid = try #require(sent["uuid"]?.stringValue)

        // Another user: close 1000, a new connection, IDENTIFY bob, LOGIN (a different user).
        let bob = try await client.ok("identify", ["ext_user_id": "bob", "hash": "hb"])
        #expect(bob["ext_user_id"]?.stringValue == "bob")
        let cids = try await sim.received().compactMap { $0["cid"]?.int64Value }
        #expect(cids.filter { $0 == 3 }.count == 2 && cids.filter { $0 == 5 }.count == 2 && cids.filter { $0 == 7 }.count == 2, "\(cids)")
        let identifies = try await sim.received(cids: [5]).compactMap { $0["ext_user_id"]?.stringValue }
        #expect(identifies == ["alice", "bob"])
        #expect(try await sim.receivedEntries(cids: [9]).filter { $0["message"]?["uuid"]?.stringValue == uuid }.count == 1)
        #expect(try await client.status()["user"]?["ext_user_id"]?.stringValue == "bob")

        // Logout: LOGOUT, then an anonymous session (INIT only).
        let loggedOut = try await client.ok("logout")
        #expect(loggedOut == .object([:]))
        #expect(try await sim.received(cids: [8]).count == 1)
        #expect(try await eventually { try await sim.received(cids: [3]).count == 3 })
        #expect(try await eventually { try await client.isReady(identified: false) })
        #expect(try await sim.received(cids: [5]).count == 2)
        #expect(try await client.status()["user"]?["ext_user_id"]?.isNull != false)
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }
}
