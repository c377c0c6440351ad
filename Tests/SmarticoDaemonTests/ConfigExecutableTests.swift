import Foundation
import Testing
import SmarticoTestSupport
@testable import SmarticoDaemon

/// `smarticod --check-config` run for real, as a subprocess.
@Suite("Config: smarticod executable")
struct ConfigExecutableTests {
    struct Run: Sendable {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// The `smarticod` binary built next to this test bundle (`swift build --build-tests`
    /// builds it), found from the test process's own location.
    static func binary() throws -> URL {
        var directories: [URL] = [Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()]
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.append(URL(fileURLWithPath: exe).deletingLastPathComponent())
        }
        directories.append(ConfigTestSupport.packageRoot.appendingPathComponent(".build/debug"))
        for dir in directories {
            let candidate = dir.appendingPathComponent("smarticod")
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory), !isDirectory.boolValue,
               FileManager.default.isExecutableFile(atPath: candidate.path) {
                return candidate
            }
        }
        throw CocoaError(.fileNoSuchFile, userInfo: [NSLocalizedDescriptionKey: "smarticod not found next to the tests in \(directories.map(\.path)); run `swift build --build-tests` first"])
    }

    /// Runs smarticod with `arguments` and a clean environment; killed after 30 s.
    /// The wait happens in Process's own monitoring thread, not on the cooperative pool.
    static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> Run {
        let process = Process()
        process.executableURL = try binary()
        process.arguments = arguments
        process.environment = SanitizerEnvironment.adding(to: environment)
        process.standardOutput = Pipe()
        process.standardError = Pipe()
        process.standardInput = FileHandle.nullDevice
        return try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { p in
                // Both outputs are a few hundred bytes: well within a pipe's buffer, so the
                // child never blocked on them and reading after exit is complete.
                let out = (p.standardOutput as? Pipe)?.fileHandleForReading.readDataToEndOfFile() ?? Data()
                let err = (p.standardError as? Pipe)?.fileHandleForReading.readDataToEndOfFile() ?? Data()
                continuation.resume(returning: Run(
                    status: p.terminationStatus,
                    stdout: String(decoding: out, as: UTF8.self),
                    stderr: String(decoding: err, as: UTF8.self)))
            }
            do {
                try process.runSerialized()
            } catch {
                continuation.resume(throwing: error)
                return
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + 30) {
                // Bounded: a hung child fails the test instead of hanging it.
                if process.isRunning { process.terminate() }
            }
        }
    }

    @Test func theExampleFailsCheckConfigOnlyForItsPlaceholderKey() async throws {
        let example = ConfigTestSupport.examplePath
        let placeholder = try await Self.run(["--config", example, "--check-config"])
        #expect(placeholder.status == 78)
        #expect(placeholder.stdout.isEmpty)
        #expect(placeholder.stderr == "\(example): server.label_key: is the all-zero placeholder of config.example.json; put the label's real key (from Smartico's back office)\n")
    }

    @Test func theExampleWithARealKeyPassesCheckConfig() async throws {
        let path = try ConfigTestSupport.exampleWithRealKey()
        let r = try await Self.run(["--config", path, "--check-config"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(r.stderr.isEmpty)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "configuration OK: \(path)")
        #expect(r.stdout.contains("server: wss://api.smartico.ai/websocket/services?master&domain=&version=\(SmarticoVersion.string) (derived from the label key)"))
        #expect(r.stdout.contains("label key: 6816…(masked) (environment 2)"))
        #expect(!r.stdout.contains("6816f0c2-1a2b"))
    }

    @Test func checkConfigNeedsNeitherStateDirNorSocketDir() async throws {
        // state_dir and the socket's directory do not exist: --check-config does not care.
        let dir = try ConfigTestSupport.temporaryDirectory()
        let path = try ConfigTestSupport.writeTemporary("""
            {"server": {"label_key": "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-7"},
             "state_dir": "\(dir.path)/missing/state", "socket": {"path": "\(dir.path)/missing/run/s.sock"}}
            """)
        let r = try await Self.run(["--config", path, "--check-config"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(r.stdout.contains("wss://api7.smartico.ai/"))
        #expect(!FileManager.default.fileExists(atPath: "\(dir.path)/missing"))
    }

    @Test func aBrokenConfigExits78WithEveryProblemAndNoSecret() async throws {
        let hash = "SECRETHASH0123456789abcdef:1700000000000"
        let token = "PUSHTOKEN-fcm-0123456789-secret"
        let password = "Pr0xyPa55word"
        let key = "cafebabe-1111-2222-3333-deadbeef0001-3x"
        let path = try ConfigTestSupport.writeTemporary("""
            {
              "server": {"label_key": "\(key)", "proxy": "https://bob:\(password)@proxy:3128", "tls": {"pin": []}},
              "user": {"hash": "\(hash)", "push": {"token": "\(token)", "status": 7}},
              "session": {"keepalive_s": "abc", "reconnect": {"initial_ms": 0}},
              "socket": {"mode": "rw-rw----"},
              "lg": {}
            }
            """)
        let r = try await Self.run(["--config", path, "--check-config"])
        #expect(r.status == 78)
        #expect(r.stdout.isEmpty)
        let lines = r.stderr.split(separator: "\n").map(String.init)
        let keys = lines.map { line -> String in
            #expect(line.hasPrefix(path + ": "), "line without the path: \(line)")
            return String(line.dropFirst(path.count + 2).prefix { $0 != ":" })
        }
        #expect(Set(keys) == [
            "lg", "server.tls.pin", "session.keepalive_s", "server.label_key", "server.proxy", "user.hash",
            "user.push.status", "session.reconnect.initial_ms", "socket.mode",
        ])
        #expect(lines.count == keys.count)
        #expect(r.stderr.contains("\(path): session.keepalive_s: must be an integer ≥ 1, got \"abc\""))
        #expect(r.stderr.contains("\(path): lg: unknown key (did you mean \"log\"?)"))
        for secret in [hash, token, password, key, String(key.prefix(36))] {
            #expect(!r.stderr.contains(secret), "stderr leaks \(secret)")
        }
        // Without --check-config the daemon refuses to start the same way.
        let run = try await Self.run(["--config", path])
        #expect(run.status == 78)
        #expect(run.stderr == r.stderr)
    }

    @Test func aMissingFileExits78NamingThePath() async throws {
        let path = try ConfigTestSupport.temporaryDirectory().appendingPathComponent("absent.json").path
        let r = try await Self.run(["--config", path, "--check-config"])
        #expect(r.status == 78)
        #expect(r.stderr == "\(path): cannot open the configuration file: No such file or directory (errno 2)\n")
    }

    @Test func aSyntaxErrorExits78WithLineAndColumn() async throws {
        let path = try ConfigTestSupport.writeTemporary("{\n  \"server\": {\"label_key\": \"x\"}\n  \"log\": {}\n}\n")
        let r = try await Self.run(["--config", path, "--check-config"])
        #expect(r.status == 78)
        #expect(r.stderr == "\(path): line 3, column 3: invalid JSON: expected ',' or '}' after an object member, found '\"'\n")
    }

    @Test func anInvalidProxyVariableExits78() async throws {
        let r = try await Self.run(["--config", ConfigTestSupport.examplePath, "--check-config"], environment: ["https_proxy": "socks5://u:pw-secret-1@p:1080"])
        #expect(r.status == 78)
        #expect(r.stderr.contains(": https_proxy: invalid proxy URL \"socks5://u:(masked)@p:1080\": the scheme \"socks5\""))
        #expect(!r.stderr.contains("pw-secret-1"))
    }

    /// A configuration with a real-looking key and the simulator's loopback URL (nothing listens
    /// on port 9: the daemon backs off, which is all these tests need).
    static func daemonConfig(socket: String, stateDir: String) throws -> String {
        try ConfigTestSupport.writeTemporary("""
            {"server": {"label_key": "\(ConfigTestSupport.validKey)", "url": "ws://127.0.0.1:9/websocket/services"},
             "socket": {"path": "\(socket)"}, "state_dir": "\(stateDir)"}
            """)
    }

    @Test func aSocketDirectoryThatCannotBeCreatedExits73NamingIt() async throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("a-file")
        try Data("x".utf8).write(to: file)
        let socket = file.appendingPathComponent("run/d.sock").path
        let path = try Self.daemonConfig(socket: socket, stateDir: dir.appendingPathComponent("state").path)
        let r = try await Self.run(["--config", path])
        #expect(r.status == 73, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("cannot create the socket's directory \(file.path)/run"), "stderr: \(r.stderr)")
        #expect(r.stderr.contains("Not a directory"), "stderr: \(r.stderr)")
        #expect(!r.stderr.contains("6816f0c2-1a2b"))
        // --check-config finds it too, as a configuration problem.
        let check = try await Self.run(["--config", path, "--check-config"])
        #expect(check.status == 78)
        #expect(check.stderr == "\(path): socket.path: the socket's directory \(file.path)/run cannot be created: \(file.path) is not a directory\n")
    }

    @Test func aSocketDirectoryTheUserCannotCreateFailsTheCheck() async throws {
        // Root may write anywhere: the check runs as nobody (setpriv), in a directory root owns.
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let parent = dir.appendingPathComponent("root-only")
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.path)
        let config = dir.appendingPathComponent("config.json")
        try Data("""
            {"server": {"label_key": "\(ConfigTestSupport.validKey)"}, "socket": {"path": "\(parent.path)/run/d.sock"}}
            """.utf8).write(to: config)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: config.path)
        let r = try await BuiltExecutable.run(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            ["--reuid", "65534", "--regid", "65534", "--clear-groups", try Self.binary().path, "--config", config.path, "--check-config"],
            environment: [:])
        #expect(r.status == 78, "\(r)")
        #expect(r.stderr == "\(config.path): socket.path: the socket's directory \(parent.path)/run cannot be created in \(parent.path): Permission denied; choose another socket.path or fix the permissions\n", "\(r)")
    }

    @Test func anExistingSocketDirectoryTheDaemonCannotWriteExits73() async throws {
        // The daemon runs as nobody (setpriv) with a state_dir it owns and a socket directory
        // root owns.
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.path)
        let runDir = dir.appendingPathComponent("root-only")
        try FileManager.default.createDirectory(at: runDir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        let state = dir.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        #expect(chown(state.path, 65534, 65534) == 0)
        let config = try Self.daemonConfig(socket: runDir.appendingPathComponent("d.sock").path, stateDir: state.path)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: URL(fileURLWithPath: config).deletingLastPathComponent().path)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: config)
        let r = try await BuiltExecutable.run(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            ["--reuid", "65534", "--regid", "65534", "--clear-groups", try Self.binary().path, "--config", config],
            environment: [:])
        #expect(r.status == 73, "\(r)")
        #expect(r.stderr.contains("cannot create the socket's directory \(runDir.path) for socket.path"), "\(r)")
        #expect(r.stderr.contains("\(runDir.path): Permission denied"), "\(r)")
    }

    @Test func aStateDirThatCannotBeCreatedExits73NamingIt() async throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("a-file")
        try Data("x".utf8).write(to: file)
        let state = file.appendingPathComponent("state").path
        let path = try Self.daemonConfig(socket: dir.appendingPathComponent("d.sock").path, stateDir: state)
        let r = try await Self.run(["--config", path])
        #expect(r.status == 73, "stderr: \(r.stderr)")
        #expect(r.stderr.contains(state), "stderr: \(r.stderr)")
    }

    @Test func theDaemonCreatesAMissingNestedSocketDirectory() async throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = dir.appendingPathComponent("run/nested/d.sock").path
        let path = try Self.daemonConfig(socket: socket, stateDir: dir.appendingPathComponent("state").path)
        let process = Process()
        process.executableURL = try Self.binary()
        process.arguments = ["--config", path]
        process.environment = SanitizerEnvironment.adding(to: [:])
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.runSerialized()
        defer { if process.isRunning { process.terminate() } }
        // Bounded wait for the socket file (a loaded 2-core machine: up to 30 s).
        let deadline = ContinuousClock.now + .seconds(30)
        while !FileManager.default.fileExists(atPath: socket) && process.isRunning && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(FileManager.default.fileExists(atPath: socket))
        let attributes = try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent("run/nested").path)
        #expect((attributes[.posixPermissions] as? Int).map { $0 & 0o777 } == 0o755)
        process.terminate()
        let stopDeadline = ContinuousClock.now + .seconds(30)
        while process.isRunning && ContinuousClock.now < stopDeadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!process.isRunning)
        #expect(process.terminationStatus == 0)
    }

    @Test func anUnreadableCAFileFailsTheCheckNamingPathAndReason() async throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let ca = dir.appendingPathComponent("absent-ca.pem").path
        let path = try ConfigTestSupport.writeTemporary("""
            {"server": {"label_key": "\(ConfigTestSupport.validKey)", "tls": {"ca_file": "\(ca)"}},
             "socket": {"path": "\(dir.path)/d.sock"}}
            """)
        let r = try await Self.run(["--config", path, "--check-config"])
        #expect(r.status == 78)
        #expect(r.stderr == "\(path): server.tls.ca_file: cannot read \(ca): No such file or directory; point it at a readable PEM bundle or set it to null for the system store\n")
        // The daemon refuses to start the same way instead of backing off forever.
        let run = try await Self.run(["--config", path])
        #expect(run.status == 78)
        #expect(run.stderr == r.stderr)
    }

    @Test func warningsArePrintedButPassTheCheck() async throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // ws:// to a remote host: a warning. The placeholder key against loopback: a warning.
        let remote = try ConfigTestSupport.writeTemporary("""
            {"server": {"label_key": "\(ConfigTestSupport.validKey)", "url": "ws://smartico.example/websocket/services"},
             "socket": {"path": "\(dir.path)/d.sock"}}
            """)
        let r = try await Self.run(["--config", remote, "--check-config"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(r.stdout.hasPrefix("configuration OK: \(remote)\n"))
        #expect(r.stderr.hasPrefix("\(remote): server.url: warning: uses ws:// to smartico.example, which is not a loopback host"), "stderr: \(r.stderr)")
        let sim = try ConfigTestSupport.writeTemporary("""
            {"server": {"label_key": "00000000-0000-0000-0000-000000000000-2", "url": "ws://127.0.0.1:8765/websocket/services"},
             "socket": {"path": "\(dir.path)/d.sock"}}
            """)
        let s = try await Self.run(["--config", sim, "--check-config"])
        #expect(s.status == 0, "stderr: \(s.stderr)")
        #expect(s.stderr.hasPrefix("\(sim): server.label_key: warning: is the all-zero placeholder"), "stderr: \(s.stderr)")
        #expect(s.stderr.split(separator: "\n").count == 1, "stderr: \(s.stderr)")
    }

    @Test func usageErrorsExit2AndVersionAndHelpExit0() async throws {
        let bad = try await Self.run(["--no-such-option"])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--no-such-option"))
        let version = try await Self.run(["--version"])
        #expect(version.status == 0)
        #expect(version.stdout == SmarticoVersion.string + "\n")
        let help = try await Self.run(["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("--check-config"))
        #expect(help.stdout.contains("smarticod --config ./config.example.json --check-config"))
    }
}
