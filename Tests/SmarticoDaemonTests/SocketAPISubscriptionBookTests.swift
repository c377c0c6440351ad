// The subscription rules of the local socket API (socket-api.md, "Framing") on the pure
// `SubscriptionBook`: no socket, no store, no clock. A small harness plays the server's part: it
// keeps a journal in memory, queues the lines the book decides, drains them when told, and serves
// the pages the book asks for.
import Foundation
import Testing
import SmarticoProtocol
@testable import SmarticoDaemon

/// The queues as the book sees them: what is queued per peer, and whether the memory budget takes
/// one more oversized line.
private struct BookQueues: SubscriberQueues {
    var queued: [UInt64: Int] = [:]
    var memoryRoom = true

    func queuedBytes(_ peer: UInt64) -> Int { queued[peer] ?? 0 }
    func totalQueuedBytes() -> Int { queued.values.reduce(0, +) }
    func memoryAllows(_ peer: UInt64, extra: Int, pending: [UInt64: Int]) -> Bool { memoryRoom }
}

/// One line a peer got, parsed.
private struct BookLine: Equatable {
    var event: String?
    var seq: Int64?
    var data: [String: Any]?

    static func == (a: BookLine, b: BookLine) -> Bool { a.event == b.event && a.seq == b.seq }

    init(_ bytes: [UInt8]) {
        #expect(bytes.last == UInt8(ascii: "\n"))
        let object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] ?? [:]
        event = object["event"] as? String
        seq = (object["seq"] as? NSNumber)?.int64Value
        data = object["data"] as? [String: Any]
    }
}

/// The server's part, in memory.
private struct BookHarness {
    var book: SubscriptionBook
    var queues = BookQueues()
    /// The journal: seq → event; `firstKept` is its retention's start.
    var journal: [JournalEvent] = []
    var lastSeq: JournalSeq = 0
    /// Lines queued per peer and not drained yet, and those the peer read.
    var queuedLines: [UInt64: [[UInt8]]] = [:]
    var read: [UInt64: [BookLine]] = [:]
    var answers: [UInt64: [Result<JSONValue, SocketAPIError>]] = [:]
    var pageRequests: [(UInt64, SubscriptionBook.PageRequest)] = []
    var claims: [(UInt64, SubscriptionBook.CursorClaim)] = []
    var oversized: [UInt64: Int] = [:]
    var retries: [UInt64] = []
    var dropped: Set<UInt64> = []
    var decisions: [SubscriptionBook.Decision] = []
    let now: Int64 = 1_700_000_000_000

    init(maxQueueBytes: Int = 4096, maxTotalQueueBytes: Int = 1 << 20, lastSeq: JournalSeq = 0) {
        book = SubscriptionBook(limits: .init(maxQueueBytes: maxQueueBytes, maxTotalQueueBytes: maxTotalQueueBytes))
        book.journalID = "j1"
        book.started(lastSeq: lastSeq)
        self.lastSeq = lastSeq
    }

    mutating func apply(_ list: [SubscriptionBook.Decision]) {
        decisions += list
        for decision in list {
            switch decision {
            case .send(let peer, let line), .sendOversized(let peer, let line):
                if case .sendOversized = decision { oversized[peer, default: 0] += 1 }
                queuedLines[peer, default: []].append(line)
                queues.queued[peer, default: 0] += line.count
            case .respond(let peer, _, let result):
                answers[peer, default: []].append(result)
            case .readPage(let peer, let request): pageRequests.append((peer, request))
            case .claimCursor(let peer, let claim): claims.append((peer, claim))
            case .setCursor: break
            case .retrySoon(let peer): retries.append(peer)
            case .drop(let peer): dropped.insert(peer)
            }
        }
    }

    mutating func subscribe(_ peer: UInt64, _ options: SubscribeRequest = .init(), uid: UInt32? = 1000) {
        apply(book.subscribe(peer, id: .number(1), options, uid: uid, hasJournal: true, nowMs: now, queues: queues))
    }

