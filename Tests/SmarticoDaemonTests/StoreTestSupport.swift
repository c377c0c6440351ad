// Helpers shared by the store tests: unique temp directories, a seeded generator, and running blocking
// code on a dedicated thread instead of the cooperative pool.
import Foundation
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

/// A unique, empty temporary directory, removed by `remove()`.
struct StoreTempDir {
    let path: String

    init() throws {
        var template = Array("/tmp/smarticod-store-test-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard made != nil else { throw StoreTestFailure("mkdtemp failed: errno \(errno)") }
        path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A path inside the directory.
    func sub(_ name: String) -> String { path + "/" + name }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

struct StoreTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs blocking `body` (waitpid, read, usleep, ...) on a new thread and awaits its result.
func onDedicatedThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            do {
                continuation.resume(returning: try body())
            } catch {
                continuation.resume(throwing: error)
            }
        }
        thread.start()
    }
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

func journalEvent(_ name: String, ts: Int64, _ json: String) -> NewJournalEvent {
    NewJournalEvent(name: name, tsMs: ts, data: Array(json.utf8))
}
