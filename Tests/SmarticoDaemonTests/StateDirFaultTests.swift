// The state directory becoming full or read-only while the daemon runs (issue 30): the failure is
// reported once (an `error` log line, a `storage_unavailable` event, status.last_error), durable
// ops answer `storage_unavailable` naming the directory and the cause, the WebSocket session stays
// up, and once the directory takes writes again everything works: nothing acknowledged is lost,
// nothing is sent twice. Real file systems mounted by the test (root, as the suite runs in CI).
import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon
#if canImport(Glibc)
import Glibc
#endif

/// Whether this machine lets the tests mount file systems.
enum StateDirMounts {
    static let available: Bool = geteuid() == 0
        && ["/usr/bin/mount", "/usr/bin/umount", "/usr/bin/findmnt", "/usr/sbin/mkfs.ext4", "/usr/sbin/e2fsck"]
            .allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
}

@Suite(.serialized, .awaitsCleanup, .enabled(if: StateDirMounts.available, "needs root with mount, mkfs.ext4 and e2fsck (CI runs as root)"))
struct StateDirFaultTests {

    /// Runs a command; throws with its output when it exits non-zero (unless `allowed`).
    @discardableResult
    static func sh(_ argv: [String], allowed: Set<Int32> = [0]) throws -> String {
        let r = NetNamespaces.runSync(argv)
        guard allowed.contains(r.status) else { throw EngineTestError("\(argv.joined(separator: " ")) exited \(r.status): \(r.output)") }
        return r.output
    }

