import Foundation
import Testing
import SmarticoTestSupport
@testable import SmarticoSim

/// `smartico-sim` run for real, as a subprocess.
@Suite struct ExecutableTests {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static var packageRoot: URL { URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent() }

    /// The binary built next to this test bundle (`swift build --build-tests` builds it).
    static func binary() throws -> URL {
        var directories: [URL] = [Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()]
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.append(URL(fileURLWithPath: exe).deletingLastPathComponent())
        }
        directories.append(packageRoot.appendingPathComponent(".build/debug"))
        for dir in directories {
            let candidate = dir.appendingPathComponent("smartico-sim")
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory), !isDirectory.boolValue,
               FileManager.default.isExecutableFile(atPath: candidate.path) {
                return candidate
            }
        }
        throw CocoaError(.fileNoSuchFile, userInfo: [NSLocalizedDescriptionKey: "smartico-sim not found in \(directories.map(\.path)); run `swift build --build-tests`"])
    }

    /// Runs the binary; killed after 30 s (the wait is Process's own thread, not the cooperative pool).
    static func run(_ arguments: [String]) async throws -> Run {
        let process = Process()
        process.executableURL = try binary()
        process.arguments = arguments
        process.environment = SanitizerEnvironment.adding(to: [:])
        process.standardOutput = Pipe()
        process.standardError = Pipe()
        process.standardInput = FileHandle.nullDevice
        return try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { p in
                // Outputs are a few KB at most: they fit the pipe buffers, so reading after exit is complete.
                let out = (p.standardOutput as? Pipe)?.fileHandleForReading.readDataToEndOfFile() ?? Data()
                let err = (p.standardError as? Pipe)?.fileHandleForReading.readDataToEndOfFile() ?? Data()
                continuation.resume(returning: Run(status: p.terminationStatus, stdout: String(decoding: out, as: UTF8.self),
                                                   stderr: String(decoding: err, as: UTF8.self)))
            }
            do { try process.runSerialized() } catch {
                continuation.resume(throwing: error)
                return
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + 30) { if process.isRunning { process.terminate() } }
        }
    }

    @Test func helpDocumentsEveryOptionWithExamples() async throws {
        let r = try await Self.run(["--help"])
        #expect(r.status == 0)
        for option in ["--host", "--port", "--tls-cert", "--tls-key", "--label-key", "--brand-key", "--hash-salt", "--ping-interval",
                       "--pong-timeout", "--emit-every", "--emit-kinds", "--template-bytes", "--control", "--record", "--http-port",
                       "Examples:", "smartico-sim --port 0 --control"] {
            #expect(r.stdout.contains(option), "\(option)")
        }
    }

    @Test func badOptionsExitWithUsageErrors() async throws {
        let r = try await Self.run(["--emit-kinds", "nope"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("unknown kind \"nope\""))
        let t = try await Self.run(["--tls-cert", "/x.pem"])
        #expect(t.status == 64 && t.stderr.contains("--tls-cert and --tls-key go together"))
    }

    /// End to end with the independent Python client (Tests/SmarticoSimTests/peers/sim_client.py):
    /// the simulator as a subprocess, its port read from stdout line 1, each scenario a subprocess.
    @Test func pythonClientScenarios() async throws {
        let python = try #require(ProcessInfo.processInfo.environment["SMARTICO_TEST_PYTHON"],
            "SMARTICO_TEST_PYTHON is not set: the Python websockets client needs its venv; run scripts/test.sh, or `source scripts/deps.sh; setup_python_venv` then swift test")
        try #require(FileManager.default.isExecutableFile(atPath: python), "SMARTICO_TEST_PYTHON=\(python) is not an executable")
        let dir = try TempDir()
        defer { dir.remove() }
        let control = dir.path + "/sim.sock"
        let sim = Process()
        sim.executableURL = try Self.binary()
        sim.arguments = ["--port", "0", "--control", control, "--hash-salt", "s3cret", "--ping-interval", "1s", "--pong-timeout", "2s",
                         "--record", dir.path + "/record.ndjson"]
        let out = Pipe()
        sim.standardOutput = out
        sim.standardError = FileHandle.nullDevice
        try sim.runSerialized()
        defer { if sim.isRunning { sim.terminate() }; sim.waitForExit(timeout: .seconds(20)) }
        // Line 1 is the port; read it on a plain thread (a blocking read), bounded by the kill below.
        let killer = DispatchWorkItem { if sim.isRunning { sim.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: killer)
        defer { killer.cancel() }
        let firstLine: String = await withCheckedContinuation { cont in
            Thread.detachNewThread {
                var line: [UInt8] = []
                while true {
                    let chunk = out.fileHandleForReading.readData(ofLength: 1)
                    if chunk.isEmpty || chunk.first == 0x0A { break }
                    line += chunk
                }
                cont.resume(returning: String(decoding: line, as: UTF8.self))
            }
        }
        let port = try #require(Int(firstLine), "first stdout line \(firstLine.debugDescription) is not a port")
        let url = "ws://127.0.0.1:\(port)/websocket/services?master&domain=sim.test&version=1.0.0"
        let script = Self.packageRoot.appendingPathComponent("Tests/SmarticoSimTests/peers/sim_client.py").path
        for scenario in ["lifecycle", "hash", "pending", "keepalive", "badinput", "pushes", "faults"] {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: python)
            p.arguments = [script, "--url", url, "--control", control, "--salt", "s3cret", scenario]
            let pout = Pipe()
            p.standardOutput = pout
            p.standardError = pout
            try p.runSerialized()
            let guardKill = DispatchWorkItem { if p.isRunning { p.terminate() } }
            DispatchQueue.global().asyncAfter(deadline: .now() + 90, execute: guardKill)
            let text: String = await withCheckedContinuation { cont in
                Thread.detachNewThread {
                    let data = pout.fileHandleForReading.readDataToEndOfFile()
                    p.waitForExit(timeout: .seconds(100))
                    cont.resume(returning: String(decoding: data, as: UTF8.self))
                }
            }
            guardKill.cancel()
            #expect(p.terminationStatus == 0, "\(scenario):\n\(text)")
        }
    }
}

@Suite struct UpgradePathTests {
    @Test func onlySmarticosPathIsAccepted() {
        #expect(SimUpgrade.refusal(target: "/websocket/services?master&domain=app&version=1.0.0") == nil)
        #expect(SimUpgrade.refusal(target: "/websocket/services") == nil)
        #expect(SimUpgrade.refusal(target: "/websocket/services/") == nil)
        #expect(SimUpgrade.refusal(target: "/") != nil)
        #expect(SimUpgrade.refusal(target: "/websocket/servicesX?master")?.contains("/websocket/servicesX") == true)
    }
}
