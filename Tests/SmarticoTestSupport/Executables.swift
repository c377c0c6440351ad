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
        try BuiltExecutable.find(name)
    }

    /// Runs `body` on a new thread (blocking calls never run on the cooperative pool) and
    /// returns its result.
    public static func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }
}
