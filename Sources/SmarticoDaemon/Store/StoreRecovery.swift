// A damaged database at start (docs/store.md, "A damaged database"): moved aside to
// `NAME.corrupt-TIMESTAMP` with its -wal/-shm files, and a fresh store created in its place.
import CSQLite

#if canImport(Glibc)
import Glibc
#endif

/// A database that was found damaged at start and moved aside.
public struct DamagedStore: Sendable, Equatable {
    /// The database file that was damaged (now holding the fresh store).
    public var path: String
    /// Where the damaged file went (`path.corrupt-YYYYMMDDTHHMMSSZ`); its -wal/-shm beside it.
    public var movedTo: String
    /// What SQLite said about it.
    public var error: StoreError
}

extension SmarticoStore {
    /// Whether `error` at open means the database file itself is damaged: SQLite's `SQLITE_CORRUPT`
    /// or `SQLITE_NOTADB` (at open, during the schema check, or found by `PRAGMA quick_check`).
    /// Nothing else is: a permission error, a full disk, an I/O error, a newer schema or another
    /// program's database are left as they are for the operator (the daemon exits).
    public static func isDamage(_ error: StoreError) -> Bool {
        guard case .sqlite(let e) = error else { return false }
        return e.code == SQLITE_CORRUPT || e.code == SQLITE_NOTADB
    }

    /// Opens the store like ``open(directory:options:)``; a damaged database (``isDamage(_:)``) is
    /// moved aside with its -wal/-shm files and a fresh store is created. Any other failure, and a
    /// failure to move the file or to create the fresh store, throws.
    public static func openMovingDamageAside(directory: String, options: StoreOptions = StoreOptions(), nowMs: Int64)
        async throws(StoreError) -> (store: SmarticoStore, damaged: DamagedStore?)
    {
        do {
            return (try await open(directory: directory, options: options), nil)
        } catch {
            guard isDamage(error) else { throw error }
            let store = SmarticoStore(directory: directory, options: options)
            let movedTo = try await store.moveDatabaseAside(nowMs: nowMs)
            try await store.reopen()
            return (store, DamagedStore(path: store.path, movedTo: movedTo, error: error))
        }
    }

    /// Renames the database and its -wal/-shm files to `.corrupt-TIMESTAMP` (a free name) and makes
    /// the renames durable. Store thread.
    func moveDatabaseAside(nowMs: Int64) throws(StoreError) -> String {
        var target = path + ".corrupt-" + Self.timestamp(nowMs)
        var n = 1
        while access(target, F_OK) == 0 || access(target + "-wal", F_OK) == 0 {
            target = path + ".corrupt-" + Self.timestamp(nowMs) + "-\(n)"
            n += 1
        }
        for suffix in ["-wal", "-shm", ""] {
            let from = path + suffix
            guard access(from, F_OK) == 0 else { continue }
            if rename(from, target + suffix) != 0 {
                throw .fileSystem(path: from, operation: "moving the damaged database aside to \(target + suffix)", errno: errno)
            }
        }
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        let fd = Glibc.open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 {
            _ = fsync(fd)
            _ = Glibc.close(fd)
        }
        return target
    }

    /// `YYYYMMDDTHHMMSSZ` (UTC) of `ms` since the epoch.
    static func timestamp(_ ms: Int64) -> String {
        var seconds = time_t(ms / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let n = strftime(&buffer, buffer.count, "%Y%m%dT%H%M%SZ", &parts)
        return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
