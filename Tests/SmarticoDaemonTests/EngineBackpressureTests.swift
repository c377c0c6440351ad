import Foundation
import Synchronization
import SmarticoProtocol
import SmarticoTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// socket-api.md, "Framing": subscribers are cursors over the journal. Through the real daemon,
/// the real simulator and real Unix sockets: a burst reaches every reading subscriber in order,
/// with no gap and no duplicate, whatever their pace; a peer that never reads costs at most its
/// queue and is not disconnected; replays of any size cost bounded memory; a peer behind retention
/// gets one `gap`; a durable name resumes after a catch-up.
@Suite("Engine: subscribers are cursors over the journal", .serialized)
struct EngineBackpressureTests {
    /// A field of `/proc/PID/status` in KiB (`VmRSS`, `RssAnon`).
    static func statusKiB(_ pid: Int32, _ field: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            return Int(line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
        }
        return nil
    }

    /// `VmRSS` of `pid` in KiB.
    static func rssKiB(_ pid: Int32) -> Int? { statusKiB(pid, "VmRSS") }

    /// Samples the peak `VmRSS` of `pid` every 10 ms until stopped.
    final class PeakSampler: Sendable {
        private let peak = Mutex(0)
        private let running = Atomic<Bool>(true)
        private let done = Mutex<Task<Void, Never>?>(nil)

