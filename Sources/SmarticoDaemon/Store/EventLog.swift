// The event journal's records: append-only segment files beside the database (docs/store.md,
// "The event log"). Used only by `SmarticoStore`, on its thread.
import COpenSSL  // zlib's crc32

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One event to append: its seq (consecutive within a batch), receive time, name, the (user, uid)
/// it marks seen when it is an engagement journaled once, and its `data` bytes.
struct EventLogEntry {
    var seq: JournalSeq
    var tsMs: Int64
    var name: String
    var seen: (user: String, uid: String)?
    /// The `data` bytes, or (appending) the pieces an engagement's row is copied from.
    var body: EventBody

    init(seq: JournalSeq, tsMs: Int64, name: String, seen: (user: String, uid: String)?, data: [UInt8]) {
        self.init(seq: seq, tsMs: tsMs, name: name, seen: seen, body: .bytes(data))
    }

    init(seq: JournalSeq, tsMs: Int64, name: String, seen: (user: String, uid: String)?, body: EventBody) {
        self.seq = seq
        self.tsMs = tsMs
        self.name = name
        self.seen = seen
        self.body = body
    }

    /// The `data` bytes (a record read back always holds them as they are).
    var data: [UInt8] { body.journalBytes }
}

/// The events in segment files `<directory>/<first seq, 20 digits>.log`. A record is a 32-byte
/// header — magic, body length, checksum of everything after it (the magic says which: `SEV2`
/// XXH64's low 32 bits, `SEV1` CRC-32), flags, seq, time — and a body:
/// the name, the seen (user, uid) when flagged, the data. A batch is one `pwrite` and one
/// `fdatasync`. At open every segment is read and checked; in the newest one, whatever follows the
/// last valid record (a write cut by a crash) is cut off. Seqs are consecutive inside a segment.
///
/// A new segment is, when one is ready, a file written ahead of time (`SpareSegment`): zeros, or a
/// segment retention let go of, reused. Appends overwrite it, so their syncs write data blocks only.
/// After the last record, bytes holding no record header with a seq of the segment (zeros, a reused
/// file's older records) are the unused rest of such a file, not damage (`classifyTail`); a segment
/// is cut to its records when the next begins.
final class EventLog {
    static let directoryName = "events"
    static let headerSize = 32
    /// "SEV2" in the file: the record's checksum is XXH64's low 32 bits. Written by this code.
    static let magic: UInt32 = 0x3256_4553
    /// "SEV1": the checksum is zlib's CRC-32. Written before schema 7 (2026-11-26); still read, so
    /// the segments of an older smarticod replay as they are.
    static let magicCRC32: UInt32 = 0x3156_4553
    static let flagSeen: UInt32 = 1

    struct Segment {
        let firstSeq: JournalSeq
        let path: String
        /// Start of each record; record i has seq firstSeq + i.
        var offsets: [UInt32] = []
        /// Receive time of each record.
        var times: [Int64] = []
        /// Bytes of valid records (the end of the last one).
        var size: Int = 0

        var count: Int { offsets.count }
        var lastSeq: JournalSeq { firstSeq + JournalSeq(offsets.count) - 1 }
        func end(of index: Int) -> Int { index + 1 < offsets.count ? Int(offsets[index + 1]) : size }
    }

    let directory: String
    // Store thread only, never held across a call that could reach the log again: not checked for
    // exclusive access at run time (see `SessionDriver.machine`).
    @exclusivity(unchecked) private(set) var segments: [Segment] = []
    /// Descriptor of the newest segment (appends go there), -1 when there is none.
    private var activeFD: Int32 = -1
    private var lockFD: Int32 = -1
    /// A new segment starts once the newest holds this many bytes.
    let segmentBytes: Int
    /// The next segment written ahead of time; nil when segments are not preallocated.
    private var spare: SpareSegment?
    /// Tests: the next append fails with this errno after its segment is chosen, before writing.
    var failNextAppend: Int32 = 0
    /// A batch's bytes are encoded here, kept from one batch to the next: a new array for every batch
    /// was one allocation and, for the large batches of a burst (past glibc's 128 KiB mmap
    /// threshold), an `mmap`, page faults on every page and a `munmap` — ~0.5 µs an event in the
    /// saturation benchmark. Its storage is let go when it grew past ``keptBatchBytes`` and by
    /// ``releaseMemory()`` after a burst.
    @exclusivity(unchecked) private var batchBuffer: [UInt8] = []
    @exclusivity(unchecked) private var batchStarts: [Int] = []
    @exclusivity(unchecked) private var batchTimes: [Int64] = []
    /// The largest batch buffer kept between batches (a batch holds what the driver let wait for the
    /// journal: up to ~2 MB of events, SessionDriver.pauseReadingBacklogBytes).
    static let keptBatchBytes = 4 << 20
    /// What recovery found and cut, for the store to report (empty when the files were clean).
    private(set) var recoveryNotes: [String] = []

