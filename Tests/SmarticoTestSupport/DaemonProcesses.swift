// The real `smarticod` and `smartico-sim` executables as subprocesses, the daemon's Unix socket
// and the simulator's control socket spoken as NDJSON: for every test target that runs them
// (SmarticoDaemonTests' Engine* and Ctl* tests, SmarticoClientTests). Every blocking call runs on
// a thread of its own (TestExecutables.onThread), every wait is bounded.
import Foundation
import SmarticoProtocol
#if canImport(Glibc)
import Glibc
#endif

public struct EngineTestError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A blocking Unix stream socket read and written in lines, with timeouts.
public final class LineSocket: @unchecked Sendable {  // every use holds `lock`; calls come from one test task at a time
    private let fd: Int32
    private var buffer: [UInt8] = []
    private let lock = NSLock()
    private var closed = false

    private init(fd: Int32) { self.fd = fd }

    /// Connects (blocking, local: immediate); nil when nothing listens at `path`.
    public static func connect(path: String) -> LineSocket? {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            Glibc.close(fd)
            return nil
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0 else {
            Glibc.close(fd)
            return nil
        }
        return LineSocket(fd: fd)
    }

    deinit { if !closed { Glibc.close(fd) } }

    public func close() {
        lock.lock()
        defer { lock.unlock() }
        if !closed {
            closed = true
            Glibc.close(fd)
        }
    }

    /// Writes `line` plus a newline; false when the peer is gone.
    public func writeLine(_ line: String) -> Bool {
        write(line + "\n")
    }

    /// Writes `text` as it is (no newline added); false when the peer is gone.
    public func write(_ text: String) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }

    /// The next line (without its newline), or nil after `timeoutMs` or at EOF.
    public func readLine(timeoutMs: Int) -> String? {
        lock.lock()
        defer { lock.unlock() }
        let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000)
        var chunk = [UInt8](repeating: 0, count: 65_536)
        // Bytes already known to hold no newline: a long line is scanned once, not once per chunk.
        var scanned = 0
        while true {
            if let newline = buffer[scanned...].firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            scanned = buffer.count
            let remaining = Int(deadline.timeIntervalSinceNow * 1000)
            guard remaining > 0 else { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, Int32(min(remaining, 1000)))
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            buffer.append(contentsOf: chunk[..<n])
        }
    }
}

/// A connection to the daemon's socket: requests answered by id, events kept in arrival order.
public final class DaemonClient: @unchecked Sendable {  // `events`/`nextID` only touched inside `lock`
    public let socket: LineSocket
    private var nextID = 1
    private var events: [JSONObject] = []
    private let lock = NSLock()

    private init(socket: LineSocket) { self.socket = socket }

