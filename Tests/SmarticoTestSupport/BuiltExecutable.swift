import Foundation

/// The package's executables (`smarticod`, `smarticoctl`, …) as built next to the test bundle, run
/// as real subprocesses.
public enum BuiltExecutable {
    /// What a finished run left.
    public struct Run: Sendable, CustomStringConvertible {
        /// The exit status, or the signal number when `signaled`.
        public var status: Int32
        public var signaled: Bool
        public var stdout: String
        public var stderr: String

        public var description: String {
            "\(signaled ? "signal" : "exit") \(status)\nstdout:\n\(stdout)\nstderr:\n\(stderr)"
        }
    }

    public struct NotFound: Error, CustomStringConvertible {
        public let name: String
        public let searched: [String]
        public var description: String {
            "\(name) not found next to the tests in \(searched); run `swift build --build-tests` first"
        }
    }

    /// The executable `name` built with the tests (`swift build --build-tests` builds every product):
    /// looked for beside the test bundle, beside the test process, then in `<package>/.build/debug`.
    public static func find(_ name: String, filePath: String = #filePath) throws -> URL {
        var directories: [URL] = [Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()]
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.append(URL(fileURLWithPath: exe).deletingLastPathComponent())
        }
        // <package>/Tests/SmarticoTestSupport/BuiltExecutable.swift → <package>/.build/debug
        let root = URL(fileURLWithPath: filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        directories.append(root.appendingPathComponent(".build/debug"))
        for dir in directories {
            let candidate = dir.appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory), !isDirectory.boolValue,
               FileManager.default.isExecutableFile(atPath: candidate.path) {
                return candidate
            }
        }
        throw NotFound(name: name, searched: directories.map(\.path))
    }

    /// Runs `executable` with `arguments`, exactly `environment` (nothing inherited), `stdin` as its
    /// standard input (empty when nil). Output goes to files in a fresh temporary directory, so a
    /// chatty child never blocks on a full pipe. Killed (SIGKILL) after `timeout`; launched with
    /// ``Process/runSerialized()``; the wait happens in Process's monitoring thread, not on the
    /// cooperative pool.
    public static func run(
        _ executable: URL, _ arguments: [String], environment: [String: String] = [:],
        stdin: [UInt8]? = nil, timeout: Duration = .seconds(30)
    ) async throws -> Run {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("exe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let outURL = dir.appendingPathComponent("stdout")
        let errURL = dir.appendingPathComponent("stderr")
        let inURL = dir.appendingPathComponent("stdin")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: inURL.path, contents: Data(stdin ?? []))
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)
        let input = try FileHandle(forReadingFrom: inURL)
        defer {
            try? out.close()
            try? err.close()
            try? input.close()
        }

        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = SanitizerEnvironment.adding(to: environment)
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        let (status, signaled): (Int32, Bool) = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { p in
                continuation.resume(returning: (p.terminationStatus, p.terminationReason == .uncaughtSignal))
            }
            do {
                try process.runSerialized()
            } catch {
                continuation.resume(throwing: error)
                return
            }
            let pid = process.processIdentifier
            let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
                // Bounded: a hung child fails its test instead of hanging the run.
                if process.isRunning { kill(pid, SIGKILL) }
            }
        }
        return Run(
            status: status, signaled: signaled,
            stdout: String(decoding: (try? Data(contentsOf: outURL)) ?? Data(), as: UTF8.self),
            stderr: String(decoding: (try? Data(contentsOf: errURL)) ?? Data(), as: UTF8.self))
    }
}
