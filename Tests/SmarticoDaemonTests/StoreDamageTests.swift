// A damaged database at start (docs/store.md, "A damaged database"): moved aside to
// `smarticod.db.corrupt-TIMESTAMP` with its old bytes, a fresh store, an `error` log line naming the
// path and SQLite's error, a `store_damaged` event as the fresh journal's first, and the daemon runs
// on. Errors that are not damage (a newer schema, another program's database) leave the file alone.
import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

@Suite(.serialized, .awaitsCleanup) struct StoreDamageTests {
    enum Damage: String, CaseIterable, Sendable { case garbage, truncated }

    static func damage(_ path: String, _ kind: Damage) throws {
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        switch kind {
        case .garbage:
            try Data(repeating: 0x5a, count: max(size, 4096)).write(to: URL(fileURLWithPath: path))
        case .truncated:
            #expect(truncate(path, off_t(size / 2)) == 0)
        }
    }

    static func movedAside(_ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { $0.hasPrefix(SmarticoStore.fileName + ".corrupt-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }
    }

    /// The store alone: both kinds of damage are moved aside with their bytes, and the fresh store works.
    @Test(arguments: Damage.allCases) func storeMovesADamagedDatabaseAside(_ kind: Damage) async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path)
        _ = try await store.appendEvents((0..<300).map { journalEvent("message", ts: Int64($0), "{\"pad\":\"\(String(repeating: "x", count: 200))\"}") })
        await store.close()
        let path = dir.path + "/" + SmarticoStore.fileName
        try Self.damage(path, kind)
        let old = try Data(contentsOf: URL(fileURLWithPath: path))
        let (fresh, damaged) = try await SmarticoStore.openMovingDamageAside(directory: dir.path, nowMs: 1_795_831_365_496)
        store = fresh
        let d = try #require(damaged)
        #expect(SmarticoStore.isDamage(d.error))
        #expect(d.movedTo == path + ".corrupt-20261128T020245Z")
        #expect(try Data(contentsOf: URL(fileURLWithPath: d.movedTo)) == old)
        #expect(await store.lastSeq() == 0)
        #expect(try await store.appendEvents([journalEvent("message", ts: 1, "{}")]) == [1])
        #expect(try await store.integrityCheck() == [])
        await store.close()
        // A sound store opens without moving anything.
        let (again, none) = try await SmarticoStore.openMovingDamageAside(directory: dir.path, nowMs: 1)
        #expect(none == nil)
        #expect(await again.lastSeq() == 1)
        await again.close()
        #expect(try Self.movedAside(dir.path).count == 1)
    }

