// The test-support trait that awaits clean-ups started in `defer` (Tests/SmarticoDaemonTests/TestCleanup.swift).
import Synchronization
import Testing

@Suite struct TestCleanupTests {
    /// A clean-up that takes a while has finished when the scope returns; without the scope it
    /// has not (so the first check can fail).
    @Test func theScopeAwaitsEveryCleanUpTheTestStarted() async throws {
        let test = try #require(Test.current)
        let done = Mutex(0)
        let slowCleanUp: @Sendable () async -> Void = {
            try? await Task.sleep(for: .milliseconds(300))
            done.withLock { $0 += 1 }
        }
        try await AwaitsCleanupTrait().provideScope(for: test, testCase: Test.Case.current) {
            defer { cleanUpAfterTest(slowCleanUp) }
            // A clean-up that starts another: that one is awaited too.
            cleanUpAfterTest { cleanUpAfterTest(slowCleanUp) }
        }
        #expect(done.withLock { $0 } == 2)

        // Outside any scope the clean-up still runs, but nothing waits for it, and the test is
        // told so (withKnownIssue fails unless exactly that issue is recorded).
        let unscoped = Mutex(0)
        withKnownIssue {
            cleanUpAfterTest {
                try? await Task.sleep(for: .milliseconds(300))
                unscoped.withLock { $0 += 1 }
            }
        } matching: { issue in
            issue.description.contains("without the .awaitsCleanup trait")
        }
        #expect(unscoped.withLock { $0 } == 0)
    }

    /// A test that throws still has its clean-ups awaited, and the error goes on to the caller.
    @Test func aThrowingTestStillHasItsCleanUpsAwaited() async throws {
        struct Boom: Error {}
        let test = try #require(Test.current)
        let done = Mutex(false)
        await #expect(throws: Boom.self) {
            try await AwaitsCleanupTrait().provideScope(for: test, testCase: Test.Case.current) {
                defer {
                    cleanUpAfterTest {
                        try? await Task.sleep(for: .milliseconds(200))
                        done.withLock { $0 = true }
                    }
                }
                throw Boom()
            }
        }
        #expect(done.withLock { $0 })
    }
}
