import Foundation
@testable import SmarticoDaemon

/// Helpers shared by the Config* tests.
enum ConfigTestSupport {
    /// The package root, found from this file's path.
    static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static var examplePath: String { packageRoot.appendingPathComponent("config.example.json").path }

    static let validKey = "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2"

    /// Decodes `json` the way the daemon does; returns the config or the error.
    static func decode(_ json: String) -> Result<DaemonConfig, ConfigError> {
        do { return .success(try ConfigLoader.decode(Array(json.utf8), source: "test.json")) } catch { return .failure(error) }
    }

    /// The problems of `json` (empty when it is valid).
    static func problems(_ json: String) -> [ConfigProblem] {
        switch decode(json) {
        case .success: return []
        case .failure(let error): return error.problems
        }
    }

    /// A fresh temporary directory, unique per call.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("smarticod-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// config.example.json with its placeholder label key replaced by ``validKey``, as an
    /// operator installs it; written to a temporary file whose path is returned.
    static func exampleWithRealKey() throws -> String {
        let text = try String(contentsOfFile: examplePath, encoding: .utf8)
        let replaced = text.replacingOccurrences(of: "00000000-0000-0000-0000-000000000000-2", with: validKey)
        precondition(replaced != text, "config.example.json no longer has the placeholder key")
        return try writeTemporary(replaced)
    }

    /// Writes `text` to a new file in a fresh temporary directory and returns its path.
    static func writeTemporary(_ text: String, name: String = "config.json") throws -> String {
        let url = try temporaryDirectory().appendingPathComponent(name)
        try Data(text.utf8).write(to: url)
        return url.path
    }
}