    /// Connects to `path`, retrying until `timeout` (the daemon may still be starting).
    public static func connect(path: String, timeout: Duration = .seconds(15)) async throws -> DaemonClient {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let socket = await TestExecutables.onThread({ LineSocket.connect(path: path) }) {
                return DaemonClient(socket: socket)
            }
            try await Task.sleep(for: .milliseconds(30))
        }
        throw EngineTestError("nothing listens on \(path) after \(timeout)")
    }

    public func close() { socket.close() }

    /// Sends `{"id", "op", …args}` and returns the response object (`ok`, `result`/`error`).
    public func request(_ op: String, _ args: JSONObject = [:], timeoutMs: Int = 20_000) async throws -> JSONObject {
        let result: Result<JSONObject, EngineTestError> = await TestExecutables.onThread { [self] in
            lock.lock()
            defer { lock.unlock() }
            let id = nextID
            nextID += 1
            var o: JSONObject = ["id": .number(id), "op": .string(op)]
            for (k, v) in args { o[k] = v }
            guard socket.writeLine(String(decoding: o.serialized(), as: UTF8.self)) else {
                return .failure(EngineTestError("the daemon closed the socket before \(op)"))
            }
            let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000)
            while Date() < deadline {
                guard let line = socket.readLine(timeoutMs: max(1, Int(deadline.timeIntervalSinceNow * 1000))) else { break }
                guard let object = (try? JSONValue(parsing: line))?.objectValue else {
                    return .failure(EngineTestError("not a JSON object from the daemon: \(line.prefix(200))"))
                }
                if object["event"] != nil {
                    events.append(object)
                } else if object["id"]?.int64Value == Int64(id) {
                    return .success(object)
                }
            }
            return .failure(EngineTestError("no answer to \(op) within \(timeoutMs) ms"))
        }
        return try result.get()
    }

    /// `request` expecting `ok: true`; returns `result`.
    public func ok(_ op: String, _ args: JSONObject = [:], timeoutMs: Int = 20_000) async throws -> JSONValue {
        let response = try await request(op, args, timeoutMs: timeoutMs)
        guard response["ok"]?.boolValue == true, let result = response["result"] else {
            throw EngineTestError("\(op) failed: \(String(decoding: response.serialized(), as: UTF8.self))")
        }
        return result
    }

    /// The first event (buffered or arriving within `timeoutMs`) for which `match` is true; events
    /// before it are consumed.
    public func nextEvent(timeoutMs: Int = 15_000, where match: @escaping @Sendable (JSONObject) -> Bool = { _ in true }) async -> JSONObject? {
        await TestExecutables.onThread { [self] in
            lock.lock()
            defer { lock.unlock() }
            while !events.isEmpty {
                let e = events.removeFirst()
                if match(e) { return e }
            }
            let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000)
            while Date() < deadline {
                guard let line = socket.readLine(timeoutMs: max(1, Int(deadline.timeIntervalSinceNow * 1000))) else { return nil }
                guard let object = (try? JSONValue(parsing: line))?.objectValue, object["event"] != nil else { continue }
                if match(object) { return object }
            }
            return nil
        }
    }

    /// Every event that arrives within `ms` (plus those buffered).
    public func drainEvents(forMs ms: Int) async -> [JSONObject] {
        await TestExecutables.onThread { [self] in
            lock.lock()
            defer { lock.unlock() }
            var out = events
            events = []
            let deadline = Date().addingTimeInterval(Double(ms) / 1000)
            while Date() < deadline {
                guard let line = socket.readLine(timeoutMs: max(1, Int(deadline.timeIntervalSinceNow * 1000))) else { break }
                if let object = (try? JSONValue(parsing: line))?.objectValue, object["event"] != nil { out.append(object) }
            }
            return out
        }
    }
}

/// A subprocess whose stderr goes to a file (shown when a test fails).
public final class ChildProcess: @unchecked Sendable {  // Process is used from the test task and its own threads, as Foundation allows
    public let process: Process
    public let logPath: String

    public init(process: Process, logPath: String) {
        self.process = process
        self.logPath = logPath
    }

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    public func signal(_ sig: Int32) { if process.isRunning { kill(process.processIdentifier, sig) } }

    /// Waits for the exit (SIGKILL after `timeout`); the exit status, or −signal.
    public func waitForExit(timeout: Duration = .seconds(20)) async -> Int32 {
        let p = process
        return await TestExecutables.onThread {
            p.waitForExit(timeout: timeout)  // SIGKILL past the timeout; never waitUntilExit (it spins)
            return p.terminationReason == .exit ? p.terminationStatus : -p.terminationStatus
        }
    }

    /// SIGKILL and wait.
    public func kill9() async {
        signal(SIGKILL)
        _ = await waitForExit()
    }
}

/// `smartico-sim` with a control socket: a process, or (SmarticoDaemonTests' InProcessEngine.swift)
/// its runtime in the test process, driven the same way through the control socket.
public final class SimProcess: @unchecked Sendable {  // immutable after start; `child` as above
    private enum Running: Sendable {
        case process(ChildProcess)
        case inProcess(stop: @Sendable () async -> Void)
    }

