import Foundation
import Synchronization

/// One lock for every `Process.run()` in the test bundle. All test targets link into one
/// process, and concurrent launches from several threads crashed inside Foundation's
/// `Process.run` (a memmove on a bad pointer) during full parallel runs; a lock private to
/// one test module did not stop launches from the others.
public let processLaunchLock = Mutex(())

extension Process {
    /// `run()` under ``processLaunchLock``.
    public func runSerialized() throws {
        try processLaunchLock.withLock { _ in try run() }
    }
}

extension Process {
    /// Waits (blocking: call it on a plain `Thread`, never on the cooperative pool) until the
    /// process has exited, at most `timeout`; past it, sends SIGKILL when `killOnTimeout` and
    /// waits up to 5 s more for the kill. Returns true when it exited within `timeout`.
    ///
    /// Use this, never Foundation's `waitUntilExit()`: on Linux that one spins a run loop with
    /// no sources on the calling thread, a full core per waiting thread for as long as the child
    /// lives (it was most of the suite's CPU: an Autobahn run burnt 10 CPU-minutes waiting).
    @discardableResult
    public func waitForExit(timeout: Duration = .seconds(120), killOnTimeout: Bool = true) -> Bool {
        let clock = ContinuousClock()
        let end = clock.now + timeout
        while isRunning {
            if clock.now >= end {
                if killOnTimeout {
                    kill(processIdentifier, SIGKILL)
                    let hard = clock.now + .seconds(5)
                    while isRunning && clock.now < hard { usleep(5_000) }
                }
                return false
            }
            usleep(5_000)
        }
        return true
    }

    /// ``waitForExit(timeout:killOnTimeout:)`` for async code: sleeps between checks instead of
    /// blocking a thread.
    @discardableResult
    public func exited(timeout: Duration = .seconds(120), killOnTimeout: Bool = true) async -> Bool {
        let clock = ContinuousClock()
        let end = clock.now + timeout
        while isRunning {
            if clock.now >= end {
                if killOnTimeout {
                    kill(processIdentifier, SIGKILL)
                    let hard = clock.now + .seconds(5)
                    while isRunning && clock.now < hard { try? await Task.sleep(for: .milliseconds(5)) }
                }
                return false
            }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return true
    }
}
