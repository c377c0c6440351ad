import Foundation

/// The package's executables as built next to the test bundle (`swift build --build-tests`
/// builds them all), for tests that run them as subprocesses.
public enum TestExecutables {
    /// The package root, found from this file's path.
    public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The executable `name` (`smarticod`, `smartico-sim`, …): looked for beside the test bundle,
    /// beside the running test binary, then in `.build/debug`. Throws naming the places searched.
    public static func url(_ name: String) throws -> URL {
        var directories: [URL] = [Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()]
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.append(URL(fileURLWithPath: exe).deletingLastPathComponent())
        }
        directories.append(packageRoot.appendingPathComponent(".build/debug"))
        for dir in directories {
            let candidate = dir.appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory), !isDirectory.boolValue,
               FileManager.default.isExecutableFile(atPath: candidate.path) {
                return candidate
            }
        }
        throw CocoaError(.fileNoSuchFile, userInfo: [
            NSLocalizedDescriptionKey: "\(name) not found next to the tests in \(directories.map(\.path)); run `swift build --build-tests` first",
        ])
    }

    /// Runs `body` on a new thread (blocking calls never run on the cooperative pool) and
    /// returns its result.
    public static func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }
}
