// Reconnect storms (issue 30): 200 engine sessions lose the server at once; their reconnects,
// counted where a server would see them (accepted TCP connections), must not come in a burst.
//
// 200 real `smarticod` processes would cost the shared 2-core machine ~200 start-ups and ~3 GB
// for what this checks: when the sessions reconnect. That is decided by the engine — the session
// machine's backoff (full jitter, Backoff.swift) run by the SessionDriver's timers on an event
// loop — so this test runs 200 real SessionDrivers in the test process (each with its own store
// in its own state directory, four event loops as four daemons' worth of loop threads), connected
// over real TCP to the real smartico-sim. The sim is killed (SIGKILL: every connection drops at
// once), and a listener that only records accept times takes over its port: "the server comes
// back" for everyone at once. It never answers the handshake, so each session makes one attempt
// in the window (session.connect_timeout_s is 20 s, longer than the test looks).
//
// `swift test --skip-build --filter ReconnectStormTests` prints the histogram.
import Foundation
import Logging
import SmarticoProtocol
import SmarticoTestSupport
import Synchronization
import Testing
import Transport
@testable import SmarticoDaemon
#if canImport(Glibc)
import Glibc
#endif

@Suite(.serialized) struct ReconnectStormTests {
    static let sessions = 200
    /// `session.reconnect.initial_ms`: after losing a healthy session, the first reconnect comes
    /// uniformly in [0, 2000] ms (attempt 0 of the full-jitter backoff).
    static let initialMs = 2000
    static let bucketMs = 100
    /// No 100 ms bucket may hold more than 25 of the 200 reconnects (12.5%). With full jitter
    /// over 2000 ms a bucket expects 200 × 100/2000 = 10 (5%), standard deviation √(200·0.05·0.95)
    /// ≈ 3.1; 25 is ~4.9 standard deviations above, so the chance that one of the 20 buckets
    /// reaches it by luck is below 1 in 10⁴ (binomial tail ≈ 5·10⁻⁶ per bucket). A backoff without
    /// jitter puts all 200 in one bucket; a 10% jitter ([1800, 2000] ms) puts ~100 in each of two.
    /// Sessions refused in the few ms before the listener binds (ECONNREFUSED, attempt 1:
    /// [0, 4000] ms) arrive later and only spread the count more.
    static let maxPerBucket = 25

    struct Engine {
        let driver: SessionDriver
        let store: SmarticoStore
        let server: SocketAPIServer
        let task: Task<Void, Never>
    }

    @Test(.timeLimit(.minutes(2)))
    func twoHundredSessionsLosingTheServerAtOnceReconnectWithoutABurst() async throws {
        let dir = "/tmp/sms-\(UUID().uuidString.prefix(8).lowercased())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let sim = try await SimProcess.start(dir: dir)
        let loops = try (0..<4).map { i in try EventLoop(name: "storm-\(i)") }
        var logger = Logger(label: "storm")
        logger.logLevel = .critical
        var engines: [Engine] = []
        var simAlive = true
        defer { if simAlive { sim.child.signal(SIGKILL) } }

        let started = ContinuousClock.now
        for i in 0..<Self.sessions {
            let stateDir = "\(dir)/s\(i)"
            let config: JSONObject = [
                "server": ["url": .string(sim.serverURL), "label_key": "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2"],
                "user": ["ext_user_id": .string("storm-\(i)"), "hash": "h"],
                "session": [
                    "connect_timeout_s": 20, "response_timeout_s": 20,
                    "reconnect": ["initial_ms": .number(Int64(Self.initialMs)), "max_ms": 60_000, "multiplier": 2.0],
                ],
                "socket": ["path": .string("\(stateDir)/d.sock")],
                "state_dir": .string(stateDir),
            ]
            let resolved = try ConfigLoader.resolve(config.serialized(), source: "storm-\(i)", environment: [:])
            let loop = loops[i % loops.count]
            let store = try await SmarticoStore.open(directory: stateDir, options: Daemon.storeOptions(resolved))
            let server = SocketAPIServer(loop: loop, configuration: .init(resolved.config.socket), store: store)
            let driver = SessionDriver(config: resolved, configPath: nil, environment: [:], loop: loop, store: store,
                                       server: server, notifier: SystemdNotifier(), logger: logger)
            let snapshot = await Daemon.startSnapshot(config: resolved, store: store, pool: loop.blockingPool, logger: logger)
            let task = Task(executorPreference: loop) { await driver.run(snapshot) }
            engines.append(Engine(driver: driver, store: store, server: server, task: task))
        }
        let allReady = await eventually(timeout: .seconds(40)) {
            engines.allSatisfy { $0.driver.socketHandler.state.withLock { $0 } == .ready }
        }
        let readyCount = engines.filter { $0.driver.socketHandler.state.withLock { $0 } == .ready }.count
        print("storm: \(readyCount) of \(Self.sessions) sessions ready after \(ContinuousClock.now - started)")

        var arrivals: [Int] = []
        if allReady {
            // The server goes away for everyone at once, and its port is taken over at once.
            await sim.child.kill9()
            simAlive = false
            let lost = ContinuousClock.now
            let probe = try AcceptRecorder(port: sim.port)
            // Everyone reconnects within attempt 1's window ([0, 4000] ms) plus slack.
            _ = await eventually(timeout: .seconds(8)) { probe.count >= Self.sessions }
            arrivals = probe.stop().map { Int(($0 - lost) / .milliseconds(1)) }.sorted()
        }

        for engine in engines { engine.driver.terminate(signal: SIGTERM) }
        for engine in engines {
            await engine.task.value
            await engine.server.close()
            await engine.store.close()
        }
        for loop in loops { await loop.shutdown() }

        #expect(allReady, "only \(readyCount) of \(Self.sessions) sessions became ready")
        guard allReady else { return }
        let histogram = Self.histogram(arrivals)
        print(histogram.text)
        #expect(arrivals.count == Self.sessions, "\(arrivals.count) reconnects seen, expected one per session")
        // Spread over the window, not bunched at one end: each half of [0, 2000] ms holds a third or more.
        let firstHalf = arrivals.filter { $0 < Self.initialMs / 2 }.count
        guard SanitizerEnvironment.timingBoundsApply else {
            print("timing bounds not checked under a sanitizer: largest bucket \(histogram.largest), \(firstHalf) in the first half")
            return
        }
        #expect(histogram.largest <= Self.maxPerBucket, "a burst: \(histogram.largest) reconnects in one \(Self.bucketMs) ms bucket\n\(histogram.text)")
        #expect(firstHalf >= Self.sessions / 3 && firstHalf <= Self.sessions * 2 / 3, "\(firstHalf) of \(arrivals.count) in the first half\n\(histogram.text)")
    }

