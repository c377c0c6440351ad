// The event log under the store (docs/store.md, "The event log"): recovery of a cut or damaged
// tail, segments rolling and going with retention, one process at a time, and the move of an older
// database's journal rows.
import Foundation
import Testing
@testable import SmarticoDaemon

#if canImport(Glibc)
import Glibc
#endif

/// The segment files of a state directory, oldest first.
private func segments(_ dir: StoreTempDir) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: dir.sub(EventLog.directoryName))
        .filter { $0.hasSuffix(".log") }.sorted().map { dir.sub(EventLog.directoryName) + "/" + $0 }
}

private func fileSize(_ path: String) -> Int {
    var info = stat()
    return stat(path, &info) == 0 ? Int(info.st_size) : -1
}

/// Appends `bytes` to the file at `path`.
private func appendBytes(_ bytes: [UInt8], to path: String) throws {
    let handle = try #require(FileHandle(forWritingAtPath: path))
    defer { try? handle.close() }
    try handle.seekToEnd()
    try handle.write(contentsOf: Data(bytes))
}

/// Inverts the byte at `offset` of the file at `path`, as a bad sector or a stray write would.
private func flipByte(of path: String, at offset: Int) throws {
    let fd = open(path, O_RDWR)
    guard fd >= 0 else { throw StoreTestFailure("cannot open \(path): errno \(errno)") }
    defer { close(fd) }
    var byte: UInt8 = 0
    guard pread(fd, &byte, 1, off_t(offset)) == 1 else { throw StoreTestFailure("cannot read byte \(offset) of \(path)") }
    byte ^= 0xFF
    guard pwrite(fd, &byte, 1, off_t(offset)) == 1 else { throw StoreTestFailure("cannot write byte \(offset) of \(path)") }
}

/// Where the records of a preallocated segment end: after its last non-zero byte (a record ends in
/// its data, here always a JSON object's `}`).
private func recordsEnd(of path: String) throws -> Int {
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    return (bytes.lastIndex { $0 != 0 } ?? -1) + 1
}

/// Where a segment's records end, found as an open finds it: record after record from offset 0,
/// each with the magic and the next seq (the first is in the file's name).
private func walkedRecordsEnd(of path: String) throws -> Int {
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    var seq = try #require(JournalSeq(String(path.split(separator: "/").last!.prefix(20))))
    var at = 0
    while at + EventLog.headerSize <= bytes.count {
        let word = { (o: Int) in bytes[(at + o) ..< (at + o + 4)].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
        let seqLow = Int64(word(16)) | Int64(word(20)) << 32
        guard word(0) == EventLog.magic, seqLow == seq else { break }
        at += EventLog.headerSize + Int(word(4))
        seq += 1
    }
    return at
}

/// The first 40 bytes of a record with `seq` as a crash can leave them: its whole header (magic,
/// length, checksum, flags, seq, time) and the start of its body.
private func tornRecord(seq: JournalSeq) -> [UInt8] {
    func le(_ v: UInt64, _ n: Int) -> [UInt8] { (0 ..< n).map { UInt8(truncatingIfNeeded: v >> (8 * UInt64($0))) } }
    return le(UInt64(EventLog.magic), 4) + le(200, 4) + le(0xDEAD_BEEF, 4) + le(0, 4) + le(UInt64(seq), 8) + le(4, 8)
        + Array(repeating: 7, count: 8)
}

/// True when some file of the event log directory (a segment, the spare) holds `text`.
private func eventFilesHold(_ dir: StoreTempDir, _ text: String) throws -> Bool {
    let events = dir.sub(EventLog.directoryName)
    let needle = Data(text.utf8)
    return try FileManager.default.contentsOfDirectory(atPath: events)
        .filter { $0.hasSuffix(".log") || $0 == "spare" }
        .contains { try Data(contentsOf: URL(fileURLWithPath: events + "/" + $0)).range(of: needle) != nil }
}

/// Opens a store on `dir`, lets its spare be written, appends three small events (seqs 1–3) into
/// that preallocated segment, and closes it.
private func threeEventsInAPreallocatedSegment(_ dir: StoreTempDir, _ options: StoreOptions) async throws {
    let store = try await SmarticoStore.open(directory: dir.path, options: options)
    #expect(await store.waitForSpareSegment())
    _ = try await store.appendEvents((1...3).map { journalEvent("message", ts: Int64($0), "{\"n\":\($0)}") })
    await store.close()
}

/// Writes `bytes` at `offset` of the file at `path`.
private func writeBytes(_ bytes: [UInt8], to path: String, at offset: Int) throws {
    let fd = open(path, O_RDWR)
    guard fd >= 0 else { throw StoreTestFailure("cannot open \(path): errno \(errno)") }
    defer { close(fd) }
    guard bytes.withUnsafeBytes({ pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }) == bytes.count else {
        throw StoreTestFailure("cannot write \(bytes.count) bytes at \(offset) of \(path)")
    }
}

/// Rewrites every record of the segment at `path` in the format written before schema 7: magic
/// `SEV1`, its checksum zlib's CRC-32. Returns the offset of each record.
private func rewriteAsCRC32Records(_ path: String) throws -> [Int] {
    var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    var starts: [Int] = []
    var at = 0
    func word(_ o: Int) -> UInt32 { bytes[(at + o) ..< (at + o + 4)].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
    func put(_ v: UInt32, _ o: Int) { for k in 0 ..< 4 { bytes[at + o + k] = UInt8(truncatingIfNeeded: v >> (8 * UInt32(k))) } }
    while at + EventLog.headerSize <= bytes.count, word(0) == EventLog.magic {
        let total = EventLog.headerSize + Int(word(4))
        put(EventLog.magicCRC32, 0)
        let crc = try #require(bytes.withUnsafeBytes {
            EventLog.checksum(UnsafeRawBufferPointer(rebasing: $0[(at + 12) ..< (at + total)]), magic: EventLog.magicCRC32)
        })
        put(crc, 8)
        starts.append(at)
        at += total
    }
    try writeBytes(Array(bytes[..<at]), to: path, at: 0)
    return starts
}

