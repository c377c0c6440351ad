import Foundation
import SmarticoProtocol
import Testing
@testable import SmarticoDaemon

/// Proof of receipt: an outbox message leaves the outbox (`.markSent`) only when the server proved
/// it read it — the k-th PONG confirms what was written before our k-th PING (cumulative, counted),
/// or the clean end of a close we started. A skipped PONG only delays confirmation.
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

    @Test func aKeepalivePongConfirmsEverythingBeforeItsPingCumulatively() throws {
        // Barrier #1 after "a"; "b" waits behind it (one barrier at a time); keepalive #2 covers both.
        var (h, flushed) = Self.ready(with: [Self.entry("a")])
        #expect(flushed.sent.map(\.cid) == [9, 1])
        h.feed(.request(SessionRequestID(1), .send(["cid": 500, "uuid": "b"])))
        #expect(h.feed(.outboxStored(uuid: "b", failure: nil)).sent.map(\.cid) == [500])
        #expect(h.advance(by: 29_000).sent.map(\.cid) == [1])
        // The server answers both in order: the second PONG confirms "b" with no barrier of its own.
        #expect(h.server(["cid": 2]).markedSent == ["a"])
        let second = h.server(["cid": 2])
        #expect(second.markedSent == ["b"])
        #expect(second.sent.isEmpty)
        #expect(h.machine.counters.pings == 2)
    }

    @Test func aSkippedPongDelaysConfirmationAndNothingIsConfirmedUnread() throws {
        // Keepalive #1 is never answered (the server skips that PONG).
        var (h, _) = Self.ready(with: [])
        #expect(h.advance(by: 29_000).sent.map(\.cid) == [1])
        h.server(["cid": 1])  // the server is alive (its own PING), but sends no PONG for #1
        // "a", then its barrier #2. The server answers #2: by the count that PONG answers #1,
        // written before "a" — so "a" is not confirmed yet (never confirmed before it was read).
        h.feed(.request(SessionRequestID(1), .send(["cid": 500, "uuid": "a"])))
        #expect(h.feed(.outboxStored(uuid: "a", failure: nil)).sent.map(\.cid) == [500, 1])
        let pong = h.server(["cid": 2])
        #expect(pong.markedSent.isEmpty)
        // "a" is covered by a PING (#2) already: no barrier per PONG, so no PING flood.
        #expect(pong.sent.isEmpty)
        // Any PONG lets the next barrier go (waiting for "its own" would wait forever after a
        // skip). The next message's barrier (#3) gets its PONG, counted as #2's: "a" is confirmed.
        h.feed(.request(SessionRequestID(2), .send(["cid": 500, "uuid": "b"])))
        #expect(h.feed(.outboxStored(uuid: "b", failure: nil)).sent.map(\.cid) == [500, 1])
        #expect(h.server(["cid": 2]).markedSent == ["a"])
        // "b" waits for one more PONG; the connection dies first: "b" stays in the outbox and the
        // next connection sends it again with its uuid.
        h.reconnect()
        h.initOK()
        let again = h.feed(.outboxLoaded([Self.entry("b")]))
        #expect(again.sent.first?["uuid"] == .string("b"))
        #expect(h.server(["cid": 2]).markedSent == ["b"])
        #expect(h.all.markedSent == ["a", "b"])
    }

    @Test func aServerThatNeverAnswersPingsKeepsMessagesAndGetsOneBarrier() throws {
        var (h, flushed) = Self.ready(with: [Self.entry("a")])
        #expect(flushed.sent.map(\.cid) == [9, 1])
        // More messages while the barrier waits: no PING per message.
        for (i, u) in ["b", "c", "d"].enumerated() {
            h.feed(.request(SessionRequestID(UInt64(i + 1)), .send(["cid": 500, "uuid": .string(u)])))
            #expect(h.feed(.outboxStored(uuid: u, failure: nil)).sent.map(\.cid) == [500])
        }
        // The server's own PINGs keep the connection alive for minutes: no PONG ever comes, no
        // reconnect, nothing leaves the outbox.
        let minutes = h.keepAlive(for: 180_000)
        #expect(minutes.sent(cid: 1).isEmpty)
        #expect(minutes.connects.isEmpty && minutes.aborts == 0)
        #expect(h.all.markedSent.isEmpty)
        // When the server falls silent, our keepalive PING gets no answer either: after
        // keepalive_s + dead_after_s the connection is declared dead and everything is re-sent,
        // same uuids, on the next one.
        let silenceStart = h.now
        var silent: [SessionAction] = []
        while h.machine.state != .backoff, h.now - silenceStart < 120_000 { silent += h.advance(by: 500) }
        #expect(h.machine.state == .backoff)
        #expect(silent.sent.map(\.cid) == [1])
        #expect(silent.aborts == 1)
        // Declared dead no earlier than keepalive_s + dead_after_s (29 + 15 s) of silence.
        #expect(h.now - silenceStart >= 44_000)
        h.advance(by: h.timers[.backoff]! - h.now)
        h.connected()
        h.initOK()
        let again = h.feed(.outboxLoaded(["a", "b", "c", "d"].map { Self.entry($0) }))
        #expect(again.sent.compactMap { $0["uuid"]?.stringValue }.prefix(4) == ["a", "b", "c", "d"])
        #expect(h.server(["cid": 2]).markedSent == ["a", "b", "c", "d"])
    }
}
