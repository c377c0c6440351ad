import CBench
import Foundation
import SmarticoProtocol
import SmarticoSim
import Transport
#if canImport(Glibc)
import Glibc
#endif

// The daemon measured as users run it: the release `smarticod` binary as a subprocess, against
// `smartico-sim` running in this process, with subscribers on its Unix socket read by C threads.
// The goals are issue 24's: what users feel, each row with its goal and whether it was met.

/// The rows, by name (`--filter` matches a substring of these).
enum RowName {
    static let idle = "idle: wake-ups per minute over all the daemon's threads, and RSS"
    static let burst = "burst: engagements of ~2 KB to 10 subscribers (8 reading, 1 at a tenth of their pace, 1 never reading)"
    static let replay = "replay: 20 subscribers with since 0 over a full journal, never reading"
    static let latency = "latency: end-to-end p99, server send → subscriber receive, 10 subscribers at 100 events/s"
    static let throughput = "throughput: engagements per daemon CPU-second at the daemon's maximum rate"
    static let start = "start to ready (spawn → READY=1 on NOTIFY_SOCKET)"
    static let all = [idle, burst, replay, latency, throughput, start]
}

/// The goals (issue 24).
enum Goal {
    static let idleWakeupsPerMinute = 5.0
    static let idleRSSKB = 10 * 1024
    static let peakRSSKB = 48 * 1024
    static let settledRSSKB = 16 * 1024
    static let settleSeconds = 10.0
    static let latencyRatio = 3.0
    static let eventsPerCPUSecond = 20_000.0
    static let startMs = 50.0
}

func daemonBenchmarks(_ report: Report) async {
    guard RowName.all.contains(where: { report.wants($0) }) else {
        FileHandle.standardError.write(Data("smartico-bench: no row matches --filter \(report.options.filter ?? ""); rows: \(RowName.all)\n".utf8))
        return
    }
    let binary = smarticodBinaryPath()
    guard access(binary, X_OK) == 0 else {
        let message = "smartico-bench: the release smarticod binary is missing or not executable at \(binary); "
            + "build it with `swift build -c release` at the repository root (or set SMARTICOD_BIN)\n"
        FileHandle.standardError.write(Data(message.utf8))
        report.add("smarticod rows", figure: "not measured: \(binary) missing", met: false)
        return
    }
    do {
        let bench = try await DaemonBench(binary: binary, report: report)
        await bench.runAll()
        await bench.shutdown()
    } catch {
        FileHandle.standardError.write(Data("smartico-bench: cannot start the simulator: \(error)\n".utf8))
        report.add("smarticod rows", figure: "failed: \(error)", met: false)
    }
}

/// A simulator in this process, on an event loop of its own.
struct InProcessSim {
    let loop: EventLoop
    let sim: SimRunning
    let emitter: SimEmitter
    let url: String

    /// `--pong-timeout 120s` for the load rows: the throughput row stops the daemon (SIGSTOP) while
    /// a backlog is queued, and a PONG late by more than the default would close the session and
    /// lose the backlog. Pings every 30 s otherwise, as Smartico's server sends them.
    static func start(name: String, pongTimeout: String? = nil) async throws -> InProcessSim {
        let loop = try EventLoop(name: name)
        var args = ["--port", "0", "--template-bytes", "\(templateBytes)"]
        if let pongTimeout { args += ["--pong-timeout", pongTimeout] }
        let sim = try await SimRunning.start(try SimCommand.parse(args), on: loop)
        return InProcessSim(loop: loop, sim: sim, emitter: SimEmitter(loop: loop, runtime: sim.services.runtime),
                            url: "ws://127.0.0.1:\(sim.listener.port)\(SimUpgrade.path)?master&domain=bench&version=1.0.0")
    }

    func stop() async {
        await sim.stop()
        await loop.shutdown()
    }
}

final class DaemonBench {
    let binary: String
    let report: Report
    /// The load rows' simulator and daemon (latency, throughput, burst, replay).
    let main: InProcessSim
    var daemon: DaemonProcess?
    /// The idle row's own simulator and daemon, started first so that its session is in its steady
    /// state by the time the load rows are done; it gets no events from the load rows' simulator.
    var idleSim: InProcessSim?
    var idleDaemon: DaemonProcess?
    var idleUpAtNs: UInt64 = 0
    let workDir: String
    /// Bytes of one engagement line from the daemon and of the 110 the simulator sends.
    var lineBytes = 0
    var messageBytes = 0
    var emitter: SimEmitter { main.emitter }
    var quick: Bool { report.options.quick }

