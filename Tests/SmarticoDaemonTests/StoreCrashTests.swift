// Crash safety for real: a writer in a child process appends events and enqueues outbox messages and
// prints each seq/uuid only after the call returned (that is, after the commit was fsync'd); the parent
// kill -9s it at seeded random moments, reopens the database and checks that everything acknowledged is
// there, that nothing was journaled twice, that seq never went backwards, that the newest event
// is last_seq, and that the database is sound.
//
// The child is this test binary itself (/proc/self/exe), run with Swift Testing's own arguments
// (`--testing-library swift-testing --filter crashWriterProcess`) and an environment variable that
// enables `crashWriterProcess`: it needs no extra executable target, and the writer runs the very
// store code under test. In a normal run that test is disabled (reported as skipped).
import Foundation
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

private let writerDirectoryVariable = "SMARTICO_STORE_CRASH_WRITER_DIR"

/// Limits no run reaches, so every acknowledged write must still be there.
private let keepEverything = StoreOptions(
    maxOutboxMessages: 1_000_000, retentionEvents: 1_000_000, retentionHours: 1_000_000, seenPerUser: 1_000_000)

/// Writes one line to stdout with a single write(2): unbuffered, so a line the parent reads is a
/// promise the writer made after the store call returned.
private func emit(_ line: String) {
    let data = Array((line + "\n").utf8)
    var offset = 0
    while offset < data.count {
        let written = data[offset...].withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
        if written <= 0 { return }
        offset += written
    }
}

/// What the parent decided for one child.
private enum KillPlan: CustomStringConvertible {
    /// Kill after this many microseconds from spawn, without waiting for anything (may hit the open).
    case afterSpawn(micros: UInt32)
    /// Kill this many microseconds after the child acknowledged `acks` writes.
    case afterAcks(Int, micros: UInt32)

    var description: String {
        switch self {
        case .afterSpawn(let micros): return "kill \(micros) µs after spawn"
        case .afterAcks(let acks, let micros): return "kill \(micros) µs after \(acks) acks"
        }
    }
}

/// What one child acknowledged before it died.
private struct ChildRun: Sendable {
    var readyLastSeq: Int64?
    /// Acknowledged seqs, in order, with the data the event was written with.
    var seqs: [(seq: Int64, data: String)] = []
    var uuids: [String] = []
    /// The largest seq acknowledged for the durable cursor.
    var cursor: Int64?
    /// What the writer found wrong itself (a duplicate engagement journaled twice).
    var bugs: [String] = []
    var killedBySignal = false
    /// The raw wait status (the signal number when killed).
    var exitStatus: Int32 = 0
}

