// Real network faults in network namespaces (docs/reliability.md, docs/testing.md): smartico-sim
// runs in one namespace, smarticod in another, joined by a veth pair with 10.201.0.x addresses; the
// test takes the link down and up, blackholes the route and changes the daemon's address. The
// traffic never leaves the machine's namespaces.
//
// Shown: a dead connection is noticed within keepalive_s + dead_after_s; once the way to the server
// is back the daemon is `ready` within 1 s (measured and printed), by the rtnetlink path (the
// reconnect's reason is `network_changed`, with a backoff that would otherwise wait up to 10 s);
// events the sim emits during and after the fault reach a durable subscriber exactly once, and
// messages the app queues while down reach the sim exactly once.
//
// Needs root and `ip netns` (CI has both); without them the tests are skipped with the reason.
import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

/// Namespaces and a veth pair for one test, named `smnf<6 hex><suffix>` (unique per run).
struct NetNamespaces: Sendable {
    static let prefix = "smnf"
    static let ip = "/usr/sbin/ip"
    let id: String
    var simNS: String { Self.prefix + id + "s" }
    var daemonNS: String { Self.prefix + id + "d" }
    var daemonLink: String { Self.prefix + id + "a" }
    var simLink: String { Self.prefix + id + "b" }
    static let daemonAddress = "10.201.0.1"
    static let movedAddress = "10.201.0.3"
    static let simAddress = "10.201.0.2"

    init() { id = String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(6)).lowercased() }

    /// Whether namespaces work here, and why not: tried once (add and delete one).
    static let availability: (ok: Bool, why: String) = {
        guard getuid() == 0 else { return (false, "network namespace tests need root (uid \(getuid()))") }
        guard FileManager.default.isExecutableFile(atPath: ip) else { return (false, "\(ip) is missing") }
        let probe = prefix + "probe" + String(UInt32.random(in: 0..<1_000_000))
        let add = runSync([ip, "netns", "add", probe])
        guard add.status == 0 else { return (false, "`ip netns add` failed: \(add.output)") }
        _ = runSync([ip, "netns", "delete", probe])
        return (true, "")
    }()

    /// Runs a command and waits (for set-up outside async contexts: the probe, the sweep).
    @discardableResult
    static func runSync(_ argv: [String]) -> (status: Int32, output: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: argv[0])
        p.arguments = Array(argv.dropFirst())
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        do { try p.runSerialized() } catch { return (-1, "\(error)") }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitForExit(timeout: .seconds(10))
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// Runs `ip ARGS`; throws with its output when it fails.
    static func ip(_ args: [String]) async throws {
        let r = try await BuiltExecutable.run(URL(fileURLWithPath: ip), args, timeout: .seconds(10))
        guard r.status == 0 else { throw EngineTestError("ip \(args.joined(separator: " ")): \(r)") }
    }

    /// Deletes namespaces of earlier runs that were not cleaned up (a killed test run).
    static func sweepStale() {
        let list = runSync([ip, "netns", "list"]).output
        for line in list.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            if name.hasPrefix(prefix) { runSync([ip, "netns", "delete", name]) }
        }
        for line in runSync([ip, "-o", "link", "show"]).output.split(separator: "\n") {
            let fields = line.split(separator: ":")
            guard fields.count > 1 else { continue }
            let name = fields[1].trimmingCharacters(in: .whitespaces).split(separator: "@").first.map(String.init) ?? ""
            if name.hasPrefix(prefix) { runSync([ip, "link", "delete", name]) }
        }
    }

    /// Both namespaces, the veth pair between them, addresses and loopbacks up.
    func create() async throws {
        try await Self.ip(["netns", "add", simNS])
        try await Self.ip(["netns", "add", daemonNS])
        try await Self.ip(["link", "add", daemonLink, "netns", daemonNS, "type", "veth", "peer", "name", simLink, "netns", simNS])
        try await Self.ip(["-n", daemonNS, "addr", "add", Self.daemonAddress + "/24", "dev", daemonLink])
        try await Self.ip(["-n", simNS, "addr", "add", Self.simAddress + "/24", "dev", simLink])
        for (ns, link) in [(daemonNS, daemonLink), (simNS, simLink)] {
            try await Self.ip(["-n", ns, "link", "set", "lo", "up"])
            try await Self.ip(["-n", ns, "link", "set", link, "up"])
        }
    }

    /// Deleting the namespaces deletes the veth pair.
    func remove() async {
        for ns in [simNS, daemonNS] { _ = try? await BuiltExecutable.run(URL(fileURLWithPath: Self.ip), ["netns", "delete", ns]) }
    }

    func inDaemonNS(_ args: [String]) async throws { try await Self.ip(["-n", daemonNS] + args) }
}

