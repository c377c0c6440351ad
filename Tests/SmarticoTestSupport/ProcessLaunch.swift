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
