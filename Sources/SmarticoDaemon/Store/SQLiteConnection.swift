// A small wrapper over SQLite's C API: one connection, prepared statements cached per SQL text,
// typed binds and columns, `BEGIN IMMEDIATE` transactions, errors that carry the code, the extended
// code, the message and the SQL that failed. Used only by `SmarticoStore` on its own thread.
import CSQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An error returned by SQLite, with everything a person needs to understand it.
public struct SQLiteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The primary result code (`SQLITE_BUSY`, `SQLITE_IOERR`, ...).
    public var code: Int32
    /// The extended result code (`SQLITE_IOERR_FSYNC`, `SQLITE_CONSTRAINT_UNIQUE`, ...).
    public var extendedCode: Int32
    /// SQLite's message (`sqlite3_errmsg`) at the time of the failure.
    public var message: String
    /// The SQL that failed, or nil when the failure was not tied to a statement (open, close).
    public var sql: String?
    /// The database file.
    public var path: String
    /// The operating system's errno behind the failure (`sqlite3_system_errno`, or for a full,
    /// read-only or failing file system what `statvfs` says of it), 0 when none.
    public var systemErrno: Int32 = 0

    public var description: String {
        var text = "SQLite error \(code) (extended \(extendedCode), \(String(cString: sqlite3_errstr(extendedCode))))"
        text += " on \(path): \(message)"
        if systemErrno != 0 { text += " (\(String(cString: strerror(systemErrno))), errno \(systemErrno))" }
        if let sql { text += " [SQL: \(sql)]" }
        return text
    }
}

/// A value to bind to a statement parameter.
enum SQLiteValue {
    case null
    case integer(Int64)
    case text(String)
    case blob([UInt8])

    static func optionalText(_ value: String?) -> SQLiteValue { value.map { .text($0) } ?? .null }
    static func optionalInteger(_ value: Int64?) -> SQLiteValue { value.map { .integer($0) } ?? .null }
    static func optionalBlob(_ value: [UInt8]?) -> SQLiteValue { value.map { .blob($0) } ?? .null }
}

/// The current row of a stepping statement; valid only inside the closure it is passed to.
struct SQLiteRow {
    fileprivate let stmt: OpaquePointer

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(stmt, column) == SQLITE_NULL }
    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(stmt, column) }
    func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }
    func text(_ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(stmt, column) else { return "" }
        let count = Int(sqlite3_column_bytes(stmt, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }
    func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }
    func blob(_ column: Int32) -> [UInt8] {
        // Ask for the pointer first, then the size (SQLite's documented order).
        guard let pointer = sqlite3_column_blob(stmt, column) else { return [] }
        let count = Int(sqlite3_column_bytes(stmt, column))
        return [UInt8](UnsafeRawBufferPointer(start: pointer, count: count))
    }
    func optionalBlob(_ column: Int32) -> [UInt8]? { isNull(column) ? nil : blob(column) }
}

/// `SQLITE_TRANSIENT` is a macro Swift cannot import: SQLite copies the bound bytes before returning.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One SQLite connection. Not thread-safe and not `Sendable`: it lives inside `SmarticoStore`, whose
/// executor is a single dedicated thread, so it is only ever used from that thread.
final class SQLiteConnection {
    let path: String
    private var handle: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    private var inTransaction = false

