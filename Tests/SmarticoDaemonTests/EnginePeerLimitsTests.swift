// Hostile local peers against the real smarticod and smartico-sim (socket-api.md, "Permissions"):
// a peer's pending requests go with it, and a thousand held connections under a low descriptor
// limit leave the upstream connection its descriptors.
import Foundation
import Testing
import SmarticoProtocol
import SmarticoTestSupport
#if canImport(Glibc)
import Glibc
#endif

@Suite(.serialized) struct EnginePeerLimitsTests {
    /// A `request` the simulator never answers (CLIENT_DEBUG is fire-and-forget), waiting an hour.
    static func neverAnswered(id: Int) -> String {
        #"{"id":\#(id),"op":"request","message":{"cid":77777},"expect_cid":77778,"timeout_ms":3600000}"#
    }

    @Test func aPeersPendingRequestsGoWithItAndAtMost64Pend() async throws {
        let (setup, sim, watcher) = try await startAgainstSim { setup, sim in
            try setup.writeConfig(url: sim.serverURL, logLevel: "info")
        }
        defer { watcher.close(); setup.remove() }
        #expect(try await eventually { try await watcher.isReady(identified: nil) }, "log:\n\(setup.log)")

        let greedy = try await DaemonClient.connect(path: setup.socketPath)
        let answers: [String] = await TestExecutables.onThread {
            for id in 1...65 { _ = greedy.socket.writeLine(Self.neverAnswered(id: id)) }
            var lines: [String] = []
            // Only the 65th is answered now.
            while let line = greedy.socket.readLine(timeoutMs: 3000) { lines.append(line) }
            return lines
        }
        #expect(answers.count == 1, "\(answers)")
        let full = answers.first.flatMap { try? JSONValue(parsing: $0) }
        #expect(full?["id"] == 65)
        #expect(full?["error"]?["code"] == "queue_full", "\(answers)")
        #expect(full?["error"]?["message"]?.stringValue?.contains("(64)") == true, "\(answers)")
        #expect(try await watcher.status()["requests_pending"] == 64)

        // The peer goes: its requests are abandoned, not left waiting for an hour.
        greedy.close()
        let gone = try await eventually { try await watcher.status()["requests_pending"] == 0 }
        #expect(gone, "log:\n\(setup.log.suffix(3000))")
        // The session is unharmed and a new peer may have its own 64.
        let next = try await DaemonClient.connect(path: setup.socketPath)
        defer { next.close() }
        let answered = try await next.request("request", ["message": ["cid": 77777], "expect_cid": 77778, "timeout_ms": 200])
        #expect(answered["error"]?["code"]?.stringValue == "timeout", "\(answered.text)")
        #expect(try await watcher.isReady(identified: nil))
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    @Test func rootAndTheDaemonsOwnUIDControlWhenTheDaemonIsNotRoot() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir)
        try setup.writeConfig(url: sim.serverURL, socket: ["mode": "0666"], logLevel: "info")
        // The daemon runs as uid 4260: its directory (state, socket) is that uid's.
        #expect(chown(setup.dir, 4260, 4260) == 0 && chmod(setup.dir, 0o755) == 0)
        let root = try await setup.start(launcher: ["/usr/bin/setpriv", "--reuid=4260", "--regid=4260", "--clear-groups"])
        defer { root.close() }
        let event = #"{"id":1,"op":"event","event_type":"probe"}"#
        // Root has control though the daemon is not root.
        _ = try await root.ok("event", ["event_type": "probe"])
        // So has the daemon's own uid.
        let own = try await ForeignPeer(uid: 4260, gid: 4260).run(dir: setup.dir, ["calls", setup.socketPath, event])
        #expect(own.first?["ok"] == true, "\(own); log:\n\(setup.log.suffix(2000))")
        // Anyone else only reads.
        let other = try await ForeignPeer(uid: 65534, gid: 65534).run(
            dir: setup.dir, ["calls", setup.socketPath, event, #"{"id":2,"op":"hello"}"#])
        #expect(other.first?["error"]?["code"] == "not_permitted", "\(other)")
        #expect(other.last?["ok"] == true, "\(other)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// Issue 43, finding 2, as it was found: a read-role peer sends `api` reads behind a slow
    /// server and leaves. Before: every late answer was published and journaled as a `message`,
    /// ~10,000 in 3 s, and a durable reader lost a real engagement to a `gap`.
    @Test func abandonedReadCallsLeaveTheJournalAloneAndADurableReaderWhole() async throws {
        let (setup, sim, watcher) = try await startAgainstSim { setup, sim in
            try setup.writeConfig(url: sim.serverURL, socket: ["mode": "0666"], journal: ["retention_events": 200], logLevel: "info")
            #expect(chmod(setup.dir, 0o755) == 0)
        }
        defer { watcher.close(); setup.remove() }
        #expect(try await eventually { try await watcher.isReady(identified: nil) }, "log:\n\(setup.log)")
        let reader = try await DaemonClient.connect(path: setup.socketPath)
        defer { reader.close() }
        _ = try await reader.ok("subscribe", ["durable": "kiosk", "types": ["engagement", "message"]])
        let before = try await watcher.status()["journal"]?["last_seq"]?.int64Value ?? -1

        _ = try await sim.control(["op": "fault", "kind": "delay", "ms": 1_000])
        let started = ContinuousClock.now
        for _ in 0..<3 {
            let flood = try await ForeignPeer(uid: 65534, gid: 65534).run(
                dir: setup.dir, ["flood", setup.socketPath, "16", "64", #"{"id":{id},"op":"api","call":"levels.list"}"#])
            #expect(flood.first?["sent"] == 1024, "\(flood)")
        }
        let elapsed = ContinuousClock.now - started
        // Every request that reached the server is answered, late, and dropped.
        let settled = try await eventually(timeout: .seconds(20)) {
            let upstream = try await sim.received(cids: [500]).count
            let dropped = try await watcher.status()["counters"]?["answers_dropped"]?.int64Value ?? -1
            return upstream > 0 && Int64(upstream) == dropped
        }
        let upstream = try await sim.received(cids: [500]).count
        let afterFlood = try await watcher.status()
        #expect(settled, "\(upstream) requests upstream; status: \(afterFlood); log:\n\(setup.log.suffix(2000))")
        // 3,072 calls made; the read uid's rate (16/s, bursts of 64) let few reach the server.
        let allowed = 64 + Int(16 * (Double(elapsed.components.seconds) + 2))
        #expect(upstream > 0, "the flood never reached the server")
        #expect(upstream <= allowed, "\(upstream) requests reached the server in \(elapsed) (at most \(allowed))")
        #expect(try await watcher.status()["journal"]?["last_seq"]?.int64Value == before, "the journal moved")
        #expect(try await watcher.status()["requests_pending"] == 0)

        _ = try await sim.control(["op": "fault", "kind": "clear"])
        let uid = try await sim.emitEngagement(to: "alice")
        let got = await reader.nextEvent(timeoutMs: 10_000) { $0["event"]?.stringValue != nil }
        #expect(got?["event"] == "engagement" && got?["data"]?["message"]?["engagement_uid"]?.stringValue == uid, "\(String(describing: got))")
        #expect(await reader.drainEvents(forMs: 500).allSatisfy { $0["event"] != "gap" })
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// Issue 43, finding 3: a read peer holding its calls behind a slow server cannot take the
    /// pool from root. Rates are lifted so that the share alone is what bounds it.
    @Test func aReadPeerHoldsAQuarterOfThePoolAndRootStillGetsIn() async throws {
        let (setup, sim, watcher) = try await startAgainstSim { setup, sim in
            try setup.writeConfig(url: sim.serverURL, socket: ["mode": "0666", "read_requests_per_s": 1_000_000, "read_requests_burst": 1_000_000],
                                  logLevel: "info")
            #expect(chmod(setup.dir, 0o755) == 0)
        }
        defer { watcher.close(); setup.remove() }
        #expect(try await eventually { try await watcher.isReady(identified: nil) }, "log:\n\(setup.log)")
        _ = try await sim.control(["op": "fault", "kind": "delay", "ms": 3_000])

        let release = setup.dir + "/release"
        let dir = setup.dir, path = setup.socketPath
        let flood = Task {
            try await ForeignPeer(uid: 65534, gid: 65534).run(
                dir: dir, ["flood", path, "16", "64", #"{"id":{id},"op":"api","call":"levels.list","timeout_ms":60000}"#, release])
        }
        defer { _ = FileManager.default.createFile(atPath: release, contents: nil) }
        let held = try await eventually(timeout: .seconds(10)) { try await watcher.status()["requests_pending"] == 250 }
        let whileHeld = try await watcher.status()
        #expect(held, "\(whileHeld)")
        let root = try await watcher.request("request", ["message": ["cid": 500], "timeout_ms": 15_000], timeoutMs: 20_000)
        #expect(root["ok"] == true, "root's request: \(root)")
        _ = FileManager.default.createFile(atPath: release, contents: nil)
        #expect(try await flood.value.first?["sent"] == 1024)
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// Issue 43: a burst of refused connections, then nothing: the first is logged at once, and
    /// the rest are counted in the log when the 10 s window ends, though no refusal follows.
    @Test func aBurstOfRefusalsIsCountedInTheLogThoughNoneFollows() async throws {
        let (setup, sim, watcher) = try await startAgainstSim { setup, sim in
            try setup.writeConfig(url: sim.serverURL, socket: ["mode": "0666", "max_peers_per_uid": 2], logLevel: "info")
            #expect(chmod(setup.dir, 0o755) == 0)
        }
        defer { watcher.close(); setup.remove() }
        #expect(try await eventually { try await watcher.isReady(identified: nil) }, "log:\n\(setup.log)")

        // uid 65534 opens 12 connections at once: 2 are served, 10 refused; then it goes.
        let answers = try await ForeignPeer(uid: 65534, gid: 65534).run(dir: setup.dir, ["conns", setup.socketPath, "12"])
        let refused = answers.filter { $0["error"]?["code"] == "too_many_connections" }
        #expect(refused.count == 10, "\(answers)")
        let first = setup.log.split(separator: "\n").filter { $0.contains("refused a local connection of uid 65534") }
        #expect(first.count == 1, "log:\n\(setup.log.suffix(3000))")

        // No refusal follows; within the window (10 s) and a margin, the other 9 are logged.
        let counted = try await eventually(timeout: .seconds(20)) {
            setup.log.contains("refused 9 more local connection(s) in the last 10 s; the last of uid 65534")
        }
        #expect(counted, "log:\n\(setup.log.suffix(3000))")
        let lines = setup.log.split(separator: "\n").filter { $0.contains("refused") && $0.contains("uid 65534") }
        #expect(lines.count == 2 && lines.allSatisfy { $0.contains(" warning ") }, "\(lines)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    @Test func theUpstreamReconnectsWhileAThousandLocalConnectionsAreHeld() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        // The hash comes from hash_command: each new connection runs it (pipes, a fork), so the
        // reconnect needs more descriptors than the closed connection gave back.
        let sim = try await SimProcess.start(dir: setup.dir, extra: ["--hash-salt", "s3cret"])
        let hashCommand = try writeHashScript(dir: setup.dir, salt: "s3cret")
        try setup.writeConfig(url: sim.serverURL, hash: nil, hashCommand: ["/bin/sh", hashCommand], logLevel: "info")  // root is not capped per uid
        // 256 descriptors: at most 192 local connections, 64 kept for everything else.
        let watcher = try await setup.start(launcher: ["/usr/bin/prlimit", "--nofile=256:256", "--"])
        defer { watcher.close() }
        #expect(try await eventually { try await watcher.isReady(identified: nil) }, "log:\n\(setup.log)")
        #expect(try await watcher.status()["user"]?["identified"] == true)
        let initsBefore = try await sim.received(cids: [3]).count
        let identifiesBefore = try await sim.received(cids: [5]).count

        let path = setup.socketPath
        let held: [LineSocket] = await TestExecutables.onThread {
            var held: [LineSocket] = []
            for _ in 0..<1000 {
                guard let socket = LineSocket.connect(path: path) else { break }
                held.append(socket)
            }
            return held
        }
        defer { for socket in held { socket.close() } }
        #expect(held.count == 1000)
        // The ones beyond the budget were told so and closed.
        let last = await TestExecutables.onThread { held.last?.readLine(timeoutMs: 5000) }
        let refusal = last.flatMap { try? JSONValue(parsing: $0) }
        #expect(refusal?["error"]?["code"] == "too_many_connections", "\(String(describing: last))")
        #expect(refusal?["error"]?["message"]?.stringValue?.contains("at most 192 local connections") == true,
                "\(String(describing: last))")

        // The server drops the session: the daemon must reconnect with all those peers held.
        _ = try await sim.control(["op": "fault", "kind": "close_abruptly"])
        #expect(try await eventually(timeout: .seconds(20)) { try await sim.received(cids: [3]).count > initsBefore },
                "no new INIT; log:\n\(setup.log.suffix(3000))")
        #expect(try await eventually(timeout: .seconds(20)) { try await sim.received(cids: [5]).count > identifiesBefore },
                "no new IDENTIFY; log:\n\(setup.log.suffix(3000))")
        #expect(try await eventually(timeout: .seconds(20)) { try await watcher.isReady(identified: nil) }, "log:\n\(setup.log.suffix(3000))")
        #expect(try await watcher.status()["user"]?["identified"] == true)
        let status = try await watcher.status()
        #expect((status["counters"]?["reconnects"]?.int64Value ?? 0) >= 1, "\(status)")
        #expect(!setup.log.contains("Too many open files"), "log:\n\(setup.log.suffix(3000))")
        // The 808 refusals are logged at warning, a line per 10 s at most, not one each.
        let refusalLines = setup.log.split(separator: "\n").filter { $0.contains("refused a local connection of uid 0") }
        #expect((1...3).contains(refusalLines.count) && refusalLines.allSatisfy { $0.contains("warning") },
                "\(refusalLines.count) lines: \(refusalLines.prefix(3))")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }
}
