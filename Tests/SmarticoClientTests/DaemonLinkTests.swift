// DaemonLink against the real smarticod and smartico-sim: a durable subscription across a daemon
// restart, requests made while the daemon is away, the bounds, stop().
import Foundation
import SmarticoClient
import SmarticoProtocol
import SmarticoSocketAPI
import SmarticoTestSupport
import Testing

@Suite("DaemonLink")
struct DaemonLinkTests {
    @Test func aDurableLinkResumesAfterItsLastAckAcrossADaemonRestart() async throws {
        try await withRig { rig in
            var rig = rig
            let recorder = LinkRecorder()
            let link = try DaemonLink(
                .init(path: rig.path, types: ["engagement"], durable: "link-test", requestTimeout: 20),
                onEvent: { recorder.event($0) }, onState: { recorder.state($0) })
            #expect(await eventually(timeout: .seconds(10)) { recorder.connections == 1 }, "\(recorder.stateChanges)")
            #expect(recorder.stateChanges == [.connected(version: SmarticoVersion.string)])

            // Three engagements; the app handles the first two and acknowledges them.
            var uids = try await rig.emitJournaled(3)
            #expect(await eventually(timeout: .seconds(10)) { recorder.received.count == 3 }, "\(recorder.uids)")
            #expect(recorder.uids == uids)
            let seqs = recorder.received.compactMap(\.seq)
            link.ack(seqs[1])
            #expect(await eventually(timeout: .seconds(5)) { link.acknowledgedSeq == seqs[1] })

            // Connected and idle, the link's thread sleeps in poll: no wake-up at all.
            let iterations = link.loopIterations
            try await Task.sleep(for: .milliseconds(500))
            #expect(link.loopIterations - iterations <= 1, "the idle link woke \(link.loopIterations - iterations) times in 0.5 s")

            // The daemon restarts (SIGTERM, then again on the same state dir and socket).
            rig.raw.close()
            let exitStatus = await rig.setup.stop()
            #expect(exitStatus == 0, "log:\n\(rig.setup.log.suffix(2000))")
            #expect(await eventually(timeout: .seconds(5)) { recorder.disconnections == 1 }, "\(recorder.stateChanges)")

            // Requests made while it is away wait for it, each within its own timeout.
            let completions = Completions()
            link.send(.hello, completion: completions.record("hello"))
            link.send(op: "status", completion: completions.record("status"))
            link.send(.status, timeout: 0.3, completion: completions.record("short"))
            try await Task.sleep(for: .milliseconds(600))
            #expect(completions["hello"] == nil && completions["status"] == nil, "answered while the daemon was away?")
            guard case .timedOut(_, 0.3, let waitingFor)? = completions["short"]?.failure else {
                Issue.record("a request with a 0.3 s timeout while the daemon is away: \(String(describing: completions["short"]))")
                return
            }
            #expect(waitingFor.hasPrefix("waiting for smarticod to come back to send status ("), "\(waitingFor)")
            #expect(completions.ranOnCallerThread("short") == false)

            rig.raw = try await rig.setup.start()
            #expect(await eventually(timeout: .seconds(10)) { completions.count == 3 }, "log:\n\(rig.setup.log.suffix(2000))")
            #expect(completions["hello"]?.success?["version"]?.stringValue == SmarticoVersion.string, "\(String(describing: completions["hello"]))")
            #expect(completions["status"]?.success?["state"] != nil, "\(String(describing: completions["status"]))")
            #expect(recorder.connections == 2, "\(recorder.stateChanges)")
            let status = try await link.send(.status)
            #expect(status["journal"]?["last_seq"]?.int64Value ?? 0 >= 3)

            // The daemon resumed the durable name after seq 2: it replayed the third, which this
            // link had delivered already (not again), then the new ones. Nothing lost, nothing twice.
            uids += try await rig.emitJournaled(2)
            #expect(await eventually(timeout: .seconds(10)) { recorder.received.count >= 5 }, "\(recorder.uids)")
            try await Task.sleep(for: .milliseconds(300))  // a duplicate would arrive now
            #expect(recorder.uids == uids, "\(recorder.uids) against \(uids)")
            let allSeqs = recorder.received.compactMap(\.seq)
            #expect(allSeqs == allSeqs.sorted() && Set(allSeqs).count == 5, "\(allSeqs)")

            // stop() returns promptly, and ends the link for good.
            let stopping = ContinuousClock.now
            link.stop()
            #expect(ContinuousClock.now - stopping < .milliseconds(500))
            #expect(recorder.stateChanges.last == .disconnected(reason: "stopped"), "\(recorder.stateChanges)")
            let after = Completions()
            link.send(.hello, completion: after.record("late"))
            #expect(after["late"]?.failure == .stopped(path: rig.path))

            // A new link with the name (the app restarted) starts exactly after the last ack:
            // the third, which was never acknowledged, then the two new ones.
            let again = LinkRecorder()
            let second = try DaemonLink(.init(path: rig.path, types: ["engagement"], durable: "link-test"), onEvent: { again.event($0) })
            #expect(await eventually(timeout: .seconds(10)) { again.received.count >= 3 }, "\(again.uids)")
            try await Task.sleep(for: .milliseconds(300))
            #expect(again.uids == Array(uids.dropFirst(2)), "\(again.uids)")
            second.stop()
        }
    }

    @Test func aLinkWithoutADaemonBoundsItsRequestsAndStopsPromptly() async throws {
        let dir = "/tmp/smlink-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/missing.sock"
        let recorder = LinkRecorder()
        let link = try DaemonLink(.init(path: path, maxPendingRequests: 3), onState: { recorder.state($0) })
        #expect(await eventually(timeout: .seconds(5)) { recorder.disconnections == 1 })
        guard case .disconnected(let reason)? = recorder.stateChanges.first else { return }
        #expect(reason.contains("cannot connect to \(path): No such file or directory (ENOENT)"), "\(reason)")

        let completions = Completions()
        for i in 0..<3 { link.send(.status, timeout: 0.4, completion: completions.record("r\(i)")) }
        link.send(.status, completion: completions.record("over"))
        #expect(completions["over"]?.failure == .queueFull(path: path, limit: 3), "\(String(describing: completions["over"]))")
        #expect(completions.ranOnCallerThread("over") == true)
        #expect(await eventually(timeout: .seconds(5)) { completions.count == 4 })
        for i in 0..<3 {
            guard case .timedOut(path, 0.4, _)? = completions["r\(i)"]?.failure else {
                Issue.record("r\(i): \(String(describing: completions["r\(i)"]))")
                continue
            }
        }
        // Room again once they completed.
        link.send(.status, timeout: 5, completion: completions.record("room"))
        #expect(completions["room"] == nil)

        // Retrying 0.1, 0.2, 0.4, … 2 s apart: a handful of wake-ups a second, no busy loop.
        let iterations = link.loopIterations
        try await Task.sleep(for: .seconds(1))
        #expect(link.loopIterations - iterations <= 8, "\(link.loopIterations - iterations) wake-ups in 1 s")

        let stopping = ContinuousClock.now
        link.stop()
        #expect(ContinuousClock.now - stopping < .milliseconds(500))
        #expect(completions["room"]?.failure == .stopped(path: path), "\(String(describing: completions["room"]))")
        #expect(recorder.disconnections == 1, "\(recorder.stateChanges)")
    }
}
