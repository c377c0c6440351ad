import CBench
import Foundation
import SmarticoProtocol
import SmarticoSim
import Transport
#if canImport(Glibc)
import Glibc
#endif

// The pieces the rows share: the simulator in-process (so its send time and a subscriber's
// receive time come from one CLOCK_MONOTONIC), the release `smarticod` binary as a subprocess
// with its /proc figures, subscribers on its Unix socket, and latency statistics.

/// The engagement_id of the first 110 the simulator generates (SimPushGenerator counts from
/// 236,356,782 + 1); the k-th generated 110 (0-based) carries `firstEngagementID + k`.
let firstEngagementID: Int64 = 236_356_783
/// `template_html` size: a 110 of about 2 KB as a whole (issue 7's "2 KB message").
let templateBytes = 1_650

/// Where the main package's release build puts `smarticod`; `SMARTICOD_BIN` overrides.
func smarticodBinaryPath() -> String {
    if let p = ProcessInfo.processInfo.environment["SMARTICOD_BIN"], !p.isEmpty { return p }
    // Benchmarks/Sources/smartico-bench/Daemon.swift → repository root.
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    return root.appendingPathComponent(".build/release/smarticod").path
}

struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

// MARK: - The simulator, in-process

/// Emits generated 110s through the simulator's control API on its loop thread and keeps the
/// time each single one went to the socket.
final class SimEmitter:
    // `wireNs`, `unstamped` and `problems` are touched only on the simulator's loop thread (inside
    // `loop.execute`), and read by others only after `sent()` has run a barrier on it.
    @unchecked Sendable
{
    let loop: EventLoop
    let runtime: SimRuntime
    /// When each single 110 (`emit()` with a count of 1) went to the socket: the time of the
    /// simulator's first send(2) for it (`cbench_take_send_stamp`), where the C relay's sender
    /// starts its clock too. The request time when no send was seen (the frame was queued), or
    /// for the 110s of a multiple emit.
    private(set) var wireNs: [UInt64] = []
    /// Single 110s whose frame was not sent at once (no stamp; `wireNs` holds the request time).
    private(set) var unstampedCount = 0
    private(set) var problems: [String] = []
    private let lineOne = Array(#"{"op":"emit","kind":"engagement","bodies":false}"#.utf8)

    init(loop: EventLoop, runtime: SimRuntime) {
        self.loop = loop
        self.runtime = runtime
    }

    /// Emits `count` 110s to every identified client (one: the daemon), from any thread.
    func emit(count: Int = 1) {
        let line = count == 1 ? lineOne : Array(#"{"op":"emit","kind":"engagement","bodies":false,"count":\#(count)}"#.utf8)
        _ = loop.execute { [self] in
            _ = cbench_take_send_stamp()
            let t0 = cbench_now_ns()
            let response = runtime.assumeIsolated { $0.control(line: line) }
            let wire = cbench_take_send_stamp()
            let sent = Self.sentCount(response)
            if count == 1, sent == 1, wire < t0 { unstampedCount += 1 }
            for _ in 0..<sent { wireNs.append(count == 1 && wire >= t0 ? wire : t0) }
            if sent != count, problems.count < 10 {
                problems.append(String(decoding: response.prefix(300), as: UTF8.self))
            }
        }
    }

    /// The 110s sent so far, once every earlier `emit` has run on the loop. The k-th (0-based)
    /// carries the engagement_id `firstEngagementID + k`.
    func sent() async -> Int {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            if !loop.execute({ c.resume() }) { c.resume() }
        }
        return wireNs.count
    }

    static func sentCount(_ response: [UInt8]) -> Int {
        let key = Array(#""sent":"#.utf8)
        guard let r = response.firstRange(of: key) else { return 0 }
        var n = 0
        var i = r.upperBound
        while i < response.count, response[i] >= 0x30, response[i] <= 0x39 {
            n = n * 10 + Int(response[i] - 0x30)
            i += 1
        }
        return n
    }
}

// MARK: - The daemon, a subprocess

/// One load run of the daemon: events through it, wall time, the daemon's CPU.
struct LoadRun {
    var events: Int
    var wall: Double
    var daemonCPU: Double

    var perCPUSecond: Double { Double(events) / daemonCPU }

    /// The run with the median CPU per event.
    static func median(_ runs: [LoadRun]) -> LoadRun {
        runs.sorted { $0.perCPUSecond < $1.perCPUSecond }[runs.count / 2]
    }
}

/// What the bench writes into each daemon's configuration beyond the server, user, socket path and
/// state_dir. The subscriber-queue keys change with the journal-cursor subscribers
/// (`socket.max_queue_events` goes; `socket.max_queue_bytes`, `socket.max_total_queue_bytes` and
/// `journal.max_bytes` come): the bench writes none of them and relies on the daemon's defaults,
/// so the same bench runs against either daemon. To try other values, add them here (e.g.
/// `"socket": ["max_queue_bytes": "262144"]`), and check them with `smarticod --check-config`.
let daemonConfigExtras: [String: [String: String]] = [:]

final class DaemonProcess {
    let pid: Int32
    let directory: String
    let socketPath: String
    let logPath: String
    let spawnedNs: UInt64

    /// Writes a minimal configuration in `directory` and starts `binary` with it.
    init(binary: String, directory: String, serverURL: String, notifySocket: String? = nil) throws {
        self.directory = directory
        socketPath = directory + "/d.sock"
        logPath = directory + "/smarticod.log"
        let state = directory + "/state"
        mkdir(state, 0o700)
        var sections: [String: [String: String]] = [
            "server": ["url": "\"\(serverURL)\"", "label_key": "\"00000000-0000-0000-0000-000000000000-2\""],
            "user": ["ext_user_id": "\"bench-user\"", "hash": "\"bench-hash\""],
            "socket": ["path": "\"\(socketPath)\"", "mode": "\"0600\""],
            "log": ["level": "\"warning\""],
        ]
        for (section, values) in daemonConfigExtras { sections[section, default: [:]].merge(values) { $1 } }
        let body = sections.sorted { $0.key < $1.key }.map { section, values in
            "  \"\(section)\": {" + values.sorted { $0.key < $1.key }.map { "\"\($0.key)\": \($0.value)" }.joined(separator: ", ") + "}"
        }
        let config = "{\n" + body.joined(separator: ",\n") + ",\n  \"state_dir\": \"\(state)\"\n}\n"
        let configPath = directory + "/config.json"
        try Data(config.utf8).write(to: URL(fileURLWithPath: configPath))
        var spawned: UInt64 = 0
        let p = cbench_spawn_daemon(binary, configPath, notifySocket, logPath, &spawned)
        guard p > 0 else { throw BenchFailure("cannot spawn \(binary): \(String(cString: strerror(errno)))") }
        pid = p
        spawnedNs = spawned
    }

    /// utime + stime of the whole process (every thread, living or gone), in seconds.
    func cpuSeconds() -> Double? {
        guard let text = readProcFile("/proc/\(pid)/stat"),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After "(comm)": state is field 3, utime 14, stime 15 → indices 11 and 12 here.
        guard fields.count > 13, let u = Double(fields[11]), let s = Double(fields[12]) else { return nil }
        return (u + s) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Resident memory in kB: VmRSS, and its anonymous and file-backed parts (RssAnon, RssFile).
    func rssKB() -> (total: Int, anon: Int, file: Int)? {
        guard let text = readProcFile("/proc/\(pid)/status") else { return nil }
        var v: [String: Int] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") || line.hasPrefix("RssAnon:") || line.hasPrefix("RssFile:") {
            let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if parts.count >= 2 { v[String(parts[0])] = Int(parts[1]) }
        }
        guard let total = v["VmRSS:"] else { return nil }
        return (total, v["RssAnon:"] ?? 0, v["RssFile:"] ?? 0)
    }

    /// Page faults of the whole process so far (minflt, majflt of /proc/PID/stat). A major fault
    /// blocks the thread on the disk, so it counts as a voluntary context switch: the idle row
    /// prints them beside its wake-ups.
    func pageFaults() -> (minor: Int, major: Int)? {
        guard let text = readProcFile("/proc/\(pid)/stat"),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 9, let minor = Int(fields[7]), let major = Int(fields[9]) else { return nil }
        return (minor, major)
    }

    struct ThreadSwitches {
        var name: String
        var voluntary: Int
        var involuntary: Int
    }

    /// Context switches of each thread, by thread id.
    func threadSwitches() -> [Int: ThreadSwitches] {
        var out: [Int: ThreadSwitches] = [:]
        guard let tids = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return out }
        for tid in tids {
            guard let id = Int(tid), let text = readProcFile("/proc/\(pid)/task/\(tid)/status")
            else { continue }
            var t = ThreadSwitches(name: "?", voluntary: 0, involuntary: 0)
            for line in text.split(separator: "\n") {
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2 else { continue }
                let value = parts[1].trimmingCharacters(in: .whitespaces)
                switch parts[0] {
                case "Name": t.name = value
                case "voluntary_ctxt_switches": t.voluntary = Int(value) ?? 0
                case "nonvoluntary_ctxt_switches": t.involuntary = Int(value) ?? 0
                default: break
                }
            }
            out[id] = t
        }
        return out
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// nil while running; how it ended once it has (and reaps it).
    func exitDescription() -> String? {
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
        let low = status & 0x7f
        if low == 0 { return "exited with status \((status >> 8) & 0xff)" }
        return "killed by signal \(low)"
    }

    /// SIGTERM, then waits (≤ 5 s) for the exit; returns the wait status (-1: killed after the timeout).
    @discardableResult
    func stop() -> Int32 {
        kill(pid, SIGTERM)
        return cbench_wait_exit(pid, 5_000)
    }
}

/// The session's reconnects and connection time from the daemon's `status` (a reconnect during
/// the load rows starts the keepalive cadence over: the idle window then sees the first minute's
/// wake-ups), or what went wrong asking.
func statusSummary(_ path: String) -> String {
    let line = statusLine(path)
    func field(_ name: String) -> String {
        guard let r = line.range(of: "\"\(name)\":") else { return "?" }
        return String(line[r.upperBound...].prefix { $0 != "," && $0 != "}" })
    }
    return "reconnects \(field("reconnects")), connected_at_ms \(field("connected_at_ms"))"
}

/// The daemon's answer to `status` (one line), or what went wrong asking.
func statusLine(_ path: String) -> String {
    let fd = cbench_unix_connect(path)
    guard fd >= 0 else { return "cannot connect to \(path)" }
    defer { close(fd) }
    let request = Array(#"{"id":1,"op":"status"}"#.utf8) + [0x0A]
    guard cbench_write_all(fd, request, request.count) == 0 else { return "status: write failed" }
    var buf = [CChar](repeating: 0, count: 1 << 16)
    let n = cbench_read_line(fd, &buf, buf.count, 5_000)
    guard n > 0 else { return "status: no answer" }
    return lineText(buf, n)
}

/// A peer on the daemon's socket, subscribed to engagement events (`since`: replayed from the
/// journal after that seq first). Only the subscribe's response is read: the events after it are
/// left in the socket for whoever reads it next.
func subscribedPeer(_ path: String, since: Int? = nil) throws -> Int32 {
    var fd: Int32 = -1
    for _ in 0..<200 {  // the socket appears once the daemon listens (≤ 10 s)
        fd = cbench_unix_connect(path)
        if fd >= 0 { break }
        usleep(50_000)
    }
    guard fd >= 0 else { throw BenchFailure("cannot connect to the daemon's socket \(path): \(String(cString: strerror(errno)))") }
    let from = since.map { #","since":\#($0)"# } ?? ""
    let request = Array(#"{"id":1,"op":"subscribe","types":["engagement"]\#(from)}"#.utf8) + [0x0A]
    guard cbench_write_all(fd, request, request.count) == 0 else { close(fd); throw BenchFailure("subscribe: write failed") }
    var buf = [CChar](repeating: 0, count: 65_536)
    let n = cbench_read_line(fd, &buf, buf.count, 5_000)
    guard n > 0 else { close(fd); throw BenchFailure("subscribe: no answer from the daemon (\(n))") }
    let line = lineText(buf, n)
    guard line.contains(#""ok":true"#) else { close(fd); throw BenchFailure("subscribe refused: \(line)") }
    return fd
}

/// The first `n` bytes of a line `cbench_read_line` read into `buf`.
func lineText(_ buf: [CChar], _ n: Int) -> String {
    String(decoding: buf.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func makeTempDir() -> String {
    var template = Array("/tmp/sbench.XXXXXX".utf8CString)
    guard let p = mkdtemp(&template) else { return "/tmp" }
    return String(cString: p)
}

// MARK: - Statistics

struct LatencySummary {
    var p50: Double, p99: Double, p999: Double  // µs
    var samples: Int
    var missing: Int

    init(_ samplesNs: [UInt64], missing: Int) {
        let s = samplesNs.sorted()
        func q(_ p: Double) -> Double {
            guard !s.isEmpty else { return .nan }
            return Double(s[min(s.count - 1, Int(Double(s.count) * p))]) / 1000
        }
        p50 = q(0.5); p99 = q(0.99); p999 = q(0.999)
        samples = s.count
        self.missing = missing
    }

    var text: String { "p50 \(us(p50)) / p99 \(us(p99)) / p99.9 \(us(p999))" }
}

func us(_ v: Double) -> String {
    v >= 1000 ? fmt(v / 1000, 2) + " ms" : fmt(v, 0) + " µs"
}

/// Latencies from send times (by ordinal) and the receiver's matrix (peer × ordinal).
func latencies(send: ArraySlice<UInt64>, recv: [UInt64], peers: Int) -> ([UInt64], Int) {
    let perPeer = send.count
    var out: [UInt64] = []
    out.reserveCapacity(perPeer * peers)
    var missing = 0
    for p in 0..<peers {
        for j in 0..<perPeer {
            let r = recv[p * perPeer + j]
            if r == 0 { missing += 1; continue }
            let s = send[send.startIndex + j]
            out.append(r > s ? r - s : 0)
        }
    }
    return (out, missing)
}

func readProcFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 { if errno == EINTR { continue }; return nil }
        if n == 0 { break }
        bytes += chunk[0..<n]
    }
    return String(decoding: bytes, as: UTF8.self)
}

func sleepUntil(_ t: UInt64) {
    var ts = timespec(tv_sec: Int(t / 1_000_000_000), tv_nsec: Int(t % 1_000_000_000))
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
}