    /// Opens the database at `path` for reading and writing, creating it when missing if `create`.
    init(path: String, create: Bool = true) throws(SQLiteError) {
        self.path = path
        var db: OpaquePointer?
        // NOMUTEX: the connection is used by one thread at a time. EXRESCODE: extended result codes
        // everywhere. NOFOLLOW: a symbolic link at `path` is refused (SQLITE_CANTOPEN), never followed.
        let flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
            | SQLITE_OPEN_NOFOLLOW
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_close_v2(db)
            throw SQLiteError(code: rc & 0xff, extendedCode: rc, message: message, sql: nil, path: path)
        }
        sqlite3_extended_result_codes(db, 1)
        handle = db
    }

    deinit {
        close()
        walFrameCount.deallocate()
    }

    /// Finalizes every cached statement and closes the connection. Idempotent.
    func close() {
        guard let db = handle else { return }
        for stmt in statements.values { sqlite3_finalize(stmt) }
        statements.removeAll()
        sqlite3_close_v2(db)
        handle = nil
    }

    /// Frames in the WAL after this connection's last commit, once ``takeOverCheckpoints()`` was
    /// called (SQLite's WAL hook writes it; the connection's thread reads it).
    private let walFrameCount: UnsafeMutablePointer<Int32> = {
        let count = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
        count.initialize(to: 0)
        return count
    }()

    /// Turns SQLite's automatic checkpoint off on this connection — it ran inside the commit that
    /// filled the WAL past 1000 frames, copying them and syncing the database file before that
    /// commit returned — and keeps the WAL's size after each commit instead (``walFrames``), for a
    /// checkpoint run elsewhere (``WALCheckpointer``). (SQLite's WAL hook replaces its automatic
    /// checkpoint, which is one.)
    func takeOverCheckpoints() {
        guard let db = handle else { return }
        sqlite3_wal_hook(db, { context, _, _, frames in
            context?.assumingMemoryBound(to: Int32.self).pointee = frames
            return SQLITE_OK
        }, UnsafeMutableRawPointer(walFrameCount))
    }

    /// Frames in the WAL after the last commit (``takeOverCheckpoints()``; 0 before).
    var walFrames: Int { Int(walFrameCount.pointee) }

    /// A passive checkpoint (`sqlite3_wal_checkpoint_v2`): copies what the WAL holds back into the
    /// database file as far as no reader needs it, without waiting for a lock or blocking the
    /// writer of another connection.
    func checkpoint() throws(SQLiteError) {
        let db = try requireHandle("PRAGMA wal_checkpoint(PASSIVE)")
        let rc = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc, sql: "PRAGMA wal_checkpoint(PASSIVE)") }
    }

    /// The heap memory held by this connection's page cache (`SQLITE_DBSTATUS_CACHE_USED`).
    var cacheBytes: Int {
        guard let db = handle else { return 0 }
        var current: Int32 = 0
        var highwater: Int32 = 0
        guard sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_USED, &current, &highwater, 0) == SQLITE_OK else { return 0 }
        return Int(current)
    }

    private func error(_ rc: Int32, sql: String?) -> SQLiteError {
        let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "the connection is closed"
        let extended = handle.map { sqlite3_extended_errcode($0) } ?? rc
        var systemErrno = handle.map { sqlite3_system_errno($0) } ?? 0
        let primary = rc & 0xff
        if systemErrno == 0, [SQLITE_FULL, SQLITE_IOERR, SQLITE_READONLY, SQLITE_CANTOPEN].contains(primary) {
            systemErrno = fileSystemErrno(path)
        }
        return SQLiteError(code: primary, extendedCode: rc == SQLITE_MISUSE ? rc : extended,
                           message: message, sql: sql, path: path, systemErrno: systemErrno)
    }


    private func requireHandle(_ sql: String?) throws(SQLiteError) -> OpaquePointer {
        guard let handle else {
            throw SQLiteError(code: SQLITE_MISUSE, extendedCode: SQLITE_MISUSE,
                              message: "the connection is closed", sql: sql, path: path)
        }
        return handle
    }

    /// Runs one or more statements without parameters or results (schema changes, pragmas).
    func execute(_ sql: String) throws(SQLiteError) {
        let db = try requireHandle(sql)
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc, sql: sql) }
    }

    /// The cached prepared statement for `sql`, prepared on first use.
    private func statement(_ sql: String) throws(SQLiteError) -> OpaquePointer {
        if let stmt = statements[sql] { return stmt }
        let db = try requireHandle(sql)
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw error(rc, sql: sql) }
        statements[sql] = stmt
        return stmt
    }

    private func bind(_ values: [SQLiteValue], to stmt: OpaquePointer, sql: String) throws(SQLiteError) {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .null:
                rc = sqlite3_bind_null(stmt, index)
            case .integer(let v):
                rc = sqlite3_bind_int64(stmt, index, v)
            case .text(let v):
                // With its length: a NUL inside the text is kept.
                rc = sqlite3_bind_text(stmt, index, v, Int32(clamping: v.utf8.count), transient)
            case .blob(let v):
                rc = v.withUnsafeBytes { bytes in
                    // A zero-length blob with a nil pointer would bind NULL; bind an empty blob instead.
                    bytes.baseAddress == nil
                        ? sqlite3_bind_zeroblob(stmt, index, 0)
                        : sqlite3_bind_blob64(stmt, index, bytes.baseAddress, UInt64(bytes.count), transient)
                }
            }
            guard rc == SQLITE_OK else { throw error(rc, sql: sql) }
        }
    }

    /// Runs `sql` with `values` bound and calls `row` for each result row, in order.
    /// `row` returns false to stop early.
    func forEachRow(
        _ sql: String, _ values: [SQLiteValue] = [],
        _ row: (SQLiteRow) -> Bool
    ) throws(SQLiteError) {
        let stmt = try statement(sql)
        defer {
            sqlite3_reset(stmt)
            sqlite3_clear_bindings(stmt)
        }
        try bind(values, to: stmt, sql: sql)
        while true {
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else { throw error(rc, sql: sql) }
            if !row(SQLiteRow(stmt: stmt)) { return }
        }
    }

    /// Runs a statement that returns no rows (or whose rows are ignored).
    func run(_ sql: String, _ values: [SQLiteValue] = []) throws(SQLiteError) {
        try forEachRow(sql, values) { _ in true }
    }

    /// All result rows mapped by `transform`.
    func query<T>(
        _ sql: String, _ values: [SQLiteValue] = [],
        _ transform: (SQLiteRow) -> T
    ) throws(SQLiteError) -> [T] {
        var result: [T] = []
        try forEachRow(sql, values) { row in
            result.append(transform(row))
            return true
        }
        return result
    }

    /// The first result row mapped by `transform`, or nil when there is none.
    func queryFirst<T>(
        _ sql: String, _ values: [SQLiteValue] = [],
        _ transform: (SQLiteRow) -> T
    ) throws(SQLiteError) -> T? {
        var result: T?
        try forEachRow(sql, values) { row in
            result = transform(row)
            return false
        }
        return result
    }

    /// The number of rows changed by the last INSERT, UPDATE or DELETE.
    var changes: Int { handle.map { Int(sqlite3_changes64($0)) } ?? 0 }

    /// Runs `body` inside `BEGIN IMMEDIATE` … `COMMIT`; any error thrown rolls the transaction back.
    /// With `synchronous=FULL` the commit has reached the disk when this returns.
    func transaction<T>(_ body: () throws -> T) throws(StoreError) -> T {
        precondition(!inTransaction, "SQLiteConnection.transaction is not reentrant")
        do {
            try execute("BEGIN IMMEDIATE")
        } catch {
            throw .sqlite(error)
        }
        inTransaction = true
        defer { inTransaction = false }
        let value: T
        do {
            value = try body()
            try execute("COMMIT")
        } catch let thrown {
            // After some errors (SQLITE_FULL, SQLITE_IOERR, ...) SQLite has already rolled back;
            // a failing ROLLBACK then only says "no transaction is active".
            if let db = handle, sqlite3_get_autocommit(db) == 0 {
                _ = sqlite3_exec(db, "ROLLBACK", nil, nil, nil)
            }
            if let storeError = thrown as? StoreError { throw storeError }
            if let sqliteError = thrown as? SQLiteError { throw .sqlite(sqliteError) }
            throw .other(String(describing: thrown))
        }
        return value
    }
}