    /// Not damage: a newer smarticod's store and another program's database are refused and left in place.
    @Test func refusedDatabasesAreNotMoved() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path)
        await store.close()
        let path = dir.path + "/" + SmarticoStore.fileName
        let bump = try await BuiltExecutable.run(URL(fileURLWithPath: "/usr/bin/sqlite3"), [path, "PRAGMA user_version = 999"])
        #expect(bump.status == 0, "\(bump)")
        await #expect(throws: StoreError.self) { _ = try await SmarticoStore.openMovingDamageAside(directory: dir.path, nowMs: 1) }
        #expect(try Self.movedAside(dir.path).isEmpty)

        try FileManager.default.removeItem(atPath: path)
        let other = try await BuiltExecutable.run(URL(fileURLWithPath: "/usr/bin/sqlite3"), [path, "CREATE TABLE t(x)"])
        #expect(other.status == 0, "\(other)")
        do {
            _ = try await SmarticoStore.openMovingDamageAside(directory: dir.path, nowMs: 1)
            Issue.record("another program's database was opened")
        } catch {
            #expect(error == .notAStore(path: path))
        }
        #expect(try Self.movedAside(dir.path).isEmpty)
    }

    /// The daemon: damage with the daemon stopped, started again: it runs, the old bytes are kept
    /// aside, the log line and the event are there, and new events flow, once each. A subscriber
    /// with a `since` of the old store gets a `gap` and the new journal from its start.
    @Test(arguments: Damage.allCases) func daemonStartsOnAFreshStoreAfterDamage(_ kind: Damage) async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir)
        defer { cleanUpAfterTest { _ = await sim.stop() } }
        try setup.writeConfig(url: sim.serverURL)
        var ops = try await setup.start()
        #expect(try await eventually(timeout: .seconds(20)) { try await ops.ok("status")["state"]?.stringValue == "ready" }, "log:\n\(setup.log)")
        for _ in 0..<30 { _ = try await sim.emitEngagement(to: "alice") }
        #expect(try await eventually { (try await ops.ok("status")["journal"]?["last_seq"]?.int64Value ?? 0) >= 30 },
                "log:\n\(setup.log)")
        // The journal an app's seqs are positions in: named in every subscribe answer.
        let before = try await DaemonClient.connect(path: setup.socketPath)
        let oldJournal = try #require(try await before.ok("subscribe")["journal"]?.stringValue)
        before.close()
        ops.close()
        expectExitedZero(await setup.stop())

        let path = setup.stateDir + "/" + SmarticoStore.fileName
        try Self.damage(path, kind)
        let old = try Data(contentsOf: URL(fileURLWithPath: path))
        ops = try await setup.start()
        defer { ops.close() }
        #expect(try await eventually(timeout: .seconds(20)) { try await ops.ok("status")["state"]?.stringValue == "ready" }, "log:\n\(setup.log)")
        #expect(setup.daemon?.isRunning == true)

        let moved = try Self.movedAside(setup.stateDir)
        try #require(moved.count == 1, "\(moved)")
        let movedPath = setup.stateDir + "/" + moved[0]
        #expect(try Data(contentsOf: URL(fileURLWithPath: movedPath)) == old)
        let line = try #require(setup.log.split(separator: "\n").first { $0.contains("was damaged") }, "log:\n\(setup.log)")
        #expect(line.contains(movedPath) && line.contains("SQLite error") && line.contains(path))
        #expect(line.lowercased().contains("error"), "\(line)")

        // The fresh journal's first event, for a subscriber from the start.
        let app = try await DaemonClient.connect(path: setup.socketPath)
        defer { app.close() }
        let currentJournal = try #require(try await app.ok("subscribe", ["since": 0])["journal"]?.stringValue)
        let first = try #require(await app.nextEvent { $0["event"]?.stringValue != "session" }, "log:\n\(setup.log)")
        #expect(first["event"] == "error" && first["seq"] == 1, "\(first.text)")
        #expect(first["data"]?["code"] == "store_damaged")
        #expect(first["data"]?["moved_to"]?.stringValue == movedPath)

        // A since of the old store (beyond the new last_seq): a gap saying so, then the same event.
        let stale = try await DaemonClient.connect(path: setup.socketPath)
        defer { stale.close() }
        _ = try await stale.ok("subscribe", ["since": 5_000])
        let gap = try #require(await stale.nextEvent { $0["event"]?.stringValue == "gap" })
        #expect(gap["data"]?["reason"] == "since_beyond_last_seq" && gap["data"]?["since"] == 5_000, "\(gap.text)")
        let replayed = try #require(await stale.nextEvent { $0["event"]?.stringValue == "error" })
        #expect(replayed["seq"] == 1 && replayed["data"]?["code"] == "store_damaged")

        // A since of the old store that is NOT beyond the new last_seq, with the old journal named
        // (what a client resuming after the new journal grew sends): the same gap and replay, not
        // a resume from that seq of the new journal. Likewise a durable name new to this store.
        for args: JSONObject in [["since": 1, "journal": .string(oldJournal)],
                                 ["durable": "resumed", "journal": .string(oldJournal)]] {
            let named = try await DaemonClient.connect(path: setup.socketPath)
            defer { named.close() }
            let answer = try await named.ok("subscribe", args)
            let journal = try #require(answer["journal"]?.stringValue)
            #expect(journal == currentJournal && journal != oldJournal)
            let gap = try #require(await named.nextEvent { $0["event"]?.stringValue == "gap" }, "\(args)")
            #expect(gap["data"]?["reason"] == "journal_replaced" && gap["data"]?["journal"]?.stringValue == oldJournal,
                    "\(gap.text)")
            #expect(gap["data"]?["since"] == (args["since"] ?? .null), "\(gap.text)")
            let first = try #require(await named.nextEvent { $0["event"]?.stringValue == "error" }, "\(args)")
            #expect(first["seq"] == 1 && first["data"]?["code"] == "store_damaged")
        }
        // The current journal named: an ordinary resume from that seq, no gap.
        let current = try await DaemonClient.connect(path: setup.socketPath)
        defer { current.close() }
        _ = try await current.ok("subscribe", ["since": 0, "journal": .string(currentJournal)])
        let firstAgain = try #require(await current.nextEvent { $0["event"]?.stringValue != "session" })
        #expect(firstAgain["event"] == "error" && firstAgain["seq"] == 1, "\(firstAgain.text)")

        // New events flow, each once. (The sim also sends again the engagements the old store had
        // seen and the user never reported: the fresh store does not know them.)
        var uids: [String] = []
        for _ in 0..<3 { uids.append(try await sim.emitEngagement(to: "alice")) }
        var got: [String] = []
        let deadline = ContinuousClock.now + .seconds(10)
        while !Set(uids).isSubset(of: got), ContinuousClock.now < deadline {
            got += await app.drainEvents(forMs: 100).filter { $0["event"]?.stringValue == "engagement" }
                .compactMap { $0["data"]?["message"]?["engagement_uid"]?.stringValue }
        }
        got += await app.drainEvents(forMs: 300).filter { $0["event"]?.stringValue == "engagement" }
            .compactMap { $0["data"]?["message"]?["engagement_uid"]?.stringValue }
        for uid in uids { #expect(got.filter { $0 == uid }.count == 1, "\(uid): got \(got)") }
        #expect(Set(got).count == got.count, "duplicates: \(got)")
    }

    /// A store of a newer smarticod is not damage: the daemon exits 73 (an unusable state directory,
    /// not restarted by systemd) and leaves the file as it was.
    @Test func daemonExits73OnANewerStoreAndLeavesIt() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        try setup.writeConfig(url: "ws://127.0.0.1:9/websocket/services")
        let store = try await SmarticoStore.open(directory: setup.stateDir)
        await store.close()
        let path = setup.stateDir + "/" + SmarticoStore.fileName
        let bump = try await BuiltExecutable.run(URL(fileURLWithPath: "/usr/bin/sqlite3"), [path, "PRAGMA user_version = 999"])
        #expect(bump.status == 0, "\(bump)")
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let run = try await BuiltExecutable.run(try TestExecutables.url("smarticod"), ["--config", setup.configPath],
                                                environment: ["PATH": "/usr/bin:/bin"], timeout: .seconds(20))
        #expect(run.status == 73, "\(run)")
        #expect(run.stderr.contains("schema version 999"), "\(run.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(try Self.movedAside(setup.stateDir).isEmpty)
    }
}
