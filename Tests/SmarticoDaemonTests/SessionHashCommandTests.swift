import Foundation
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

/// `HashCommandRunner` with real subprocesses.
@Suite struct SessionHashCommandTests {
    @Test func printsAHash() async throws {
        let r = await HashCommandRunner.run(
            argv: ["/bin/sh", "-c", #"printf 'md5-of-%s:1700000000000\r\nsecond line\n' "$SMARTICO_EXT_USER_ID""#],
            user: "player-7", timeoutMs: 5_000)
        guard case .hash(let secret) = r else { Issue.record("expected a hash, got \(r)"); return }
        #expect(secret.exposedValue == "md5-of-player-7:1700000000000")
        // The hash is a Secret: printing the outcome masks it.
        #expect(!"\(r)".contains("md5-of-player-7"))
    }

    @Test func failsWithExitStatusAndStderrButNeverStdout() async throws {
        let r = await HashCommandRunner.run(
            argv: ["/bin/sh", "-c", "echo TOPSECRETHASH; echo 'salt file missing' >&2; exit 3"], user: "u", timeoutMs: 5_000)
        guard case .failed(let error) = r else { Issue.record("expected a failure, got \(r)"); return }
        #expect(error == .exited(program: "/bin/sh", status: 3, stderr: "salt file missing"))
        #expect(error.description.contains("exited with status 3"))
        // The description goes into events: the stderr stays out of it, kept for the log.
        #expect(!error.description.contains("salt file missing"))
        #expect(error.stderrExcerpt == "salt file missing")
        #expect(!error.description.contains("TOPSECRETHASH") && !error.stderrExcerpt.contains("TOPSECRETHASH"))
    }

    @Test func hangingCommandIsKilledWithItsProcessGroup() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("smarticod-hash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let pidFile = dir.appendingPathComponent("child.pid").path
        let start = Date()
        // The shell starts a grandchild and waits: the whole group must go.
        let r = await HashCommandRunner.run(
            argv: ["/bin/sh", "-c", "sleep 30 & echo $! > \(pidFile); wait"], user: "u", timeoutMs: 400)
        let elapsed = Date().timeIntervalSince(start)
        #expect(r == .failed(.timedOut(program: "/bin/sh", timeoutMs: 400)))
        // Not a timing test: the lower bound shows the timeout was waited for, and finishing
        // well before the 30 s `sleep` shows it was killed. The upper bound is loose because a
        // shared 2-core machine running the suite in parallel can delay process start-up
        // (seen: 18 s under a load average of 6).
        #expect(elapsed >= 0.35 && elapsed < 25)
        let pidText = try String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let pid = try #require(Int32(pidText))
        #expect(await processEnds(pid))
    }

    @Test func killRunningEndsEveryRunningCommandWithItsGroup() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("smarticod-hash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let pidFile = dir.appendingPathComponent("child.pid").path
        // A long timeout: only killRunning() can end it within the test.
        let run = Task {
            await HashCommandRunner.run(argv: ["/bin/sh", "-c", "sleep 60 & echo $! > \(pidFile); wait"], user: "u", timeoutMs: 60_000)
        }
        #expect(await eventually(timeout: .seconds(20)) {
            HashCommandRunner.runningCount == 1 && ((try? String(contentsOfFile: pidFile, encoding: .utf8))?.hasSuffix("\n") ?? false)
        })
        let grandchild = try #require(Int32(String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(HashCommandRunner.killRunning() == 1)
        #expect(await run.value == .failed(.signaled(program: "/bin/sh", signal: SIGKILL, stderr: "")))
        #expect(HashCommandRunner.runningCount == 0)
        #expect(await processEnds(grandchild))
        // Nothing left to kill.
        #expect(HashCommandRunner.killRunning() == 0)
    }

    @Test func printsNothing() async {
        let r = await HashCommandRunner.run(argv: ["/bin/sh", "-c", "echo 'no user known' >&2"], user: nil, timeoutMs: 5_000)
        #expect(r == .failed(.noOutput(program: "/bin/sh", stderr: "no user known")))
        let blank = await HashCommandRunner.run(argv: ["/bin/true"], user: nil, timeoutMs: 5_000)
        #expect(blank == .failed(.noOutput(program: "/bin/true", stderr: "")))
    }

    @Test func missingProgramAndEmptyCommand() async {
        let r = await HashCommandRunner.run(argv: ["/nonexistent/make-hash"], user: nil, timeoutMs: 5_000)
        #expect(r == .failed(.spawnFailed(program: "/nonexistent/make-hash", errno: ENOENT)))
        #expect("\(r)".contains("No such file"))
        let e = await HashCommandRunner.run(argv: [], user: nil)
        #expect(e == .failed(.emptyCommand))
    }

    @Test func callbackFormRunsOffTheCallersThread() async {
        let outcome = await withCheckedContinuation { (c: CheckedContinuation<(HashCommandOutcome, String?), Never>) in
            HashCommandRunner.start(argv: ["/bin/echo", "abc"], user: nil, timeoutMs: 5_000) { r in
                let name = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)
                c.resume(returning: (r, name?.trimmingCharacters(in: .whitespacesAndNewlines)))
            }
        }
        #expect(outcome.0 == .hash(Secret("abc")))
        #expect(outcome.1 == "smarticod-hash")
    }
}

/// Inputs and actions can be logged: the hash and the push token never show.
@Suite struct SessionLogSafetyTests {
    @Test func descriptionsMaskTheHashAndThePushToken() throws {
        let hash = "0123456789abcdef0123456789abcdef:1700000000000"
        var h = Harness(SessionFixtures.config())
        var lines: [String] = []
        h.start()
        h.connected()
        h.initOK()
        let inputs: [SessionInput] = [
            .outboxLoaded([]), // the anonymous gate's load
            .request(SessionRequestID(1), .identify(extUserID: "u1", hash: hash)),
            .outboxLoaded([]),
            .request(SessionRequestID(2), .pushToken(token: "PUSHTOKEN-SECRET-VALUE", platform: 7, status: 0, appPackageID: nil)),
            .hashResult(token: 1, .hash(Secret(hash))),
        ]
        for input in inputs {
            lines.append("\(input)")
            lines += h.feed(input).map { "\($0)" }
        }
        #expect(h.all.sent(cid: 5).first?["hash"] == .string(hash)) // it was really sent
        #expect(lines.contains { $0.hasPrefix("send(") && $0.contains("IDENTIFY_USER_REQUEST") })
        for line in lines {
            #expect(!line.contains(hash), "\(line)")
            #expect(!line.contains("PUSHTOKEN-SECRET-VALUE"), "\(line)")
        }
    }
}

/// True once `pid` is dead (gone, or a zombie waiting for its new parent to reap it), within a
/// bounded wait (5 s).
func processEnds(_ pid: Int32) async -> Bool {
    for _ in 0..<250 {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        let state = stat.split(separator: ")").last?.split(separator: " ").first
        if stat.isEmpty || state == "Z" || state == "X" { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return false
}
