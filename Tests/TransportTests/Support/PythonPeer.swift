import Foundation
import Synchronization
import SmarticoTestSupport

/// A Python program from `Tests/TransportTests/peers/` run as a subprocess (an independent peer: the
/// `websockets` package, a CONNECT proxy, an HTTP server). It prints its port on the first line; later
/// lines are collected in ``lines``. Its stdout is read by a dedicated thread (never the cooperative pool).
final class PythonPeer: Sendable {
    struct Missing: Error, CustomStringConvertible {
        let detail: String
        var description: String {
            "the Python test peers need the websockets package in a venv: \(detail). "
                + "Run `source scripts/deps.sh; setup_python_venv` (scripts/test.sh does it) and set SMARTICO_TEST_PYTHON."
        }
    }

    let port: Int
    let lines: Shared<[String]>
    private let process: Process

    /// The interpreter: `SMARTICO_TEST_PYTHON`, else `.venv-test/bin/python` of this checkout. Throws (never
    /// skips) when there is none.
    static func interpreter() throws -> String {
        if let p = ProcessInfo.processInfo.environment["SMARTICO_TEST_PYTHON"], !p.isEmpty {
            guard FileManager.default.isExecutableFile(atPath: p) else { throw Missing(detail: "SMARTICO_TEST_PYTHON=\(p) is not executable") }
            return p
        }
        let local = repositoryRoot + "/.venv-test/bin/python"
        if FileManager.default.isExecutableFile(atPath: local) { return local }
        throw Missing(detail: "SMARTICO_TEST_PYTHON is not set and \(local) does not exist")
    }

    static var repositoryRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
    }

    static var peersDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().path + "/peers"
    }

    /// Starts `peers/<script>` with `arguments` and waits (bounded) for its port.
    static func start(_ script: String, _ arguments: [String] = [], timeout: Duration = .seconds(20)) async throws -> PythonPeer {
        let python = try interpreter()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [peersDirectory + "/" + script] + arguments
        let output = Pipe()
        let input = Pipe()
        process.standardOutput = output
        // Not the test process's own stderr (a peer left behind must not hold `swift test`'s pipe), and
        // not a FileHandle of our own either (Foundation would close its descriptor behind the handle's
        // back, and the handle would close the number again later: someone else's socket by then).
        process.standardError = output
        // The peers exit when their stdin reaches EOF: when this process dies, they die too.
        process.standardInput = input
        try process.runSerialized()
        let lines = Shared<[String]>([])
        let ended = Shared(false)
        let fd = output.fileHandleForReading.fileDescriptor
        let reader = Thread {
            // Keep the pipe (and so `fd`) open until EOF: were it released first, the number could be
            // reused by another test's socket and this thread would steal that socket's bytes.
            withExtendedLifetime(output) {
                readLines(fd: fd, into: lines)
            }
            ended.update { $0 = true }
        }
        reader.start()
        do {
            try await waitUntil("\(script) to print its port", timeout: timeout) { !lines.value.isEmpty || ended.value }
        } catch {
            process.terminate()
            throw error
        }
        guard let first = lines.value.first, let port = Int(first) else {
            process.terminate()
            let text = lines.value.joined(separator: "\n")
            throw Missing(detail: "\(script) exited without printing a port; its output: \(text.suffix(2000))")
        }
        return PythonPeer(port: port, lines: lines, process: process, input: input)
    }

    private let input: Pipe

    private init(port: Int, lines: Shared<[String]>, process: Process, input: Pipe) {
        self.port = port
        self.lines = lines
        self.process = process
        self.input = input
    }

    /// Kills the peer (SIGTERM) without waiting for it on the caller's thread.
    func stop() {
        try? input.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        let process = self.process
        Thread { process.waitForExit(timeout: .seconds(10)) }.start()
    }
}


/// Reads `fd` to EOF, appending each line to `lines`.
private func readLines(fd: Int32, into lines: Shared<[String]>) {
    var pending: [UInt8] = []
    while true {
        let chunk = readSome(fd: fd)
        if chunk.isEmpty { break }
        pending += chunk
        while let nl = pending.firstIndex(of: 10) {
            let line = String(decoding: pending[..<nl], as: UTF8.self)
            pending.removeSubrange(...nl)
            lines.update { $0.append(line) }
        }
    }
}