    init(binary: String, report: Report) async throws {
        self.binary = binary
        self.report = report
        main = try await InProcessSim.start(name: "bench-sim", pongTimeout: "120s")
        workDir = makeTempDir()
    }

    func shutdown() async {
        if let d = daemon { d.stop(); daemon = nil }
        if let d = idleDaemon { d.stop(); idleDaemon = nil }
        await main.stop()
        await idleSim?.stop()
        try? FileManager.default.removeItem(atPath: workDir)
    }

    func runAll() async {
        let wants = { (row: String) in self.report.wants(row) }
        if wants(RowName.idle) {
            await attempt(RowName.idle) { try await self.startIdleDaemon() }
        }
        if wants(RowName.latency) { await attempt(RowName.latency) { try await self.latencyRow() } }
        if wants(RowName.throughput) { await attempt(RowName.throughput) { try await self.throughputRow() } }
        if wants(RowName.burst) { await attempt(RowName.burst) { try await self.burstRow() } }
        if wants(RowName.replay) { await attempt(RowName.replay) { try await self.replayRow() } }
        var loadedRSS: Int?
        if let d = daemon { loadedRSS = d.rssKB()?.total; d.stop(); daemon = nil }
        if wants(RowName.idle), idleDaemon != nil {
            await attempt(RowName.idle) { try await self.idleRow(loadedRSS: loadedRSS) }
        }
        if wants(RowName.start) { await attempt(RowName.start) { try self.startToReadyRow() } }
    }

    /// Runs one row; a row that cannot be measured is reported as failed (with the daemon's log
    /// tail on stderr) and the next row starts a new daemon if this one is gone.
    func attempt(_ row: String, _ body: () async throws -> Void) async {
        do {
            try await body()
        } catch {
            FileHandle.standardError.write(Data("smartico-bench: \(row): \(error)\n".utf8))
            for d in [daemon, idleDaemon].compactMap({ $0 }) {
                let how = d.exitDescription().map { "smarticod (pid \(d.pid)) \($0)" } ?? "smarticod (pid \(d.pid)) still running"
                FileHandle.standardError.write(Data("\(how); its log:\n\(d.log.suffix(3000))\n".utf8))
            }
            report.add(row, figure: "not measured: \(error)", met: false)
        }
    }

    // MARK: Daemons

    /// Starts a daemon in `dir` against `sim`, waits for its session (identified: the simulator
    /// sends 110s only to identified clients) and reads one engagement line.
    func launch(dir: String, sim: InProcessSim) async throws -> (daemon: DaemonProcess, lineBytes: Int) {
        mkdir(dir, 0o700)
        let d = try DaemonProcess(binary: binary, directory: dir, serverURL: sim.url)
        do {
            let peer = try subscribedPeer(d.socketPath)
            defer { close(peer) }
            let deadline = monotonicNanos() + 20_000_000_000
            let before = await sim.emitter.sent()
            while true {
                sim.emitter.emit()
                if await sim.emitter.sent() > before { break }
                guard monotonicNanos() < deadline else {
                    throw BenchFailure("smarticod did not identify with the simulator within 20 s")
                }
                usleep(20_000)
            }
            var buf = [CChar](repeating: 0, count: 1 << 20)
            let n = cbench_read_line(peer, &buf, buf.count, 5_000)
            guard n > 0 else { throw BenchFailure("no engagement line from the daemon (\(n))") }
            return (d, n + 1)
        } catch {
            FileHandle.standardError.write(Data("smarticod's log:\n\(d.log.suffix(3000))\n".utf8))
            d.stop()
            throw error
        }
    }

    /// The load rows' daemon, started (again) when there is none or it has exited.
    func loadDaemon() async throws -> DaemonProcess {
        if let d = daemon {
            guard let how = d.exitDescription() else { return d }
            print("  the daemon (pid \(d.pid)) \(how): starting another on the same state_dir")
            daemon = nil
        }
        let (d, line) = try await launch(dir: workDir + "/main", sim: main)
        daemon = d
        lineBytes = line
        messageBytes = engagementMessage().count
        print("  load rows' daemon up (pid \(d.pid)); a 110 is \(messageBytes) B, its engagement line \(lineBytes) B")
        return d
    }

    func startIdleDaemon() async throws {
        let sim = try await InProcessSim.start(name: "bench-idle-sim")
        idleSim = sim
        let (d, _) = try await launch(dir: workDir + "/idle", sim: sim)
        idleDaemon = d
        idleUpAtNs = monotonicNanos()
        print("  idle row's daemon up (pid \(d.pid)), against a simulator of its own; its window comes after the load rows")
    }

