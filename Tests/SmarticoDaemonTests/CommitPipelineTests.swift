import Testing
@testable import SmarticoDaemon

/// The driver's group commit, as a state machine: what goes out at once, what waits, what each
/// commit takes, and the order in which committed batches are published.
@Suite("Engine: commit pipeline")
struct CommitPipelineTests {
    /// Events are named "j…" (journaled) or "n…" (not); steps are written as short strings.
    static func pipeline(depth: Int) -> CommitPipeline<String, Void> {
        CommitPipeline(depth: depth) { $0.hasPrefix("j") }
    }

    static func describe(_ steps: [CommitPipeline<String, Void>.Step]) -> [String] {
        steps.map {
            switch $0 {
            case .publishNow(let e): "now \(e)"
            case .submit(let t, let batch): "submit \(t) \(batch.items.joined(separator: ","))"
            case .publishCommitted(let t, let batch, _): "published \(t) \(batch.joined(separator: ","))"
            case .publishWaiting(let events): "waiting \(events.joined(separator: ","))"
            }
        }
    }

    /// The batch of the steps' newest `.submit` (the driver hands it to the store).
    static func submitted(_ steps: [CommitPipeline<String, Void>.Step]) -> CommitBatch<String>? {
        for case .submit(_, let batch) in steps.reversed() { return batch }
        return nil
    }

    @Test func aSecondCommitGoesToTheStoreWhileTheFirstRunsAndTakesWhatArrivesUntilItStarts() throws {
        var p = Self.pipeline(depth: 2)
        #expect(Self.describe(p.emitted("n0")) == ["now n0"])
        let first = try #require(Self.submitted(p.emitted("j1")))
        #expect(first.items == ["j1"])
        _ = first.seal()  // the store starts commit 0
        // Arrived during commit 0: submitted at once, to wait at the store rather than on the loop.
        let steps = p.emitted("j2")
        #expect(Self.describe(steps) == ["submit 1 j2"])
        let second = try #require(Self.submitted(steps))
        // Until the store starts it, commit 1 takes what arrives, a non-journaled event in order too.
        #expect(Self.describe(p.emitted("j3")).isEmpty)
        #expect(Self.describe(p.emitted("n4")).isEmpty)
        #expect(second.items == ["j2", "j3", "n4"] && p.queue.isEmpty)
        #expect(second.seal() == ["j2", "j3", "n4"])  // the store starts commit 1
        // After that, events queue for the next commit; both slots are taken.
        #expect(Self.describe(p.emitted("j5")).isEmpty)
        #expect(Self.describe(p.emitted("n6")).isEmpty)
        #expect(p.inFlight == 2 && p.queue == ["j5", "n6"])
        // Commit 0 back: published, and everything queued becomes the next commit (one fsync).
        #expect(Self.describe(p.committed(ticket: 0, outcome: ())) == ["published 0 j1", "submit 2 j5,n6"])
        #expect(Self.describe(p.committed(ticket: 1, outcome: ())) == ["published 1 j2,j3,n4"])
        #expect(!p.isIdle)
        #expect(Self.describe(p.emitted("j7")).isEmpty, "commit 2 is still open: it takes j7")
        #expect(Self.describe(p.committed(ticket: 2, outcome: ())) == ["published 2 j5,n6,j7"])
        #expect(p.isIdle)
        #expect(Self.describe(p.emitted("n8")) == ["now n8"])
    }

    /// A commit whose store call failed before it started (the store closed) was never sealed
    /// there: its outcome seals it, and it is published with what it took; later events go on.
    @Test func aCommitTheStoreNeverStartedIsSealedByItsOutcome() throws {
        var p = Self.pipeline(depth: 2)
        let batch = try #require(Self.submitted(p.emitted("j1")))
        #expect(Self.describe(p.emitted("j2")).isEmpty)
        #expect(Self.describe(p.committed(ticket: 0, outcome: ())) == ["published 0 j1,j2"])
        #expect(batch.append("j3") == "j3", "a published batch still took events")
        #expect(Self.describe(p.emitted("n3")) == ["now n3"])
        #expect(p.isIdle)
    }

    @Test func withOneSlotEverythingDuringACommitWaitsForTheNext() {
        var p = Self.pipeline(depth: 1)
        _ = Self.submitted(p.emitted("j1"))?.seal()
        #expect(Self.describe(p.emitted("j2")).isEmpty)
        #expect(Self.describe(p.emitted("j3")).isEmpty)
        #expect(Self.describe(p.committed(ticket: 0, outcome: ())) == ["published 0 j1", "submit 1 j2,j3"])
        #expect(Self.describe(p.committed(ticket: 1, outcome: ())) == ["published 1 j2,j3"])
        #expect(p.isIdle)
    }

    @Test func resultsThatComeBackOutOfOrderArePublishedInSubmissionOrder() {
        var p = Self.pipeline(depth: 2)
        _ = Self.submitted(p.emitted("j1"))?.seal()
        _ = Self.submitted(p.emitted("j2"))?.seal()
        _ = p.emitted("j3")
        // Commit 1 first: held until commit 0 is published; no slot frees meanwhile.
        #expect(Self.describe(p.committed(ticket: 1, outcome: ())).isEmpty)
        #expect(p.inFlight == 2)
        #expect(Self.describe(p.committed(ticket: 0, outcome: ())) == ["published 0 j1", "published 1 j2", "submit 2 j3"])
    }

    @Test func eventsThatAreNotJournaledWaitForTheCommitsBeforeThemOnly() {
        var p = Self.pipeline(depth: 2)
        _ = Self.submitted(p.emitted("j1"))?.seal()
        _ = Self.submitted(p.emitted("j2"))?.seal()
        #expect(Self.describe(p.emitted("n3")).isEmpty)
        // One commit still in flight: n3 came after it, so it still waits (no empty commit is made).
        #expect(Self.describe(p.committed(ticket: 0, outcome: ())) == ["published 0 j1"])
        #expect(p.queue == ["n3"])
        #expect(Self.describe(p.committed(ticket: 1, outcome: ())) == ["published 1 j2", "waiting n3"])
        #expect(p.isIdle)
    }

    /// The store's thread seals a batch and moves each event's journal row out in the same step
    /// (under the batch's lock): what it changed is what the loop publishes, and nothing joins after.
    @Test func sealingCanChangeTheEventsInPlace() {
        let batch = CommitBatch(["j1", "n2", "j3"])
        let taken = batch.seal { events -> [String] in
            let journaled = events.filter { $0.hasPrefix("j") }
            for i in events.indices where events[i].hasPrefix("j") { events[i] = "moved" }
            return journaled
        }
        #expect(taken == ["j1", "j3"])
        #expect(batch.append("j4") == "j4", "sealed: handed back, for the next commit")
        #expect(batch.seal() == ["moved", "n2", "moved"])
    }
}
