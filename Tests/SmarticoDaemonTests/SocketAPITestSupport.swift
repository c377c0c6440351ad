// Helpers of the socket API tests: a temp dir, a server on a real Unix socket, NDJSON clients on
// their own event loop, and a fake request handler standing where the session driver will be.
import Foundation
import Synchronization
import Testing
import SmarticoProtocol
import Transport
@testable import SmarticoDaemon

struct SocketTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A short unique directory (Unix socket paths are limited to 107 bytes).
func makeSocketTempDir() throws -> String {
    var template = Array("/tmp/sapi-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    guard made != nil else { throw SocketTestFailure("mkdtemp failed: errno \(errno)") }
    return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Polls `condition` every few ms until it holds or `timeout` passes (then fails with `what`).
func waitUntil(
    _ what: @autoclosure () -> String, timeout: Duration = .seconds(20), _ condition: () -> Bool
) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while !condition() {
        if clock.now > deadline { throw SocketTestFailure("timed out waiting for \(what())") }
        try await Task.sleep(for: .milliseconds(5))
    }
}

private let eventPrefix = Array("{\"event\":".utf8)
private let gapPrefix = Array("{\"event\":\"gap\"".utf8)
private let seqKey = Array("\"seq\":".utf8)

/// The seq of an event line (`{"event":…,"seq":N,…`), found without a full parse or allocation.
func seqOfEventLine<C: Collection<UInt8>>(_ line: C) -> Int64? where C.Index == Int {
    guard line.starts(with: eventPrefix) else { return nil }
    var i = line.startIndex
    let last = line.endIndex - seqKey.count
    while i <= last {
        if line[i] == 0x22 && line[i + 1] == 0x73 && line[(i..<(i + seqKey.count))].elementsEqual(seqKey) {
            var j = i + seqKey.count
            var value: Int64 = 0
            while j < line.endIndex, line[j] >= 0x30, line[j] <= 0x39 {
                value = value * 10 + Int64(line[j] - 0x30)
                j += 1
            }
            return value
        }
        i += 1
    }
    return nil
}

/// A hash of a line's bytes (stable within the test process).
func lineHash(_ line: UnsafeRawBufferPointer) -> Int {
    var hasher = Hasher()
    hasher.combine(bytes: line)
    return hasher.finalize()
}

func lineHash(_ line: [UInt8]) -> Int { line.withUnsafeBytes { lineHash($0) } }

/// A client of the socket API over a real Unix socket, driven by a test event loop.
final class SocketTestClient: Sendable {
    struct State {
        var partial: [UInt8] = []
        /// Every complete line (only the first 16 without `keepLines`).
        var lines: [[UInt8]] = []
        var lineCount = 0
        /// Seqs of the event lines, in arrival order (not `gap`).
        var eventSeqs: [Int64] = []
        /// A hash of each of those lines (to compare lines without keeping them).
        var eventHashes: [Int] = []
        var gapLines: [[UInt8]] = []
        var closed = false
    }

    let connection: StreamConnection
    let state = Mutex(State())
    let keepLines: Bool

    private init(connection: StreamConnection, keepLines: Bool) {
        self.connection = connection
        self.keepLines = keepLines
    }

    /// Connects; with `read: false` the client never reads (its kernel buffers fill up).
    static func connect(_ path: String, loop: EventLoop, read: Bool = true, keepLines: Bool = true) async throws -> SocketTestClient {
        var attempts = 0
        while true {
            do {
                let connection = try await StreamConnection.connect(unixPath: path, on: loop)
                let client = SocketTestClient(connection: connection, keepLines: keepLines)
                try await loop.submit { client.install(read: read) }
                return client
            } catch let error as SocketError {
                attempts += 1
                // A full backlog (EAGAIN) while many peers connect at once: try again shortly.
                guard attempts < 200, case .system(_, _, let e) = error, e == EAGAIN else { throw error }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }

    private func install(read: Bool) {
        // Weak: the connection must not keep its client alive. A client that never reads, or stopped
        // reading after a hang-up, is not registered with the loop, so the loop's shutdown never
        // closes it; with strong captures client and connection kept each other (and, through the
        // connection, the loop) alive for good, which LeakSanitizer reported. Dropped, the client
        // frees its connection, whose deinit closes the descriptor.
        connection.onRead = { [weak self] bytes in self?.received(bytes) }
        connection.onClose = { [weak self] _ in self?.state.withLock { $0.closed = true } }
        if read { connection.start() }
    }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        state.withLock { s in
            var start = 0
            while start < bytes.count {
                guard let newline = bytes[start...].firstIndex(of: 0x0A) else {
                    s.partial.append(contentsOf: bytes[start...])
                    return
                }
                if s.partial.isEmpty {
                    account(UnsafeRawBufferPointer(rebasing: bytes[start..<newline]), &s)
                } else {
                    s.partial.append(contentsOf: bytes[start..<newline])
                    let line = s.partial
                    s.partial = []
                    line.withUnsafeBytes { account($0, &s) }
                }
                start = newline + 1
            }
        }
    }

    private func account(_ line: UnsafeRawBufferPointer, _ s: inout State) {
        s.lineCount += 1
        if line.starts(with: gapPrefix) {
            s.gapLines.append(Array(line))
        } else if let seq = seqOfEventLine(line) {
            s.eventSeqs.append(seq)
            s.eventHashes.append(lineHash(line))
        }
        if keepLines || s.lines.count < 16 { s.lines.append(Array(line)) }
    }

    /// Sends text as is (add the `\n` yourself).
    func send(_ text: String) async throws {
        let bytes = Array(text.utf8)
        try await connection.loop.submit { self.connection.write(bytes) }
    }

    func send(bytes: [UInt8]) async throws {
        try await connection.loop.submit { self.connection.write(bytes) }
    }

    var lines: [[UInt8]] { state.withLock { $0.lines } }
    var lineCount: Int { state.withLock { $0.lineCount } }
    var isClosed: Bool { state.withLock { $0.closed } }
    var eventSeqs: [Int64] { state.withLock { $0.eventSeqs } }
    /// The number of event lines (cheap: no copy of `eventSeqs`).
    var eventCount: Int { state.withLock { $0.eventSeqs.count } }

    /// Parsed lines.
    func json() throws -> [JSONValue] { try lines.map { try JSONValue(parsing: $0) } }

    /// The responses (lines with `ok`).
    func responses() throws -> [JSONValue] { try json().filter { $0["ok"] != nil } }

    /// The events (lines with `event`).
    func events() throws -> [JSONValue] { try json().filter { $0["event"] != nil } }

    /// Waits for the response whose `id` is `id` and returns it.
    func response(id: JSONValue, timeout: Duration = .seconds(20)) async throws -> JSONValue {
        var found: JSONValue? = nil
        try await waitUntil("a response with id \(id.serializedString())", timeout: timeout) {
            found = try? responses().first { $0["id"] == id && $0["id"]?.serializedString() == id.serializedString() }
            return found != nil
        }
        return found!
    }

    /// Sends one request and waits for its response.
    func call(_ json: String, id: JSONValue, timeout: Duration = .seconds(20)) async throws -> JSONValue {
        try await send(json + "\n")
        return try await response(id: id, timeout: timeout)
    }

    func close() async {
        _ = try? await connection.loop.submit { self.connection.close() }
    }
}

/// Stands where the session driver will be: answers every call at once (or as told) and records them.
final class FakeSocketHandler: SocketAPIHandler {
    let calls = Mutex<[SocketAPICall]>([])
    let peers = Mutex<[SocketPeer]>([])

    func handle(_ call: SocketAPICall, from peer: SocketPeer, reply: SocketAPIReply) {
        calls.withLock { $0.append(call) }
        peers.withLock { $0.append(peer) }
        switch call {
        case .hello:
            reply.succeed(["api": 1, "version": "test", "state": "ready"])
        case .status:
            reply.succeed(["state": "ready", "subscribers": 0])
        case .pushReport:
            reply.fail(SocketAPIError(.notImplemented, "push_report needs the HTTP API, not built yet"))
        case .logLevel(let level):
            reply.succeed(["level": .string(level.rawValue), "previous": "info"])
        case .metrics:
            reply.succeed(["content_type": "text/plain; version=0.0.4; charset=utf-8", "text": "smarticod_subscribers 0\n"])
        case .api(let r):
            reply.succeed(["call": .string(r.call), "args": .object(r.args.object)])
        case .session(let request):
            switch request {
            case .event(let type, _) where type == "fail_server":
                reply.answer(.failure(SocketAPIError(.serverError, "the server refused it", errCode: 42, errMsg: "nope")))
            case .event(let type, _) where type == "fail_timeout":
                reply.answer(.failure(SocketAPIError(.timeout, "no answer within 10 ms")))
            case .event(let type, _) where type == "fail_queue":
                reply.answer(.failure(SocketAPIError(.queueFull, "the outbox holds 10000 messages")))
            case .event(let type, _) where type == "fail_ready":
                reply.answer(.failure(SocketAPIError(.notReady, "no session")))
            case .event(let type, _) where type == "drop":
                break  // the reply is released unanswered: the server must answer `internal`
            case .request(_, _, let timeoutMs):
                // Slow: answered after `timeout_ms` so a later request overtakes it.
                let delay = timeoutMs ?? 0
                Task {
                    try? await Task.sleep(for: .milliseconds(delay))
                    reply.succeed(["message": ["cid": 501, "slow": true]])
                }
            default:
                reply.succeed(["uuid": "00000000-0000-4000-8000-000000000000", "queued": false])
            }
        }
    }
}

/// A running server plus its loops, for one test.
struct SocketTestRig {
    let dir: String
    let path: String
    let serverLoop: EventLoop
    let clientLoop: EventLoop
    let server: SocketAPIServer
    let handler: FakeSocketHandler

    static func start(
        configuration: SocketAPIServer.Configuration = SocketAPIServer.Configuration(),
        store: SmarticoStore? = nil, dir: String? = nil, mode: UInt32 = 0o600
    ) async throws -> SocketTestRig {
        let dir = try dir ?? makeSocketTempDir()
        let path = dir + "/s.sock"
        let serverLoop = try EventLoop(name: "sapi-server")
        let clientLoop = try EventLoop(name: "sapi-clients")
        let server = SocketAPIServer(loop: serverLoop, configuration: configuration, store: store)
        let handler = FakeSocketHandler()
        try await server.start(.path(path, mode: mode), handler: handler)
        return SocketTestRig(dir: dir, path: path, serverLoop: serverLoop, clientLoop: clientLoop, server: server, handler: handler)
    }

    func connect(read: Bool = true, keepLines: Bool = true) async throws -> SocketTestClient {
        try await SocketTestClient.connect(path, loop: clientLoop, read: read, keepLines: keepLines)
    }

    func stop(removeDir: Bool = true) async {
        await server.close()
        await clientLoop.shutdown()
        await serverLoop.shutdown()
        if removeDir { try? FileManager.default.removeItem(atPath: dir) }
    }
}

/// Journals `count` events named `name` in the store, then publishes them in seq order (what the
/// driver does). Returns the seqs.
@discardableResult
func journalAndPublish(
    _ count: Int, name: String = "message", store: SmarticoStore, server: SocketAPIServer, from index: Int = 0,
    publishing: Bool = true
) async throws -> [JournalSeq] {
    var events: [NewJournalEvent] = []
    var datas: [JSONValue] = []
    for i in 0..<count {
        let data: JSONValue = ["i": .number(index + i)]
        datas.append(data)
        events.append(NewJournalEvent(name: name, tsMs: 1_700_000_000_000 + Int64(index + i), data: data.serialized()))
    }
    let seqs = try await store.appendEvents(events)
    for (i, seq) in seqs.enumerated() where publishing {
        server.publish(DaemonEvent(kind: EventKind(rawValue: name)!, data: datas[i], journaled: true), seq: seq, tsMs: 1_700_000_000_000 + Int64(index + i))
    }
    return seqs
}