@Suite("Network faults in namespaces", .serialized,
       .enabled(if: NetNamespaces.availability.ok, "skipped: \(NetNamespaces.availability.why)"))
struct NetworkFaultTests {
    static let keepaliveS = 2
    static let deadAfterS = 2

    /// What each fault does, undone by `restore`.
    enum Fault: String, CaseIterable, Sendable {
        case linkDown, blackhole, addressChange

        func apply(_ ns: NetNamespaces) async throws {
            switch self {
            case .linkDown: try await ns.inDaemonNS(["link", "set", ns.daemonLink, "down"])
            case .blackhole: try await ns.inDaemonNS(["route", "add", "blackhole", NetNamespaces.simAddress + "/32"])
            // The address goes away (DHCP lost it): the connection's source address is gone.
            case .addressChange: try await ns.inDaemonNS(["addr", "del", NetNamespaces.daemonAddress + "/24", "dev", ns.daemonLink])
            }
        }

        func restore(_ ns: NetNamespaces) async throws {
            switch self {
            case .linkDown: try await ns.inDaemonNS(["link", "set", ns.daemonLink, "up"])
            case .blackhole: try await ns.inDaemonNS(["route", "del", "blackhole", NetNamespaces.simAddress + "/32"])
            // A new address: the way to the server is back, from another source address.
            case .addressChange: try await ns.inDaemonNS(["addr", "add", NetNamespaces.movedAddress + "/24", "dev", ns.daemonLink])
            }
        }
    }

    /// Emits an engagement to alice: the uids the sim generated for it (one per connection it still
    /// has for her, a dead one included, or the one kept pending).
    static func emit(_ sim: SimProcess) async throws -> Set<String> {
        let answer = try await sim.control(["op": "emit", "kind": "engagement", "user": "alice"])
        var uids = Set((answer["deliveries"]?.arrayValue ?? []).compactMap { $0["message"]?["engagement_uid"]?.stringValue })
        if let queued = answer["queued_pending"]?.arrayValue { uids.formUnion(queued.compactMap { $0["engagement_uid"]?.stringValue }) }
        if uids.isEmpty { throw EngineTestError("emit answered without an engagement: \(answer.text)") }
        return uids
    }

    static func state(_ ops: DaemonClient) async -> String? {
        try? await ops.ok("status", timeoutMs: 2_000)["state"]?.stringValue
    }