        init(pid: Int32) {
            peak.withLock { $0 = EngineBackpressureTests.rssKiB(pid) ?? 0 }
            let task = Task.detached { [self] in
                while running.load(ordering: .relaxed) {
                    if let now = EngineBackpressureTests.rssKiB(pid) { peak.withLock { $0 = max($0, now) } }
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
            done.withLock { $0 = task }
        }

        func stop() async -> Int {
            running.store(false, ordering: .relaxed)
            await done.withLock { $0 }?.value
            return peak.withLock { $0 }
        }
    }

    /// A subscriber on its own thread: sends `subscribe` with `args`, then reads events until it
    /// has seen `expect` events named `name`, pausing `pauseMs` every `every` lines (its pace), or
    /// until `timeoutMs` passes. Returns the seqs of `name` events, in arrival order, and every
    /// `gap` event's data.
    struct Reading: Sendable {
        var seqs: [Int64] = []
        var gaps: [JSONObject] = []
        var subscribeResult: JSONObject?
    }

    static func read(path: String, args: JSONObject, name: String = "engagement", expect: Int,
                     pauseMs: Int = 0, every: Int = 1, timeoutMs: Int = 120_000,
                     ackEvery: Int? = nil, stopAfter: Int? = nil) async -> Reading {
        await TestExecutables.onThread {
            var out = Reading()
            guard let socket = LineSocket.connect(path: path) else { return out }
            defer { socket.close() }
            var request: JSONObject = ["id": 1, "op": "subscribe"]
            for (k, v) in args { request[k] = v }
            guard socket.writeLine(request.text) else { return out }
            // Scaled in a sanitized run only: 4,000 events through an instrumented daemon (the first
            // ThreadSanitizer run got 1,811 of them in 120 s).
            let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000 * SanitizerEnvironment.timeScale)
            var lines = 0
            while out.seqs.count < (stopAfter ?? expect), Date() < deadline {
                guard let line = socket.readLine(timeoutMs: max(1, Int(deadline.timeIntervalSinceNow * 1000))) else { break }
                guard let object = (try? JSONValue(parsing: line))?.objectValue else { continue }
                if object["id"]?.int64Value == 1 { out.subscribeResult = object; continue }
                lines += 1
                if pauseMs > 0, lines % every == 0 { usleep(useconds_t(pauseMs * 1000)) }
                switch object["event"]?.stringValue {
                case name?:
                    if let seq = object["seq"]?.int64Value {
                        out.seqs.append(seq)
                        if let ackEvery, out.seqs.count % ackEvery == 0 {
                            _ = socket.writeLine(#"{"op":"ack","seq":\#(seq)}"#)
                        }
                    }
                case "gap"?:
                    if let data = object["data"]?.objectValue { out.gaps.append(data) }
                default: break
                }
            }
            return out
        }
    }

    /// Seqs strictly increasing by one: in order, no gap, no duplicate.
    static func contiguous(_ seqs: [Int64]) -> Bool {
        zip(seqs, seqs.dropFirst()).allSatisfy { $1 == $0 + 1 }
    }

    /// A daemon identified against a simulator of ~2 KB engagements.
    static func identifiedDaemon(socket: JSONObject = [:], journal: JSONObject = [:], logLevel: String = "info",
                                 simExtra: [String] = []) async throws
        -> (DaemonSetup, SimProcess, DaemonClient, Int32)
    {
        let setup = try DaemonSetup()
        let sim: SimProcess
        let client: DaemonClient
        do {
            sim = try await SimProcess.start(dir: setup.dir, extra: ["--template-bytes", "1650"] + simExtra)
            try setup.writeConfig(url: sim.serverURL, socket: socket, journal: journal, logLevel: logLevel)
            client = try await setup.start()
        } catch {
            setup.remove()
            throw error
        }
        #expect(try await eventually { try await client.isReady() }, "never identified; log:\n\(setup.log)")
        return (setup, sim, client, try #require(setup.daemon?.pid))
    }

    static func emit(_ sim: SimProcess, count: Int) async throws {
        var left = count
        while left > 0 {
            let n = min(left, 1_000)
            _ = try await sim.control(["op": "emit", "kind": "engagement", "user": "alice", "bodies": false, "count": .number(Int64(n))])
            left -= n
        }
    }

    static func lastSeq(_ client: DaemonClient) async throws -> Int64 {
        try await client.status()["journal"]?["last_seq"]?.int64Value ?? -1
    }

    /// Waits until the journal holds `seq`.
    static func journaled(through seq: Int64, _ client: DaemonClient) async throws -> Bool {
        try await eventually(timeout: .seconds(60)) { try await lastSeq(client) >= seq }
    }

    /// The burst of the issue (smaller: 4,000 engagements of ~2 KB): a subscriber reading as fast
    /// as it can and one reading at a tenth of its pace get every event in order; a peer that never
    /// reads stays connected and costs at most its queue.
    @Test func aBurstReachesEveryReaderInOrderAndANonReaderCostsItsQueue() async throws {
        let (setup, sim, client, pid) = try await Self.identifiedDaemon(socket: ["max_queue_bytes": 262_144])
        defer { setup.remove() }
        defer { client.close() }
        let start = try await Self.lastSeq(client)
        let total = 4_000

        // The peer that never reads: subscribed, then silent.
        let silent = try await DaemonClient.connect(path: setup.socketPath)
        defer { silent.close() }
        #expect(silent.socket.writeLine(#"{"id":1,"op":"subscribe"}"#))
        let idle = try #require(Self.rssKiB(pid))
        let sampler = PeakSampler(pid: pid)

        async let fast = Self.read(path: setup.socketPath, args: ["types": ["engagement"]], expect: total)
        async let slow = Self.read(path: setup.socketPath, args: ["types": ["engagement"]], expect: total,
                                   pauseMs: 10, every: 10)
        try await Task.sleep(for: .milliseconds(300))  // both subscribed
        try await Self.emit(sim, count: total)
        let (f, s) = await (fast, slow)
        let peak = await sampler.stop()

        #expect(f.seqs.count == total, "fast reader got \(f.seqs.count) of \(total); log:\n\(setup.log.suffix(2000))")
        #expect(Self.contiguous(f.seqs) && f.seqs.first == start + 1, "fast reader: out of order, gap or duplicate")
        #expect(s.seqs.count == total, "slow reader got \(s.seqs.count) of \(total)")
        #expect(Self.contiguous(s.seqs) && s.seqs.first == start + 1, "slow reader: out of order, gap or duplicate")
        #expect(f.gaps.isEmpty && s.gaps.isEmpty, "a reader got a gap: \(f.gaps) \(s.gaps)")
        // The silent peer is still connected: it answers its own status request's line… after its
        // queue; the daemon counts it as a subscriber.
        let subscribers = try await client.status()["subscribers"]?.int64Value
        #expect(subscribers == 1, "the silent peer is not counted as subscribed (\(subscribers ?? -1)); was it dropped?")
        // ~8 MB of events went through; the silent peer holds at most 256 KiB of them. The bound
        // is generous for a debug build's heap and the store's page cache.
        if SanitizerEnvironment.memoryBoundsApply {
            #expect(peak - idle < 40 << 10, "VmRSS grew by \(peak - idle) KiB during the burst (idle \(idle) KiB)")
        } else {
            SanitizerEnvironment.memoryBoundNotChecked("VmRSS grew by \(peak - idle) KiB during the burst (idle \(idle) KiB)")
        }
        #expect(!setup.log.contains("overflow"), "log:\n\(setup.log.suffix(2000))")

        // The silent peer, read at last, gets every event too, in order (it caught up from the journal).
        let late = await TestExecutables.onThread { () -> [Int64] in
            var seqs: [Int64] = []
            let deadline = Date().addingTimeInterval(60)
            while seqs.count < total, Date() < deadline {
                guard let line = silent.socket.readLine(timeoutMs: 5_000) else { break }
                guard let o = (try? JSONValue(parsing: line))?.objectValue, o["event"]?.stringValue == "engagement",
                      let seq = o["seq"]?.int64Value else { continue }
                seqs.append(seq)
            }
            return seqs
        }
        #expect(late.count == total && Self.contiguous(late), "the silent peer, reading late, got \(late.count) of \(total)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// A replay far larger than `socket.max_total_queue_bytes`: peers that subscribe with `since: 0`
    /// and never read cost bounded memory, and a peer that reads gets the whole journal in order.
    @Test func aReplayLargerThanTheTotalQueueCapCostsBoundedMemory() async throws {
        let (setup, sim, client, pid) = try await Self.identifiedDaemon(
            socket: ["max_queue_bytes": 262_144, "max_total_queue_bytes": 1_048_576])
        defer { setup.remove() }
        defer { client.close() }
        let total = 3_000  // ~6 MB of journal, six times the total cap
        let start = try await Self.lastSeq(client)
        try await Self.emit(sim, count: total)
        #expect(try await Self.journaled(through: start + Int64(total), client), "log:\n\(setup.log.suffix(2000))")
        let idle = try #require(Self.rssKiB(pid))
        let sampler = PeakSampler(pid: pid)

        var silent: [LineSocket] = []
        for _ in 0..<10 {
            let s = try #require(LineSocket.connect(path: setup.socketPath))
            #expect(s.writeLine(#"{"id":1,"op":"subscribe","since":0}"#))
            silent.append(s)
        }
        let reader = await Self.read(path: setup.socketPath, args: ["since": 0], expect: total)
        let peak = await sampler.stop()
        for s in silent { s.close() }

        #expect(reader.seqs.count == total && Self.contiguous(reader.seqs) && reader.seqs.first == start + 1,
                "the reading peer got \(reader.seqs.count) of \(total), first \(reader.seqs.first ?? -1)")
        #expect(reader.gaps.isEmpty)
        if SanitizerEnvironment.memoryBoundsApply {
            #expect(peak - idle < 24 << 10, "VmRSS grew by \(peak - idle) KiB while 10 peers replayed ~6 MB each")
        } else {
            SanitizerEnvironment.memoryBoundNotChecked("VmRSS grew by \(peak - idle) KiB while 10 peers replayed ~6 MB each")
        }
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// A peer that asks for more than retention kept gets one `gap` naming the first seq still
    /// there, then every event from it on, in order.
    @Test func aPeerBehindRetentionGetsOneGapThenContinuesInOrder() async throws {
        let (setup, sim, client, pid) = try await Self.identifiedDaemon(journal: ["retention_events": 500])
        defer { setup.remove() }
        defer { client.close() }
        let start = try await Self.lastSeq(client)
        try await Self.emit(sim, count: 1_500)
        let last = start + 1_500
        #expect(try await Self.journaled(through: last, client))
        let first = try await client.status()["journal"]?["first_seq"]?.int64Value ?? -1
        #expect(first > start + 1 && first <= last - 499, "retention kept from \(first) (last \(last))")

        let idle = try #require(Self.rssKiB(pid))
        let sampler = PeakSampler(pid: pid)
        let reader = await Self.read(path: setup.socketPath, args: ["since": 0], expect: Int(last - first + 1))
        let peak = await sampler.stop()
        if SanitizerEnvironment.memoryBoundsApply {
            #expect(peak - idle < 24 << 10, "VmRSS grew by \(peak - idle) KiB during the replay")
        } else {
            SanitizerEnvironment.memoryBoundNotChecked("VmRSS grew by \(peak - idle) KiB during the replay")
        }
        #expect(reader.gaps.count == 1, "gaps: \(reader.gaps)")
        #expect(reader.gaps.first?["first_available_seq"]?.int64Value == first, "gap: \(reader.gaps)")
        #expect(reader.seqs.first == first && reader.seqs.last == last && Self.contiguous(reader.seqs),
                "after the gap: \(reader.seqs.first ?? -1)…\(reader.seqs.last ?? -1), \(reader.seqs.count) events")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// A durable subscriber that read and acknowledged part of a burst, then left, resumes after
    /// its acknowledgement: what it missed comes from the journal (a catch-up larger than its
    /// queue), then live events, in order, no duplicate.
    @Test func aDurableNameResumesAfterItsAckThroughACatchUp() async throws {
        let (setup, sim, client, pid) = try await Self.identifiedDaemon(socket: ["max_queue_bytes": 65_536])
        defer { setup.remove() }
        defer { client.close() }
        let start = try await Self.lastSeq(client)
        try await Self.emit(sim, count: 300)
        #expect(try await Self.journaled(through: start + 300, client))
        // Reads 200 (from the journal), acknowledging every 100, and leaves.
        let first = await Self.read(path: setup.socketPath, args: ["durable": "kiosk", "since": .number(start)],
                                    expect: 300, ackEvery: 100, stopAfter: 200)
        #expect(first.seqs.count == 200 && Self.contiguous(first.seqs) && first.seqs.first == start + 1)
        try await Task.sleep(for: .milliseconds(200))  // the last ack is committed

        // 1,000 more while it is away (~2 MB: thirty times its queue), then it comes back.
        try await Self.emit(sim, count: 1_000)
        #expect(try await Self.journaled(through: start + 1_300, client))
        let idle = try #require(Self.rssKiB(pid))
        let sampler = PeakSampler(pid: pid)
        async let resumed = Self.read(path: setup.socketPath, args: ["durable": "kiosk"], expect: 1_150)
        try await Task.sleep(for: .milliseconds(300))
        try await Self.emit(sim, count: 50)  // live, after the catch-up
        let second = await resumed
        let peak = await sampler.stop()
        if SanitizerEnvironment.memoryBoundsApply {
            #expect(peak - idle < 24 << 10, "VmRSS grew by \(peak - idle) KiB during the catch-up")
        } else {
            SanitizerEnvironment.memoryBoundNotChecked("VmRSS grew by \(peak - idle) KiB during the catch-up")
        }
        #expect(second.seqs.first == start + 201, "resumed at \(second.seqs.first ?? -1), acknowledged \(start + 200)")
        #expect(second.seqs.count == 1_150 && Self.contiguous(second.seqs),
                "resumed: \(second.seqs.count) of 1150, contiguous \(Self.contiguous(second.seqs))")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }
}