    /// The last appended seq, 0 when the log holds no record.
    var lastSeq: JournalSeq { segments.last(where: { $0.count > 0 })?.lastSeq ?? 0 }
    /// The oldest stored seq, nil when the log holds no record.
    var firstSeq: JournalSeq? { segments.first(where: { $0.count > 0 })?.firstSeq }

    /// Opens (creating) the log in `directory` (mode 0700), takes its lock (one process appends)
    /// and reads every segment. With `preallocate`, the next segment is written ahead of time.
    init(directory: String, segmentBytes: Int = 4 << 20, preallocate: Bool = true) throws(StoreError) {
        self.directory = directory
        self.segmentBytes = max(4096, segmentBytes)
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw .fileSystem(path: directory, operation: "creating the event log directory", errno: errno)
        }
        Self.syncDirectory(Self.parent(of: directory))
        let lockPath = directory + "/lock"
        lockFD = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lockFD >= 0 else { throw .fileSystem(path: lockPath, operation: "opening", errno: errno) }
        guard flock(lockFD, LOCK_EX | LOCK_NB) == 0 else {
            let e = errno
            Glibc.close(lockFD)
            lockFD = -1
            throw .fileSystem(path: lockPath, operation: "locking (another smarticod uses this state_dir?)", errno: e)
        }
        do {
            try load()
        } catch {
            close()
            throw error
        }
        if preallocate {
            // After the lock: the spare's files are this process's to replace.
            spare = SpareSegment(directory: directory, bytes: self.segmentBytes)
            spare?.request()
        }
    }

    deinit { close() }

    func close() {
        spare?.close()
        if activeFD >= 0 { Glibc.close(activeFD); activeFD = -1 }
        if lockFD >= 0 { Glibc.close(lockFD); lockFD = -1 }
    }

    /// Waits for the next segment being written ahead of time; true when one is ready.
    func waitForSpare() -> Bool {
        spare?.wait()
        return spare?.isReady ?? false
    }

    // MARK: appending

    /// The records of one append, encoded as they are added (``beginBatch()``, ``Batch/add(seq:tsMs:name:seen:body:)``,
    /// ``append(_:)-(Batch)``): no entry value per record, whose copy retained and released its
    /// strings and data on the store's thread — objects made by the event loop's.
    struct Batch {
        fileprivate var buffer: [UInt8]
        fileprivate var starts: [Int]
        fileprivate var times: [Int64]
        fileprivate(set) var firstSeq: JournalSeq = 0
        var count: Int { starts.count }

        /// Encodes one record; seqs must be consecutive.
        mutating func add(seq: JournalSeq, tsMs: Int64, name: String, seen: (user: String, uid: String)?, body: EventBody) {
            if starts.isEmpty { firstSeq = seq }
            precondition(seq == firstSeq + JournalSeq(starts.count), "event log: a batch's seqs must be consecutive")
            starts.append(buffer.count)
            times.append(tsMs)
            EventLog.encode(seq: seq, tsMs: tsMs, name: name, seen: seen, body: body, into: &buffer)
        }
    }

    /// An empty batch, in the storage the last one left (a new array for every batch was one
    /// allocation and, for the large batches of a burst, past glibc's 128 KiB mmap threshold, an
    /// `mmap`, page faults on every page and a `munmap`).
    func beginBatch() -> Batch {
        var batch = Batch(buffer: [], starts: [], times: [])
        swap(&batch.buffer, &batchBuffer)
        swap(&batch.starts, &batchStarts)
        swap(&batch.times, &batchTimes)
        return batch
    }

    /// Lets go of a batch that is not appended, keeping its storage for the next.
    func discard(_ batch: consuming Batch) {
        // Changed in place (a consuming parameter is the only reference): a copy would make the
        // arrays shared, and emptying a shared array allocates a new one — for a 4 MiB buffer an
        // `mmap` and a fault on every page it is filled on.
        batch.buffer.removeAll(keepingCapacity: batch.buffer.capacity <= Self.keptBatchBytes)
        batch.starts.removeAll(keepingCapacity: true)
        batch.times.removeAll(keepingCapacity: true)
        swap(&batch.buffer, &batchBuffer)
        swap(&batch.starts, &batchStarts)
        swap(&batch.times, &batchTimes)
    }

    /// Appends `entries` (consecutive seqs, the first above `lastSeq`): ``append(_:)-(Batch)`` of them.
    func append(_ entries: [EventLogEntry]) throws(StoreError) {
        var batch = beginBatch()
        entries.withUnsafeBufferPointer { entries in
            for i in entries.indices {
                batch.add(seq: entries[i].seq, tsMs: entries[i].tsMs, name: entries[i].name, seen: entries[i].seen,
                          body: entries[i].body)
            }
        }
        try append(consume batch)
    }

    /// Appends the batch's records (the first seq above `lastSeq`) with one write and one
    /// `fdatasync`; on return they are on disk. On failure nothing is indexed and the bytes written
    /// are cut off again (as far as the file system lets us). The batch's storage is kept for the next.
    func append(_ batch: consuming Batch) throws(StoreError) {
        let failure: StoreError?
        do { try write(batch); failure = nil } catch { failure = error }
        discard(consume batch)  // the arrays go back unshared, their storage kept
        if let failure { throw failure }
    }

    private func write(_ batch: borrowing Batch) throws(StoreError) {
        guard batch.count > 0 else { return }
        let first = batch.firstSeq
        precondition(first > lastSeq, "event log: seq \(first) after \(lastSeq)")
        try ensureActiveSegment(for: first, adding: batch.buffer.count)
        let index = segments.count - 1
        let at = segments[index].size
        guard at + batch.buffer.count <= Int(UInt32.max) else {
            throw .other("event log: a batch of \(batch.buffer.count) bytes does not fit a segment")
        }
        let injected = failNextAppend
        failNextAppend = 0
        if let error = injected != 0 ? injected
            : Self.writeAll(activeFD, batch.buffer, at: at) ?? (fdatasync(activeFD) == 0 ? nil : errno) {
            _ = ftruncate(activeFD, off_t(at))
            throw .fileSystem(path: segments[index].path, operation: "appending to", errno: error)
        }
        for start in batch.starts { segments[index].offsets.append(UInt32(at + start)) }
        segments[index].times.append(contentsOf: batch.times)
        segments[index].size = at + batch.buffer.count
    }

    /// Lets go of the batch buffer's storage (after a burst; the next append allocates it again).
    func releaseMemory() {
        batchBuffer = []
        batchStarts = []
        batchTimes = []
    }

    /// Makes the newest segment the place for a batch starting at `seq`: a new file when there is
    /// none, when the newest is full, or when `seq` does not follow its last record.
    ///
    /// A segment is full once it holds `segmentBytes`: the batch that gets it there is appended
    /// whole, past the end of a preallocated file if need be (that one sync writes the inode too).
    /// Until 2026-11-27 a batch that did not fit began the next segment, leaving on average half a
    /// batch of a preallocated file's zeros unused — under load ~300 KB a segment, which the cut
    /// below then gave back (page by page, on the store's thread) and a reused segment's spare wrote
    /// again (1.2 % and ~3 % of the daemon's CPU samples on the CPU row).
    private func ensureActiveSegment(for seq: JournalSeq, adding bytes: Int) throws(StoreError) {
        if let last = segments.last, activeFD >= 0 {
            let follows = last.count == 0 ? last.firstSeq == seq : last.lastSeq + 1 == seq
            if follows && last.size < segmentBytes { return }
        }
        if activeFD >= 0 {
            // The newest segment is complete: cut to its records when the file holds more (the rest
            // of a preallocated file's zeros, a reused one's old records; not synced — an open that
            // finds them again cuts them then). A segment filled past the file's end has nothing to cut.
            if let last = segments.last {
                var info = stat()
                if fstat(activeFD, &info) != 0 || Int(info.st_size) > last.size { _ = ftruncate(activeFD, off_t(last.size)) }
            }
            Glibc.close(activeFD)
            activeFD = -1
        }
        // Its index goes beside it, so the next open need not read the segment to find its records.
        if let last = segments.last, last.count > 0 { Self.writeIndex(of: last) }
        if let last = segments.last, last.count == 0 {
            // An empty newest segment that does not fit: remove it.
            unlink(last.path)
            segments.removeLast()
        }
        let path = Self.segmentPath(directory, seq)
        // The spare when one is ready (zeros, synced), else an empty file.
        let preallocated = spare?.take(to: path) ?? false
        let fd = open(path, O_RDWR | O_CLOEXEC | (preallocated ? 0 : O_CREAT | O_TRUNC), 0o600)
        guard fd >= 0 else { throw .fileSystem(path: path, operation: "creating event log segment", errno: errno) }
        // The file's name must be durable before any record in it is acknowledged.
        Self.syncDirectory(directory)
        activeFD = fd
        segments.append(Segment(firstSeq: seq, path: path))
        spare?.request()
    }

    fileprivate static func encode(seq: JournalSeq, tsMs: Int64, name: String, seen: (user: String, uid: String)?,
                                   body data: EventBody, into buffer: inout [UInt8]) {
        let start = buffer.count
        let hasSeen = seen != nil
        // Straight from the strings' UTF-8 (no array of each: three allocations a record).
        let nameCount = name.utf8.count
        let userCount = hasSeen ? seen!.user.utf8.count : 0
        let uidCount = hasSeen ? seen!.uid.utf8.count : 0
        let dataCount = data.journalCount
        let body = 12 + nameCount + userCount + uidCount + dataCount
        append32(magic, &buffer)
        append32(UInt32(body), &buffer)
        append32(0, &buffer)  // CRC, below
        append32(hasSeen ? flagSeen : 0, &buffer)
        append64(UInt64(bitPattern: seq), &buffer)
        append64(UInt64(bitPattern: tsMs), &buffer)
        append32(UInt32(nameCount), &buffer)
        appendUTF8(name, &buffer)
        append32(UInt32(userCount), &buffer)
        if hasSeen { appendUTF8(seen!.user, &buffer) }
        append32(UInt32(uidCount), &buffer)
        if hasSeen { appendUTF8(seen!.uid, &buffer) }
        // An engagement's row is copied here from the 110's bytes (no array of the row before it).
        data.appendJournal(to: &buffer)
        assert(buffer.count - start == headerSize + body, "event log: the row's size was not the one announced")
        let sum = buffer.withUnsafeBytes { checksum(UnsafeRawBufferPointer(rebasing: $0[(start + 12)...]), magic: magic) }
        buffer.withUnsafeMutableBytes { $0.storeBytes(of: (sum ?? 0).littleEndian, toByteOffset: start + 8, as: UInt32.self) }
    }

    // MARK: reading

    /// A record read back: what was appended.
    typealias Record = EventLogEntry

    /// Calls `body` with every record whose seq is at least `from`, in seq order, until it returns false.
    func forEach(from: JournalSeq, _ body: (Record) throws(StoreError) -> Bool) throws(StoreError) {
        guard var s = segmentIndex(containing: from) else { return }
        var i = Int(max(0, from - segments[s].firstSeq))
        while s < segments.count {
            let segment = segments[s]
            if i < segment.count {
                // Read the records in runs of up to 256 KiB: few calls, a bounded buffer.
                let fd = open(segment.path, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { throw .fileSystem(path: segment.path, operation: "opening event log segment", errno: errno) }
                defer { Glibc.close(fd) }
                while i < segment.count {
                    var j = i + 1
                    while j < segment.count && segment.end(of: j) - Int(segment.offsets[i]) <= 256 << 10 { j += 1 }
                    let from = Int(segment.offsets[i]), to = segment.end(of: j - 1)
                    let chunk = try Self.readAll(fd, count: to - from, at: from, path: segment.path)
                    for k in i ..< j {
                        let start = Int(segment.offsets[k]) - from
                        // A record whose bytes changed on disk since it was written (its checksum no
                        // longer matches) is skipped: the rest of the journal still replays.
                        guard let record = Self.decode(chunk, at: start, end: segment.end(of: k) - from) else { continue }
                        if try !body(record) { return }
                    }
                    i = j
                }
            }
            s += 1
            i = 0
        }
    }

    /// The receive time of `seq`, nil when the log does not hold it.
    func time(of seq: JournalSeq) -> Int64? {
        guard let s = segmentIndex(containing: seq) else { return nil }
        let i = Int(seq - segments[s].firstSeq)
        return i >= 0 && i < segments[s].count ? segments[s].times[i] : nil
    }

    /// The index of the segment holding `seq`, or the first one after it; nil when none is.
    private func segmentIndex(containing seq: JournalSeq) -> Int? {
        var lo = 0, hi = segments.count
        while lo < hi {  // the first segment whose last seq is ≥ seq
            let mid = (lo + hi) / 2
            if segments[mid].count == 0 || segments[mid].lastSeq >= seq { hi = mid } else { lo = mid + 1 }
        }
        return lo < segments.count ? lo : nil
    }

    /// Deletes the segments whose every record is below `seq`, never the newest one (it holds the
    /// high-water mark of seqs). Returns how many files it removed.
    @discardableResult
    func dropSegments(below seq: JournalSeq) -> Int {
        var removed = 0
        while segments.count > 1, segments[0].count == 0 || segments[0].lastSeq < seq {
            // Kept to be the next spare when none waits (`SpareSegment.retire`), else deleted.
            if spare?.retire(segments[0].path) != true { unlink(segments[0].path) }
            unlink(Self.indexPath(segments[0].path))
            segments.removeFirst()
            removed += 1
        }
        if removed > 0 { Self.syncDirectory(directory) }
        return removed
    }

    // MARK: opening

    private func load() throws(StoreError) {
        guard let dir = opendir(directory) else {
            throw .fileSystem(path: directory, operation: "listing the event log directory", errno: errno)
        }
        var firsts: [JournalSeq] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard name.hasSuffix(".log"), name.utf8.count == 24, let seq = JournalSeq(name.prefix(20)), seq > 0 else { continue }
            firsts.append(seq)
        }
        closedir(dir)
        firsts.sort()
        for (n, first) in firsts.enumerated() {
            let isNewest = n == firsts.count - 1
            var segment = Segment(firstSeq: first, path: Self.segmentPath(directory, first))
            if !isNewest, let indexed = Self.readIndex(of: segment) {
                try checkFollowsPrevious(indexed)
                segments.append(indexed)
                continue
            }
            let fd = open(segment.path, (isNewest ? O_RDWR : O_RDONLY) | O_CLOEXEC)
            guard fd >= 0 else { throw .fileSystem(path: segment.path, operation: "opening event log segment", errno: errno) }
            var keep = false
            defer { if !keep { Glibc.close(fd) } }
            var info = stat()
            guard fstat(fd, &info) == 0 else { throw .fileSystem(path: segment.path, operation: "reading the size of", errno: errno) }
            let bytes = try Self.readAll(fd, count: Int(info.st_size), at: 0, path: segment.path)
            // The newest segment may end in a batch a crash cut: every record's checksum is checked.
            // Older ones were complete and synced before the next began: their headers are walked
            // (their checksums are checked when a record is read back).
            var at = 0
            while let (seq, tsMs, length) = Self.header(bytes, at: at, checksum: isNewest), seq == first + JournalSeq(segment.count) {
                segment.offsets.append(UInt32(at))
                segment.times.append(tsMs)
                at += length
            }
            segment.size = at
            if segment.count > 0 { try checkFollowsPrevious(segment) }
            // After the last record: the unused rest of a preallocated segment (zeros, or the records
            // of a reused one, all older than this segment), or something else.
            let tail = at < bytes.count ? Self.classifyTail(bytes, from: at, firstSeq: first) : .unusedRest
            // A complete segment whose cut to its records was lost (a crash) is cut now, so its size
            // matches the index written below (when it cannot be, it is read at every open instead).
            // An older segment's tail that is neither zeros nor old records is left (and reported).
            let cutUnusedRest = at < bytes.count && !isNewest && (tail == .unusedRest && (Self.isZero(bytes, from: at)
                || Self.holdsOlderRecord(bytes, from: at, firstSeq: first))) && truncate(segment.path, off_t(at)) == 0
            if at < bytes.count && (isNewest ? tail == .ours : !cutUnusedRest) {
                if isNewest {
                    // A batch cut by a crash (never acknowledged): cut it off, so appends follow the last record.
                    recoveryNotes.append("\(segment.path): cut \(bytes.count - at) bytes after the last whole record (seq \(segment.count > 0 ? segment.lastSeq : first - 1))")
                    guard ftruncate(fd, off_t(at)) == 0, fdatasync(fd) == 0 else {
                        throw .fileSystem(path: segment.path, operation: "cutting a torn record off", errno: errno)
                    }
                } else {
                    recoveryNotes.append("\(segment.path): \(bytes.count - at) bytes after seq \(segment.count > 0 ? segment.lastSeq : first - 1) do not read as records; ignored")
                }
            }
            if segment.count == 0 && !isNewest {
                unlink(segment.path)
                unlink(Self.indexPath(segment.path))
                continue
            }
            if !isNewest && (at == bytes.count || cutUnusedRest) { Self.writeIndex(of: segment) }  // read once, not again
            if isNewest {
                keep = true
                activeFD = fd
            }
            segments.append(segment)
        }
    }

    /// Segments are named by their first seq, so one that starts inside the one before it means
    /// files that did not come from this log.
    private func checkFollowsPrevious(_ segment: Segment) throws(StoreError) {
        guard let previous = segments.last, previous.count > 0, segment.firstSeq <= previous.lastSeq else { return }
        throw .other("event log: \(segment.path) starts at seq \(segment.firstSeq), inside the segment before it "
                     + "(up to \(previous.lastSeq)); move the event log directory away to start with an empty journal")
    }

    // MARK: segment indexes

    /// `<segment>.idx`: what a complete segment holds, so opening does not read it — "SEI1", the
    /// record count, the segment's size, then each record's offset (4 bytes) and time (8 bytes).
    /// A cache: written without a sync when the segment is complete, believed only when it agrees
    /// with the segment file's size and is whole; otherwise the segment is read as before.
    static func indexPath(_ segmentPath: String) -> String {
        String(segmentPath.dropLast(4)) + ".idx"
    }

    static let indexMagic: UInt32 = 0x3149_4553

    private static func writeIndex(of segment: Segment) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16 + 12 * segment.count)
        append32(indexMagic, &bytes)
        append32(UInt32(segment.count), &bytes)
        append64(UInt64(segment.size), &bytes)
        for offset in segment.offsets { append32(offset, &bytes) }
        for time in segment.times { append64(UInt64(bitPattern: time), &bytes) }
        let path = indexPath(segment.path)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        if writeAll(fd, bytes, at: 0) != nil { _ = ftruncate(fd, 0) }
        Glibc.close(fd)
    }

    private static func readIndex(of segment: Segment) -> Segment? {
        var info = stat()
        guard stat(segment.path, &info) == 0 else { return nil }
        let path = indexPath(segment.path)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var indexInfo = stat()
        guard fstat(fd, &indexInfo) == 0, indexInfo.st_size >= 16,
              let bytes = try? readAll(fd, count: Int(indexInfo.st_size), at: 0, path: path), bytes.count == Int(indexInfo.st_size)
        else { return nil }
        return bytes.withUnsafeBytes { raw -> Segment? in
            func u32(_ o: Int) -> UInt32 { UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: o, as: UInt32.self)) }
            func u64(_ o: Int) -> UInt64 { UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: o, as: UInt64.self)) }
            let count = Int(u32(4)), size = Int(u64(8))
            guard u32(0) == indexMagic, count > 0, size == Int(info.st_size), raw.count == 16 + 12 * count else { return nil }
            var indexed = Segment(firstSeq: segment.firstSeq, path: segment.path)
            indexed.offsets.reserveCapacity(count)
            indexed.times.reserveCapacity(count)
            var previous = -1
            for i in 0 ..< count {
                let offset = Int(u32(16 + 4 * i))
                // Increasing, starting at 0, each leaving room for a header.
                guard (i == 0 ? offset == 0 : offset >= previous + headerSize), offset + headerSize <= size else { return nil }
                previous = offset
                indexed.offsets.append(UInt32(offset))
                indexed.times.append(Int64(bitPattern: u64(16 + 4 * count + 8 * i)))
            }
            indexed.size = size
            return indexed
        }
    }

    // MARK: bytes

    private static func decode(_ bytes: [UInt8], at start: Int, end: Int) -> Record? {
        bytes.withUnsafeBytes { raw -> Record? in
            guard start >= 0, end <= raw.count, end - start >= headerSize else { return nil }
            func u32(_ o: Int) -> UInt32 { UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: start + o, as: UInt32.self)) }
            func u64(_ o: Int) -> UInt64 { UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: start + o, as: UInt64.self)) }
            guard isMagic(u32(0)) else { return nil }
            let body = Int(u32(4))
            guard body >= 12, body <= end - start - headerSize else { return nil }
            let total = headerSize + body
            guard checksum(UnsafeRawBufferPointer(rebasing: raw[(start + 12) ..< (start + total)]), magic: u32(0)) == u32(8) else { return nil }
            let flags = u32(12)
            var o = headerSize
            func field() -> UnsafeRawBufferPointer? {
                guard o + 4 <= total else { return nil }
                let n = Int(u32(o))
                guard n <= total - o - 4 else { return nil }
                defer { o += 4 + n }
                return UnsafeRawBufferPointer(rebasing: raw[(start + o + 4) ..< (start + o + 4 + n)])
            }
            guard let name = field(), let user = field(), let uid = field() else { return nil }
            let data = [UInt8](UnsafeRawBufferPointer(rebasing: raw[(start + o) ..< (start + total)]))
            let seen = flags & flagSeen != 0
                ? (String(decoding: user, as: UTF8.self), String(decoding: uid, as: UTF8.self)) : nil
            return Record(seq: JournalSeq(bitPattern: u64(16)), tsMs: Int64(bitPattern: u64(24)),
                          name: String(decoding: name, as: UTF8.self), seen: seen, data: data)
        }
    }

    /// The seq, time and whole length of the record at `start` when its header is sound (and, with
    /// `checksum`, its checksum matches), else nil.
    private static func header(_ bytes: [UInt8], at start: Int, checksum verify: Bool) -> (JournalSeq, Int64, Int)? {
        bytes.withUnsafeBytes { raw -> (JournalSeq, Int64, Int)? in
            guard start >= 0, raw.count - start >= headerSize else { return nil }
            func u32(_ o: Int) -> UInt32 { UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: start + o, as: UInt32.self)) }
            func u64(_ o: Int) -> UInt64 { UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: start + o, as: UInt64.self)) }
            guard isMagic(u32(0)) else { return nil }
            let body = Int(u32(4))
            guard body >= 12, body <= raw.count - start - headerSize else { return nil }
            let total = headerSize + body
            if verify, checksum(UnsafeRawBufferPointer(rebasing: raw[(start + 12) ..< (start + total)]), magic: u32(0)) != u32(8) { return nil }
            return (JournalSeq(bitPattern: u64(16)), Int64(bitPattern: u64(24)), total)
        }
    }

    /// What follows a segment's last valid record (at `start`).
    enum Tail: Equatable {
        /// Nothing of this segment: zeros, the records of the file's earlier use (seqs below
        /// `firstSeq`), or bytes that hold no record header.
        case unusedRest
        /// A record header with a seq of this segment (at `start` or further on): a batch a crash
        /// cut, or damage. Never kept before appends: a record of it could come to follow theirs.
        case ours
    }

    /// Tells a torn batch from the unused rest of a preallocated or reused segment: a batch's
    /// records carry seqs of this segment, a reused file's old records seqs below `firstSeq`.
    /// Every place from `start` that begins with the record magic is looked at (records of the same
    /// size can line up with the old ones; a text can hold the magic: read as ours, which only cuts).
    static func classifyTail(_ bytes: [UInt8], from start: Int, firstSeq: JournalSeq) -> Tail {
        bytes.withUnsafeBytes { raw -> Tail in
            var found: Tail = .unusedRest
            forEachHeaderSeq(raw, from: start) { seq in
                if seq >= firstSeq { found = .ours; return false }
                return true
            }
            return found
        }
    }

    /// True when the bytes from `start` hold a record header of the file's earlier use.
    static func holdsOlderRecord(_ bytes: [UInt8], from start: Int, firstSeq: JournalSeq) -> Bool {
        bytes.withUnsafeBytes { raw -> Bool in
            var found = false
            forEachHeaderSeq(raw, from: start) { seq in
                found = seq < firstSeq
                return !found
            }
            return found
        }
    }

    /// Calls `body` with the seq of every place from `start` that begins with the record magic and
    /// leaves room for a header, until it returns false.
    private static func forEachHeaderSeq(_ raw: UnsafeRawBufferPointer, from start: Int, _ body: (JournalSeq) -> Bool) {
        guard let base = raw.baseAddress else { return }
        var at = start
        while raw.count - at >= headerSize {
            // The magics' first byte ("S"), then the rest of one of them.
            guard let hit = memchr(base + at, 0x53, raw.count - at - headerSize + 1) else { return }
            at = base.distance(to: UnsafeRawPointer(hit))
            if isMagic(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: at, as: UInt32.self))) {
                let seq = JournalSeq(bitPattern: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: at + 16, as: UInt64.self)))
                if !body(seq) { return }
            }
            at += 1
        }
    }

    private static func isZero(_ bytes: [UInt8], from start: Int) -> Bool {
        bytes.withUnsafeBytes { isZero(UnsafeRawBufferPointer(rebasing: $0[start...])) }
    }

    /// True when every byte is zero (eight at a time).
    private static func isZero(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        let words = bytes.count / 8
        var acc: UInt64 = 0
        while i < words {
            acc |= bytes.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)
            if i & 511 == 511, acc != 0 { return false }
            i += 1
        }
        var j = words * 8
        while j < bytes.count { acc |= UInt64(bytes[j]); j += 1 }
        return acc == 0
    }

    /// True for the magic of either record format.
    static func isMagic(_ word: UInt32) -> Bool { word == magic || word == magicCRC32 }

    /// The checksum a record with `magic` carries for `bytes` (everything after the checksum
    /// field): XXH64's low 32 bits for `SEV2`, CRC-32 for `SEV1`; nil for any other magic.
    static func checksum(_ bytes: UnsafeRawBufferPointer, magic recordMagic: UInt32) -> UInt32? {
        switch recordMagic {
        case magic:
            return UInt32(truncatingIfNeeded: XXH64.hash(bytes))
        case magicCRC32:
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return UInt32(crc32(0, nil, 0)) }
            return UInt32(truncatingIfNeeded: crc32(0, base.assumingMemoryBound(to: Bytef.self), UInt32(bytes.count)))
        default:
            return nil
        }
    }

    /// `string`'s UTF-8 from its own storage when it has some (native and small strings do):
    /// appending a `String.UTF8View` walked the generic collection path, retaining the string.
    private static func appendUTF8(_ string: String, _ buffer: inout [UInt8]) {
        if string.utf8.withContiguousStorageIfAvailable({ buffer.append(contentsOf: $0) }) == nil {
            buffer.append(contentsOf: string.utf8)
        }
    }

    private static func append32(_ v: UInt32, _ buffer: inout [UInt8]) {
        withUnsafeBytes(of: v.littleEndian) { buffer.append(contentsOf: $0) }
    }

    private static func append64(_ v: UInt64, _ buffer: inout [UInt8]) {
        withUnsafeBytes(of: v.littleEndian) { buffer.append(contentsOf: $0) }
    }

    /// nil, or the errno of the failed write.
    private static func writeAll(_ fd: Int32, _ bytes: [UInt8], at offset: Int) -> Int32? {
        bytes.withUnsafeBytes { raw -> Int32? in
            var done = 0
            while done < raw.count {
                let n = pwrite(fd, raw.baseAddress! + done, raw.count - done, off_t(offset + done))
                if n > 0 { done += n; continue }
                if n < 0 && errno == EINTR { continue }
                return n < 0 ? errno : EIO
            }
            return nil
        }
    }

    private static func readAll(_ fd: Int32, count: Int, at offset: Int, path: String) throws(StoreError) -> [UInt8] {
        var failure: Int32 = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var done = 0
            while done < count {
                let n = pread(fd, buffer.baseAddress! + done, count - done, off_t(offset + done))
                if n > 0 { done += n; continue }
                if n < 0 && errno == EINTR { continue }
                failure = n < 0 ? errno : 0
                break
            }
            initialized = done
        }
        if bytes.count < count && failure != 0 {
            throw .fileSystem(path: path, operation: "reading", errno: failure)
        }
        return bytes
    }

    static func segmentPath(_ directory: String, _ seq: JournalSeq) -> String {
        let digits = String(seq)
        return directory + "/" + String(repeating: "0", count: max(0, 20 - digits.count)) + digits + ".log"
    }

    private static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    static func syncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 {
            _ = fsync(fd)
            Glibc.close(fd)
        }
    }
}