/// Spawns the writer, reads its acknowledgements, kills it according to `plan`, reaps it.
/// Blocking: run it on a dedicated thread.
private func runWriterChild(executable: String, directory: String, seed: UInt64, plan: KillPlan) throws -> ChildRun {
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else { throw StoreTestFailure("pipe failed: errno \(errno)") }
    _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
    _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
    defer { close(fds[0]) }

    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
    posix_spawn_file_actions_addopen(&actions, 2, directory + "-writer-stderr.log",
                                     O_WRONLY | O_CREAT | O_APPEND, 0o600)

    let arguments = [executable, "--testing-library", "swift-testing", "--filter", "crashWriterProcess"]
    var environment = ProcessInfo.processInfo.environment
    environment[writerDirectoryVariable] = directory
    environment["SMARTICO_STORE_CRASH_WRITER_SEED"] = String(seed)
    let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        argv.forEach { free($0) }
        envp.forEach { free($0) }
    }
    var pid = pid_t()
    let rc = posix_spawn(&pid, executable, &actions, nil, argv, envp)
    close(fds[1])
    guard rc == 0 else { throw StoreTestFailure("posix_spawn \(executable) failed: \(rc)") }

    var run = ChildRun()
    var killed = false
    func killNow(_ micros: UInt32) {
        guard !killed else { return }
        if micros > 0 { usleep(micros) }
        kill(pid, SIGKILL)
        killed = true
    }
    if case .afterSpawn(let micros) = plan { killNow(micros) }

    var pending: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    var acks = 0
    let deadline = Date().addingTimeInterval(20)
    while true {
        var pollfd = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
        let ready = poll(&pollfd, 1, 100)
        if ready == 0 {
            if Date() > deadline {
                kill(pid, SIGKILL)
                killed = true
                throw StoreTestFailure("the writer printed nothing for too long; killed it")
            }
            continue
        }
        let count = read(fds[0], &buffer, buffer.count)
        if count < 0 && errno == EINTR { continue }
        if count <= 0 { break }
        pending += buffer[0..<count]
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
            let line = String(decoding: pending[..<newline], as: UTF8.self)
            pending.removeSubrange(...newline)
            let fields = line.split(separator: " ")
            switch fields.first {
            case "READY":
                run.readyLastSeq = Int64(fields[1])
            case "SEQ":
                run.seqs.append((Int64(fields[1])!, "{\"k\":\(fields[2])}"))
                acks += 1
            case "ENG":
                run.seqs.append((Int64(fields[1])!, "{\"uid\":\"\(fields[2])\"}"))
                acks += 1
            case "CUR":
                run.cursor = Int64(fields[1])
                acks += 1
            case "BUG":
                run.bugs.append(line)
            case "UUID":
                run.uuids.append(String(fields[1]))
                acks += 1
            default:
                continue  // Swift Testing's own output
            }
            if case .afterAcks(let wanted, let micros) = plan, acks >= wanted, run.readyLastSeq != nil {
                killNow(micros)
            }
        }
    }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    // WIFSIGNALED / WTERMSIG are macros: decode by hand.
    run.killedBySignal = (status & 0x7f) != 0 && (status & 0x7f) != 0x7f
    run.exitStatus = status
    return run
}

@Suite struct StoreCrashTests {
    /// The writer half: runs only in the child process the crash test starts.
    @Test(.enabled(if: ProcessInfo.processInfo.environment[writerDirectoryVariable] != nil,
                   "runs only as the crash test's child process"))
    func crashWriterProcess() async throws {
        let environment = ProcessInfo.processInfo.environment
        let directory = try #require(environment[writerDirectoryVariable])
        var random = SplitMix64(seed: UInt64(environment["SMARTICO_STORE_CRASH_WRITER_SEED"] ?? "") ?? 1)
        let store = try await SmarticoStore.open(directory: directory, options: keepEverything)
        emit("READY \(await store.lastSeq())")
        var k = 0
        // Bounded: the parent normally kills it long before the end.
        for _ in 0..<2_000 {
            let batch = Int.random(in: 1...3, using: &random)
            let events = (0..<batch).map { offset in
                journalEvent("message", ts: Int64(k + offset), "{\"k\":\(k + offset)}")
            }
            let seqs = try await store.appendEvents(events)
            for (offset, seq) in seqs.enumerated() { emit("SEQ \(seq) \(k + offset)") }
            k += batch
            let uuid = SmarticoStore.makeUUID()
            try await store.enqueue(uuid: uuid, cid: 9, payload: bytes("{\"uuid\":\"\(uuid)\"}"), createdMs: Int64(k))
            emit("UUID \(uuid)")
            // An engagement (seen-set + journal in one transaction), then its repeat, which must be dropped.
            let uid = SmarticoStore.makeUUID()
            let engagement = journalEvent("engagement", ts: Int64(k), "{\"uid\":\"\(uid)\"}")
            if let seq = try await store.appendEngagement(user: "crash-user", uid: uid, event: engagement) {
                emit("ENG \(seq) \(uid)")
            } else {
                emit("BUG new uid \(uid) reported as seen")
            }
            if let seq = try await store.appendEngagement(user: "crash-user", uid: uid, event: engagement) {
                emit("BUG repeated uid \(uid) journaled again as \(seq)")
            }
            let acknowledged = try await store.setCursor("crash", await store.lastSeq())
            emit("CUR \(acknowledged)")
        }
        await store.close()
    }

    @Test func acknowledgedWritesSurviveKill9() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let stateDir = dir.sub("state")
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let seed = UInt64(ProcessInfo.processInfo.environment["SMARTICO_STORE_CRASH_SEED"] ?? "") ?? 0x5EED_2026
        var random = SplitMix64(seed: seed)

