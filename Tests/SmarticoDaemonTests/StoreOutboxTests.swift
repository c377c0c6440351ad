// The outbox: order, exactly-once removal, the queue_full cap, latest-value slots, status numbers.
import Testing
@testable import SmarticoDaemon

@Suite struct StoreOutboxTests {
    @Test func outboxKeepsOrderAndRemovesExactlyOnce() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path)
        let kinds: [OutboxKind] = [.socket, .http, .socket, .socket, .http]
        for (index, kind) in kinds.enumerated() {
            try await store.enqueue(uuid: "u\(index)", cid: 100 + index, kind: kind,
                                    payload: bytes("{\"n\":\(index)}"), createdMs: 1_000 + Int64(index))
        }
        let firstThree = try await store.peek(limit: 3)
        #expect(firstThree.map(\.uuid) == ["u0", "u1", "u2"])
        #expect(firstThree.map(\.cid) == [100, 101, 102])
        #expect(firstThree[1].kind == .http && firstThree[1].payload == bytes("{\"n\":1}"))
        #expect(firstThree.map(\.position) == firstThree.map(\.position).sorted())
        #expect(try await store.peek(limit: 10, kind: .http).map(\.uuid) == ["u1", "u4"])

        // A duplicate uuid is refused and changes nothing.
        await #expect(throws: StoreError.duplicateUUID("u2")) {
            try await store.enqueue(uuid: "u2", cid: 1, payload: [], createdMs: 0)
        }

        #expect(try await store.markSent(["u0", "u2", "nope"]) == 2)
        #expect(try await store.markSent(["u0", "u2"]) == 0)
        try await store.recordAttempt(["u1"])
        try await store.recordAttempt(["u1"])

        // Everything, including attempts, survives a reopen.
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path)
        let rest = try await store.peek(limit: 100)
        #expect(rest.map(\.uuid) == ["u1", "u3", "u4"])
        #expect(rest.map(\.attempts) == [2, 0, 0])
        #expect(try await store.outboxStatus() == OutboxStatus(depth: 3, oldestMs: 1_001))
        #expect(try await store.markSent(rest.map(\.uuid)) == 3)
        #expect(try await store.outboxStatus() == OutboxStatus(depth: 0, oldestMs: nil))
        #expect(try await store.peek(limit: 0).isEmpty)
        await store.close()
    }

    @Test func enqueueFailsWithQueueFullAtTheCap() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(maxOutboxMessages: 3))
        for index in 0..<3 {
            try await store.enqueue(uuid: "m\(index)", cid: 9, payload: bytes("{}"), createdMs: Int64(index))
        }
        await #expect(throws: StoreError.queueFull(max: 3)) {
            try await store.enqueue(uuid: "m3", cid: 9, payload: bytes("{}"), createdMs: 3)
        }
        #expect(try await store.outboxStatus().depth == 3)
        #expect(StoreError.queueFull(max: 3).description.contains("outbox.max_messages"))

        // Room again after a removal; a larger cap applies at once.
        try await store.markSent(["m0"])
        try await store.enqueue(uuid: "m3", cid: 9, payload: bytes("{}"), createdMs: 3)
        await store.updateOptions(StoreOptions(maxOutboxMessages: 4))
        try await store.enqueue(uuid: "m4", cid: 9, payload: bytes("{}"), createdMs: 4)
        #expect(try await store.peek(limit: 10).map(\.uuid) == ["m1", "m2", "m3", "m4"])
        await store.close()
    }

    @Test func latestValueSlotKeepsOnlyTheLatest() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(maxOutboxMessages: 1))
        try await store.enqueue(uuid: "o1", cid: 9, payload: bytes("{}"), createdMs: 50)
        try await store.putLatest(slot: "language", uuid: "l1", cid: 9, payload: bytes("{\"language\":\"en\"}"),
                                  createdMs: 100)
        try await store.putLatest(slot: "language", uuid: "l2", cid: 9, payload: bytes("{\"language\":\"de\"}"),
                                  createdMs: 200)
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(maxOutboxMessages: 1))
        let latest = try await store.latestMessages()
        #expect(latest == [LatestMessage(slot: "language", uuid: "l2", cid: 9,
                                         payload: bytes("{\"language\":\"de\"}"), createdMs: 200)])
        // Slots do not count against the cap, but do count as waiting.
        #expect(try await store.outboxStatus() == OutboxStatus(depth: 2, oldestMs: 50))
        // Acknowledging the replaced value does not remove the newer one.
        #expect(try await store.markSent(["l1"]) == 0)
        #expect(try await store.markSent(["l2", "o1"]) == 2)
        #expect(try await store.latestMessages().isEmpty)
        #expect(try await store.outboxStatus() == OutboxStatus(depth: 0, oldestMs: nil))
        await store.close()
    }
}
