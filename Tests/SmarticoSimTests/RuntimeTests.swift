import Foundation
import Synchronization
import Testing
import Transport
import SmarticoProtocol
@testable import SmarticoSim

/// A stand-in for the WebSocket glue's connection: records what the runtime asks for.
final class FakeConnection: SimClientConnection, @unchecked Sendable {
    // Touched on the loop thread by the runtime and read by the test through `events` (a Mutex).
    let events = Mutex<[String]>([])
    /// When each entry of `events` arrived (taken by the runtime's thread, not by the test).
    let arrivals = Mutex<[ContinuousClock.Instant]>([])
    var queued = 0
    var remoteDescription: String { "127.0.0.1:40000" }
    var queuedByteCount: Int { queued }
    func sendText(_ bytes: [UInt8]) {
        arrivals.withLock { $0.append(.now) }
        events.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) }
    }
    func sendRaw(_ bytes: [UInt8]) { events.withLock { $0.append("raw:\(bytes)") } }
    func close(code: UInt16, reason: String) { events.withLock { $0.append("close:\(code):\(reason)") } }
    func abort() { events.withLock { $0.append("abort") } }
    var all: [String] { events.withLock { $0 } }
}

func waitFor(_ what: String, timeout: Duration = .seconds(10), _ condition: () async -> Bool) async throws {
    let end = ContinuousClock.now + timeout
    while !(await condition()) {
        if ContinuousClock.now >= end { throw SimControlError.invalid("timed out waiting for \(what)") }
        try await Task.sleep(for: .milliseconds(5))
    }
}