    /// Counts per `bucketMs` bucket, as text: `  0– 99 ms  12 ############`.
    static func histogram(_ arrivals: [Int]) -> (text: String, largest: Int) {
        guard let last = arrivals.last else { return ("no reconnects", 0) }
        var counts = Array(repeating: 0, count: last / bucketMs + 1)
        for a in arrivals { counts[max(0, a) / bucketMs] += 1 }
        var text = "reconnects of \(sessions) sessions after the server was lost (per \(bucketMs) ms, from the kill):\n"
        for (i, c) in counts.enumerated() {
            let from = String(i * bucketMs).leftPadded(5)
            let to = String(i * bucketMs + bucketMs - 1).leftPadded(5)
            text += "\(from)–\(to) ms \(String(c).leftPadded(4)) \(String(repeating: "#", count: c))\n"
        }
        text += "largest bucket: \(counts.max() ?? 0) (\(String(format: "%.1f", Double(counts.max() ?? 0) * 100 / Double(sessions)))%), total \(arrivals.count)"
        return (text, counts.max() ?? 0)
    }
}

private extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}

/// A TCP listener on 127.0.0.1:`port` that records when it accepts and never answers: a server
/// that has come back, as its accept queue sees the clients. Its own thread; `stop()` joins it.
final class AcceptRecorder: Sendable {
    private let fd: Int32
    private let times = Mutex<[ContinuousClock.Instant]>([])
    private let accepted = Mutex<[Int32]>([])
    private let running = Atomic<Bool>(true)
    private let done = DispatchSemaphore(value: 0)

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw EngineTestError("socket: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 1024) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw EngineTestError("cannot listen on 127.0.0.1:\(port): \(String(cString: strerror(e)))")
        }
        let thread = Thread { [self] in
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while running.load(ordering: .relaxed) {
                guard poll(&pfd, 1, 50) > 0 else { continue }
                let client = accept(fd, nil, nil)
                guard client >= 0 else { continue }
                let now = ContinuousClock.now
                times.withLock { $0.append(now) }
                accepted.withLock { $0.append(client) }
            }
            done.signal()
        }
        thread.start()
    }

    var count: Int { times.withLock { $0.count } }

    /// Stops accepting, closes everything; the accept times.
    func stop() -> [ContinuousClock.Instant] {
        running.store(false, ordering: .relaxed)
        done.wait()
        Glibc.close(fd)
        for client in accepted.withLock({ $0 }) { Glibc.close(client) }
        return times.withLock { $0 }
    }
}