@Suite struct StoreEventLogTests {
    /// A crash in the middle of a batch's write leaves part of a record after the last whole one:
    /// the next open cuts it off, every acknowledged event reads back, and appends go on from there.
    @Test func aTornTailIsCutOffAtOpen() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        // Files that grow record by record (a preallocated segment: `aTornBatchInAPreallocatedSegmentIsCut`).
        let options = StoreOptions(preallocateSegments: false)
        var store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(try await store.appendEvents((1...5).map { journalEvent("message", ts: Int64($0), "{\"n\":\($0)}") }) == [1, 2, 3, 4, 5])
        await store.close()
        let segment = try #require(try segments(dir).last)
        let clean = fileSize(segment)
        // The first 40 bytes of a sixth record's header and body (what a cut write leaves).
        try appendBytes(tornRecord(seq: 6), to: segment)
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(fileSize(segment) == clean, "the torn bytes are still there")
        #expect(await store.lastSeq() == 5)
        #expect(try await store.events(after: 0, limit: 10).map(\.data) == (1...5).map { bytes("{\"n\":\($0)}") })
        #expect(try await store.appendEvents([journalEvent("message", ts: 6, "{}")]) == [6])
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(try await store.events(after: 4, limit: 10).map(\.seq) == [5, 6])
        await store.close()
    }

    /// A record whose bytes changed on disk fails its checksum: in the newest segment it and what
    /// follows are cut off (it was the batch a crash interrupted), the records before stay.
    @Test func aDamagedLastRecordIsCutOffWithWhatFollows() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        // Files that grow record by record (a preallocated segment: `aTornBatchInAPreallocatedSegmentIsCut`).
        let options = StoreOptions(preallocateSegments: false)
        var store = try await SmarticoStore.open(directory: dir.path, options: options)
        _ = try await store.appendEvents([journalEvent("message", ts: 1, "{\"a\":1}")])
        let before = fileSize(try #require(try segments(dir).last))
        _ = try await store.appendEvents([journalEvent("message", ts: 2, "{\"b\":2}"), journalEvent("message", ts: 3, "{\"c\":3}")])
        await store.close()
        let segment = try #require(try segments(dir).last)
        // Flip one byte of the second record's body.
        try flipByte(of: segment, at: before + 40)
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [1])
        #expect(fileSize(segment) == before)
        #expect(await store.eventLogRecovery().count == 1, "the cut is reported")
        // Seqs 2 and 3 were acknowledged before the damage (the close recorded the high-water
        // mark): they are not given out again.
        #expect(await store.lastSeq() == 3)
        #expect(try await store.appendEvents([journalEvent("message", ts: 4, "{}")]) == [4])
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [1, 4])
        await store.close()
    }

    /// Segments an older smarticod wrote (records `SEV1`, CRC-32) replay as they are, appends after
    /// them (`SEV2`, XXH64) join the same segment, and a damaged `SEV1` record still fails its CRC.
    @Test func recordsOfTheCRC32FormatAreStillRead() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let options = StoreOptions(preallocateSegments: false)
        var store = try await SmarticoStore.open(directory: dir.path, options: options)
        _ = try await store.appendEvents((1...3).map { journalEvent("message", ts: Int64($0), "{\"n\":\($0)}") })
        await store.close()
        let segment = try #require(try segments(dir).last)
        let starts = try rewriteAsCRC32Records(segment)
        #expect(starts.count == 3)
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        let notes = await store.eventLogRecovery()
        #expect(notes.isEmpty, "\(notes)")
        #expect(try await store.events(after: 0, limit: 10).map(\.data) == (1...3).map { bytes("{\"n\":\($0)}") })
        #expect(try await store.appendEvents([journalEvent("message", ts: 4, "{\"n\":4}")]) == [4])
        await store.close()
        #expect(try segments(dir) == [segment], "the new record went into the same segment")
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(try await store.events(after: 0, limit: 10).map(\.data) == (1...4).map { bytes("{\"n\":\($0)}") })
        await store.close()
        // One byte of the second (CRC-32) record's body: it and what follows are cut at open.
        try flipByte(of: segment, at: starts[1] + 40)
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [1])
        #expect(await store.eventLogRecovery().count == 1)
        await store.close()
    }

    /// In an older segment (complete and synced when the next began) a damaged record is found when
    /// it is read back: replay skips it and goes on with the rest.
    @Test func aDamagedRecordInAnOlderSegmentIsSkippedInReplay() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let options = StoreOptions(segmentBytes: 4096)
        var store = try await SmarticoStore.open(directory: dir.path, options: options)
        let payload = "{\"t\":\"" + String(repeating: "x", count: 1_500) + "\"}"
        for i in 1...6 { _ = try await store.appendEvents([journalEvent("message", ts: Int64(i), payload)]) }
        await store.close()
        let files = try segments(dir)
        #expect(files.count >= 2)
        // Flip a byte inside the first segment's second record (records are ~1.5 KB).
        try flipByte(of: files[0], at: 1_700)
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [1, 3, 4, 5, 6])
        #expect(try await store.events(after: 1, limit: 1).map(\.seq) == [3])
        await store.close()
    }

    /// Segments roll at `segmentBytes`; retention deletes whole segments once every record in them
    /// is past it, never the newest; seq and the first kept seq hold across a reopen.
    @Test func segmentsRollAndRetentionDeletesWholeOnes() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let options = StoreOptions(retentionEvents: 100, segmentBytes: 16 << 10)
        var store = try await SmarticoStore.open(directory: dir.path, options: options)
        let payload = "{\"t\":\"" + String(repeating: "x", count: 1_000) + "\"}"
        for i in 1...400 {
            _ = try await store.appendEvents([journalEvent("message", ts: Int64(i), payload)])
        }
        let files = try segments(dir)
        // ~1 KB records, 16 KiB segments: ~15 records a segment; ~100 kept → ~7 or 8 files.
        #expect(files.count >= 6 && files.count <= 10, "\(files.count) segment files")
        let bounds = try await store.journalBounds()
        #expect(bounds.lastSeq == 400)
        let first = try #require(bounds.firstSeq)
        #expect(first >= 301 - 1 && first <= 301, "first kept \(first)")
        #expect(try await store.events(after: 0, limit: 1_000).map(\.seq) == Array(first...400))
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(try await store.journalBounds() == bounds)
        #expect(try await store.appendEvents([journalEvent("message", ts: 401, "{}")]) == [401])
        // Retention to nothing keeps the newest segment (and with it the high-water mark).
        await store.updateOptions(StoreOptions(retentionEvents: 0, segmentBytes: 16 << 10))
        #expect(try await store.applyRetention(nowMs: 401) > 0)
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: nil, lastSeq: 401))
        #expect(try segments(dir).count == 1)
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path, options: StoreOptions(retentionEvents: 0))
        #expect(await store.lastSeq() == 401)
        #expect(try await store.events(after: 0, limit: 10).isEmpty)
        #expect(try await store.appendEvents([journalEvent("message", ts: 402, "{}")]) == [402])
        await store.close()
    }

    /// A complete segment gets an index beside it (`.idx`), so an open need not read the
    /// segment; an index that is missing, cut or disagrees with its segment is not believed: the
    /// segment is read instead (and the index written again). Replay is the same every way.
    @Test func segmentIndexesAreUsedOnlyWhenTheyAgree() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let options = StoreOptions(segmentBytes: 8 << 10)
        let store = try await SmarticoStore.open(directory: dir.path, options: options)
        let payload = "{\"t\":\"" + String(repeating: "x", count: 1_000) + "\"}"
        for i in 1...40 { _ = try await store.appendEvents([journalEvent("message", ts: Int64(i), payload)]) }
        await store.close()
        let files = try segments(dir)
        #expect(files.count >= 5)
        for file in files.dropLast() {
            #expect(FileManager.default.fileExists(atPath: EventLog.indexPath(file)), "no index beside \(file)")
        }
        #expect(!FileManager.default.fileExists(atPath: EventLog.indexPath(files.last!)), "the newest segment is never indexed")
        func replayed() async throws -> [Int64] {
            let reopened = try await SmarticoStore.open(directory: dir.path, options: options)
            let seqs = try await reopened.events(after: 0, limit: 100).map(\.seq)
            #expect(await reopened.lastSeq() == 40)
            await reopened.close()
            return seqs
        }
        #expect(try await replayed() == Array(1...40))
        // Missing: read and written again.
        try FileManager.default.removeItem(atPath: EventLog.indexPath(files[0]))
        #expect(try await replayed() == Array(1...40))
        #expect(FileManager.default.fileExists(atPath: EventLog.indexPath(files[0])))
        // Cut in half, and one that names another size: both ignored.
        let index1 = EventLog.indexPath(files[1])
        let whole = try Data(contentsOf: URL(fileURLWithPath: index1))
        try whole.prefix(whole.count / 2).write(to: URL(fileURLWithPath: index1))
        var other = try Data(contentsOf: URL(fileURLWithPath: EventLog.indexPath(files[2])))
        other[8] ^= 0x01  // the segment size it claims
        try other.write(to: URL(fileURLWithPath: EventLog.indexPath(files[2])))
        #expect(try await replayed() == Array(1...40))
    }

    /// One process appends: a second store on the same state directory is refused with an error
    /// that names the lock, and opens once the first is closed.
    @Test func aSecondStoreOnTheSameDirectoryIsRefused() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let first = try await SmarticoStore.open(directory: dir.path)
        do {
            let second = try await SmarticoStore.open(directory: dir.path)
            await second.close()
            Issue.record("a second store opened on the same directory")
        } catch {
            #expect("\(error)".contains("lock"), "\(error)")
        }
        await first.close()
        let again = try await SmarticoStore.open(directory: dir.path)
        await again.close()
    }

    /// A version-5 database (the journal in SQLite) moves its rows into the event log at open, seqs
    /// and data kept; the seen table is untouched; a crash after the move but before the rows were
    /// deleted moves nothing twice.
    @Test func aVersion5JournalMovesIntoTheLog() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let path = dir.sub(SmarticoStore.fileName)
        try await onDedicatedThread {
            let db = try SQLiteConnection(path: path)
            defer { db.close() }
            try db.execute("PRAGMA journal_mode = WAL")
            try StoreSchema.migrate(db, upTo: 5)
            try db.execute("""
                INSERT INTO journal(seq, name, ts_ms, data) VALUES (7, 'message', 1, '{"m":7}'), (8, 'engagement', 2, '{"e":8}'), (9, 'message', 3, '{"m":9}');
                UPDATE meta SET value = 9 WHERE key = 'last_seq';
                INSERT INTO seen(user, uid) VALUES ('alice', 'u8');
                """)
        }
        var store = try await SmarticoStore.open(directory: dir.path)
        #expect(await store.lastSeq() == 9)
        #expect(try await store.journalBounds() == JournalBounds(firstSeq: 7, lastSeq: 9))
        #expect(try await store.events(after: 0, limit: 10).map { String(decoding: $0.data, as: UTF8.self) }
                == [#"{"m":7}"#, #"{"e":8}"#, #"{"m":9}"#])
        #expect(try await store.appendEngagement(user: "alice", uid: "u8", event: journalEvent("engagement", ts: 4, "{}")) == nil)
        #expect(try await store.appendEngagement(user: "alice", uid: "u9", event: journalEvent("engagement", ts: 4, "{}")) == 10)
        await store.close()
        let rows = try await onDedicatedThread {
            let db = try SQLiteConnection(path: path)
            defer { db.close() }
            // As if the rows' deletion had not committed: put two of them back.
            try db.execute("INSERT INTO journal(seq, name, ts_ms, data) VALUES (8, 'engagement', 2, '{\"e\":8}'), (9, 'message', 3, '{\"m\":9}')")
            return try db.queryFirst("SELECT count(*) FROM journal") { $0.int64(0) } ?? -1
        }
        #expect(rows == 2)
        store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [7, 8, 9, 10])
        #expect(await store.lastSeq() == 10)
        await store.close()
    }

    /// An append that fails (here injected, as a full disk would) leaves nothing behind: the next
    /// batch takes the same seqs and the file holds exactly the records acknowledged.
    @Test func aFailedAppendLeavesTheLogAsItWas() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        var store = try await SmarticoStore.open(directory: dir.path)
        _ = try await store.appendEvents([journalEvent("message", ts: 1, "{}")])
        await store.failNextEventLogAppend(errno: EIO)
        await #expect(throws: StoreError.self) { try await store.appendEvents([journalEvent("message", ts: 2, "{\"lost\":1}")]) }
        #expect(await store.lastSeq() == 1)
        #expect(try await store.appendEvents([journalEvent("message", ts: 3, "{\"kept\":1}")]) == [2])
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path)
        #expect(try await store.events(after: 0, limit: 10).map { String(decoding: $0.data, as: UTF8.self) } == ["{}", #"{"kept":1}"#])
        await store.close()
    }

    // MARK: preallocated segments

    /// With the spare ready, a new segment is that file of zeros, appended in place: the file keeps
    /// its size, a reopen finds the records and no damage, and when the next segment begins the
    /// complete one is cut to its records and indexed.
    @Test func aPreallocatedSegmentIsAppendedInPlace() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let options = StoreOptions(segmentBytes: 16 << 10)
        var store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(await store.waitForSpareSegment(), "no spare segment was written")
        let spare = dir.sub(EventLog.directoryName) + "/spare"
        #expect(fileSize(spare) == 16 << 10)
        let payload = "{\"t\":\"" + String(repeating: "x", count: 1_000) + "\"}"
        for i in 1...5 { _ = try await store.appendEvents([journalEvent("message", ts: Int64(i), payload)]) }
        let first = try #require(try segments(dir).first)
        #expect(try segments(dir).count == 1)
        #expect(fileSize(first) == 16 << 10, "the segment is the spare, appended in place")
        #expect(!FileManager.default.fileExists(atPath: spare) || fileSize(spare) == 16 << 10)
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(await store.eventLogRecovery().isEmpty, "the zeros after the records were taken for damage")
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [1, 2, 3, 4, 5])
        #expect(await store.waitForSpareSegment())
        // Once it holds 16 KiB the next segment begins (the spare again): the first was filled up to
        // and past the spare's end by the batch that got it there, so no zeros are left in it.
        for i in 6...20 { _ = try await store.appendEvents([journalEvent("message", ts: Int64(i), payload)]) }
        let files = try segments(dir)
        #expect(files.count >= 2)
        #expect(fileSize(files[0]) == (try recordsEnd(of: files[0])), "the complete segment keeps its zeros")
        #expect(fileSize(files[0]) >= 16 << 10, "a segment began before the one before it was full")
        #expect(fileSize(files[0]) < (16 << 10) + 1_100, "a segment went on after it was full")
        #expect(FileManager.default.fileExists(atPath: EventLog.indexPath(files[0])))
        #expect(fileSize(files[1]) == 16 << 10, "the second segment is not the spare")
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(await store.eventLogRecovery().isEmpty)
        #expect(try await store.events(after: 0, limit: 30).map(\.seq) == Array(1...20))
        await store.close()
    }

    /// A crash in a batch's write into a preallocated segment leaves part of a record, then zeros:
    /// the next open cuts the part off (and the zeros with it), reports it, and appends go on.
    @Test func aTornBatchInAPreallocatedSegmentIsCut() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let options = StoreOptions(segmentBytes: 16 << 10)
        try await threeEventsInAPreallocatedSegment(dir, options)
        var store: SmarticoStore
        let segment = try #require(try segments(dir).last)
        #expect(fileSize(segment) == 16 << 10)
        let end = try recordsEnd(of: segment)
        #expect(try walkedRecordsEnd(of: segment) == end)
        try writeBytes(tornRecord(seq: 4), to: segment, at: end)
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(await store.eventLogRecovery().count == 1, "the cut is reported")
        #expect(fileSize(segment) == end)
        #expect(try await store.events(after: 0, limit: 10).map(\.data) == (1...3).map { bytes("{\"n\":\($0)}") })
        #expect(try await store.appendEvents([journalEvent("message", ts: 4, "{}")]) == [4])
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(await store.eventLogRecovery().isEmpty)
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [1, 2, 3, 4])
        await store.close()
    }

    /// A crash after a segment was complete but before its cut to its records reached the disk
    /// leaves it with zeros after them (a segment that ended before it was full: its next seq did
    /// not follow): the next open cuts it then, reports nothing, and indexes it.
    @Test func aCompleteSegmentStillHoldingItsZerosIsCutAtOpen() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let options = StoreOptions(segmentBytes: 8 << 10, preallocateSegments: false)
        var store = try await SmarticoStore.open(directory: dir.path, options: options)
        let payload = "{\"t\":\"" + String(repeating: "x", count: 1_000) + "\"}"
        for i in 1...12 { _ = try await store.appendEvents([journalEvent("message", ts: Int64(i), payload)]) }
        await store.close()
        let files = try segments(dir)
        #expect(files.count >= 2)
        let cut = fileSize(files[0])
        #expect(truncate(files[0], off_t(cut + 2_048)) == 0)
        try FileManager.default.removeItem(atPath: EventLog.indexPath(files[0]))
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(await store.eventLogRecovery().isEmpty, "zeros after the records were taken for damage")
        #expect(try await store.events(after: 0, limit: 20).map(\.seq) == Array(1...12))
        #expect(fileSize(files[0]) == cut)
        #expect(FileManager.default.fileExists(atPath: EventLog.indexPath(files[0])))
        await store.close()
    }

    /// A segment retention lets go of becomes the next spare instead of being deleted: its old
    /// records stay after the new ones (no zeros written), are never read as the new segment's,
    /// and are no damage at the next open — which keeps that segment as it is.
    @Test func aSegmentRetentionLetsGoOfIsReusedAsTheNextSpare() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let options = StoreOptions(retentionEvents: 8, segmentBytes: 16 << 10)
        var store = try await SmarticoStore.open(directory: dir.path, options: options)
        // 16 records a segment (the 16th takes it past 16 KiB): seqs 1–16, 17–32, 33–48, then
        // 49–52 in the file that held 1–16.
        let payload = { (i: Int) in "{\"n\":\(i),\"t\":\"" + String(repeating: "x", count: 1_000) + "\"}" }
        for i in 1...52 {
            #expect(await store.waitForSpareSegment())
            _ = try await store.appendEvents([journalEvent("message", ts: Int64(i), payload(i))])
        }
        // Seqs 1–44 left the journal, the first 32 with their segments; some of their bytes are
        // still in the files (the newest segment, the spare): reused.
        #expect(try await store.events(after: 0, limit: 100).map(\.seq) == Array(45...52))
        #expect(try (1...32).contains { try eventFilesHold(dir, "{\"n\":\($0),") }, "the segments were deleted, not reused")
        await store.close()
        let newest = try #require(try segments(dir).last)
        let end = try walkedRecordsEnd(of: newest)
        #expect(fileSize(newest) == 16 << 10)
        let tail = [UInt8](try Data(contentsOf: URL(fileURLWithPath: newest)))[end...]
        try #require(tail.contains { $0 != 0 }, "the newest segment is not a reused file with old records after its own")
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(await store.eventLogRecovery().isEmpty, "a reused segment's old records were taken for damage")
        #expect(fileSize(newest) == 16 << 10, "the newest segment was cut at open")
        #expect(try await store.events(after: 0, limit: 100).map(\.seq) == Array(45...52))
        for i in 53...55 { _ = try await store.appendEvents([journalEvent("message", ts: Int64(i), payload(i))]) }
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(await store.eventLogRecovery().isEmpty)
        #expect(try await store.events(after: 0, limit: 100).map(\.seq) == Array(48...55))
        #expect(try walkedRecordsEnd(of: try #require(try segments(dir).last)) > end || (try segments(dir).last) != newest)
        await store.close()
    }

    /// A crash in a batch's write into a reused segment: its first record's header where the
    /// records end, or only a later record of the batch further on (the first never reached the
    /// disk) — either way a record of this segment's seqs after the end: cut, reported, appends go on.
    @Test(arguments: [0, 1_500])
    func aTornBatchInAReusedSegmentIsCut(laterBy gap: Int) async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let options = StoreOptions(retentionEvents: 4, segmentBytes: 16 << 10)
        var store = try await SmarticoStore.open(directory: dir.path, options: options)
        let payload = { (i: Int) in "{\"n\":\(i),\"t\":\"" + String(repeating: "x", count: 1_000) + "\"}" }
        var reused = false
        for i in 1...200 {
            #expect(await store.waitForSpareSegment())
            _ = try await store.appendEvents([journalEvent("message", ts: Int64(i), payload(i))])
            // Until the newest segment is a reused file holding old records after its own.
            if i > 40, let newest = try segments(dir).last {
                let end = try walkedRecordsEnd(of: newest)
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: newest)))
                if end > 0 && end + gap + 200 < bytes.count && bytes[end...].contains(where: { $0 != 0 }) { reused = true; break }
            }
        }
        try #require(reused, "no segment was reused")
        let kept = try await store.events(after: 0, limit: 100)
        await store.close()
        let newest = try #require(try segments(dir).last)
        let end = try walkedRecordsEnd(of: newest)
        try writeBytes(tornRecord(seq: kept.last!.seq + 1 + JournalSeq(gap > 0 ? 1 : 0)), to: newest, at: end + gap)
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(await store.eventLogRecovery().count == 1, "the cut is reported")
        #expect(fileSize(newest) == end)
        #expect(try await store.events(after: 0, limit: 100) == kept)
        let next = try await store.appendEvents([journalEvent("message", ts: 999, "{}")])
        #expect(next == [kept.last!.seq + 1])
        await store.close()
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(await store.eventLogRecovery().isEmpty)
        // Retention keeps the newest 4.
        #expect(try await store.events(after: 0, limit: 100).map(\.seq) == Array((kept.map(\.seq) + next).suffix(4)))
        await store.close()
    }

    /// A spare that holds a reused segment's records, and a retired segment waiting to be one, are
    /// not carried across a restart: both are removed and the spare is written as zeros.
    @Test func aReusedSpareIsNotKeptAcrossARestart() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let options = StoreOptions(segmentBytes: 16 << 10)
        try await threeEventsInAPreallocatedSegment(dir, options)
        var store: SmarticoStore
        let events = dir.sub(EventLog.directoryName)
        let segment = try #require(try segments(dir).first)
        let records = [UInt8](try Data(contentsOf: URL(fileURLWithPath: segment)))
        try Data(records).write(to: URL(fileURLWithPath: events + "/spare"))
        try Data(records).write(to: URL(fileURLWithPath: events + "/retired"))
        #expect(fileSize(events + "/spare") == 16 << 10)
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(await store.waitForSpareSegment())
        #expect(!FileManager.default.fileExists(atPath: events + "/retired"))
        let spareBytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: events + "/spare")))
        #expect(spareBytes.count == 16 << 10 && spareBytes.allSatisfy { $0 == 0 }, "a reused spare was kept")
        #expect(try await store.events(after: 0, limit: 10).map(\.seq) == [1, 2, 3])
        await store.close()
    }

    /// A crash after a reused segment was complete but before its cut reached the disk leaves the
    /// file's old records after its own: the next open cuts them, reports nothing, and indexes it.
    /// A record of the segment's own seqs there instead (damage before it) is reported and kept.
    @Test(arguments: [true, false])
    func aCompleteSegmentStillHoldingOldRecordsIsCutAtOpen(old: Bool) async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let options = StoreOptions(segmentBytes: 8 << 10, preallocateSegments: false)
        var store = try await SmarticoStore.open(directory: dir.path, options: options)
        let payload = "{\"t\":\"" + String(repeating: "x", count: 1_000) + "\"}"
        for i in 1...20 { _ = try await store.appendEvents([journalEvent("message", ts: Int64(i), payload)]) }
        await store.close()
        let files = try segments(dir)
        try #require(files.count >= 3)
        let cut = fileSize(files[1])
        let first = try #require(JournalSeq(String(files[1].split(separator: "/").last!.prefix(20))))
        // Seq 1 is older than the segment; its own next seq is not.
        try appendBytes(Array(repeating: 0x78, count: 300) + tornRecord(seq: old ? 1 : first + 20) + Array(repeating: 0x78, count: 300),
                        to: files[1])
        try FileManager.default.removeItem(atPath: EventLog.indexPath(files[1]))
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(await store.eventLogRecovery().count == (old ? 0 : 1))
        #expect(try await store.events(after: 0, limit: 30).map(\.seq) == Array(1...20))
        #expect((fileSize(files[1]) == cut) == old)
        #expect(FileManager.default.fileExists(atPath: EventLog.indexPath(files[1])) == old)
        await store.close()
    }

    /// A spare is kept across restarts only when it is whole (the right size under its final name):
    /// a half-written `spare.tmp` and a spare of another size are removed and a new one is written.
    @Test func onlyAWholeSpareIsKept() async throws {
        let dir = try StoreTempDir()
        defer { dir.remove() }
        let options = StoreOptions(segmentBytes: 16 << 10)
        var store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(await store.waitForSpareSegment())
        await store.close()
        let events = dir.sub(EventLog.directoryName)
        // Kept: the same inode after a reopen.
        var before = stat(), after = stat()
        #expect(stat(events + "/spare", &before) == 0)
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(await store.waitForSpareSegment())
        await store.close()
        #expect(stat(events + "/spare", &after) == 0)
        #expect(before.st_ino == after.st_ino, "a whole spare was written again")
        // Another size (here: half-written, then renamed by hand) and a leftover temporary file.
        #expect(truncate(events + "/spare", 4096) == 0)
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: events + "/spare.tmp"))
        store = try await SmarticoStore.open(directory: dir.path, options: options)
        #expect(await store.waitForSpareSegment())
        #expect(fileSize(events + "/spare") == 16 << 10)
        #expect(!FileManager.default.fileExists(atPath: events + "/spare.tmp"))
        let spareBytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: events + "/spare")))
        #expect(spareBytes.allSatisfy { $0 == 0 })
        await store.close()
    }
}
