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
            case .submit(let t, let batch): "submit \(t) \(batch.joined(separator: ","))"
            case .publishCommitted(let t, _, _): "published \(t)"
            case .publishWaiting(let events): "waiting \(events.joined(separator: ","))"
            }
        }
    }

    @Test func aSecondCommitGoesToTheStoreWhileTheFirstRunsAndLaterEventsBatch() {
        var p = Self.pipeline(depth: 2)
        #expect(Self.describe(p.emitted("n0")) == ["now n0"])
        #expect(Self.describe(p.emitted("j1")) == ["submit 0 j1"])
        // Arrived during commit 0: submitted at once, to wait at the store rather than on the loop.
        #expect(Self.describe(p.emitted("j2")) == ["submit 1 j2"])
        // Both slots taken: queued, with a non-journaled event between them kept in order.
        #expect(Self.describe(p.emitted("j3")).isEmpty)
        #expect(Self.describe(p.emitted("n4")).isEmpty)
        #expect(Self.describe(p.emitted("j5")).isEmpty)
        #expect(p.inFlight == 2 && p.queue == ["j3", "n4", "j5"])
        // Commit 0 back: published, and everything queued becomes the next commit (one fsync).
        #expect(Self.describe(p.committed(ticket: 0, outcome: ())) == ["published 0", "submit 2 j3,n4,j5"])
        #expect(Self.describe(p.committed(ticket: 1, outcome: ())) == ["published 1"])
        #expect(!p.isIdle)
        #expect(Self.describe(p.committed(ticket: 2, outcome: ())) == ["published 2"])
        #expect(p.isIdle)
        #expect(Self.describe(p.emitted("n6")) == ["now n6"])
    }

    @Test func withOneSlotEverythingDuringACommitWaitsForTheNext() {
        var p = Self.pipeline(depth: 1)
        #expect(Self.describe(p.emitted("j1")) == ["submit 0 j1"])
        #expect(Self.describe(p.emitted("j2")).isEmpty)
        #expect(Self.describe(p.emitted("j3")).isEmpty)
        #expect(Self.describe(p.committed(ticket: 0, outcome: ())) == ["published 0", "submit 1 j2,j3"])
        #expect(Self.describe(p.committed(ticket: 1, outcome: ())) == ["published 1"])
        #expect(p.isIdle)
    }

    @Test func resultsThatComeBackOutOfOrderArePublishedInSubmissionOrder() {
        var p = Self.pipeline(depth: 2)
        _ = p.emitted("j1")
        _ = p.emitted("j2")
        _ = p.emitted("j3")
        // Commit 1 first: held until commit 0 is published; no slot frees meanwhile.
        #expect(Self.describe(p.committed(ticket: 1, outcome: ())).isEmpty)
        #expect(p.inFlight == 2)
        #expect(Self.describe(p.committed(ticket: 0, outcome: ())) == ["published 0", "published 1", "submit 2 j3"])
    }

    @Test func eventsThatAreNotJournaledWaitForTheCommitsBeforeThemOnly() {
        var p = Self.pipeline(depth: 2)
        _ = p.emitted("j1")
        _ = p.emitted("j2")
        #expect(Self.describe(p.emitted("n3")).isEmpty)
        // One commit still in flight: n3 came after it, so it still waits (no empty commit is made).
        #expect(Self.describe(p.committed(ticket: 0, outcome: ())) == ["published 0"])
        #expect(p.queue == ["n3"])
        #expect(Self.describe(p.committed(ticket: 1, outcome: ())) == ["published 1", "waiting n3"])
        #expect(p.isIdle)
    }
}