    /// Journals an event (as the driver does) and publishes it.
    mutating func publish(_ name: String = "engagement", size: Int = 100) {
        lastSeq += 1
        let data = Array(#"{"x":"\#(String(repeating: "a", count: size))"}"#.utf8)
        journal.append(JournalEvent(seq: lastSeq, name: name, tsMs: now, data: data))
        apply(book.publish(PreparedEvent(name: name, seq: lastSeq, tsMs: now, data: data), queues: queues))
    }

    /// Journals an event without publishing it yet (the driver journals, then publishes).
    mutating func journalOnly(_ name: String = "engagement") -> PreparedEvent {
        lastSeq += 1
        let data = Array(#"{"x":1}"#.utf8)
        journal.append(JournalEvent(seq: lastSeq, name: name, tsMs: now, data: data))
        return PreparedEvent(name: name, seq: lastSeq, tsMs: now, data: data)
    }

    mutating func publishLive(_ name: String, _ data: String) {
        apply(book.publish(PreparedEvent(name: name, seq: nil, tsMs: now, data: Array(data.utf8)), queues: queues))
    }

    /// The peer's socket takes everything queued; the book hears its queue went down.
    mutating func drain(_ peer: UInt64) {
        for line in queuedLines[peer] ?? [] { read[peer, default: []].append(BookLine(line)) }
        queuedLines[peer] = []
        queues.queued[peer] = 0
        apply(book.roomMayHaveGrown(peer, queues: queues))
    }

    /// Serves the pages asked for so far from the in-memory journal.
    mutating func serveReads() {
        let requests = pageRequests
        pageRequests = []
        for (peer, request) in requests {
            let first = journal.first?.seq
            let events = journal.filter { $0.seq > request.after && (request.types?.contains($0.name) ?? true) }.prefix(request.limit)
            let page = SubscriptionBook.Page(bounds: JournalBounds(firstSeq: first, lastSeq: lastSeq), events: Array(events))
            apply(book.pageRead(peer, request, .success(page), nowMs: now, queues: queues))
        }
    }

    /// Drains and serves reads until nothing more moves.
    mutating func settle(_ peer: UInt64) {
        for _ in 0..<10_000 {
            drain(peer)
            if pageRequests.isEmpty && (queuedLines[peer] ?? []).isEmpty { return }
            serveReads()
        }
    }

    func seqs(_ peer: UInt64, of name: String = "engagement") -> [Int64] {
        (read[peer] ?? []).filter { $0.event == name }.compactMap(\.seq)
    }
}

@Suite("SubscriptionBook: the subscription rules without sockets")
struct SocketAPISubscriptionBookTests {
    @Test func liveSubscriberGetsEventsInOrderAndLiveOnlyEventsCarryItsCursor() throws {
        var h = BookHarness(lastSeq: 7)
        h.subscribe(1)
        #expect(h.answers[1] == [.success(.object(["last_seq": 7, "journal": "j1"]))])
        h.publish()
        h.publish()
        h.publishLive("session", #"{"state":"ready"}"#)
        h.drain(1)
        #expect(h.read[1]?.map(\.event) == ["engagement", "engagement", "session"])
        #expect(h.read[1]?.map(\.seq) == [8, 9, 9])
        #expect(h.book.subscriptions[1]?.isLive == true)
        #expect(h.pageRequests.isEmpty)
    }

    @Test func repeatedSeqIsIgnoredAndTypesFilter() {
        var h = BookHarness()
        h.subscribe(1, .init(types: ["deeplink"]))
        h.subscribe(2)
        h.publish("engagement")
        h.publish("deeplink")
        let again = PreparedEvent(name: "deeplink", seq: 2, tsMs: 0, data: Array("{}".utf8))
        #expect(h.book.publish(again, queues: h.queues).isEmpty)
        h.drain(1)
        h.drain(2)
        #expect(h.read[1]?.map(\.seq) == [2])
        #expect(h.read[2]?.map(\.seq) == [1, 2])
    }

    @Test func secondSubscribeOnAConnectionIsRefused() {
        var h = BookHarness()
        h.subscribe(1)
        h.subscribe(1)
        guard case .failure(let error)? = h.answers[1]?.last else { Issue.record("no refusal"); return }
        #expect(error.code == .badRequest)
        #expect(h.book.subscriberCount == 1)
    }

    @Test func fullQueueCatchesUpFromTheJournalThenRejoinsLiveWithoutLossOrDuplicate() {
        // Room for about ten lines; the peer does not read while 100 events are published.
        var h = BookHarness(maxQueueBytes: 2048)
        h.subscribe(1)
        h.subscribe(2)  // a fast reader beside it
        for i in 0..<100 {
            h.publish()
            h.drain(2)
            if i == 50 { h.publishLive("session", #"{"state":"backoff"}"#) }
        }
        #expect(h.book.subscriptions[1]?.isLive == false)
        #expect((h.queues.queued[1] ?? 0) <= 2048)
        // It reads, pages come; events keep coming meanwhile.
        for _ in 0..<20 {
            h.drain(1)
            h.serveReads()
            h.publish()
            h.drain(2)
        }
        h.settle(1)
        #expect(h.book.subscriptions[1]?.isLive == true)
        h.publish()
        h.drain(1)
        h.drain(2)
        #expect(h.seqs(1) == Array(1...121))
        #expect(h.seqs(2) == Array(1...121))
        // The session it missed while catching up came once, when it rejoined.
        let sessions = (h.read[1] ?? []).filter { $0.event == "session" }
        #expect(sessions.count == 1)
        #expect(h.pageRequests.isEmpty)
    }

    @Test func anEventInAPageBeforeItIsPublishedIsNotSentTwice() {
        var h = BookHarness(maxQueueBytes: 64 << 10)
        for _ in 0..<3 { h.publish() }
        h.subscribe(1, .init(since: 0))
        // Journaled while the page is read, published after it.
        let next = h.journalOnly()
        h.serveReads()
        #expect(h.book.subscriptions[1]?.isLive == true)
        h.apply(h.book.publish(next, queues: h.queues))
        h.publish()
        h.drain(1)
        #expect(h.seqs(1) == [1, 2, 3, 4, 5])
    }

    @Test func oneReadAtATimeAndOnlyBelowLowWater() {
        var h = BookHarness(maxQueueBytes: 2048)
        h.subscribe(1)
        for _ in 0..<40 { h.publish() }
        #expect(h.book.subscriptions[1]?.isLive == false)
        // Its queue is still above half: no page yet.
        #expect(h.book.roomMayHaveGrown(1, queues: h.queues).isEmpty)
        h.drain(1)
        #expect(h.pageRequests.count == 1)
        // A read is in flight: no second one.
        #expect(h.book.roomMayHaveGrown(1, queues: h.queues).isEmpty)
        #expect(h.pageRequests.first?.1.after == h.read[1]?.last?.seq)
        #expect(h.pageRequests.first?.1.limit == h.book.limits.pageSize)
    }

    @Test func totalBoundSendsPeersToTheJournal() {
        var h = BookHarness(maxQueueBytes: 100_000, maxTotalQueueBytes: 1500)
        h.subscribe(1)
        h.subscribe(2)
        for _ in 0..<10 { h.publish() }
        let queued = h.queues.queued.values.reduce(0, +)
        #expect(queued <= 1500)
        #expect(h.book.peakTotalQueuedBytes == queued)
        #expect(h.book.subscriptions.values.allSatisfy { !$0.isLive })
        h.settle(1)
        h.settle(2)
        #expect(h.seqs(1) == Array(1...10))
        #expect(h.seqs(2) == Array(1...10))
    }

    @Test func behindRetentionGetsOneGapThenGoesOnFromTheOldestKept() throws {
        var h = BookHarness(maxQueueBytes: 2048)
        h.subscribe(1)
        for _ in 0..<60 { h.publish() }
        let lastReceived = h.queuedLines[1]!.count  // lines 1...n queued before it was full
        // Retention drops everything up to 40 meanwhile.
        h.journal.removeAll { $0.seq <= 40 }
        h.settle(1)
        let lines = h.read[1] ?? []
        let gaps = lines.filter { $0.event == "gap" }
        #expect(gaps.count == 1)
        let gap = try #require(gaps.first?.data)
        #expect((gap["first_available_seq"] as? NSNumber)?.int64Value == 41)
        let missed = (gap["missed"] as? NSNumber)?.int64Value
        #expect(missed == Int64(40 - lastReceived))
        let expected: [Int64] = Array(1...Int64(lastReceived)) + Array(41...60)
        #expect(h.seqs(1) == expected)
        #expect(h.book.subscriptions[1]?.isLive == true)
    }

    @Test func replaySinceThenLive() {
        var h = BookHarness()
        for _ in 0..<30 { h.publish() }
        h.subscribe(1, .init(since: 12))
        #expect(h.answers[1] == [.success(.object(["last_seq": 30, "journal": "j1"]))])
        #expect(h.book.subscriptions[1]?.isLive == false)
        // Published during the replay: not sent live, read from the journal in order.
        h.publish()
        h.settle(1)
        h.publish()
        h.drain(1)
        #expect(h.seqs(1) == Array(13...32))
    }

    @Test func sinceBeyondTheLastSeqReplaysFromTheStartAfterAGap() throws {
        var h = BookHarness()
        for _ in 0..<3 { h.publish() }
        h.subscribe(1, .init(since: 99))
        h.settle(1)
        let gap = try #require(h.read[1]?.first)
        #expect(gap.event == "gap")
        #expect(gap.data?["reason"] as? String == "since_beyond_last_seq")
        #expect(h.seqs(1) == [1, 2, 3])
    }

    @Test func sinceFromAnotherJournalReplaysFromTheStart() throws {
        var h = BookHarness()
        for _ in 0..<3 { h.publish() }
        h.subscribe(1, .init(since: 2, journal: "old"))
        h.settle(1)
        #expect(h.read[1]?.first?.data?["reason"] as? String == "journal_replaced")
        #expect(h.seqs(1) == [1, 2, 3])
    }

    @Test func durableResumesAfterItsCursor() throws {
        var h = BookHarness()
        for _ in 0..<10 { h.publish() }
        h.subscribe(1, .init(durable: "kiosk"), uid: 1000)
        // Nothing is answered or read before the name's cursor comes back.
        #expect(h.answers[1] == nil)
        let (peer, claim) = try #require(h.claims.first)
        #expect(peer == 1)
        #expect(claim.name == "kiosk" && claim.uid == 1000 && claim.start == 10)
        #expect(h.book.roomMayHaveGrown(1, queues: h.queues).isEmpty)
        // The store says this name acknowledged 6.
        h.apply(h.book.cursorClaimed(1, claim, .success(6), nowMs: h.now, queues: h.queues))
        #expect(h.answers[1] == [.success(.object(["last_seq": 10, "journal": "j1"]))])
        h.settle(1)
        #expect(h.seqs(1) == [7, 8, 9, 10])
        #expect(h.book.subscriptions[1]?.isLive == true)
    }

    @Test func aDurableSubscriberGetsWhatWasPublishedWhileItsCursorWasClaimed() throws {
        var h = BookHarness()
        for _ in 0..<4 { h.publish() }
        h.subscribe(1, .init(durable: "kiosk"))
        let claim = try #require(h.claims.first).1
        // Published while the store looks the name up: nothing live, no page yet.
        h.publish()
        h.publishLive("props", #"{"a":2}"#)
        #expect(h.queuedLines[1] == nil)
        #expect(h.pageRequests.isEmpty)
        h.apply(h.book.cursorClaimed(1, claim, .success(2), nowMs: h.now, queues: h.queues))
        h.settle(1)
        #expect(h.seqs(1) == [3, 4, 5])
        let props = (h.read[1] ?? []).filter { $0.event == "props" }
        #expect(props.map(\.seq) == [5])
        #expect(h.book.subscriptions[1]?.isLive == true)
    }

    @Test func durableStartsAtSinceForANewName() throws {
        var h = BookHarness()
        for _ in 0..<5 { h.publish() }
        h.subscribe(1, .init(since: 2, durable: "new"))
        #expect(try #require(h.claims.first).1.start == 2)
    }

    @Test func durableClaimRefusedEndsTheSubscription() throws {
        var h = BookHarness()
        h.subscribe(1, .init(durable: "theirs"))
        let claim = try #require(h.claims.first).1
        let refusal = SocketAPIError(.notPermitted, "owned")
        h.apply(h.book.cursorClaimed(1, claim, .failure(refusal), nowMs: h.now, queues: h.queues))
        #expect(h.answers[1] == [.failure(refusal)])
        #expect(h.book.subscriberCount == 0)
    }

    @Test func unsubscribedBeforeTheCursorCameIsStillAnswered() throws {
        var h = BookHarness()
        h.subscribe(1, .init(durable: "k"))
        let claim = try #require(h.claims.first).1
        let had = h.book.unsubscribe(1)
        #expect(had)
        let decisions = h.book.cursorClaimed(1, claim, .success(0), nowMs: h.now, queues: h.queues)
        #expect(decisions == [.respond(1, id: .number(1), .success(.object(claim.answer)))])
    }

    @Test func durableWithoutCredentialsOrJournalIsRefused() {
        var h = BookHarness()
        h.subscribe(1, .init(durable: "k"), uid: nil)
        guard case .failure(let error)? = h.answers[1]?.first else { Issue.record("no refusal"); return }
        #expect(error.code == .notPermitted)
        #expect(h.book.subscriberCount == 0)
        let noJournal = h.book.subscribe(2, id: nil, .init(since: 0), uid: 1, hasJournal: false, nowMs: 0, queues: h.queues)
        guard case .respond(_, _, .failure(let e))? = noJournal.first else { Issue.record("no refusal"); return }
        #expect(e.code == .internal)
    }

    @Test func ackGoesToTheDurableNameOfTheSubscription() throws {
        var h = BookHarness()
        h.subscribe(1)
        guard case .respond(_, _, .failure(let notDurable)) = h.book.ack(1, id: nil, seq: 3, uid: 1000, hasJournal: true) else {
            Issue.record("ack without durable accepted"); return
        }
        #expect(notDurable.code == .badRequest)
        h.subscribe(2, .init(durable: "kiosk"))
        #expect(h.book.ack(2, id: .number(9), seq: 3, uid: 1000, hasJournal: true)
            == .setCursor(2, id: .number(9), name: "kiosk", seq: 3, uid: 1000))
        guard case .respond(_, _, .failure(let noUID)) = h.book.ack(2, id: nil, seq: 3, uid: nil, hasJournal: true) else {
            Issue.record("ack without credentials accepted"); return
        }
        #expect(noUID.code == .notPermitted)
    }

    @Test func sessionAndPropsAreCoalescedForACatchingUpPeer() {
        var h = BookHarness(maxQueueBytes: 2048)
        h.subscribe(1)
        for _ in 0..<30 { h.publish() }
        h.publishLive("session", #"{"state":"backoff"}"#)
        h.publishLive("session", #"{"state":"ready"}"#)
        h.publishLive("props", #"{"a":1}"#)
        h.publishLive("identified", #"{}"#)
        h.settle(1)
        let names = (h.read[1] ?? []).compactMap { $0.event }.filter { $0 != "engagement" }
        #expect(names == ["session", "props"])
        let session = (h.read[1] ?? []).first { $0.event == "session" }
        #expect(session?.data?["state"] as? String == "ready")
        #expect(session?.seq == 30)
    }

    @Test func anOversizedLineGoesAloneIntoAnEmptyQueue() {
        var h = BookHarness(maxQueueBytes: 2048)
        h.subscribe(1)
        h.publish(size: 5000)
        #expect(h.oversized[1] == 1)
        // Behind it, the next one waits in the journal.
        h.publish()
        #expect(h.book.subscriptions[1]?.isLive == false)
        h.settle(1)
        #expect(h.seqs(1) == [1, 2])
        #expect(h.book.peakQueuedBytes[1] ?? 0 > 5000)
    }

    @Test func anOversizedLineBeyondTheMemoryBudgetWaitsAndIsRetried() {
        var h = BookHarness(maxQueueBytes: 2048)
        h.queues.memoryRoom = false
        h.subscribe(1)
        h.publish(size: 5000)
        #expect(h.oversized[1] == nil)
        #expect(h.retries == [1])
        #expect(h.book.subscriptions[1]?.isLive == false)
        // Its page is read but the line still does not fit: not sent, cursor not moved.
        h.drain(1)
        h.serveReads()
        #expect(h.seqs(1).isEmpty)
        #expect(h.retries == [1, 1])
        // Room again: the retry brings it.
        h.queues.memoryRoom = true
        h.settle(1)
        #expect(h.seqs(1) == [1])
    }

    @Test func aJournalReadFailureDropsThePeerAfterAnError() throws {
        var h = BookHarness()
        for _ in 0..<3 { h.publish() }
        h.subscribe(1, .init(since: 0))
        let (_, request) = try #require(h.pageRequests.first)
        h.apply(h.book.pageRead(1, request, .failure(.invalidArgument("disk")), nowMs: h.now, queues: h.queues))
        #expect(h.dropped == [1])
        h.drain(1)
        #expect(h.read[1]?.map(\.event) == ["error"])
        #expect(h.read[1]?.first?.data?["code"] as? String == "journal_read_failed")
        #expect(h.book.subscriberCount == 0)
    }

    @Test func aPageForAnEarlierSubscriptionIsIgnored() throws {
        var h = BookHarness()
        for _ in 0..<3 { h.publish() }
        h.subscribe(1, .init(since: 0))
        let (_, request) = try #require(h.pageRequests.first)
        h.book.unsubscribe(1)
        h.subscribe(1)
        let page = SubscriptionBook.Page(bounds: JournalBounds(firstSeq: 1, lastSeq: 3), events: h.journal)
        #expect(h.book.pageRead(1, request, .success(page), nowMs: h.now, queues: h.queues).isEmpty)
    }

    @Test func closingForgetsThePeerAndReturnsItsPeak() {
        var h = BookHarness()
        h.subscribe(1)
        h.publish()
        let peak = h.book.peakQueuedBytes[1]
        #expect(peak != nil)
        #expect(h.book.peerClosed(1) == peak)
        #expect(h.book.subscriberCount == 0)
        #expect(h.book.peakQueuedBytes[1] == nil)
    }
}
