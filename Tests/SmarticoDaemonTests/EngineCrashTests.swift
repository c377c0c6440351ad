import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon
#if canImport(Glibc)
import Glibc
#endif

/// `kill -9` of the real daemon at random moments while a peer streams `event` ops and the
/// server pushes engagements, restarted many times (`SMARTICO_CRASH_RESTARTS`, default 100).
@Suite("Engine: kill -9")
struct EngineCrashTests {
    static var restarts: Int {
        ProcessInfo.processInfo.environment["SMARTICO_CRASH_RESTARTS"].flatMap { Int($0) }.map { max(1, $0) } ?? 100
    }

    @Test func killNineAtRandomMomentsLosesNothingAcknowledgedAndNeverCorruptsTheStore() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        let sim = try await SimProcess.start(dir: setup.dir, extra: ["--template-bytes", "200"])
        try setup.writeConfig(url: sim.serverURL, logLevel: ProcessInfo.processInfo.environment["SMARTICO_CRASH_LOG"] ?? "warning")

        var acknowledged: [String] = []
        var emitted: [String] = []
        var lastSeq: Int64 = 0
        var killedWithRequestInFlight = 0
        let started = ContinuousClock.now
        for round in 0..<Self.restarts {
            let client = try await setup.start()
            let pid = try #require(setup.daemon?.pid)
            let status = try await client.ok("status")
            let seq = try #require(status["journal"]?["last_seq"]?.int64Value)
            #expect(seq >= lastSeq, "round \(round): seq went back from \(lastSeq) to \(seq)")
            lastSeq = max(lastSeq, seq)
            if seq > 0 {
                // The counter and the journal moved together: the event numbered last_seq is readable.
                let first = await Self.firstReplayedSeq(path: setup.socketPath, since: seq - 1)
                #expect(first == seq, "round \(round): last_seq \(seq), but the first event after \(seq - 1) is \(first.map(String.init) ?? "none")")
            }

            // A random moment: 10–300 ms into the stream (start-up, handshake, steady traffic).
            let killAt = ContinuousClock.now + .milliseconds(Int.random(in: 10...300))
            let killer = Task.detached {
                try? await Task.sleep(until: killAt)
                kill(pid, SIGKILL)
            }
            var n = 0
            while ContinuousClock.now < killAt {
                if n % 4 == 0 { emitted.append(try await sim.emitEngagement(to: "alice")) }
                let response: JSONObject
                do {
                    response = try await client.request("event", ["event_type": .string("crash_\(round)_\(n)")], timeoutMs: 5000)
                } catch {
                    killedWithRequestInFlight += 1
                    break
                }
                if response["ok"]?.boolValue == true, let uuid = response["result"]?["uuid"]?.stringValue {
                    acknowledged.append(uuid)
                } else {
                    Issue.record("round \(round): event refused: \(response.text)")
                }
                n += 1
            }
            await killer.value
            await setup.kill9()
            client.close()
        }
        let crashPhase = ContinuousClock.now - started

        // One last start: everything acknowledged reaches the server, every engagement is journaled.
        let client = try await setup.start()
        defer { client.close() }
        let drained = try await eventually(timeout: .seconds(60)) {
            let s = try await client.ok("status")
            return s["state"]?.stringValue == "ready" && s["outbox"]?["depth"]?.int64Value == 0
        }
        #expect(drained, "log tail:\n\(setup.log.suffix(3000))")
        _ = try await client.ok("subscribe", ["since": 0, "types": ["engagement"]])
        var journal: [JSONObject] = []
        _ = await eventually(timeout: .seconds(30)) {
            journal += await client.drainEvents(forMs: 200)
            return Set(journal.compactMap { $0["data"]?["message"]?["engagement_uid"]?.stringValue }).isSuperset(of: emitted)
        }
        let seqs = journal.compactMap { $0["seq"]?.int64Value }
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "journal seqs not strictly increasing")
        let journaledUIDs = journal.compactMap { $0["data"]?["message"]?["engagement_uid"]?.stringValue }
        #expect(Set(journaledUIDs).count == journaledUIDs.count, "an engagement was journaled twice")
        #expect(Set(journaledUIDs) == Set(emitted), "missing: \(Set(emitted).subtracting(journaledUIDs).count)")
        let finalStatus = try await client.ok("status")
        #expect((finalStatus["journal"]?["last_seq"]?.int64Value ?? 0) >= lastSeq)

        // Every acknowledged message arrived; a uuid is never sent twice on one connection (a
        // resend after a crash between the write and its removal from the outbox reuses the uuid).
        let entries = try await sim.receivedEntries(cids: [9])
        var copies: [String: Int] = [:]
        var perConnection: Set<String> = []
        var repeatsOnOneConnection = 0
        for entry in entries {
            guard let uuid = entry["message"]?["uuid"]?.stringValue else { continue }
            copies[uuid, default: 0] += 1
            if !perConnection.insert((entry["client"]?.stringValue ?? "") + "/" + uuid).inserted { repeatsOnOneConnection += 1 }
        }
        let lost = acknowledged.filter { copies[$0] == nil }
        #expect(lost.isEmpty, "\(lost.count) acknowledged message(s) never reached the server: \(lost)")
        if !lost.isEmpty, ProcessInfo.processInfo.environment["SMARTICO_CRASH_LOG"] != nil { try? FileManager.default.copyItem(atPath: setup.logPath, toPath: "/tmp/crash-daemon.log") }
        #expect(repeatsOnOneConnection == 0)
        let resent = copies.values.filter { $0 > 1 }.count

        expectExitedZero(await setup.stop())
        let store = try await SmarticoStore.open(directory: setup.stateDir)
        #expect(try await store.integrityCheck().isEmpty, "PRAGMA integrity_check found problems")
        #expect(try await store.outboxStatus().depth == 0)
        await store.close()
        print("""
            EngineCrashTests: \(Self.restarts) kill -9 restarts in \(crashPhase); \(acknowledged.count) acknowledged events, \
            all delivered (\(resent) resent once more after a crash, same uuid); \(emitted.count) engagements, each journaled \
            once; last seq \(lastSeq); \(killedWithRequestInFlight) kills with a request in flight; integrity_check ok
            """)
        _ = await sim.stop()
    }

    /// The seq of the first journaled event a `subscribe` with `since` replays (nil within 5 s: none).
    static func firstReplayedSeq(path: String, since: Int64) async -> Int64? {
        await TestExecutables.onThread {
            guard let socket = LineSocket.connect(path: path) else { return nil }
            defer { socket.close() }
            guard socket.writeLine(#"{"id":1,"op":"subscribe","since":\#(since)}"#) else { return nil }
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline {
                guard let line = socket.readLine(timeoutMs: 1_000) else { continue }
                guard let o = (try? JSONValue(parsing: line))?.objectValue, o["event"] != nil,
                      let seq = o["seq"]?.int64Value, seq > since else { continue }
                return seq
            }
            return nil
        }
    }
}