    /// Polls the state every 10 ms until `until` holds; the time it took, nil past `timeout`.
    static func measure(timeout: Duration, _ ops: DaemonClient, until: @Sendable (String?) -> Bool) async -> Duration? {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < timeout {
            if until(await state(ops)) { return ContinuousClock.now - start }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    @Test(arguments: Fault.allCases) func faultIsNoticedAndTheDaemonIsBackWithinASecond(_ fault: Fault) async throws {
        NetNamespaces.sweepStale()
        let ns = NetNamespaces()
        let setup = try DaemonSetup()
        var sim: SimProcess?
        do {
            try await ns.create()
            try await run(fault, ns, setup, &sim)
        } catch {
            Issue.record("\(fault): \(error)\ndaemon log:\n\(setup.log.suffix(4000))")
        }
        await setup.kill9()
        if let sim { _ = await sim.stop() }
        await ns.remove()
        setup.remove()
    }

    private func run(_ fault: Fault, _ ns: NetNamespaces, _ setup: DaemonSetup, _ simOut: inout SimProcess?) async throws {
        let sim = try await SimProcess.start(
            dir: setup.dir, extra: ["--host", NetNamespaces.simAddress], launcher: [NetNamespaces.ip, "netns", "exec", ns.simNS])
        simOut = sim
        let url = "ws://\(NetNamespaces.simAddress):\(sim.port)/websocket/services?master&domain=test.example&version=1.0.0"
        // A backoff that would wait up to 10 s and more: back within 1 s only through rtnetlink.
        try setup.writeConfig(url: url, session: [
            "keepalive_s": .number(Int64(Self.keepaliveS)), "dead_after_s": .number(Int64(Self.deadAfterS)),
            "reconnect": ["initial_ms": 10_000, "max_ms": 60_000, "multiplier": 2.0],
        ])
        let ops = try await setup.start(launcher: [NetNamespaces.ip, "netns", "exec", ns.daemonNS])
        defer { ops.close() }
        try #require(await Self.measure(timeout: .seconds(20), ops) { $0 == "ready" } != nil, "never ready; log:\n\(setup.log)")
        #expect(!setup.log.contains("cannot watch network changes"), "rtnetlink unavailable: \(setup.log)")

        let app = try await DaemonClient.connect(path: setup.socketPath)
        defer { app.close() }
        _ = try await app.ok("subscribe", ["durable": .string("nf-\(ns.id)")])
        var emitted: [Set<String>] = []
        for _ in 0..<2 { emitted.append(try await Self.emit(sim)) }

        // The fault: noticed within keepalive_s + dead_after_s.
        try await fault.apply(ns)
        let bound = Duration.seconds(Self.keepaliveS + Self.deadAfterS)
        let noticed = await Self.measure(timeout: bound + .seconds(2), ops) { $0 != "ready" }
        print("network fault \(fault): dead connection noticed after \(noticed.map { "\($0)" } ?? "never") (bound keepalive_s + dead_after_s = \(bound))")
        let noticedIn = try #require(noticed, "the dead connection was not noticed; log:\n\(setup.log)")
        #expect(noticedIn <= bound + .milliseconds(200))

        // While down: the app queues messages, the sim emits events.
        var markers: [String] = []
        for i in 0..<3 {
            let marker = "nf-\(ns.id)-\(fault.rawValue)-\(i)"
            markers.append(marker)
            let queued = try await ops.ok("event", ["event_type": "nf_test", "payload": ["marker": .string(marker)]])
            #expect(queued["uuid"] != nil)
        }
        for _ in 0..<2 { emitted.append(try await Self.emit(sim)) }
        try await Task.sleep(for: .milliseconds(300))
        #expect(await Self.state(ops) != "ready")

        // Back: ready within 1 s, through a network_changed reconnect.
        let sessionsBefore = await app.drainEvents(forMs: 0)
        try await fault.restore(ns)
        let back = await Self.measure(timeout: .seconds(10), ops) { $0 == "ready" }
        print("network fault \(fault): ready again \(back.map { "\($0)" } ?? "never") after the way to the server returned")
        let backIn = try #require(back, "not ready again; log:\n\(setup.log)")
        #expect(backIn < .seconds(1))
        #expect(setup.log.contains("reason=network_changed"), "no network_changed reconnect in the log")

        // After: more events; every one reaches the subscriber exactly once.
        for _ in 0..<2 { emitted.append(try await Self.emit(sim)) }
        try await Self.expectExactlyOnce(app: app, sim: sim, emitted: emitted, markers: markers, buffered: sessionsBefore)
    }

    /// Every emit reached the subscriber `app` exactly once (an emit counts as delivered when one of
    /// its uids arrived; nothing unknown, seqs increasing), and every queued message (a `marker` in
    /// its payload) is in the sim's `received` log exactly once. `buffered`: events already read.
    static func expectExactlyOnce(app: DaemonClient, sim: SimProcess, emitted: [Set<String>], markers: [String],
                                  buffered: [JSONObject]) async throws {
        var engagements = buffered.filter { $0["event"]?.stringValue == "engagement" }
        let deadline = ContinuousClock.now + .seconds(10)
        func uids() -> [String] { engagements.compactMap { $0["data"]?["message"]?["engagement_uid"]?.stringValue } }
        while !emitted.allSatisfy({ !$0.isDisjoint(with: uids()) }), ContinuousClock.now < deadline {
            engagements += await app.drainEvents(forMs: 100).filter { $0["event"]?.stringValue == "engagement" }
        }
        engagements += await app.drainEvents(forMs: 300).filter { $0["event"]?.stringValue == "engagement" }
        // Every emit reached the app, exactly once; nothing else arrived.
        for e in emitted { #expect(e.intersection(uids()).count == 1, "emit \(e): delivered \(uids())") }
        #expect(Set(uids()).count == uids().count, "duplicates: \(uids())")
        #expect(Set(uids()).isSubset(of: emitted.reduce(into: Set<String>()) { $0.formUnion($1) }), "unknown: \(uids())")
        let seqs = engagements.compactMap { $0["seq"]?.int64Value }
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "seqs \(seqs)")

        // The queued messages reached the sim exactly once each.
        var counts: [String: Int] = [:]
        let arrived = try await eventually(timeout: .seconds(10)) {
            let received = try await sim.received(cids: [9]).map(\.text)
            counts = Dictionary(uniqueKeysWithValues: markers.map { m in (m, received.filter { $0.contains("\"\(m)\"") }.count) })
            return counts.values.allSatisfy { $0 >= 1 }
        }
        #expect(arrived, "queued messages at the sim: \(counts)")
        try await Task.sleep(for: .milliseconds(300))
        let received = try await sim.received(cids: [9]).map(\.text)
        for m in markers { #expect(received.filter { $0.contains("\"\(m)\"") }.count == 1, "\(m) at the sim: \(received.filter { $0.contains(m) })") }
    }
}
