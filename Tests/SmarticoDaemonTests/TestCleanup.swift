import Synchronization
import Testing

/// Asynchronous clean-up a test starts in `defer` (where it cannot `await`), awaited before the
/// test counts as finished when the test or its suite carries `.awaitsCleanup`:
///
///     @Suite("…", .awaitsCleanup) struct SomeTests {
///         @Test func something() async throws {
///             let rig = try await SocketTestRig.start()
///             defer { cleanUpAfterTest { await rig.stop() } }
///             …
///         }
///     }
///
/// Before, these tests wrote `defer { Task { await rig.stop() } }`: nothing waited for that task,
/// so a rig could still be running when the next test started, and the last test's loops and
/// connections were never shut down before the process exited (LeakSanitizer reported them).
/// Called in a test without the trait, it records an issue (the test fails) and still runs the
/// clean-up, unawaited: a new suite that forgets the trait is caught at once, not by the next
/// LeakSanitizer run.
///
/// It lives in the test target, not in SmarticoTestSupport: that is a plain target, which the
/// release build (scripts/package.sh) compiles too, and `Testing` exists only for test builds.
func cleanUpAfterTest(_ body: @escaping @Sendable () async -> Void) {
    let task = Task { await body() }
    guard let pending = PendingCleanups.current else {
        Issue.record(
            "cleanUpAfterTest was called in a test without the .awaitsCleanup trait, so nothing awaits this clean-up: add .awaitsCleanup to the test or its suite")
        return
    }
    pending.add(task)
}

/// The clean-ups started during one test (a task-local set by ``AwaitsCleanupTrait``).
final class PendingCleanups: Sendable {
    @TaskLocal static var current: PendingCleanups?

    private let tasks = Mutex<[Task<Void, Never>]>([])

    func add(_ task: Task<Void, Never>) {
        tasks.withLock { $0.append(task) }
    }

    /// Awaits every clean-up, including any started by another clean-up.
    func drain() async {
        while true {
            let batch = tasks.withLock { t -> [Task<Void, Never>] in
                defer { t.removeAll() }
                return t
            }
            if batch.isEmpty { return }
            for task in batch { await task.value }
        }
    }
}

/// Runs each test with a fresh ``PendingCleanups`` and awaits them after the test body, whether it
/// returned or threw.
struct AwaitsCleanupTrait: TestTrait, SuiteTrait, TestScoping {
    init() {}

    var isRecursive: Bool { true }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // Scopes nest (the suite's around each test's, a test function's around its cases); a
        // clean-up joins the innermost, so each is awaited when its own test case ends.
        let cleanups = PendingCleanups()
        do {
            try await PendingCleanups.$current.withValue(cleanups) { try await function() }
        } catch {
            await cleanups.drain()
            throw error
        }
        await cleanups.drain()
    }
}

extension Trait where Self == AwaitsCleanupTrait {
    /// Await the clean-ups each test starts with ``cleanUpAfterTest(_:)`` before the test ends.
    static var awaitsCleanup: Self { AwaitsCleanupTrait() }
}