@Suite struct RuntimeTests {
    @Test func answersPerformsDelaysOnATimerAndRecords() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let recordPath = dir.path + "/record.ndjson"
        try await withLoop { loop in
            let runtime = try SimRuntime(config: SimConfig(pingIntervalMs: 0), loop: loop, recordPath: recordPath)
            await runtime.start()
            let fast = FakeConnection(), slow = FakeConnection()
            let a = await runtime.accepted(fast)
            let b = await runtime.accepted(slow)
            await runtime.received(client: a, text: Msg.initSession().serialized())
            #expect(fast.all.count == 1 && fast.all[0].contains("\"cid\":4"))
            // Delay b's answers by 1 s: a is answered at once meanwhile. (Long enough that a
            // loaded machine cannot let the delay pass between two awaits of this test.)
            let ok = await runtime.control(line: Array(#"{"op":"fault","kind":"delay","ms":1000,"client":"\#(b)"}"#.utf8))
            #expect(String(decoding: ok, as: UTF8.self).contains("\"ok\":true"))
            let start = ContinuousClock.now
            await runtime.received(client: b, text: Msg.initSession().serialized())
            await runtime.received(client: a, text: Msg.simple(1).serialized())
            // a's answer is written synchronously while b's waits on a loop timer.
            #expect(fast.all.count == 2 && fast.all[1].contains("\"cid\":2"))
            try await waitFor("the delayed answer") { !slow.all.isEmpty }
            // Times are taken when the runtime wrote each answer, so a loaded machine
            // delaying this test cannot make the check pass or fail.
            let slowAt = try #require(slow.arrivals.withLock { $0.first })
            #expect(slowAt - start >= .milliseconds(990))
            #expect(slow.all[0].contains("\"cid\":4"))
            // Faults reach the connection: a malformed frame, then a close with a code.
            _ = await runtime.control(line: Array(#"{"op":"fault","kind":"malformed_frame","client":"\#(a)"}"#.utf8))
            _ = await runtime.control(line: Array(#"{"op":"fault","kind":"close","code":4000,"reason":"bye","client":"\#(a)"}"#.utf8))
            #expect(fast.all.suffix(2) == ["raw:[131, 0]", "close:4000:bye"])
            // After a close nothing more is sent to it.
            await runtime.received(client: a, text: Msg.simple(1).serialized())
            #expect(fast.all.count == 4)
            await runtime.closed(client: a)
            #expect(await runtime.clientIDs == [b])
            await runtime.stop()
        }
        let lines = try String(contentsOfFile: recordPath, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 4)
        #expect(lines.allSatisfy { $0.hasPrefix("{\"seq\":") })
        #expect(lines[1].contains("\"client\":\"c2\""))
    }

    @Test func serverPingsAndDropsOnTheLoopTimer() async throws {
        try await withLoop { loop in
            let runtime = try SimRuntime(config: SimConfig(pingIntervalMs: 50, pongTimeoutMs: 50), loop: loop)
            await runtime.start()
            let conn = FakeConnection()
            let id = await runtime.accepted(conn)
            await runtime.received(client: id, text: Msg.initSession().serialized())
            try await waitFor("a ping") { conn.all.contains { $0.contains("\"cid\":1,") } }
            try await waitFor("the drop") { conn.all.last?.hasPrefix("close:1001:") == true }
            await runtime.stop()
        }
    }

    @Test func slowClientIsDroppedWithoutTouchingOthers() async throws {
        try await withLoop { loop in
            let runtime = try SimRuntime(config: SimConfig(pingIntervalMs: 0), loop: loop, maxQueuedBytes: 1000)
            await runtime.start()
            let slow = FakeConnection(), other = FakeConnection()
            let s = await runtime.accepted(slow)
            let o = await runtime.accepted(other)
            slow.queued = 5000
            await runtime.received(client: s, text: Msg.initSession().serialized())
            await runtime.received(client: o, text: Msg.initSession().serialized())
            #expect(slow.all.last == "abort")
            #expect(other.all.count == 1 && other.all[0].contains("\"cid\":4"))
            await runtime.stop()
        }
    }

    @Test func unwritableRecordFileIsANamedError() throws {
        let loop = try EventLoop(name: "sim-record-test")
        defer { loop.shutdownAndJoin() }
        #expect(throws: SimRuntimeError.self) { try SimRuntime(config: SimConfig(), loop: loop, recordPath: "/nonexistent/dir/x") }
        do { _ = try SimRuntime(config: SimConfig(), loop: loop, recordPath: "/nonexistent/dir/x") } catch {
            #expect(error.description.contains("/nonexistent/dir/x"))
        }
    }
}

@Suite struct OutboxTests {
    @Test func releasesInTimeThenEmissionOrder() {
        var box = SimOutbox()
        box.add(.text([1]), at: 100)
        box.add(.text([2]), at: 0)
        box.add(.text([3]), at: 100)
        box.add(.abort, at: 50)
        #expect(box.nextAt == 0)
        #expect(box.takeDue(now: 10) == [.text([2])])
        #expect(box.takeDue(now: 99) == [.abort])
        #expect(box.takeDue(now: 100) == [.text([1]), .text([3])])
        #expect(box.count == 0 && box.nextAt == nil)
    }
}

@Suite struct CommandLineTests {
    @Test func parsesEveryOption() throws {
        let c = try SimCommand.parse([
            "--host", "::1", "--port", "0", "--label-key", "k-2", "--brand-key", "b", "--hash-salt", "s",
            "--ping-interval", "500ms", "--pong-timeout", "1.5s", "--emit-every", "2m", "--emit-kinds", "110, show_spin",
            "--template-bytes", "10", "--control", "/tmp/c.sock", "--record", "/tmp/r", "--http-port", "0", "--no-echo-uuid",
        ])
        let cfg = try c.makeConfig(httpBaseURL: "http://[::1]:9")
        #expect(cfg.labelKey == "k-2" && cfg.brandKey == "b" && cfg.hashSalt == "s")
        #expect(cfg.pingIntervalMs == 500 && cfg.pongTimeoutMs == 1500 && cfg.emitEveryMs == 120_000)
        #expect(cfg.emitKinds == [.engagement, .showSpin] && cfg.templateBytes == 10)
        #expect(try SimCommand.parse(["--echo-uuids", "--quirks", "--withhold-pong"]).makeConfig(httpBaseURL: "http://x")
            == SimConfig(httpBaseURL: "http://x", uuidEcho: .always, quirks: true, withholdPong: true))
        #expect(cfg.uuidEcho == .never && c.control == "/tmp/c.sock" && c.record == "/tmp/r")
        #expect(SimDurationArgument(argument: "30") == SimDurationArgument(milliseconds: 30_000))
        #expect(SimDurationArgument(argument: "-1s") == nil && SimDurationArgument(argument: "fast") == nil)
    }

    @Test func refusesBadCombinations() {
        for args in [["--tls-cert", "a"], ["--emit-kinds", "nope"], ["--port", "70000"], ["--template-bytes", "-1"],
                     ["--emit-every", "0"], ["--ping-interval", "zz"], ["--no-echo-uuid", "--echo-uuids"]] {
            #expect(throws: (any Error).self, "\(args)") { _ = try SimCommand.parse(args) }
        }
    }

    @Test func helpDocumentsEveryOption() {
        let help = SimCommand.helpMessage(columns: 200)
        for option in ["--host", "--port", "--tls-cert", "--tls-key", "--label-key", "--brand-key", "--hash-salt", "--ping-interval",
                       "--pong-timeout", "--emit-every", "--emit-kinds", "--template-bytes", "--control", "--record", "--http-port",
                       "--no-echo-uuid", "--echo-uuids", "--quirks", "--withhold-pong", "Examples:"] {
            #expect(help.contains(option), "\(option)")
        }
    }
}

@Suite struct ClockTests {
    @Test func runtimeClockIsNearTheWallClockAndNeverGoesBack() {
        let a = SimRuntime.wallClockMilliseconds()
        let wall = Int64(Date().timeIntervalSince1970 * 1000)
        #expect(abs(a - wall) < 5_000)
        var last = a
        for _ in 0..<1000 {
            let t = SimRuntime.wallClockMilliseconds()
            #expect(t >= last)
            last = t
        }
    }
}
