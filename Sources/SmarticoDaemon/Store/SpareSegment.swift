// The event log's next segment, written full of zeros ahead of time (docs/store.md, "Preallocated
// segments"). Used only by `EventLog`, on the store thread; the writing runs on a thread of its own.
import COpenSSL  // smartico_write_back_range, smartico_set_io_priority_idle, smartico_set_thread_name
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A file of `bytes` zeros at `<directory>/spare`, written and synced on a short-lived thread of its
/// own, for `EventLog` to rename into its next segment. An append into blocks that are already
/// allocated and inside the file's size makes `fdatasync` write the data alone; an append that grows
/// the file makes it write the inode too, a second synchronous write on every batch (on this
/// machine's ext4: p50 153 → 107 µs per append + sync, `docs/benchmarks.md`).
///
/// The file is written as `spare.tmp`, synced, then renamed to `spare`: a `spare` of the right size
/// is whole and durable, also after a crash, so it is kept across restarts.
///
/// A segment retention lets go of is reused rather than deleted when none is waiting (`retire`):
/// renamed to `retired`, it becomes the next spare with only its end written (zeros from its size up
/// to `bytes`). Its blocks are already written, so appends into it sync data alone as into zeros, and
/// the 4 MiB of zeros a new spare costs (CPU and disk writes) are not spent. Its old records stay
/// after the new ones; they are older than any seq it will hold, so they are never read as its
/// records (`EventLog`'s open tells them apart). Such a spare is not carried across a restart.
final class SpareSegment: @unchecked Sendable {
    // @unchecked Sendable: `state` is a Mutex; `directory`, `bytes` and the paths are immutable;
    // `thread` is touched only by the owner (the store thread), which starts and joins it.
    private enum Phase: Equatable {
        case absent
        case writing
        case ready
        /// The last attempt failed with this errno (retried at the next `request`).
        case failed(Int32)
    }

    private struct State {
        var phase: Phase = .absent
        var cancel = false
        /// A retired segment waits at `retiredPath` to be the next spare.
        var retired = false
    }

    let path: String
    private let temporaryPath: String
    private let retiredPath: String
    let bytes: Int
    private let state = Mutex(State())
    private var thread: pthread_t?
    /// Written back (and waited for) in steps of this many bytes.
    static let writeBackStep = 256 << 10

    /// Owns `<directory>/spare`: keeps one of `bytes` bytes left by an earlier run when it is zeros
    /// at its start (written as zeros, not a reused segment), removes anything else (a half-written
    /// `spare.tmp`, a spare of another size, a reused one, a `retired` segment).
    init(directory: String, bytes: Int) {
        path = directory + "/spare"
        temporaryPath = directory + "/spare.tmp"
        retiredPath = directory + "/retired"
        self.bytes = bytes
        unlink(temporaryPath)
        unlink(retiredPath)
        var info = stat()
        if stat(path, &info) == 0 {
            if (info.st_mode & S_IFMT) == S_IFREG && Int(info.st_size) == bytes && Self.startsWithZeros(path) {
                state.withLock { $0.phase = .ready }
            } else {
                unlink(path)
            }
        }
    }

    /// True when the file's first 8 bytes are zeros (a reused segment starts with a record).
    private static func startsWithZeros(_ path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        var head: UInt64 = 1
        return pread(fd, &head, 8, 0) == 8 && head == 0
    }

    /// Keeps the segment file at `segmentPath`, which retention lets go of, to be the next spare
    /// instead of zeros; false when one is kept already or it cannot be moved (the caller deletes
    /// it). Starts the spare's writing when none is ready or being written.
    func retire(_ segmentPath: String) -> Bool {
        let kept = state.withLock { s -> Bool in
            guard !s.retired, rename(segmentPath, retiredPath) == 0 else { return false }
            s.retired = true
            return true
        }
        if kept { request() }
        return kept
    }

    /// True while a retired segment waits to be the next spare.
    var holdsRetired: Bool { state.withLock { $0.retired } }

    deinit { close() }

