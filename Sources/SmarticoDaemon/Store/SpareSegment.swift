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
    }

    let path: String
    private let temporaryPath: String
    let bytes: Int
    private let state = Mutex(State())
    private var thread: pthread_t?
    /// Written back (and waited for) in steps of this many bytes.
    static let writeBackStep = 256 << 10

    /// Owns `<directory>/spare`: keeps one of `bytes` bytes left by an earlier run, removes
    /// anything else (a half-written `spare.tmp`, a spare of another size).
    init(directory: String, bytes: Int) {
        path = directory + "/spare"
        temporaryPath = directory + "/spare.tmp"
        self.bytes = bytes
        unlink(temporaryPath)
        var info = stat()
        if stat(path, &info) == 0 {
            if (info.st_mode & S_IFMT) == S_IFREG && Int(info.st_size) == bytes {
                state.withLock { $0.phase = .ready }
            } else {
                unlink(path)
            }
        }
    }

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

    /// On the writer thread: `bytes` zeros to `spare.tmp`, synced, renamed to `spare`. Its disk
    /// writes go in the idle I/O class, 256 KiB at a time, so the journal's syncs never queue behind
    /// megabytes of zeros (p99.9 of a 1,000/s append + sync beside a 4 MiB spare written every 2 s:
    /// 640–940 µs in one go, max 3.3–4.0 ms; 550–840 µs this way, max 0.9–1.1 ms; docs/benchmarks.md).
    private func write() {
        _ = smartico_set_io_priority_idle()
        let fd = open(temporaryPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        var failure: Int32 = fd >= 0 ? 0 : errno
        if fd >= 0 {
            var done = 0, flushed = 0
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