    func engagementMessage() -> [UInt8] {
        var m = SimPushGenerator.engagement(uid: "06f0cd67-ec24-4eeb-bbe9-c3529e8743fa", engagementID: firstEngagementID,
                                            templateBytes: templateBytes)
        m["ts"] = .number(1_632_913_275_835)
        m["uuid"] = "df4a39fb-0536-4c68-9c32-0c1db7e75588"
        return m.serialized()
    }

    /// Waits until the daemon has used no CPU for `quietMs` (at most `maxSeconds`): the previous
    /// row's trailing work (commits, retention, the trim after a burst) is not the next row's.
    func settle(_ d: DaemonProcess, quietMs: UInt64 = 500, maxSeconds: Double = 15) {
        let start = monotonicNanos()
        var last = d.cpuSeconds()
        var quietSince = start
        while Double(monotonicNanos() - start) / 1e9 < maxSeconds {
            usleep(100_000)
            let now = d.cpuSeconds()
            if now != last {
                last = now
                quietSince = monotonicNanos()
            } else if monotonicNanos() - quietSince >= quietMs * 1_000_000 {
                return
            }
        }
    }

    /// After the peers closed: how long until the daemon's RSS is under `kb` (nil: not within
    /// `seconds`), and its RSS then.
    func timeUnder(_ d: DaemonProcess, kb: Int, within seconds: Double) -> (seconds: Double?, rssKB: Int) {
        let start = monotonicNanos()
        var rss = d.rssKB()?.total ?? Int.max
        while true {
            if rss < kb { return (Double(monotonicNanos() - start) / 1e9, rss) }
            if Double(monotonicNanos() - start) / 1e9 >= seconds { return (nil, rss) }
            usleep(10_000)
            rss = d.rssKB()?.total ?? Int.max
        }
    }

    func recoveryText(_ r: (seconds: Double?, rssKB: Int)) -> String {
        r.seconds.map { "back under \(mb(Goal.settledRSSKB)) \(fmt($0, 2)) s after the peers closed" }
            ?? "still \(mb(r.rssKB)) \(fmt(Goal.settleSeconds, 0)) s after the peers closed"
    }

    // MARK: Latency

