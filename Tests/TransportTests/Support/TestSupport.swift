import Foundation
import Synchronization
@testable import Transport

/// A unique temp directory for one test.
struct TestDirectory {
    let path: String
    static func make(prefix: String = "smartico-io") throws -> TestDirectory {
        let path = NSTemporaryDirectory() + "/\(prefix)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return TestDirectory(path: path)
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
    /// A path in the temp directory (not created).
    static func tempPath(_ name: String) -> String { NSTemporaryDirectory() + "/" + name }
}

struct TimedOut: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Waits (bounded) until `condition` holds, checking every few milliseconds.
func waitUntil(
    _ what: String, timeout: Duration = .seconds(10), _ condition: @Sendable () -> Bool
) async throws {
    let clock = ContinuousClock()
    let end = clock.now + timeout
    while !condition() {
        if clock.now >= end { throw TimedOut(what: what) }
        try await Task.sleep(for: .milliseconds(5))
    }
}

/// A value shared between loop callbacks and the test.
final class Shared<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>
    init(_ value: Value) { storage = Mutex(value) }
    var value: Value { storage.withLock { $0 } }
    func update<R>(_ body: (inout Value) -> R) -> R { storage.withLock { body(&$0) } }
}

/// Runs `body` with a fresh loop, always shut down after.
func withLoop<R>(_ name: String = "test-loop", _ body: (EventLoop) async throws -> R) async throws -> R {
    let loop = try EventLoop(name: name)
    do {
        let result = try await body(loop)
        await loop.shutdown()
        return result
    } catch {
        await loop.shutdown()
        throw error
    }
}

/// A deterministic byte pattern (so the receiver can check content and order).
func patternBytes(count: Int, seed: UInt8 = 0) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    for i in 0..<count { bytes[i] = UInt8(truncatingIfNeeded: i &* 31 &+ i >> 11 &+ Int(seed)) }
    return bytes
}

/// Collects what a connection receives and how it ended (set up on the loop thread).
final class StreamRecorder: Sendable {
    let received = Shared<[UInt8]>([])
    let receivedCount = Shared(0)
    let closeReason = Shared<StreamCloseReason?>(nil)
    let closeCalls = Shared(0)
    let keepBytes: Bool

    init(keepBytes: Bool = true) { self.keepBytes = keepBytes }

    /// Installs handlers and starts reading. Loop thread.
    func attach(_ connection: StreamConnection) {
        connection.onRead = { [self] bytes in
            if keepBytes { received.update { $0.append(contentsOf: bytes) } }
            receivedCount.update { $0 += bytes.count }
        }
        connection.onClose = { [self] reason in
            closeCalls.update { $0 += 1 }
            closeReason.update { $0 = reason }
        }
        connection.start()
    }

    var isClosed: Bool { closeReason.value != nil }
}

/// Reads what is available from a pipe (blocking; EINTR retried, unlike FileHandle which traps on it).
/// Returns [] at end of file. Call it on the blocking pool.
func readSome(fd: Int32, max: Int = 65536) -> [UInt8] {
    var buffer = [UInt8](repeating: 0, count: max)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, max) }
        if n >= 0 { return Array(buffer[0..<n]) }
        if errno != EINTR { return [] }
    }
}

/// Reads a pipe to its end (blocking). Call it on the blocking pool.
func readToEnd(fd: Int32) -> [UInt8] {
    var all: [UInt8] = []
    while true {
        let chunk = readSome(fd: fd)
        if chunk.isEmpty { return all }
        all += chunk
    }
}