    private let running: Running
    public let port: Int
    public let wsURL: String
    public let controlPath: String
    /// The HTTP port's base URL (`http://127.0.0.1:PORT`, `https://` with `--http-tls`).
    public let httpURL: String

    /// The simulator's process; a test that signals or kills it needs one (``start(dir:port:extra:launcher:)``).
    public var child: ChildProcess {
        guard case .process(let child) = running else {
            preconditionFailure("this simulator runs in the test process: a test that signals it must start smartico-sim")
        }
        return child
    }

    private init(running: Running, port: Int, wsURL: String, controlPath: String, httpURL: String) {
        self.running = running
        self.port = port
        self.wsURL = wsURL
        self.controlPath = controlPath
        self.httpURL = httpURL
    }

    /// An in-process simulator a test did not stop ends with its last reference, as a process is killed.
    deinit {
        if case .inProcess(let stop) = running { Task { await stop() } }
    }

    /// A simulator already running in this process, listening on `port`, `stop` ending it (once,
    /// however often it is called).
    public static func inProcess(port: Int, wsURL: String, controlPath: String, httpURL: String,
                                 stop: @escaping @Sendable () async -> Void) -> SimProcess {
        SimProcess(running: .inProcess(stop: stop), port: port, wsURL: wsURL, controlPath: controlPath, httpURL: httpURL)
    }

    /// A fresh control socket path in `dir`.
    public static func newControlPath(in dir: String) -> String { dir + "/sim-\(UUID().uuidString.prefix(6)).sock" }

    /// The URL the daemon uses (Smartico's query).
    public var serverURL: String { wsURL + "?master&domain=test.example&version=1.0.0" }

    /// Starts the simulator on `port` (0: any) with its control socket in `dir`. `launcher`: a
    /// program (and its arguments) that runs it, e.g. `ip netns exec NS`.
    public static func start(dir: String, port: Int = 0, extra: [String] = [], launcher: [String] = []) async throws -> SimProcess {
        let controlPath = newControlPath(in: dir)
        let logPath = dir + "/sim-\(UUID().uuidString.prefix(6)).log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let p = Process()
        let command = launcher + [try TestExecutables.url("smartico-sim").path, "--port", String(port), "--control", controlPath] + extra
        p.executableURL = URL(fileURLWithPath: command[0])
        p.arguments = Array(command.dropFirst())
        p.environment = SanitizerEnvironment.adding(to: [:])
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle(forWritingAtPath: logPath)
        p.standardInput = FileHandle.nullDevice
        try p.runSerialized()
        let child = ChildProcess(process: p, logPath: logPath)
        let reader = out.fileHandleForReading
        let lines: [String] = await TestExecutables.onThread {
            var lines: [String] = []
            var line: [UInt8] = []
            var pfd = pollfd(fd: reader.fileDescriptor, events: Int16(POLLIN), revents: 0)
            let deadline = Date().addingTimeInterval(20)
            while lines.count < 3, Date() < deadline {
                guard poll(&pfd, 1, 200) > 0 else { continue }
                var byte: UInt8 = 0
                guard read(reader.fileDescriptor, &byte, 1) == 1 else { break }
                if byte == 0x0A { lines.append(String(decoding: line, as: UTF8.self)); line = [] } else { line.append(byte) }
            }
            return lines
        }
        guard lines.count == 3, let port = Int(lines[0]) else {
            await child.kill9()
            throw EngineTestError("smartico-sim did not print its three lines: \(lines); log: \(child.log)")
        }
        return SimProcess(running: .process(child), port: port, wsURL: lines[1], controlPath: controlPath, httpURL: lines[2])
    }

