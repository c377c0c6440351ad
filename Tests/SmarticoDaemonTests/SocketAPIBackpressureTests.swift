// Subscribers as cursors over the journal (socket-api.md, "Framing"): bounded queues, catch-up from
// the journal, `gap` behind retention, the session and props state on rejoining. Real Unix
// sockets, a real store in a temp dir; events journaled first, then published, as the driver does.
import Foundation
import Synchronization
import Testing
import SmarticoProtocol
import SmarticoTestSupport
import Transport
@testable import SmarticoDaemon

/// An engagement of about 2 KB of 110 bytes (its line carries them twice: `message` and `bridge`).
private func engagement(_ i: Int) throws -> EngagementData {
    let text = String(repeating: "x", count: 2000)
    let message = try RawJSONObject(validating: Array(#"{"cid":110,"engagement_uid":"e\#(i)","payload":{"text":"\#(text)","i":\#(i)}}"#.utf8))
    return EngagementData(message: message, popupURL: "https://p.example/\(i)")
}

/// The line a subscriber must get for an engagement, without its `\n`.
private func engagementLine(_ data: EngagementData, seq: JournalSeq, tsMs: Int64) -> [UInt8] {
    Array(#"{"event":"engagement","seq":\#(seq),"ts":\#(tsMs),"data":"#.utf8) + data.assemble().line + [UInt8(ascii: "}")]
}

/// Journals `count` engagements in batches (group commits), publishes each batch as the driver
/// does, and returns the hashes of the lines subscribers must get, in seq order.
private func journalAndPublishEngagements(
    _ count: Int, store: SmarticoStore, server: SocketAPIServer, batch: Int = 500
) async throws -> [Int] {
    var hashes: [Int] = []
    var index = 0
    while index < count {
        let datas = try (index..<min(count, index + batch)).map { try engagement($0) }
        let tsMs: Int64 = 1_700_000_000_000
        let seqs = try await store.appendEvents(datas.map {
            NewJournalEvent(name: "engagement", tsMs: tsMs, data: $0.assemble().journal)
        })
        server.publish(zip(datas, seqs).map { PreparedEvent(name: "engagement", seq: $1, tsMs: tsMs, body: .engagement($0)) })
        for (data, seq) in zip(datas, seqs) { hashes.append(lineHash(engagementLine(data, seq: seq, tsMs: tsMs))) }
        index += datas.count
    }
    return hashes
}

/// A subscriber on a thread of its own that reads `chunk` bytes at a time and sleeps `pauseMs`
/// between reads (blocking calls: not on Swift's cooperative pool).
private final class SlowReader: Sendable {
    struct State {
        var seqs: [Int64] = []
        var hashes: [Int] = []
        var gaps = 0
        var finished = false
        var failure: String?
    }

    let state = Mutex(State())

    init(path: String, subscribe: String, chunk: Int, pauseMs: Int, until expected: Int, timeout: Duration) {
        let thread = Thread { [self] in
            self.run(path: path, subscribe: subscribe, chunk: chunk, pauseMs: pauseMs, expected: expected, timeout: timeout)
        }
        thread.start()
    }

    private func run(path: String, subscribe: String, chunk: Int, pauseMs: Int, expected: Int, timeout: Duration) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer {
            if fd >= 0 { Glibc.close(fd) }
            state.withLock { $0.finished = true }
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            state.withLock { $0.failure = "connect to \(path): errno \(errno)" }
            return
        }
        // At most this long without a byte (scaled in a sanitized run: a ThreadSanitizer run with a
        // build beside it went 5 s without one, and the server was only starved, not stuck).
        let silence = SanitizerEnvironment.scaled(.seconds(5)).components.seconds
        var wait = timeval(tv_sec: Int(silence), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        let request = Array((subscribe + "\n").utf8)
        guard send(fd, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else {
            state.withLock { $0.failure = "send the subscribe line: errno \(errno)" }
            return
        }
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: chunk)
        var partial: [UInt8] = []
        while ContinuousClock.now < deadline {
            let n = recv(fd, &buffer, chunk, 0)
            guard n > 0 else {
                state.withLock { $0.failure = n == 0 ? "the daemon closed the connection" : "recv: errno \(errno)" }
                return
            }
            partial.append(contentsOf: buffer[0..<n])
            var start = 0
            var seqs: [Int64] = []
            var hashes: [Int] = []
            var gaps = 0
            while let newline = partial[start...].firstIndex(of: 0x0A) {
                let line = partial[start..<newline]
                if line.starts(with: Array(#"{"event":"gap""#.utf8)) {
                    gaps += 1
                } else if let seq = seqOfEventLine(line) {
                    seqs.append(seq)
                    hashes.append(lineHash(Array(line)))
                }
                start = newline + 1
            }
            partial.removeFirst(start)
            let count = state.withLock { s in
                s.seqs += seqs
                s.hashes += hashes
                s.gaps += gaps
                return s.seqs.count
            }
            if count >= expected { return }
            usleep(useconds_t(pauseMs * 1000))
        }
        state.withLock { $0.failure = "timed out" }
    }
}

@Suite("Socket API backpressure", .serialized, .awaitsCleanup)
struct SocketAPIBackpressureTests {
    @Test func aBurstReachesFastAndSlowReadersWholeAndANeverReadingPeerCostsAtMostItsQueue() async throws {
        let dir = try makeSocketTempDir()
        let store = try await SmarticoStore.open(directory: dir + "/state", options: StoreOptions(retentionEvents: 100_000))
        let maxQueue = 256 << 10
        let rig = try await SocketTestRig.start(configuration: .init(maxQueueBytes: maxQueue), store: store, dir: dir)
        defer { cleanUpAfterTest { await rig.stop(); await store.close() } }
        let total = 10_000

        let fast = [try await rig.connect(keepLines: false), try await rig.connect(keepLines: false)]
        for reader in fast { _ = try await reader.call(#"{"id":1,"op":"subscribe"}"#, id: 1) }
        let never = try await rig.connect(read: false, keepLines: false)
        try await never.send(#"{"id":1,"op":"subscribe"}"# + "\n")
        // Scaled in a sanitized run only (SanitizerEnvironment.timeScale): 10,000 events through an
        // instrumented server and four instrumented readers in this process.
        let slow = SlowReader(path: rig.path, subscribe: #"{"id":1,"op":"subscribe"}"#, chunk: 16_384, pauseMs: 2,
                              until: total, timeout: SanitizerEnvironment.scaled(.seconds(180)))
        try await waitUntil("four subscribers") { rig.server.subscriberCount == 4 }

        let expected = try await journalAndPublishEngagements(total, store: store, server: rig.server)
        let seqs = Array(Int64(1)...Int64(total))
        try await waitUntil("every event at the fast readers (\(fast.map(\.eventCount)) of \(total))",
                            timeout: SanitizerEnvironment.scaled(.seconds(120))) { fast.allSatisfy { $0.eventCount == total } }
        for reader in fast {
            #expect(reader.eventSeqs == seqs)
            // Whether sent live or read back from the journal, each line is its event's own.
            #expect(reader.state.withLock { $0.eventHashes } == expected)
            #expect(reader.state.withLock { $0.gapLines.isEmpty })
            #expect(!reader.isClosed)
        }
        try await waitUntil("the slow reader to finish", timeout: SanitizerEnvironment.scaled(.seconds(200))) { slow.state.withLock { $0.finished } }
        let slowState = slow.state.withLock { $0 }
        #expect(slowState.failure == nil)
        #expect(slowState.seqs == seqs)
        #expect(slowState.hashes == expected)
        #expect(slowState.gaps == 0)

        // The peer that never reads is still connected (with the fast readers; the slow one has
        // closed) and holds at most its queue.
        try await waitUntil("the slow reader's close to be seen") { rig.server.connectionCount == 3 }
        #expect(rig.server.subscriberCount == 3)
        #expect(!never.isClosed)
        let stats = try await rig.server.queueStatistics()
        #expect(stats.peakQueuedBytes.values.allSatisfy { $0 <= maxQueue }, "\(stats.peakQueuedBytes)")
        #expect(stats.queuedBytes.values.allSatisfy { $0 <= maxQueue }, "\(stats.queuedBytes)")
        // It did fill its queue (the bound was reached, not merely never approached).
        #expect(stats.queuedBytes.values.contains { $0 > maxQueue / 2 }, "\(stats.queuedBytes)")
        // The process's memory is not checked here: this server shares its process with the whole
        // suite running in parallel. EngineBackpressureTests checks a real daemon's own RSS.
    }

    @Test func aReplayLargerThanTheTotalBoundIsDeliveredWhole() async throws {
        let dir = try makeSocketTempDir()
        let store = try await SmarticoStore.open(directory: dir + "/state", options: StoreOptions(retentionEvents: 100_000))
        let maxTotal = 1 << 20
        let rig = try await SocketTestRig.start(configuration: .init(maxQueueBytes: 512 << 10, maxTotalQueueBytes: maxTotal),
                                                store: store, dir: dir)
        defer { cleanUpAfterTest { await rig.stop(); await store.close() } }
        // 2,000 engagements: about 4 MiB journaled, 8 MiB of lines.
        let expected = try await journalAndPublishEngagements(2_000, store: store, server: rig.server)
        let never = try await rig.connect(read: false, keepLines: false)
        try await never.send(#"{"id":1,"op":"subscribe","since":0}"# + "\n")
        let readers = [try await rig.connect(keepLines: false), try await rig.connect(keepLines: false),
                       try await rig.connect(keepLines: false)]
        for reader in readers {
            let answer = try await reader.call(#"{"id":1,"op":"subscribe","since":0}"#, id: 1)
            #expect(answer["result"]?["last_seq"] == 2000)
        }
        try await waitUntil("every replayed event", timeout: SanitizerEnvironment.scaled(.seconds(120))) { readers.allSatisfy { $0.eventCount == 2_000 } }
        for reader in readers {
            #expect(reader.eventSeqs == Array(1...2000))
            #expect(reader.state.withLock { $0.eventHashes } == expected)
        }
        let stats = try await rig.server.queueStatistics()
        // One line over at most: a peer with an empty queue always gets its next line.
        #expect(stats.peakTotalQueuedBytes <= maxTotal + 8192, "\(stats.peakTotalQueuedBytes)")
        #expect(!never.isClosed)
        // Live again: the next event reaches every reader.
        let next = try await journalAndPublishEngagements(1, store: store, server: rig.server)
        try await waitUntil("the live event") { readers.allSatisfy { $0.eventCount == 2_001 } }
        #expect(readers.allSatisfy { $0.state.withLock { $0.eventHashes.last } == next.first })
    }

    @Test func aPeerBehindRetentionGetsOneGapAndContinues() async throws {
        let dir = try makeSocketTempDir()
        let store = try await SmarticoStore.open(directory: dir + "/state", options: StoreOptions(retentionEvents: 100))
        let rig = try await SocketTestRig.start(configuration: .init(maxQueueBytes: 4096), store: store, dir: dir)
        defer { cleanUpAfterTest { await rig.stop(); await store.close() } }
        try await journalAndPublish(1000, store: store, server: rig.server)
        try await store.applyRetention(nowMs: 1_700_000_000_000)
        let first = try #require(try await store.journalBounds().firstSeq)
        #expect(first > 6)
        let client = try await rig.connect()
        _ = try await client.call(#"{"id":1,"op":"subscribe","since":5}"#, id: 1)
        try await waitUntil("the kept events") { client.eventSeqs.last == 1000 }
        try await journalAndPublish(10, store: store, server: rig.server, from: 1000)
        try await waitUntil("the live events") { client.eventSeqs.last == 1010 }
        #expect(client.eventSeqs == Array(first...1010))
        let gaps = client.state.withLock { $0.gapLines }
        #expect(gaps.count == 1)
        let gap = try JSONValue(parsing: try #require(gaps.first))
        #expect(gap["data"] == ["first_available_seq": .number(first), "missed": .number(first - 1 - 5)])
        #expect(gap["seq"] == 5)
        // The gap comes before the first event kept.
        let events = try client.events()
        #expect(events.first?["event"] == "gap" && events.dropFirst().first?["seq"] == .number(first))
    }

    @Test func aDurableSubscriberResumesAfterItsAckThroughACatchUp() async throws {
        let dir = try makeSocketTempDir()
        let store = try await SmarticoStore.open(directory: dir + "/state", options: StoreOptions(retentionEvents: 100_000))
        let rig = try await SocketTestRig.start(configuration: .init(maxQueueBytes: 16_384), store: store, dir: dir)
        defer { cleanUpAfterTest { await rig.stop(); await store.close() } }
        try await journalAndPublish(100, store: store, server: rig.server)
        var client = try await rig.connect()
        _ = try await client.call(#"{"id":1,"op":"subscribe","durable":"kiosk","since":0}"#, id: 1)
        try await waitUntil("the first hundred") { client.eventCount == 100 }
        #expect(client.eventSeqs == Array(1...100))
        let acked = try await client.call(#"{"id":2,"op":"ack","seq":60}"#, id: 2)
        #expect(acked["result"] == ["cursor": 60])
        await client.close()
        try await waitUntil("the server to see the close") { rig.server.connectionCount == 0 }
        // Far more than the queue holds while it is away.
        try await journalAndPublish(3000, store: store, server: rig.server, from: 100)
        client = try await rig.connect(keepLines: false)
        let resumed = try await client.call(#"{"id":3,"op":"subscribe","durable":"kiosk"}"#, id: 3)
        #expect(resumed["result"]?["last_seq"] == 3100)
        try await journalAndPublish(20, store: store, server: rig.server, from: 3100)
        try await waitUntil("everything after the ack", timeout: .seconds(60)) { client.eventSeqs.last == 3120 }
        #expect(client.eventSeqs == Array(61...3120))
    }

    @Test func aCatchingUpPeerGetsTheLatestSessionAndPropsOnRejoining() async throws {
        let dir = try makeSocketTempDir()
        let store = try await SmarticoStore.open(directory: dir + "/state", options: StoreOptions(retentionEvents: 100_000))
        let maxQueue = 8192
        let rig = try await SocketTestRig.start(configuration: .init(maxQueueBytes: maxQueue), store: store, dir: dir)
        defer { cleanUpAfterTest { await rig.stop(); await store.close() } }
        let live = try await rig.connect()
        _ = try await live.call(#"{"id":1,"op":"subscribe","types":["session","props"]}"#, id: 1)
        let late = try await rig.connect(read: false)
        try await late.send(#"{"id":1,"op":"subscribe"}"# + "\n")
        try await waitUntil("two subscribers") { rig.server.subscriberCount == 2 }
        // Far more than the kernel's buffers and the queue: the late peer falls behind, and is
        // catching up when the session and props change.
        let expected = try await journalAndPublishEngagements(500, store: store, server: rig.server)
        for (name, data) in [("session", ["state": "connecting"]), ("props", ["p": 1]),
                             ("session", ["state": "ready"]), ("props", ["p": 2])] as [(String, JSONValue)] {
            rig.server.publish(DaemonEvent(kind: EventKind(rawValue: name)!, data: data, journaled: false), seq: nil, tsMs: 9)
        }
        try await waitUntil("the live peer's four events") { live.eventCount == 4 }
        #expect(try live.events().map { $0["data"] } == [["state": "connecting"], ["p": 1], ["state": "ready"], ["p": 2]])

        try await rig.clientLoop.submit { late.connection.start() }
        try await waitUntil("the engagements and the state", timeout: .seconds(60)) { late.eventCount == 502 }
        #expect(Array(late.eventSeqs.prefix(500)) == Array(1...500))
        #expect(Array(late.state.withLock { $0.eventHashes }.prefix(500)) == expected)
        let rejoined = try late.events().suffix(2)
        #expect(Set(rejoined.map { $0.serializedString() }) == [
            #"{"event":"session","seq":500,"ts":9,"data":{"state":"ready"}}"#,
            #"{"event":"props","seq":500,"ts":9,"data":{"p":2}}"#,
        ])
        // Live again.
        rig.server.publish(DaemonEvent(kind: .session, data: ["state": "backoff"], journaled: false), seq: nil, tsMs: 10)
        try await waitUntil("the next session event") { late.eventCount == 503 }
        #expect(try late.events().last?["data"] == ["state": "backoff"])
    }
}