        var ackedSeqs: [Int64: String] = [:]   // seq → the data it was written with
        var ackedCursor: Int64 = 0
        var ackedUUIDs: Set<String> = []
        var highestSeen: Int64 = 0          // the largest seq acknowledged or observed so far
        var kills = 0
        var acksAtKill: [Int] = []
        let runs = 24
        for iteration in 0..<runs {
            let plan: KillPlan = Int.random(in: 0..<6, using: &random) == 0
                ? .afterSpawn(micros: UInt32.random(in: 0...300_000, using: &random))
                : .afterAcks(Int.random(in: 0...40, using: &random), micros: UInt32.random(in: 0...2_000, using: &random))
            let childSeed = random.next()
            let context = "seed \(seed), run \(iteration), \(plan)"
            let run = try await onDedicatedThread {
                try runWriterChild(executable: executable, directory: stateDir, seed: childSeed, plan: plan)
            }
            if run.killedBySignal {
                #expect(run.exitStatus & 0x7f == SIGKILL, "\(context): the writer died of signal \(run.exitStatus & 0x7f)")
                kills += 1
            }
            acksAtKill.append(run.seqs.count + run.uuids.count)

            // seq never goes backwards across restarts: the writer starts where everything before ended.
            if let ready = run.readyLastSeq {
                #expect(ready >= highestSeen, "\(context): reopened at \(ready) after \(highestSeen)")
            }
            var previous = run.readyLastSeq ?? highestSeen
            for (seq, data) in run.seqs {
                #expect(seq > previous, "\(context): seq \(seq) after \(previous)")
                previous = seq
                ackedSeqs[seq] = data
            }
            #expect(run.bugs.isEmpty, "\(context): \(run.bugs)")
            ackedCursor = max(ackedCursor, run.cursor ?? 0)
            ackedUUIDs.formUnion(run.uuids)
            highestSeen = max(highestSeen, previous)

            // Reopen after the crash: sound, and everything acknowledged is there.
            let store = try await SmarticoStore.open(directory: stateDir, options: keepEverything)
            #expect(try await store.integrityCheck() == [], "\(context)")
            let last = await store.lastSeq()
            #expect(last >= highestSeen, "\(context): lastSeq \(last) < acknowledged \(highestSeen)")
            highestSeen = max(highestSeen, last)
            let events = try await store.events(after: 0, limit: Int.max)
            // The counter and the journal moved together: the newest readable event is last_seq.
            #expect((events.last?.seq ?? 0) == last, "\(context): lastSeq \(last), newest event \(events.last?.seq ?? 0)")
            let journaledList = events.filter { $0.name == "engagement" }.map {
                String(decoding: $0.data, as: UTF8.self).dropFirst(8).dropLast(2).description
            }
            let journaled = Set(journaledList)
            #expect(journaled.count == journaledList.count, "\(context): an engagement was journaled twice")
            var stored: [Int64: [UInt8]] = [:]
            for event in events { stored[event.seq] = event.data }
            let missing = ackedSeqs.filter { stored[$0.key] != bytes($0.value) }
            #expect(missing.isEmpty, "\(context): acknowledged events missing or wrong: \(missing.keys.sorted().prefix(10))")
            let outbox = Set(try await store.peek(limit: Int.max).map(\.uuid))
            let lost = ackedUUIDs.subtracting(outbox)
            #expect(lost.isEmpty, "\(context): acknowledged outbox messages missing: \(lost.sorted().prefix(5))")
            let cursor = try await store.cursor("crash") ?? 0
            #expect(cursor >= ackedCursor, "\(context): cursor \(cursor) behind acknowledged \(ackedCursor)")
            // Seen-set and journal moved together: every uid seen has its engagement event and back.
            let seen = Set(try await store.seenUIDs(user: "crash-user"))
            #expect(seen == journaled, "\(context): seen-set and journal differ by \(Array(seen.symmetricDifference(journaled).prefix(5)))")
            await store.close()
        }
        // The kills really happened, and most of them while the writer was writing.
        #expect(kills >= runs - 1, "only \(kills) of \(runs) writers were killed")
        #expect(acksAtKill.filter { $0 > 0 }.count >= runs / 2, "acks at kill: \(acksAtKill)")
        #expect(ackedSeqs.count > 0 && ackedUUIDs.count > 0)
    }
}