    /// Sends `events` 110s at `rate`/s to `peers` fresh subscribers; the latencies from the
    /// simulator's send(2) of each 110, where the C relay's sender starts its clock too.
    func daemonLatency(_ d: DaemonProcess, peers: Int, rate: Int, events: Int) async throws -> LatencySummary {
        var fds: [Int32] = []
        defer { for fd in fds { close(fd) } }
        for _ in 0..<peers { fds.append(try subscribedPeer(d.socketPath)) }
        let start = await emitter.sent()
        // The receiver thread writes here until cbench_rx_join: memory of our own, not an Array's.
        let recvBuffer = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: peers * events)
        defer { recvBuffer.deallocate() }
        let rx = fds.withUnsafeBufferPointer { f in
            cbench_rx_start(f.baseAddress, Int32(peers), Int64(events), firstEngagementID + Int64(start), recvBuffer.baseAddress, 5_000)
        }
        guard let rx else { throw BenchFailure("cannot start the receiver thread") }
        let period = UInt64(1_000_000_000 / rate)
        let unstampedBefore = emitter.unstampedCount
        let t0 = monotonicNanos()
        for i in 0..<events {
            sleepUntil(t0 + UInt64(i) * period)
            emitter.emit()
        }
        var stray: Int64 = 0
        let status = cbench_rx_join(rx, &stray)
        let sent = await emitter.sent() - start
        guard sent == events else {
            throw BenchFailure("the simulator sent \(sent) of \(events) 110s: \(emitter.problems.first ?? "")")
        }
        // A 110 whose frame waited in the simulator's write queue has no send stamp: the run is
        // not measured from the send then, and says so rather than mixing two clocks.
        let unstamped = emitter.unstampedCount - unstampedBefore
        guard unstamped == 0 else {
            throw BenchFailure("\(unstamped) of \(events) 110s were queued by the simulator, not sent at once: no send(2) time for them")
        }
        let (samples, missing) = latencies(send: emitter.wireNs[start..<(start + events)], recv: Array(recvBuffer), peers: peers)
        if status != 0 || stray > 0 {
            print("    (receiver status \(status), \(missing) missing, \(stray) stray lines)")
        }
        return LatencySummary(samples, missing: missing)
    }

    /// The C relay doing the daemon's durable work: it appends each message to a file in the work
    /// directory (the daemon's file system) and `fdatasync`s it before writing the lines (group
    /// commit, which at 100 events/s is one `pwrite` + `fdatasync` per event).
    func relayLatency(peers: Int, rate: Int, events: Int) throws -> LatencySummary {
        var send = [UInt64](repeating: 0, count: events)
        var recv = [UInt64](repeating: 0, count: peers * events)
        let rc = send.withUnsafeMutableBufferPointer { s in
            recv.withUnsafeMutableBufferPointer { r in
                cbench_journaled_relay(Int32(peers), Int64(events), Int32(rate), Int32(messageBytes + 4), Int32(lineBytes), 1,
                                       workDir + "/relay-journal", s.baseAddress, r.baseAddress)
            }
        }
        guard rc >= 0 else { throw BenchFailure("C relay failed: \(String(cString: strerror(errno)))") }
        let (samples, missing) = latencies(send: send[...], recv: recv, peers: peers)
        return LatencySummary(samples, missing: missing)
    }

    func latencyRow() async throws {
        let d = try await loadDaemon()
        let peers = 10, rate = 100
        let events = quick ? 200 : 1_000
        let rounds = quick ? 1 : 5
        print("  \(RowName.latency): \(rounds) round(s) of \(events) events, the C relay and the daemon alternated")
        // Warm-up: the first events pay for page faults and the store's first pages.
        _ = try await daemonLatency(d, peers: 1, rate: 1_000, events: quick ? 200 : 500)
        // Both tails carry the machine's noise: the row alternates relay and daemon and judges the
        // median round's ratio (all printed).
        var measured: [(relay: LatencySummary, ours: LatencySummary, ratio: Double)] = []
        for _ in 0..<rounds {
            let relay = try relayLatency(peers: peers, rate: rate, events: events)
            let ours = try await daemonLatency(d, peers: peers, rate: rate, events: events)
            measured.append((relay, ours, ours.p99 / relay.p99))
            print("    round: smarticod \(ours.text); C relay \(relay.text); p99 ratio \(fmt(ours.p99 / relay.p99, 2))×")
        }
        let (relay, ours, ratio) = measured.sorted { $0.ratio < $1.ratio }[measured.count / 2]
        let missing = measured.map(\.ours.missing).reduce(0, +)
        let all = rounds > 1 ? "; rounds " + measured.map { fmt($0.ratio, 2) + "×" }.joined(separator: ", ") : ""
        report.add(RowName.latency + " (\(thousands(Double(events))) events\(rounds > 1 ? " × \(rounds) rounds" : ""))",
                   figure: "smarticod \(ours.text), p99 \(fmt(ratio, 2))× the relay's\(all)"
                       + (missing > 0 ? "; \(missing) lines missing" : ""),
                   reference: "C relay journaling each event (pwrite + fdatasync) before forwarding: " + relay.text,
                   goal: "p99 ≤ \(fmt(Goal.latencyRatio, 0))× the C relay's, no line missing",
                   met: ratio <= Goal.latencyRatio && missing == 0)
    }

    // MARK: Throughput

    /// One load run with one peer read by a receiver thread: `prepare` (before the clock starts),
    /// then the clock and the daemon's CPU from `go` until the peer has read the last of `events`.
    private func loadRun(_ d: DaemonProcess, events: Int, prepare: () async throws -> Void, go: () -> Void) async throws -> LoadRun {
        let peer = try subscribedPeer(d.socketPath)
        defer { close(peer) }
        let start = await emitter.sent()
        let recvBuffer = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: events)
        defer { recvBuffer.deallocate() }
        var fd = peer
        guard let rx = cbench_rx_start(&fd, 1, Int64(events), firstEngagementID + Int64(start), recvBuffer.baseAddress, 20_000)
        else { throw BenchFailure("cannot start the receiver thread") }
        try await prepare()
        guard let cpu0 = d.cpuSeconds() else { throw BenchFailure("cannot read /proc/\(d.pid)/stat") }
        let t0 = monotonicNanos()
        go()
        var stray: Int64 = 0
        let status = cbench_rx_join(rx, &stray)
        let recv = Array(recvBuffer)
        let t1 = recv.max() ?? monotonicNanos()
        guard let cpu1 = d.cpuSeconds() else { throw BenchFailure("cannot read /proc/\(d.pid)/stat") }
        let sent = await emitter.sent() - start
        let got = recv.reduce(0) { $0 + ($1 == 0 ? 0 : 1) }
        guard status == 0, sent == events, got == events else {
            throw BenchFailure("sent \(sent), received \(got) of \(events) (receiver status \(status)); \(emitter.problems.first ?? "")")
        }
        // A daemon that relayed every event used CPU: none means the pid watched is not the one
        // doing the work (e.g. SMARTICOD_BIN is a wrapper that runs the daemon as its child).
        guard cpu1 > cpu0 else {
            throw BenchFailure("pid \(d.pid) used no CPU while \(events) events went through it: is \(binary) "
                               + "the daemon itself (not a wrapper that starts it as a child)?")
        }
        return LoadRun(events: events, wall: Double(t1 - t0) / 1e9, daemonCPU: cpu1 - cpu0)
    }

    /// The daemon at its own maximum rate, not the simulator's: `events` 110s are built, compressed
    /// and queued by the simulator while the daemon is stopped (SIGSTOP), then the daemon is
    /// resumed and drains them as fast as it can. The clock runs from the resume to the last line.
    func drain(_ d: DaemonProcess, events: Int) async throws -> LoadRun {
        do {
            return try await loadRun(d, events: events, prepare: {
                guard kill(d.pid, SIGSTOP) == 0 else { throw BenchFailure("cannot stop pid \(d.pid): \(String(cString: strerror(errno)))") }
                var queued = 0
                while queued < events {
                    let n = min(10_000, events - queued)
                    emitter.emit(count: n)
                    queued += n
                }
                _ = await emitter.sent()
            }, go: { kill(d.pid, SIGCONT) })
        } catch {
            kill(d.pid, SIGCONT)  // never leave the daemon stopped
            throw error
        }
    }

    func throughputRow() async throws {
        let d = try await loadDaemon()
        // Below the journal's default retention (10,000 events): a receiver that falls further
        // behind than that gets a `gap`, as it should, and the row would measure nothing.
        let backlog = quick ? 5_000 : 9_000
        let runs = quick ? 1 : 3
        print("  \(RowName.throughput): \(runs) backlog(s) of \(backlog) drained")
        _ = try await drain(d, events: 2_000)  // warm-up
        var drains: [LoadRun] = []
        for _ in 0..<runs {
            let run = try await drain(d, events: backlog)
            print("    drained in \(fmt(run.wall, 2)) s (\(thousands(Double(run.events) / run.wall)) events/s), "
                  + "daemon CPU \(fmt(run.daemonCPU, 2)) s: \(thousands(run.perCPUSecond)) events per CPU-second")
            drains.append(run)
        }
        let m = LoadRun.median(drains)
        let floor = try eventFloor(events: backlog)
        report.add(RowName.throughput + " (\(thousands(Double(messageBytes))) B 110s; a backlog of \(thousands(Double(backlog))) queued while the daemon was stopped, drained"
                       + (runs > 1 ? "; median of \(runs)" : "") + ")",
                   figure: "\(thousands(m.perCPUSecond)) events per daemon CPU-second (\(fmt(1e6 / m.perCPUSecond, 1)) µs/event; "
                       + "\(thousands(Double(m.events) / m.wall)) events/s)"
                       + (runs > 1 ? "; runs " + drains.map { thousands($0.perCPUSecond) }.joined(separator: " / ") : ""),
                   reference: "C floor (the same work plainly in C on one thread: read, inflate, journal record, "
                       + "append + fdatasync every 64, line written): \(thousands(floor)) events per CPU-second",
                   goal: "≥ \(thousands(Goal.eventsPerCPUSecond)) events per daemon CPU-second",
                   met: m.perCPUSecond >= Goal.eventsPerCPUSecond)
    }

    /// `cbench_event_floor` on 64 distinct 110s of the simulator's: events per CPU-second.
    func eventFloor(events: Int) throws -> Double {
        let messages = simulatorEngagements(count: 64, templateBytes: templateBytes)
        let msgs = messages.flatMap { $0 }
        let lens = messages.map(\.count)
        var user = 0.0, system = 0.0, wall = 0.0
        let path = workDir + "/event-floor"
        let rc = msgs.withUnsafeBufferPointer { m in
            lens.withUnsafeBufferPointer { l in
                cbench_event_floor(m.baseAddress, l.baseAddress, Int32(l.count), Int64(events), 64, path, &user, &system, &wall)
            }
        }
        guard rc == 0 else { throw BenchFailure("cbench_event_floor failed (\(rc)): \(String(cString: strerror(errno)))") }
        return Double(events) / ((user + system) / 1e6)
    }

    /// Closes the subscribers, then measures how soon the daemon's RSS settles; the peak covers
    /// the whole row, the close included.
    private func closePeers(_ d: DaemonProcess, _ fds: inout [Int32], _ sampler: OpaquePointer)
        -> (peakKB: Int64, recovery: (seconds: Double?, rssKB: Int))
    {
        let peak = cbench_rss_peak_kb(sampler)
        for fd in fds { close(fd) }
        fds = []
        let recovery = timeUnder(d, kb: Goal.settledRSSKB, within: Goal.settleSeconds)
        return (max(peak, cbench_rss_stop(sampler)), recovery)
    }

    // MARK: Burst

    func burstRow() async throws {
        let d = try await loadDaemon()
        let events = quick ? 3_000 : 10_000
        print("  \(RowName.burst): \(events) events")
        settle(d)
        let before = d.rssKB()?.total ?? 0
        let modes = [Int32](repeating: Int32(CBENCH_SUB_FAST), count: 8) + [Int32(CBENCH_SUB_SLOW), Int32(CBENCH_SUB_NEVER)]
        var fds: [Int32] = []
        var closed = false
        defer { if !closed { for fd in fds { close(fd) } } }
        for _ in modes { fds.append(try subscribedPeer(d.socketPath)) }
        let start = await emitter.sent()
        guard let sampler = cbench_rss_start(d.pid, 10) else { throw BenchFailure("cannot read /proc/\(d.pid)/status") }
        var sampling = true
        defer { if sampling { _ = cbench_rss_stop(sampler) } }
        guard let subs = cbench_subs_start(fds, modes, Int32(fds.count), Int64(events), firstEngagementID + Int64(start),
                                           30_000, quick ? 90_000 : 240_000)
        else { throw BenchFailure("cannot start the subscribers' threads") }
        let t0 = monotonicNanos()
        emitter.emit(count: events)  // one control op: the simulator builds and sends them back to back
        var results = [cbench_sub_result](repeating: cbench_sub_result(), count: fds.count)
        cbench_subs_join(subs, &results)
        let sent = await emitter.sent() - start
        let (peakAll, recovery) = closePeers(d, &fds, sampler)
        closed = true
        sampling = false

        func seconds(_ r: cbench_sub_result) -> String { r.last_ns > t0 ? fmt(Double(r.last_ns - t0) / 1e9, 2) + " s" : "—" }
        func problems(_ r: cbench_sub_result) -> [String] {
            var p: [String] = []
            if r.got != events { p.append("got \(r.got) of \(events)") }
            if r.seq_errors > 0 { p.append("\(r.seq_errors) seqs not increasing") }
            if r.id_errors > 0 { p.append("\(r.id_errors) out of order") }
            if r.gaps > 0 { p.append("\(r.gaps) gap events") }
            if r.other > 0 { p.append("\(r.other) other lines (overflow, error)") }
            switch r.status {
            case 0: break
            case 1: p.append("timed out")
            case 2: p.append("the daemon closed the connection")
            default: p.append("a line over 1 MiB")
            }
            return p
        }
        let fast = results[0..<8], slow = results[8]
        let fastProblems = fast.enumerated().flatMap { i, r in problems(r).map { "fast \(i + 1): \($0)" } }
        let slowProblems = problems(slow).map { "slow: \($0)" }
        let complete = sent == events && fastProblems.isEmpty && slowProblems.isEmpty
        let fastDone = fast.map(\.last_ns).max() ?? 0
        let delivery = complete
            ? "every reading subscriber got all \(thousands(Double(events))) in order, no gap (the 8 by \(fastDone > t0 ? fmt(Double(fastDone - t0) / 1e9, 2) : "—") s, the slow one by \(seconds(slow)))"
            : "NOT all delivered: " + ((sent != events ? ["the simulator sent \(sent)"] : []) + fastProblems + slowProblems).prefix(6).joined(separator: "; ")
        report.add(RowName.burst + " (\(thousands(Double(events))) events)",
                   figure: "peak RSS \(mb(Int(peakAll))) (\(mb(before)) before); \(recoveryText(recovery)); \(delivery)",
                   goal: "all delivered in order, no gap; peak ≤ \(mb(Goal.peakRSSKB)); < \(mb(Goal.settledRSSKB)) within \(fmt(Goal.settleSeconds, 0)) s",
                   met: complete && peakAll <= Goal.peakRSSKB && recovery.seconds != nil)
    }

    // MARK: Replay

    /// The journal's first and last seq, from the daemon's `status`.
    func journalRange(_ d: DaemonProcess) -> (first: Int, last: Int)? {
        let line = statusLine(d.socketPath)
        guard let j = line.range(of: #""journal":{"#) else { return nil }
        let rest = line[j.upperBound...]
        func field(_ name: String) -> Int? {
            guard let r = rest.range(of: "\"\(name)\":") else { return nil }
            return Int(rest[r.upperBound...].prefix { $0.isNumber })
        }
        guard let first = field("first_seq"), let last = field("last_seq") else { return nil }
        return (first, last)
    }

    func replayRow() async throws {
        let d = try await loadDaemon()
        let journaled = quick ? 3_000 : 10_000
        let peers = 20
        // A full journal: fill it when the rows before did not (`--filter replay`).
        if let range = journalRange(d), range.last - range.first + 1 < journaled {
            let missing = journaled - (range.last - range.first + 1)
            print("  filling the journal: \(missing) more events")
            _ = try await loadRun(d, events: missing, prepare: {}, go: { emitter.emit(count: missing) })
        }
        guard let range = journalRange(d) else { throw BenchFailure("no journal range in the daemon's status: \(statusLine(d.socketPath).prefix(300))") }
        print("  \(RowName.replay): journal seq \(range.first)…\(range.last)")
        settle(d)
        let before = d.rssKB()?.total ?? 0
        guard let sampler = cbench_rss_start(d.pid, 10) else { throw BenchFailure("cannot read /proc/\(d.pid)/status") }
        var fds: [Int32] = []
        var closed = false
        defer { if !closed { for fd in fds { close(fd) } } }
        var sampling = true
        defer { if sampling { _ = cbench_rss_stop(sampler) } }
        for _ in 0..<peers { fds.append(try subscribedPeer(d.socketPath, since: 0)) }
        // The daemon queues what it will for them, then waits: until its CPU stands still. A daemon
        // that would hold the whole journal for each of them is cut short at 1 GB (a shared machine).
        let limitKB: Int64 = 1 << 20
        let start = monotonicNanos()
        var last = d.cpuSeconds()
        var quietSince = start
        while Double(monotonicNanos() - start) / 1e9 < 20, cbench_rss_peak_kb(sampler) < limitKB {
            usleep(50_000)
            let now = d.cpuSeconds()
            if now != last { last = now; quietSince = monotonicNanos() } else if monotonicNanos() - quietSince >= 1_000_000_000 { break }
        }
        let alive = fds.filter { fd in
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            return poll(&p, 1, 0) >= 0 && (p.revents & Int16(POLLHUP | POLLERR)) == 0
        }.count
        let (peakAll, recovery) = closePeers(d, &fds, sampler)
        closed = true
        sampling = false
        report.add(RowName.replay + " (\(thousands(Double(range.last - range.first + 1))) events journaled)",
                   figure: "peak RSS \(mb(Int(peakAll)))\(peakAll >= limitKB ? " (cut short)" : "") (\(mb(before)) before); "
                       + "\(recoveryText(recovery)); \(alive) of \(peers) still connected when they closed",
                   goal: "peak ≤ \(mb(Goal.peakRSSKB)); < \(mb(Goal.settledRSSKB)) within \(fmt(Goal.settleSeconds, 0)) s",
                   met: peakAll <= Goal.peakRSSKB && recovery.seconds != nil)
    }

    // MARK: Idle

    func idleRow(loadedRSS: Int?) async throws {
        guard let d = idleDaemon else { throw BenchFailure("no idle daemon") }
        let seconds = quick ? 10 : 60
        let peer = try subscribedPeer(d.socketPath)
        defer { close(peer) }
        // A session in its steady state: the daemon learns the server's PING cadence from its
        // first two PINGs (30 s apart) and a one-shot timer fires 60 s after ready, so the window
        // starts at least 70 s after the session came up (in a full run the load rows took longer).
        let age = Double(monotonicNanos() - idleUpAtNs) / 1e9
        if !quick, age < 70 { sleep(UInt32((70 - age).rounded(.up))) } else { sleep(2) }
        print("  \(RowName.idle): a \(seconds) s window from \(fmt(Double(monotonicNanos() - idleUpAtNs) / 1e9, 0)) s after the session came up")
        let before = d.threadSwitches()
        let faultsBefore = d.pageFaults()
        sleep(UInt32(seconds))
        let after = d.threadSwitches()
        let faultsAfter = d.pageFaults()
        guard let rss = d.rssKB() else { throw BenchFailure("no VmRSS in /proc/\(d.pid)/status") }
        print("    the daemon's status after the window: \(statusSummary(d.socketPath))")
        // A wake-up is a voluntary context switch: the thread went to sleep (epoll_wait, a futex)
        // and something woke it. Every thread counts (libdispatch's too: they are the daemon's).
        // An involuntary switch is a preemption of a running thread: shown, not counted.
        var wakeups = 0.0, preempted = 0.0
        var perThread: [String] = []
        for (tid, a) in after.sorted(by: { $0.key < $1.key }) {
            let b = before[tid] ?? DaemonProcess.ThreadSwitches(name: a.name, voluntary: 0, involuntary: 0)
            let n = Double(a.voluntary - b.voluntary) * 60 / Double(seconds)
            wakeups += n
            preempted += Double(a.involuntary - b.involuntary) * 60 / Double(seconds)
            if n > 0 { perThread.append("\(a.name) \(fmt(n, 1))") }
        }
        var faults = ""
        if let a = faultsAfter, let b = faultsBefore, a.major > b.major { faults = "; \(a.major - b.major) major page faults in the window" }
        report.add(RowName.idle + " (\(seconds) s window, identified session, the server sending nothing but its PINGs, one idle subscriber)",
                   figure: "\(fmt(wakeups, 1)) wake-ups/min over \(after.count) threads (" + (perThread.isEmpty ? "none" : perThread.joined(separator: ", "))
                       + "; \(fmt(preempted, 1))/min preemptions, not counted\(faults)); RSS \(mb(rss.total)) "
                       + "(anon \(mb(rss.anon)), file \(mb(rss.file)))"
                       + (loadedRSS.map { "; the load rows' daemon after them: \(mb($0))" } ?? ""),
                   goal: "≤ \(fmt(Goal.idleWakeupsPerMinute, 0)) wake-ups/min; RSS ≤ \(mb(Goal.idleRSSKB))",
                   met: wakeups <= Goal.idleWakeupsPerMinute && rss.total <= Goal.idleRSSKB)
        if let d = idleDaemon { d.stop(); idleDaemon = nil }
    }

    // MARK: Start to READY=1

    func startToReadyRow() throws {
        let runs = quick ? 3 : 9
        print("  \(RowName.start): \(runs) starts on a fresh state_dir, then \(runs) on the load rows' one")
        let notifyPath = workDir + "/notify"
        let nfd = cbench_notify_bind(notifyPath)
        guard nfd >= 0 else { throw BenchFailure("cannot bind \(notifyPath): \(String(cString: strerror(errno)))") }
        defer { close(nfd); unlink(notifyPath) }
        /// The first start's time and the sorted times of the `runs` starts after it.
        func starts(in dir: String) throws -> (first: Double, times: [Double]) {
            var times: [Double] = []
            var first = 0.0
            for i in 0...runs {
                let d = try DaemonProcess(binary: binary, directory: dir, serverURL: main.url, notifySocket: notifyPath)
                let ready = cbench_notify_wait_ready(nfd, 10_000)
                d.stop()
                guard ready > 0 else { throw BenchFailure("no READY=1 within 10 s; log: \(d.log.suffix(2000))") }
                let ms = Double(ready - d.spawnedNs) / 1e6
                if i == 0 { first = ms } else { times.append(ms) }
            }
            return (first, times.sorted())
        }
        let fresh = workDir + "/ready"
        mkdir(fresh, 0o700)
        let empty = try starts(in: fresh)
        let median = empty.times[empty.times.count / 2]
        var figure = "median \(fmt(median, 1)) ms over \(runs) starts (max \(fmt(empty.times.last!, 1))); "
            + "the first, on an empty state_dir, \(fmt(empty.first, 1)) ms"
        var worst = median
        if FileManager.default.fileExists(atPath: workDir + "/main/state") {
            let loaded = try starts(in: workDir + "/main")
            let loadedMedian = loaded.times[loaded.times.count / 2]
            worst = max(worst, loadedMedian)
            figure += "; on the load rows' state_dir (a full journal): median \(fmt(loadedMedian, 1)) ms (max \(fmt(loaded.times.last!, 1)))"
        }
        report.add(RowName.start, figure: figure, goal: "≤ \(fmt(Goal.startMs, 0)) ms", met: worst <= Goal.startMs)
    }
}

/// `count` 110s as `smartico-sim` sends them (a template of `templateBytes`, a random
/// `engagement_uid`, consecutive ids, a random `uuid`), seeded: the same bytes every run.
func simulatorEngagements(count: Int, templateBytes: Int, seed: UInt64 = 0x5EED) -> [[UInt8]] {
    var generator = SimPushGenerator(templateBytes: templateBytes)
    var random = SimRandom(seed: seed)
    return (0..<count).map { i in
        var m = generator.make(.engagement, random: &random)
        m["ts"] = .number(1_632_913_275_835 + Int64(i))
        m["uuid"] = .string(random.uuid())
        return m.serialized()
    }
}
