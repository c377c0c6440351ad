// The store's checkpoints, off the commit path: a connection and a thread of their own copy the WAL
// back into the database file while the store's thread goes on committing (docs/store.md,
// "Checkpoints").
import Synchronization

/// Runs the WAL's checkpoints for a ``SmarticoStore`` on a thread and an SQLite connection of its
/// own. SQLite's automatic checkpoint ran inside the commit that took the WAL past 1000 frames:
/// that commit, and every event waiting behind it, waited for the frames to be read back, written
/// into the database file and that file synced (issue 42's latency stall). Here the store's
/// connection only reports the WAL's size after each commit (``SQLiteConnection/walFrames``);
/// past ``thresholdBytes`` of frames a passive checkpoint runs on this thread, which a WAL database allows
/// beside a writer: commits go on appending to the WAL meanwhile, and the WAL starts again from its
/// beginning at the first commit after a checkpoint copied all of it.
///
/// Durability does not change: a commit is on disk once its WAL frames are synced, before any
/// checkpoint. The database's last connection to close (the store's own, after ``close()``)
/// checkpoints what is left and removes the WAL, as before.
final class WALCheckpointer: Sendable {
    /// The WAL's size after a commit from which a checkpoint is started: about what SQLite's own
    /// automatic checkpoint let it reach (1000 frames of 4 KiB pages), so the WAL stays the size it
    /// was, within `journal_size_limit`.
    static let thresholdBytes = 4 << 20

    /// The database file.
    let path: String
    /// Frames in the WAL after a commit from which a checkpoint is started (``thresholdBytes`` of
    /// the database's pages).
    let threshold: Int
    /// The thread the checkpoints run on (named like the store's: it is the store's second thread).
    private let thread = StoreThreadExecutor(name: "smarticod-store")
    /// The checkpointer's connection (opened at the first checkpoint), and whether ``close()``
    /// was called. Held for a whole checkpoint, so `close()` waits for one that is running.
    private let state = Mutex<State>(State())
    /// A checkpoint is queued or running: no second one is queued.
    private let busy = Atomic<Bool>(false)
    /// How many checkpoints ran, and the last one's failure (diagnostics, tests).
    private let outcome = Mutex<(count: Int, lastError: SQLiteError?)>((0, nil))

    private struct State: ~Copyable {
        var connection: SQLiteConnection?
        var closed = false
    }

    init(path: String, pageSize: Int) {
        self.path = path
        threshold = max(1, Self.thresholdBytes / max(512, pageSize))
    }

    /// After a commit of the store's connection that left `walFrames` frames in the WAL: queues a
    /// checkpoint when there are ``threshold`` or more and none is queued or running.
    func committed(walFrames: Int) {
        guard walFrames >= threshold, !busy.exchange(true, ordering: .acquiringAndReleasing) else { return }
        thread.submit { [self] in
            run()
            busy.store(false, ordering: .releasing)
        }
    }

    /// How many checkpoints ran and the last failure, if any.
    var checkpoints: (count: Int, lastError: SQLiteError?) { outcome.withLock { $0 } }

    /// Closes the checkpointer's connection, after the checkpoint running now if one is; no
    /// checkpoint runs after it. The store calls it before closing its own connection, so that
    /// its own is the last one and removes the WAL.
    func close() {
        state.withLock { state in
            state.connection?.close()
            state.connection = nil
            state.closed = true
        }
    }

    private func run() {
        let result: SQLiteError? = state.withLock { state in
            guard !state.closed else { return nil }
            do throws(SQLiteError) {
                if state.connection == nil {
                    let connection = try SQLiteConnection(path: path, create: false)
                    // FULL: the WAL is synced before its frames are copied, the database file after.
                    try connection.execute("PRAGMA synchronous = FULL")
                    state.connection = connection
                }
                try state.connection?.checkpoint()
                return nil
            } catch {
                // A checkpoint that fails loses nothing (the WAL still holds every commit): the
                // next commit past the threshold tries again, and the store's close checkpoints.
                state.connection?.close()
                state.connection = nil
                return error
            }
        }
        outcome.withLock { $0 = ($0.count + 1, result ?? $0.lastError) }
    }
}
