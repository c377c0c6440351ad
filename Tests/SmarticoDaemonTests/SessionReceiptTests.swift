import Foundation
import SmarticoProtocol
import Testing
@testable import SmarticoDaemon

/// Proof of receipt: an outbox message leaves the outbox (`.markSent`) only when the server proved
/// it read it — a PONG to a barrier PING written after it, or the clean end of a close we started.
@Suite struct SessionReceiptTests {
    static func entry(_ uuid: String, createdMs: Int64 = 1) -> OutboxEntry {
        OutboxEntry(uuid: uuid, cid: 9, bytes: Array(#"{"cid":9,"eventType":"e","uuid":"\#(uuid)"}"#.utf8), createdMs: createdMs)
    }

    /// An anonymous ready session whose first outbox load is answered with `entries`.
    static func ready(with entries: [OutboxEntry], outboxBatch: Int = 64) -> (Harness, [SessionAction]) {
        var h = Harness(SessionFixtures.config())
        h.machine.env.outboxBatch = outboxBatch
        #expect(h.bringUp().contains(.loadOutbox(limit: outboxBatch)))
        let flushed = h.feed(.outboxLoaded(entries))
        return (h, flushed)
    }

    @Test func aPongForTheBarrierRemovesWhatWasWrittenBeforeIt() throws {
        var (h, flushed) = Self.ready(with: [Self.entry("a"), Self.entry("b")])
        #expect(flushed.sent.map(\.cid) == [9, 9, 1])
        let barrier = try #require(flushed.sent.last)
        #expect(barrier["ts"] == .number(h.now))
        #expect(UUIDv4.isValidV4(barrier["uuid"]?.stringValue ?? ""))
        #expect(flushed.markedSent.isEmpty)
        #expect(h.machine.counters.pings == 1)

        // One barrier at a time: a message written while it waits gets none of its own yet.
        h.feed(.request(SessionRequestID(1), .send(["cid": 500, "uuid": "c"])))
        let direct = h.feed(.outboxStored(uuid: "c", failure: nil))
        #expect(direct.sent.map(\.cid) == [500])

        // The PONG confirms the barrier's messages, and the next barrier follows for "c".
        let pong = h.server(["cid": 2])
        #expect(pong.markedSent == ["a", "b"])
        #expect(pong.sent.map(\.cid) == [1])
        #expect(h.server(["cid": 2]).markedSent == ["c"])
        // Nothing is left to prove: no more barriers, nothing confirmed twice.
        let idle = h.server(["cid": 2])
        #expect(idle.sent.isEmpty && idle.markedSent.isEmpty)
        #expect(h.all.markedSent == ["a", "b", "c"])
    }

    @Test func keepalivePingsCountWhenPongsAreMatched() throws {
        var (h, _) = Self.ready(with: [])
        // Our keepalive PING (#1) goes out after 29 s of silence and is not answered yet.
        #expect(h.advance(by: 29_000).sent.map(\.cid) == [1])
        // The barrier is PING #2.
        let flushed = h.feed(.request(SessionRequestID(1), .send(["cid": 500, "uuid": "a"])))
        #expect(flushed.sent.isEmpty)
        #expect(h.feed(.outboxStored(uuid: "a", failure: nil)).sent.map(\.cid) == [500, 1])
        // The first PONG answers the keepalive PING: nothing proven yet.
        #expect(h.server(["cid": 2]).markedSent.isEmpty)
        // The second answers the barrier.
        #expect(h.server(["cid": 2]).markedSent == ["a"])

        // Barrier #3 after "b", then keepalive #4 before the server answers: PONG #3 confirms.
        h.feed(.request(SessionRequestID(2), .send(["cid": 500, "uuid": "b"])))
        #expect(h.feed(.outboxStored(uuid: "b", failure: nil)).sent.map(\.cid) == [500, 1])
        #expect(h.advance(by: 29_000).sent.map(\.cid) == [1])
        #expect(h.server(["cid": 2]).markedSent == ["b"])
        #expect(h.server(["cid": 2]).markedSent.isEmpty)
        #expect(h.machine.counters.pings == 4)
        #expect(h.machine.counters.pongs == 4)
    }

    @Test func aConnectionThatDiesKeepsThemAndTheNextSendsThemAgainWithTheSameUUID() throws {
        var (h, flushed) = Self.ready(with: [Self.entry("a")])
        #expect(flushed.sent.map { $0["uuid"] }.first == .string("a"))
        // The connection dies before the PONG: nothing leaves the outbox.
        h.reconnect()
        #expect(h.initOK().contains(.loadOutbox(limit: 64)))
        // A PONG on the new connection answers none of the old one's PINGs (none of its own is
        // waiting: it is not counted).
        #expect(h.server(["cid": 2]).markedSent.isEmpty)
        let again = h.feed(.outboxLoaded([Self.entry("a")]))
        #expect(again.sent.map(\.cid) == [9, 1])
        #expect(again.sent.first?["uuid"] == .string("a"))
        #expect(h.server(["cid": 2]).markedSent == ["a"])
        #expect(h.all.markedSent == ["a"])
    }

    @Test func aMessageWrittenButNotConfirmedIsNotSentTwiceOnOneConnection() throws {
        // A full batch asks for more; the next load skips what this connection already wrote
        // (still in the store until confirmed) and asks for that many more.
        var (h, flushed) = Self.ready(with: [Self.entry("a"), Self.entry("b")], outboxBatch: 2)
        #expect(flushed.sent.map(\.cid) == [9, 9, 1])
        #expect(flushed.contains(.loadOutbox(limit: 4)))
        let more = h.feed(.outboxLoaded([Self.entry("a"), Self.entry("b"), Self.entry("c")]))
        #expect(more.sent.map { $0["uuid"] } == [.string("c")]) // its barrier waits for the first
        #expect(more.loads == 0)
        #expect(h.server(["cid": 2]).markedSent == ["a", "b"])
        #expect(h.server(["cid": 2]).markedSent == ["c"])
    }

    @Test func aCleanCloseWeStartedConfirms() throws {
        var (h, _) = Self.ready(with: [Self.entry("a")])
        let close = h.feed(.shutdown)
        #expect(close.closes == [1000])
        #expect(close.markedSent.isEmpty)
        let closed = h.feed(.closed(h.conn!, code: 1000, reason: "", clean: true))
        #expect(closed.markedSent == ["a"])
        #expect(closed.contains(.stopped))

        // The same close ending without its handshake proves nothing.
        var (u, _) = Self.ready(with: [Self.entry("a")])
        u.feed(.shutdown)
        let unclean = u.feed(.closed(u.conn!, code: 1006, reason: "reset", clean: false))
        #expect(unclean.markedSent.isEmpty)
        #expect(unclean.contains(.stopped))

        // Nor does a close that times out (aborted).
        var (t, _) = Self.ready(with: [Self.entry("a")])
        let moved = "ws://127.0.0.1:9090/websocket/services?master&domain=app.example&version=1.2.3"
        #expect(t.feed(.reload(SessionFixtures.config(url: moved))).closes == [1000])
        let timedOut = t.advance(by: 2_000)
        #expect(timedOut.aborts == 1)
        #expect(timedOut.connects == [moved])
        #expect(t.all.markedSent.isEmpty)
    }

    @Test func aServerCloseDoesNotConfirm() throws {
        var (h, _) = Self.ready(with: [Self.entry("a")])
        let closed = h.feed(.closed(h.conn!, code: 1000, reason: "bye", clean: true))
        #expect(closed.markedSent.isEmpty)
        #expect(h.machine.state == .backoff)
        #expect(h.all.markedSent.isEmpty)
    }
}
