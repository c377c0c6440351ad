// The store's schema, versioned with `PRAGMA user_version` and built by an ordered list of migration
// steps. A step that shipped is never edited: changes are new steps appended at the end.
import CSQLite

enum StoreSchema {
    /// One migration step: the SQL that takes the database from `version - 1` to `version`.
    struct Step {
        let version: Int
        let sql: String
    }

    /// The ordered steps. `PRAGMA user_version` is the number of the last one applied (0: empty file).
    static let steps: [Step] = [
        Step(version: 1, sql: """
            CREATE TABLE meta(
                key TEXT PRIMARY KEY NOT NULL,
                value BLOB NOT NULL
            ) WITHOUT ROWID;
            -- The high-water mark of journal seqs lives here, apart from the rows, so that retention
            -- or an empty journal never lets seq go backwards.
            INSERT INTO meta(key, value) VALUES ('last_seq', 0);
            CREATE TABLE journal(
                seq INTEGER PRIMARY KEY,
                name TEXT NOT NULL,
                ts_ms INTEGER NOT NULL,
                data BLOB NOT NULL
            );
            CREATE INDEX journal_ts ON journal(ts_ms);
            CREATE TABLE outbox(
                position INTEGER PRIMARY KEY AUTOINCREMENT,
                uuid TEXT NOT NULL UNIQUE,
                cid INTEGER NOT NULL,
                payload BLOB NOT NULL,
                created_ms INTEGER NOT NULL
            );
            CREATE TABLE cursors(
                name TEXT PRIMARY KEY NOT NULL,
                seq INTEGER NOT NULL
            ) WITHOUT ROWID;
            CREATE TABLE user(
                id INTEGER PRIMARY KEY CHECK (id = 1),
                ext_user_id TEXT NOT NULL,
                hash TEXT,
                public_username TEXT,
                props BLOB,
                last_activity_ms INTEGER
            );
            """),
        Step(version: 2, sql: """
            -- Push reports go through the outbox too (kind 'http'), retried with an attempt count.
            ALTER TABLE outbox ADD COLUMN kind TEXT NOT NULL DEFAULT 'socket' CHECK (kind IN ('socket', 'http'));
            ALTER TABLE outbox ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
            -- Latest-value-only messages (the language op): one row per slot, replaced by a new value.
            CREATE TABLE latest(
                slot TEXT PRIMARY KEY NOT NULL,
                uuid TEXT NOT NULL,
                cid INTEGER NOT NULL,
                payload BLOB NOT NULL,
                created_ms INTEGER NOT NULL
            ) WITHOUT ROWID;
            -- Engagement uids already delivered, per user; id orders them for pruning.
            CREATE TABLE seen(
                id INTEGER PRIMARY KEY,
                user TEXT NOT NULL,
                uid TEXT NOT NULL,
                UNIQUE (user, uid)
            );
            CREATE INDEX seen_user_id ON seen(user, id);
            -- Push data, kept even while no user is identified.
            CREATE TABLE push(
                id INTEGER PRIMARY KEY CHECK (id = 1),
                token TEXT NOT NULL,
                platform INTEGER NOT NULL,
                status INTEGER NOT NULL,
                app_package_id TEXT
            );
            """),
        Step(version: 3, sql: """
            -- Every index is one more page written (to the WAL, then again at the checkpoint) in each
            -- commit. Pruning the seen-set walks the table in id (rowid) order instead; the
            -- UNIQUE (user, uid) index stays, it is the set's lookup.
            DROP INDEX IF EXISTS seen_user_id;
            """),
        Step(version: 4, sql: """
            -- Age retention walks the journal in seq order (rows are journaled in receive-time
            -- order), so the ts_ms index, one more page in every commit, goes.
            DROP INDEX IF EXISTS journal_ts;
            """),
        Step(version: 5, sql: """
            -- The seen-set's lookups are answered in memory (SeenSet); its UNIQUE (user, uid)
            -- index made every engagement's commit write a random page of it. SQLite cannot drop
            -- a UNIQUE constraint, so the table is rebuilt, rows and ids kept.
            CREATE TABLE seen_v5(
                id INTEGER PRIMARY KEY,
                user TEXT NOT NULL,
                uid TEXT NOT NULL
            );
            INSERT INTO seen_v5(id, user, uid) SELECT id, user, uid FROM seen ORDER BY id;
            DROP TABLE seen;
            ALTER TABLE seen_v5 RENAME TO seen;
            """),
        Step(version: 6, sql: """
            -- The events move to the event log (segment files beside the database, docs/store.md);
            -- the store moves any rows of `journal` there at open. An older smarticod, which would
            -- read only this table, refuses the file from here on. seen_seq: the last seq whose
            -- engagement is in `seen`; journal_first: the oldest seq retention keeps.
            INSERT OR IGNORE INTO meta(key, value) VALUES ('seen_seq', 0);
            INSERT OR IGNORE INTO meta(key, value) VALUES ('journal_first', 1);
            """),
        Step(version: 7, sql: """
            -- The event log's records carry XXH64 checksums (magic SEV2; SEV1 records, CRC-32, are
            -- still read). An older smarticod knows only SEV1 and would cut the newest segment at
            -- the first new record: it refuses the file from here on. No table changes.
            INSERT OR IGNORE INTO meta(key, value) VALUES ('event_log_format', 2);
            """),
        Step(version: 8, sql: """
            -- The seen-set in chunks (docs/store.md, "seen-set"): a fold writes one row holding the
            -- uids it adds for a user (SeenChunk's format) instead of a row per uid. seen_start:
            -- where a user's kept uids begin (chunk id, byte offset in it); pruning moves it and deletes
            -- the chunks wholly before it. The rows of `seen` move into chunks at open (the table
            -- stays, empty). An older smarticod would not see these uids: it refuses the file.
            CREATE TABLE seen_chunk(
                id INTEGER PRIMARY KEY,
                user TEXT NOT NULL,
                uids BLOB NOT NULL
            );
            CREATE TABLE seen_start(
                user TEXT PRIMARY KEY NOT NULL,
                chunk INTEGER NOT NULL,
                byte INTEGER NOT NULL
            ) WITHOUT ROWID;
            """),
    ]

    /// The newest schema version this code knows.
    static var latestVersion: Int { steps.last?.version ?? 0 }

    static func userVersion(_ db: SQLiteConnection) throws(SQLiteError) -> Int {
        Int(try db.queryFirst("PRAGMA user_version") { $0.int64(0) } ?? 0)
    }

    /// Applies every step after the database's version, up to `target`, each in its own transaction.
    /// Refuses a database newer than this code.
    static func migrate(_ db: SQLiteConnection, upTo target: Int = latestVersion) throws(StoreError) {
        let found: Int
        do {
            found = try userVersion(db)
        } catch {
            throw .sqlite(error)
        }
        guard found <= latestVersion else {
            throw .databaseTooNew(path: db.path, found: found, known: latestVersion)
        }
        for step in steps where step.version > found && step.version <= target {
            do {
                try db.execute("BEGIN IMMEDIATE")
            } catch {
                throw .sqlite(error)
            }
            do {
                // Another process may have migrated between our read and our write lock.
                let current = try userVersion(db)
                if current >= step.version {
                    try db.execute("COMMIT")
                    continue
                }
                try db.execute(step.sql)
                try db.execute("PRAGMA user_version = \(step.version)")
                try db.execute("COMMIT")
            } catch {
                try? db.execute("ROLLBACK")
                throw .migrationFailed(path: db.path, fromVersion: step.version - 1, toVersion: step.version,
                                       underlying: error)
            }
        }
    }
}
