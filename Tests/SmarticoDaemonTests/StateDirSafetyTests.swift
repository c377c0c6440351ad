// Issue 43: a state_dir others control, and a link at the database's name, are refused at start
// (docs/security.md, "Files the daemon writes"). The real smarticod binary, real directories of
// other uids; each run bounded (BuiltExecutable kills it after its timeout).
import Foundation
import Testing
import SmarticoTestSupport
@testable import SmarticoDaemon

@Suite struct StateDirSafetyTests {
    /// smarticod with `state_dir` set to `stateDir` (a socket beside it in `dir`), as root; it
    /// should exit at once, so the bound is short.
    static func runDaemon(stateDir: String, in dir: URL, checkOnly: Bool = false) async throws -> BuiltExecutable.Run {
        let config = try ConfigExecutableTests.daemonConfig(socket: dir.appendingPathComponent("d.sock").path, stateDir: stateDir)
        return try await BuiltExecutable.run(
            try ConfigExecutableTests.binary(), ["--config", config] + (checkOnly ? ["--check-config"] : []), timeout: .seconds(20))
    }

    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & 0o7777 : nil
    }

    @Test func aStateDirOfAnotherUserIsRefusedAtStart() async throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let state = dir.appendingPathComponent("state").path
        #expect(mkdir(state, 0o700) == 0 && chown(state, 65534, 65534) == 0)
        let r = try await Self.runDaemon(stateDir: state, in: dir)
        #expect(!r.signaled && r.status == 73, "\(r)")
        #expect(r.stderr.contains("cannot open the store in state_dir \(state): state_dir \(state) (owner uid 65534, mode 0700) does not belong to the daemon's user (uid 0): its owner could read and change the stored user, outbox and journal, or plant links where the daemon writes; give it to the daemon's user"), "\(r)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: state) == [], "the daemon wrote in it")

        // --check-config run by root does not know the daemon's user (the package's postinst runs
        // it as root on a state_dir of user smarticod): it checks the mode only, and passes.
        let check = try await Self.runDaemon(stateDir: state, in: dir, checkOnly: true)
        #expect(check.status == 0, "\(check)")
    }

    @Test("a state_dir its group or others may write is refused at start", arguments: [0o777, 0o770, 0o1777, 0o720] as [mode_t])
    func aStateDirOthersMayWriteIsRefusedAtStart(mode: mode_t) async throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let state = dir.appendingPathComponent("state").path
        #expect(mkdir(state, 0o700) == 0 && chmod(state, mode) == 0)
        let r = try await Self.runDaemon(stateDir: state, in: dir)
        let shown = String(repeating: "0", count: 4 - String(mode, radix: 8).count) + String(mode, radix: 8)
        #expect(!r.signaled && r.status == 73, "\(r)")
        #expect(r.stderr.contains("state_dir \(state) (owner uid 0, mode \(shown)) is writable by its group or by others: they could plant links at the names the daemon creates there (smarticod.db and its -wal and -shm files); make it writable by its owner only (chmod 0700"), "\(r)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: state) == [], "the daemon wrote in it")

        // --check-config says the same, as a configuration problem (whoever runs it).
        let check = try await Self.runDaemon(stateDir: state, in: dir, checkOnly: true)
        #expect(check.status == 78 && check.stderr.contains(": state_dir: state_dir \(state) (owner uid 0, mode \(shown)) is writable by its group or by others"), "\(check)")
    }

    /// A link at `state_dir/smarticod.db` to a file of root's: refused, the file neither written
    /// nor chmod'ed (it is empty: SQLite would have made a database of it).
    @Test func aLinkAtTheDatabasesNameIsRefusedAndItsTargetUntouched() async throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let state = dir.appendingPathComponent("state").path
        #expect(mkdir(state, 0o700) == 0)
        let victim = dir.appendingPathComponent("victim").path
        #expect(FileManager.default.createFile(atPath: victim, contents: Data()) && chmod(victim, 0o644) == 0)
        let database = state + "/smarticod.db"
        #expect(symlink(victim, database) == 0)
        let r = try await Self.runDaemon(stateDir: state, in: dir)
        #expect(!r.signaled && r.status == 73, "\(r)")
        #expect(r.stderr.contains("the database \(database) is a symbolic link (to \(victim)): the daemon does not follow links in state_dir; remove the link"), "\(r)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: victim)).isEmpty, "the link's target was written")
        #expect(Self.mode(victim) == 0o644, "the link's target was chmod'ed")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: database) == victim)
        #expect(try FileManager.default.contentsOfDirectory(atPath: state) == ["smarticod.db"])
    }

    /// What stays allowed: a state_dir reached through a link (SQLite's NOFOLLOW would refuse a
    /// link anywhere in the path it is given: the store hands it the real directory).
    @Test func aStateDirReachedThroughALinkStillOpens() async throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let real = dir.appendingPathComponent("real").path
        #expect(mkdir(real, 0o700) == 0)
        let link = dir.appendingPathComponent("link").path
        #expect(symlink(real, link) == 0)
        let store = try await SmarticoStore.open(directory: link)
        let id = await store.deviceID()
        await store.close()
        #expect(!id.isEmpty)
        #expect(Self.mode(real + "/smarticod.db") == 0o600)
        // And a fresh state_dir the daemon creates itself is its own, 0700.
        let fresh = dir.appendingPathComponent("new/state").path
        let created = try await SmarticoStore.open(directory: fresh)
        await created.close()
        #expect(Self.mode(fresh) == 0o700)
    }
}
