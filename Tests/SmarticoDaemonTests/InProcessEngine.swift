import Foundation
import Logging
import SmarticoProtocol
import SmarticoSim
import SmarticoTestSupport
import Synchronization
import Transport

@testable import SmarticoDaemon

// The engine tests that need no process boundary (no signal, kill -9, exit code of a process,
// socket activation or permission between users) run the daemon and the simulator in the test
// process: the same `Daemon.run` and `SimRunning` the executables run, on loops of their own,
// reached through the same Unix sockets. `startAgainstSim(inProcess: true)` starts them.

/// smarticod's `Daemon.run` in the test process, from a ``DaemonSetup``'s configuration file, its
/// log lines appended to the set-up's log file (``DaemonSetup/log`` reads them as for a process).
final class InProcessDaemon: EmbeddedDaemon {
    private let control = DaemonControl()
    private let exit = ExitStatus()

    /// Loads `setup`'s configuration as smarticod does, starts the daemon and connects a client.
    static func start(_ setup: DaemonSetup) async throws -> DaemonClient {
        let environment = ["PATH": "/usr/bin:/bin"]
        let config = try ConfigLoader.loadResolved(path: setup.configPath, environment: environment)
        InProcessLog.route(to: setup.logPath)
        let daemon = InProcessDaemon()
        setup.attach(daemon)
        let (control, exit, path) = (daemon.control, daemon.exit, setup.configPath)
        Task { exit.set(await Daemon.run(config: config, configPath: path, environment: environment, control: control)) }
        return try await DaemonClient.connect(path: setup.socketPath)
    }

    func stop() async -> Int32 {
        control.stop()
        return await exit.wait()
    }

    /// A test that ends without stopping it (a failed expectation, a thrown error) leaves no daemon
    /// running behind it: its process would have been killed with its ``ChildProcess``.
    deinit { control.stop() }

    /// The status `Daemon.run` returned, once it has.
    private final class ExitStatus: Sendable {
        private let state = Mutex<(code: Int32?, waiters: [CheckedContinuation<Int32, Never>])>((nil, []))

        func set(_ code: Int32) {
            let waiters = state.withLock { s in
                s.code = code
                defer { s.waiters = [] }
                return s.waiters
            }
            for waiter in waiters { waiter.resume(returning: code) }
        }

        func wait() async -> Int32 {
            await withCheckedContinuation { continuation in
                let code = state.withLock { s -> Int32? in
                    if s.code == nil { s.waiters.append(continuation) }
                    return s.code
                }
                if let code { continuation.resume(returning: code) }
            }
        }
    }
}

/// The test process's logging: the daemon's own handler (``DaemonLogHandler``, one shared level as
/// smarticod bootstraps it), writing to the log file of the in-process daemon started last. The
/// engine suites run one test at a time (`--no-parallel`); run in parallel, lines of two daemons
/// could land in one file, which only the failure messages read.
enum InProcessLog {
    private static let path = Mutex<String?>(nil)
    private static let bootstrap: Void = {
        let level = DaemonLogLevel(.info)
        LoggingSystem.bootstrap { label in
            DaemonLogHandler(label: label, level: level) { line in InProcessLog.append(line) }
        }
    }()

    static func route(to logPath: String) {
        _ = bootstrap
        if !FileManager.default.fileExists(atPath: logPath) { _ = FileManager.default.createFile(atPath: logPath, contents: nil) }
        path.withLock { $0 = logPath }
    }

    private static func append(_ line: String) {
        path.withLock { path in
            guard let path, let handle = FileHandle(forWritingAtPath: path) else { return }
            defer { try? handle.close() }
            _ = try? handle.seekToEnd()
            try? handle.write(contentsOf: Data(line.utf8))
        }
    }
}

extension SimProcess {
    /// The simulator's runtime in the test process, as `smartico-sim --port 0 --control … <extra>`
    /// would start it, on a loop of its own.
    static func startInProcess(dir: String, extra: [String] = []) async throws -> SimProcess {
        let controlPath = newControlPath(in: dir)
        let command = try SimCommand.parse(["--port", "0", "--control", controlPath] + extra)
        let loop = try EventLoop(name: "sim-in-test")
        let running: SimRunning
        do {
            running = try await SimRunning.start(command, on: loop)
        } catch {
            await loop.shutdown()
            throw error
        }
        let port = running.listener.port
        let scheme = command.tlsCert == nil ? "ws" : "wss"
        let once = StopOnce()
        return .inProcess(port: port, wsURL: "\(scheme)://127.0.0.1:\(port)\(SimUpgrade.path)", controlPath: controlPath,
                          httpURL: running.services.httpBaseURL) {
            guard once.first() else { return }
            await running.stop()
            await loop.shutdown()
        }
    }
}

/// True the first time only.
private final class StopOnce: Sendable {
    private let done = Mutex(false)

    func first() -> Bool {
        done.withLock { done in
            defer { done = true }
            return !done
        }
    }
}