    /// One control request (its own connection); the answer object.
    public func control(_ request: JSONObject) async throws -> JSONObject {
        let path = controlPath
        let line = String(decoding: request.serialized(), as: UTF8.self)
        // An emit of hundreds of engagements is throughput: under ThreadSanitizer the simulator
        // took longer than 15 s to answer one of 500 (the first TSan run, docs/reliability.md).
        let timeoutMs = Int(15_000 * SanitizerEnvironment.timeScale)
        let answer: String? = await TestExecutables.onThread {
            guard let s = LineSocket.connect(path: path) else { return nil }
            defer { s.close() }
            guard s.writeLine(line) else { return nil }
            return s.readLine(timeoutMs: timeoutMs)
        }
        guard let answer, let object = (try? JSONValue(parsing: answer))?.objectValue else {
            throw EngineTestError("no control answer to \(line)")
        }
        guard object["ok"]?.boolValue == true else { throw EngineTestError("control \(line) failed: \(answer)") }
        return object
    }

    /// The messages the simulator received (`message` objects), oldest first; only `cids` when given.
    public func received(cids: [Int64]? = nil) async throws -> [JSONObject] {
        try await receivedEntries(cids: cids).compactMap { $0["message"]?.objectValue }
    }

    /// The received-log entries (`seq`, `client`, `message`, …), oldest first, every page.
    public func receivedEntries(cids: [Int64]? = nil) async throws -> [JSONObject] {
        var entries: [JSONObject] = []
        var since: Int64 = 0
        while true {
            var request: JSONObject = ["op": "received", "since": .number(since)]
            if let cids { request["cid"] = .array(cids.map { .number($0) }) }
            let page = try await control(request)["messages"]?.arrayValue?.compactMap(\.objectValue) ?? []
            entries += page
            guard page.count >= 10_000, let last = page.last?["seq"]?.int64Value else { return entries }
            since = last
        }
    }

    /// Emits a generated engagement to `user`; returns its `engagement_uid` (delivered or queued pending).
    public func emitEngagement(to user: String) async throws -> String {
        let answer = try await control(["op": "emit", "kind": "engagement", "user": .string(user)])
        if let uid = answer["deliveries"]?[0]?["message"]?["engagement_uid"]?.stringValue { return uid }
        if let uid = answer["queued_pending"]?[0]?["engagement_uid"]?.stringValue { return uid }
        throw EngineTestError("emit answered without an engagement: \(String(decoding: answer.serialized(), as: UTF8.self))")
    }

    /// SIGTERM and the exit status (an in-process one: stopped, and 0).
    public func stop() async -> Int32 {
        switch running {
        case .process(let child):
            child.signal(SIGTERM)
            return await child.waitForExit()
        case .inProcess(let stop):
            await stop()
            return 0
        }
    }
}

/// A temp directory with a daemon configuration in it, and the daemon started from it.
public final class DaemonSetup: @unchecked Sendable {  // `daemon` is only replaced by the test task
    public let dir: String
    public var socketPath: String { dir + "/d.sock" }
    public var stateDir: String { dir + "/state" }
    public var configPath: String { dir + "/config.json" }
    public var logPath: String { dir + "/smarticod.log" }
    public private(set) var daemon: ChildProcess?
    /// The daemon when it runs in the test process instead (``attach(_:)``).
    public private(set) var embedded: (any EmbeddedDaemon)?

