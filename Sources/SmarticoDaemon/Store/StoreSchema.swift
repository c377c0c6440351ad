// The store's schema: one CREATE script, version 3 (1 → 2 → 3 by `migrations`). `PRAGMA application_id` marks a database as this
// format, so one written by a development build of smarticod (which used `user_version` 1 to 8 and
// kept its events in segment files beside the database) is told apart from one of a newer release.
// Each later version adds one step to `migrations`; a store of an older version is brought up to date
// when it is opened, in one transaction.

enum StoreSchema {
    /// `PRAGMA application_id` of a smarticod store ("SMCD").
    static let applicationID: Int32 = 0x534D_4344
    /// The schema version this code writes.
    static let version = 3

    /// The public HTTP API's queue, made by the schema and by the migration 2 → 3 alike.
    static let httpQueueTable = """
        CREATE TABLE http_queue(
            position INTEGER PRIMARY KEY AUTOINCREMENT,
            uuid TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL CHECK (kind IN ('push_report', 'push_token')),
            request BLOB NOT NULL,
            user TEXT,
            created_ms INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_ms INTEGER NOT NULL DEFAULT 0,
            last_error TEXT
        );
        """

    static let createSQL = """
        CREATE TABLE meta(
            key TEXT PRIMARY KEY NOT NULL,
            value BLOB NOT NULL
        ) WITHOUT ROWID;
        -- last_seq: the high-water mark of journal seqs, kept apart from the rows so that retention
        -- never lets seq go backwards. journal_bytes: the sum of length(data) of the journal's rows.
        CREATE TABLE counters(
            name TEXT PRIMARY KEY NOT NULL,
            value INTEGER NOT NULL
        ) WITHOUT ROWID;
        INSERT INTO counters(name, value) VALUES ('last_seq', 0), ('journal_bytes', 0);
        CREATE TABLE journal(
            seq INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            ts_ms INTEGER NOT NULL,
            data BLOB NOT NULL
        );
        -- Engagement uids already journaled, per user; id orders them for pruning.
        CREATE TABLE seen(
            id INTEGER PRIMARY KEY,
            user TEXT NOT NULL,
            uid TEXT NOT NULL,
            UNIQUE (user, uid)
        );
        CREATE INDEX seen_user_id ON seen(user, id);
        -- user: the user a message was made for; NULL: made on an anonymous session (daemon.md,
        -- session rule 5: it is sent only on a session identified as that user, or anonymous).
        CREATE TABLE outbox(
            position INTEGER PRIMARY KEY AUTOINCREMENT,
            uuid TEXT NOT NULL UNIQUE,
            cid INTEGER NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('socket', 'http')),
            payload BLOB NOT NULL,
            created_ms INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            user TEXT
        );
        -- Latest-value-only messages (the language op): one row per slot, replaced by a new value.
        CREATE TABLE latest(
            slot TEXT PRIMARY KEY NOT NULL,
            uuid TEXT NOT NULL,
            cid INTEGER NOT NULL,
            payload BLOB NOT NULL,
            created_ms INTEGER NOT NULL,
            user TEXT
        ) WITHOUT ROWID;
        -- Durable subscriber cursors; owner_uid: the peer uid that created the name (socket-api.md,
        -- "Permissions"); NULL for a name made before names had owners.
        CREATE TABLE cursors(
            name TEXT PRIMARY KEY NOT NULL,
            seq INTEGER NOT NULL,
            owner_uid INTEGER
        ) WITHOUT ROWID;
        CREATE TABLE user(
            id INTEGER PRIMARY KEY CHECK (id = 1),
            ext_user_id TEXT NOT NULL,
            hash TEXT,
            public_username TEXT,
            props BLOB,
            last_activity_ms INTEGER
        );
        -- Calls to Smartico's public HTTP API (push_report, push tokens over HTTP), kept apart
        -- from the WebSocket's outbox and sent in position order by their own loop. request: the
        -- call's JSON (what to send; the event's user_ext_id is filled in at send time when user
        -- is NULL, i.e. when it was made before any user was known). next_ms: not before then (backoff).
        \(httpQueueTable)
        -- Push data, kept even while no user is identified.
        CREATE TABLE push(
            id INTEGER PRIMARY KEY CHECK (id = 1),
            token TEXT NOT NULL,
            platform INTEGER NOT NULL,
            status INTEGER NOT NULL,
            app_package_id TEXT
        );
        """

    /// `migrations[v - 1]` brings a version-`v` store to version `v + 1`.
    static let migrations: [String] = [
        // 1 → 2: outbox messages and latest-value slots carry their user. Those already waiting were
        // made before rows had one: they are given the stored user (the one the daemon acted for),
        // or stay anonymous when there is none. Cursors get an owner.
        """
        ALTER TABLE outbox ADD COLUMN user TEXT;
        ALTER TABLE latest ADD COLUMN user TEXT;
        ALTER TABLE cursors ADD COLUMN owner_uid INTEGER;
        UPDATE outbox SET user = (SELECT ext_user_id FROM user WHERE id = 1);
        UPDATE latest SET user = (SELECT ext_user_id FROM user WHERE id = 1);
        """,
        // 2 → 3: the public HTTP API's queue (push reports, push tokens over HTTP), separate from
        // the outbox. Nothing to carry over: no release before 3 queued HTTP calls.
        """
        \(httpQueueTable)
        """,
    ]

    static func userVersion(_ db: SQLiteConnection) throws(SQLiteError) -> Int {
        Int(try db.queryFirst("PRAGMA user_version") { $0.int64(0) } ?? 0)
    }

    /// Checks that the database is empty or of this format; true when it is empty. Throws
    /// `.developmentFormat` for a store of a development build of smarticod, `.databaseTooNew` for one
    /// of a newer smarticod, `.notAStore` for another SQLite database. Reads only: a refused file is
    /// left as it was.
    static func check(_ db: SQLiteConnection) throws -> Bool {
        let found = try userVersion(db)
        let application = Int32(truncatingIfNeeded: try db.queryFirst("PRAGMA application_id") { $0.int64(0) } ?? 0)
        let tables = try db.queryFirst("SELECT count(*) FROM sqlite_master") { $0.int64(0) } ?? 0
        if found == 0 && application == 0 && tables == 0 { return true }
        if application == applicationID {
            guard found <= version else { throw StoreError.databaseTooNew(path: db.path, found: found, known: version) }
            return false
        }
        if application == 0 && found >= 1 && found <= 8 { throw StoreError.developmentFormat(path: db.path, found: found) }
        throw StoreError.notAStore(path: db.path)
    }

    /// Brings a store of an older version of this format up to `version`, in one transaction.
    static func migrate(_ db: SQLiteConnection) throws {
        try db.execute("BEGIN IMMEDIATE")
        do {
            let found = try userVersion(db)
            if found < version {
                for step in migrations[(found - 1)...] { try db.execute(step) }
                try db.execute("PRAGMA user_version = \(version)")
            }
            try db.execute("COMMIT")
        } catch {
            try? db.execute("ROLLBACK")
            throw error
        }
    }

    /// Creates the schema in an empty database (`check` first, in the same transaction: another
    /// process may have created it meanwhile).
    static func create(_ db: SQLiteConnection) throws {
        try db.execute("BEGIN IMMEDIATE")
        do {
            if try check(db) {
                try db.execute(createSQL)
                try db.execute("PRAGMA application_id = \(applicationID)")
                try db.execute("PRAGMA user_version = \(version)")
            }
            try db.execute("COMMIT")
        } catch {
            try? db.execute("ROLLBACK")
            throw error
        }
    }
}