    /// Starts writing a spare unless one is ready or being written.
    func request() {
        let start = state.withLock { s -> Bool in
            switch s.phase {
            case .ready, .writing: return false
            case .absent, .failed: s.phase = .writing; s.cancel = false; return true
            }
        }
        guard start else { return }
        join()  // a finished earlier writer
        let job = Unmanaged.passRetained(self)
        var created = pthread_t()
        let rc = pthread_create(&created, nil, { context in
            let spare = Unmanaged<SpareSegment>.fromOpaque(context!).takeRetainedValue()
            _ = smartico_set_thread_name("smarticod-spare")
            spare.write()
            return nil
        }, job.toOpaque())
        if rc == 0 {
            thread = created
        } else {
            job.release()
            state.withLock { $0.phase = .failed(rc) }
        }
    }

    /// Moves the ready spare to `destination` and returns true; false when none is ready (the
    /// caller creates an empty file instead).
    func take(to destination: String) -> Bool {
        let ready = state.withLock { s -> Bool in
            guard s.phase == .ready else { return false }
            s.phase = .absent
            return true
        }
        return ready && rename(path, destination) == 0
    }

    /// True when a spare is ready to take.
    var isReady: Bool { state.withLock { $0.phase == .ready } }

    /// Waits for a spare being written to be ready (or to fail). Tests and `close`.
    func wait() { join() }

    /// Stops a writer (it removes its temporary file) and waits for it; a ready spare stays.
    func close() {
        state.withLock { $0.cancel = true }
        join()
    }

    private func join() {
        guard let t = thread else { return }
        pthread_join(t, nil)
        thread = nil
    }

    /// On the writer thread: `bytes` zeros to `spare.tmp` — or, when a retired segment waits, that
    /// file moved there and written from its end up to `bytes` — synced, renamed to `spare`. Its disk
    /// writes go in the idle I/O class, 256 KiB at a time, so the journal's syncs never queue behind
    /// megabytes of zeros (p99.9 of a 1,000/s append + sync beside a 4 MiB spare written every 2 s:
    /// 640–940 µs in one go, max 3.3–4.0 ms; 550–840 µs this way, max 0.9–1.1 ms; docs/benchmarks.md).
    private func write() {
        _ = smartico_set_io_priority_idle()
        let reused = state.withLock { s -> Bool in
            guard s.retired else { return false }
            s.retired = false
            if rename(retiredPath, temporaryPath) == 0 { return true }
            unlink(retiredPath)
            return false
        }
        let fd = open(temporaryPath, O_WRONLY | O_CLOEXEC | (reused ? 0 : O_CREAT | O_TRUNC), 0o600)
        var failure: Int32 = fd >= 0 ? 0 : errno
        if fd >= 0 {
            var done = 0, flushed = 0
            if reused {
                // Its blocks up to its size are written already: only the rest is.
                var info = stat()
                if fstat(fd, &info) != 0 { failure = errno }
                done = min(Int(info.st_size), bytes)
                if failure == 0 && Int(info.st_size) > bytes && ftruncate(fd, off_t(bytes)) != 0 { failure = errno }
                flushed = done
            }
            while done < bytes && failure == 0 {
                if state.withLock({ $0.cancel }) { failure = ECANCELED; break }
                let n = min(spareZeroes.count, bytes - done)
                let written = spareZeroes.withUnsafeBytes { pwrite(fd, $0.baseAddress, n, off_t(done)) }
                if written > 0 { done += written } else if written < 0 && errno == EINTR { continue } else {
                    failure = written < 0 ? errno : EIO
                }
                if done - flushed >= Self.writeBackStep || (done == bytes && done > flushed) {
                    _ = smartico_write_back_range(fd, Int64(flushed), Int64(done - flushed))
                    flushed = done
                }
            }
            if failure == 0 && fdatasync(fd) != 0 { failure = errno }
            Glibc.close(fd)
            if failure == 0 && rename(temporaryPath, path) != 0 { failure = errno }
            if failure != 0 { unlink(temporaryPath) }
        }
        state.withLock { $0.phase = failure == 0 ? .ready : .failed(failure) }
    }
}

/// What a spare is written from (immutable, shared; 64 KiB).
private let spareZeroes = [UInt8](repeating: 0, count: 1 << 16)