    public init() throws {
        // Short: a Unix socket path must fit in 108 bytes.
        dir = "/tmp/smd-\(UUID().uuidString.prefix(8).lowercased())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    public func remove() { try? FileManager.default.removeItem(atPath: dir) }

    /// Writes the configuration. `session`: extra keys of `session` (e.g. keepalive).
    public func writeConfig(url: String, user: String? = "alice", hash: String? = "h", hashCommand: [String]? = nil,
                     session: JSONObject = [:], client: JSONObject = [:], socket: JSONObject = [:],
                     journal: JSONObject = [:], metrics: JSONObject = [:], logLevel: String = "debug",
                     server: JSONObject = [:], http: JSONObject = [:], push: JSONObject = [:]) throws {
        var userObject: JSONObject = [:]
        if let user { userObject["ext_user_id"] = .string(user) }
        if let hash { userObject["hash"] = .string(hash) }
        if let hashCommand { userObject["hash_command"] = .array(hashCommand.map { .string($0) }) }
        if !push.isEmpty { userObject["push"] = .object(push) }
        var serverObject: JSONObject = ["url": .string(url), "label_key": "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2"]
        for (k, v) in server { serverObject[k] = v }
        var sessionObject: JSONObject = [
            "connect_timeout_s": 5, "response_timeout_s": 5,
            "reconnect": ["initial_ms": 50, "max_ms": 300, "multiplier": 2.0],
        ]
        for (k, v) in session { sessionObject[k] = v }
        var socketObject: JSONObject = ["path": .string(socketPath)]
        for (k, v) in socket { socketObject[k] = v }
        var config: JSONObject = [
            "server": .object(serverObject),
            "client": .object(client),
            "user": .object(userObject),
            "session": .object(sessionObject),
            "socket": .object(socketObject),
            "state_dir": .string(stateDir),
            "log": ["level": .string(logLevel)],
        ]
        if !journal.isEmpty { config["journal"] = .object(journal) }
        if !metrics.isEmpty { config["metrics"] = .object(metrics) }
        if !http.isEmpty { config["http"] = .object(http) }
        try Data(config.serialized()).write(to: URL(fileURLWithPath: configPath))
    }

    /// Starts `smarticod --config …` (stderr appended to the log file) and connects a client.
    /// `launcher`: a program (and its arguments) that runs smarticod, e.g. systemd-socket-activate;
    /// `socketPath`: where to connect when that is not `socket.path`.
    @discardableResult
    public func start(environment: [String: String] = [:], launcher: [String] = [], socketPath: String? = nil) async throws -> DaemonClient {
        if !FileManager.default.fileExists(atPath: logPath) { _ = FileManager.default.createFile(atPath: logPath, contents: nil) }
        let p = Process()
        let daemonArguments = [try TestExecutables.url("smarticod").path, "--config", configPath]
        let command = launcher.isEmpty ? daemonArguments : launcher + daemonArguments
        p.executableURL = URL(fileURLWithPath: command[0])
        p.arguments = Array(command.dropFirst())
        p.environment = SanitizerEnvironment.adding(to: ["PATH": "/usr/bin:/bin"].merging(environment) { $1 })
        let log = FileHandle(forWritingAtPath: logPath)
        log?.seekToEndOfFile()
        p.standardOutput = FileHandle.nullDevice
        p.standardError = log
        p.standardInput = FileHandle.nullDevice
        try p.runSerialized()
        daemon = ChildProcess(process: p, logPath: logPath)
        return try await DaemonClient.connect(path: socketPath ?? self.socketPath)
    }

    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// A daemon started in the test process from this set-up's configuration: ``stop()`` stops it.
    public func attach(_ daemon: any EmbeddedDaemon) { embedded = daemon }

    /// SIGTERM (or, in the test process, what SIGTERM does) and the exit status.
    public func stop() async -> Int32? {
        if let embedded {
            self.embedded = nil
            return await embedded.stop()
        }
        guard let daemon else { return nil }
        daemon.signal(SIGTERM)
        let status = await daemon.waitForExit()
        self.daemon = nil
        return status
    }

    public func kill9() async {
        precondition(embedded == nil, "kill -9 needs a process: start the daemon with start(), not in the test process")
        await daemon?.kill9()
        daemon = nil
    }
}

/// smarticod running inside the test process (SmarticoDaemonTests' InProcessEngine.swift).
public protocol EmbeddedDaemon: Sendable {
    /// Stops it as SIGTERM does; its exit status.
    func stop() async -> Int32
}

/// Polls `condition` every 50 ms until it holds or `timeout` passes.
public func eventually(timeout: Duration = .seconds(15), _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(50))
    }
}