    /// Full: a 4 MB tmpfs as the state directory, filled with one file, later freed.
    @Test(.timeLimit(.minutes(2))) func fullStateDirectoryRefusesDurableWorkKeepsTheSessionAndRecovers() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        try FileManager.default.createDirectory(atPath: setup.stateDir, withIntermediateDirectories: true)
        // mode=0700: a tmpfs root is 1777 by default, a state_dir the daemon refuses (docs/security.md,
        // "Files the daemon writes").
        try Self.sh(["/usr/bin/mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", setup.stateDir])
        defer { _ = NetNamespaces.runSync(["/usr/bin/umount", "-l", setup.stateDir]) }
        let filler = setup.stateDir + "/filler"
        try await exercise(setup, cause: "full", errnoText: "No space left on device",
            breakIt: {
                // Fill it: write until ENOSPC.
                let fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
                guard fd >= 0 else { throw EngineTestError("cannot create \(filler)") }
                defer { close(fd) }
                let chunk = [UInt8](repeating: 0, count: 64 * 1024)
                while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
            },
            fixIt: { _ in
                try FileManager.default.removeItem(atPath: filler)
                return nil
            })
    }

    /// Read-only: an ext4 image mounted with errors=remount-ro, made read-only by the kernel's own
    /// error path (/sys/fs/ext4/DEV/trigger_fs_error), as a failing disk does. `mount -o
    /// remount,ro` cannot do it while the daemon has the database open for writing (EBUSY), and an
    /// emergency read-only ext4 cannot be remounted read-write without unmounting and e2fsck: the
    /// recovery is a stop, fsck, mount, start — the daemon's part is that nothing is lost.
    @Test(.timeLimit(.minutes(2))) func readOnlyStateDirectoryRefusesDurableWorkKeepsTheSessionAndNothingIsLost() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let image = setup.dir + "/state.img"
        try FileManager.default.createDirectory(atPath: setup.stateDir, withIntermediateDirectories: true)
        try Self.sh(["/usr/bin/truncate", "-s", "32M", image])
        try Self.sh(["/usr/sbin/mkfs.ext4", "-q", "-F", image])
        try Self.sh(["/usr/bin/mount", "-o", "loop,errors=remount-ro", image, setup.stateDir])
        defer { _ = NetNamespaces.runSync(["/usr/bin/umount", setup.stateDir]) }
        let device = try Self.sh(["/usr/bin/findmnt", "-n", "-o", "SOURCE", setup.stateDir])
            .trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "/").last.map(String.init) ?? ""
        let trigger = "/sys/fs/ext4/\(device)/trigger_fs_error"
        guard FileManager.default.fileExists(atPath: trigger) else {
            throw EngineTestError("no \(trigger): this kernel cannot make an ext4 read-only on demand")
        }
        try await exercise(setup, cause: "read-only", errnoText: "Read-only file system",
            breakIt: { try "1".write(toFile: trigger, atomically: false, encoding: .utf8) },
            fixIt: { setup in
                _ = await setup.stop()
                try Self.sh(["/usr/bin/umount", setup.stateDir])
                try Self.sh(["/usr/sbin/e2fsck", "-f", "-y", image], allowed: [0, 1])
                try Self.sh(["/usr/bin/mount", "-o", "loop,errors=remount-ro", image, setup.stateDir])
                return try await setup.start()
            })
    }

    /// The common part. `fixIt` returns a new client when it restarted the daemon.
    private func exercise(_ setup: DaemonSetup, cause: String, errnoText: String,
                          breakIt: () throws -> Void, fixIt: (DaemonSetup) async throws -> DaemonClient?) async throws {
        let sim = try await SimProcess.start(dir: setup.dir)
        defer { sim.child.signal(SIGKILL) }
        try setup.writeConfig(url: sim.serverURL)
        var ops = try await setup.start()
        defer { cleanUpAfterTest { await setup.kill9() } }
        var app = try await DaemonClient.connect(path: setup.socketPath)
        _ = try await app.ok("subscribe")
        #expect(await eventually { (try? await ops.ok("status", timeoutMs: 2_000))?["state"]?.stringValue == "ready" })

        var accepted: [String] = []
        var refused: [String] = []
        func event(_ marker: String) async throws -> JSONObject {
            try await ops.request("event", ["event_type": "sd_test", "payload": ["marker": .string(marker)]])
        }
        for i in 0..<3 {
            #expect(try await event("before-\(i)")["ok"]?.boolValue == true)
            accepted.append("before-\(i)")
        }
        // The outbox is empty (the server proved it read them): nothing left to resend.
        #expect(await eventually { (try? await ops.ok("status"))?["outbox"]?["depth"]?.int64Value == 0 })

        try breakIt()
        // A write that fits in pages SQLite already has may still succeed: send until one is refused.
        var firstError: JSONObject?
        for i in 0..<500 where firstError == nil {
            let answer = try await event("during-\(i)")
            if answer["ok"]?.boolValue == true { accepted.append("during-\(i)") } else {
                refused.append("during-\(i)")
                firstError = answer["error"]?.objectValue
            }
        }
        let refusal = try #require(firstError, "no op was refused after the state directory became \(cause)")
        #expect(refusal["code"]?.stringValue == "storage_unavailable", "\(refusal)")
        let message = refusal["message"]?.stringValue ?? ""
        #expect(message.contains(setup.stateDir) && message.contains("is \(cause)") && message.contains(errnoText), "\(message)")
        for i in 0..<3 {
            let answer = try await event("refused-\(i)")
            #expect(answer["error"]?["code"]?.stringValue == "storage_unavailable", "\(answer)")
            refused.append("refused-\(i)")
        }
        // Reported once: one error line, one event, status.last_error; the session is kept.
        let reported = await app.nextEvent { $0["event"] == "error" && $0["data"]?["code"] == "storage_unavailable" }
        #expect(reported?["data"]?["message"]?.stringValue?.contains(setup.stateDir) == true, "\(String(describing: reported))")
        let status = try await ops.ok("status")
        #expect(status["state"]?.stringValue == "ready")
        #expect(status["last_error"]?["code"]?.stringValue == "storage_unavailable", "\(status)")
        #expect(setup.log.components(separatedBy: "Durable work is refused").count - 1 == 1, "log:\n\(setup.log)")

        // Whom the daemon speaks for is stored too: an identify of another user and a logout are
        // refused while the store cannot take them, and nothing changes (in memory only, a restart
        // would bring back the user stored before and speak for them).
        let identify = try await ops.request("identify", ["ext_user_id": "bob", "hash": "bob-hash"])
        #expect(identify["error"]?["code"]?.stringValue == "storage_unavailable", "\(identify)")
        #expect(identify["error"]?["message"]?.stringValue?.contains("identify of bob was not done") == true, "\(identify)")
        let logout = try await ops.request("logout")
        #expect(logout["error"]?["code"]?.stringValue == "storage_unavailable", "\(logout)")
        let unchanged = try await ops.ok("status")
        #expect(unchanged["user"]?["ext_user_id"]?.stringValue == "alice" && unchanged["state"]?.stringValue == "ready", "\(unchanged)")

        // Space (or a writable file system) returns.
        if let restarted = try await fixIt(setup) {
            ops = restarted
            app = try await DaemonClient.connect(path: setup.socketPath)
            _ = try await app.ok("subscribe")
            #expect(await eventually { (try? await ops.ok("status", timeoutMs: 2_000))?["state"]?.stringValue == "ready" })
        }
        for i in 0..<3 {
            let answer = try await event("after-\(i)")
            #expect(answer["ok"]?.boolValue == true, "\(answer)")
            accepted.append("after-\(i)")
        }
        if cause == "full" { #expect(setup.log.contains("is writable again")) }
        // New events are journaled again: an engagement arrives with a seq.
        let uid = try await sim.emitEngagement(to: "alice")
        let engagement = await app.nextEvent { $0["event"] == "engagement" && $0.text.contains(uid) }
        #expect(engagement?["seq"]?.int64Value != nil, "\(String(describing: engagement))")

        // At the server: every accepted message exactly once, no refused one.
        var counts: [String: Int] = [:]
        _ = await eventually {
            let received = (try? await sim.received(cids: [9]).map(\.text)) ?? []
            counts = Dictionary(uniqueKeysWithValues: (accepted + refused).map { m in (m, received.filter { $0.contains("\"\(m)\"") }.count) })
            return accepted.allSatisfy { counts[$0] == 1 }
        }
        for m in accepted { #expect(counts[m] == 1, "\(m) reached the server \(counts[m] ?? 0) times") }
        for m in refused { #expect(counts[m] == 0, "refused \(m) reached the server") }
        #expect(await eventually { (try? await ops.ok("status"))?["outbox"]?["depth"]?.int64Value == 0 })
        print("state directory \(cause): \(accepted.count) accepted, \(refused.count) refused, all accepted ones at the server once")
        _ = await setup.stop()
    }
}