extension StoreError {
    /// Why the state directory takes no writes, when that is the failure: `"full"` (SQLITE_FULL,
    /// or an I/O error with ENOSPC/EDQUOT), `"read-only"` (SQLITE_READONLY, or EROFS), `"failing"`
    /// (another I/O error, a file that cannot be opened); nil for every other error. Such a
    /// failure passes when the operator frees space or makes the directory writable again.
    public var storageProblem: String? {
        guard case .sqlite(let e) = self else { return nil }
        switch e.code {
        case SQLITE_FULL: return "full"
        case SQLITE_READONLY: return "read-only"
        case SQLITE_IOERR, SQLITE_CANTOPEN:
            switch e.systemErrno {
            case ENOSPC, EDQUOT: return "full"
            case EROFS: return "read-only"
            default: return "failing"
            }
        default: return nil
        }
    }
}

/// SQLite keeps no errno for SQLITE_FULL, and the one of an I/O error is often gone by the
/// time it reports it: the file system holding `path` tells instead — EROFS when it is
/// mounted read-only, ENOSPC when it has no block or inode left for us, else the errno of
/// creating an empty file beside `path` (ext4's emergency read-only state after disk errors
/// does not show in `statvfs`); 0 when that works. Only after a failed write, on the store's
/// own thread like every call on this connection.
private func fileSystemErrno(_ path: String) -> Int32 {
    var fs = statvfs()
    guard statvfs(path, &fs) == 0 else { return 0 }
    if fs.f_flag & UInt(ST_RDONLY) != 0 { return EROFS }
    if fs.f_bavail == 0 || fs.f_favail == 0 { return ENOSPC }
    let probe = path + ".write-probe"
    let fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return errno == EEXIST ? 0 : errno }
    close(fd)
    unlink(probe)
    return 0
}
