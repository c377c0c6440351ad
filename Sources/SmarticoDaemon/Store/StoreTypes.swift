// The plain values the store takes and returns. JSON payloads are bytes (`[UInt8]`, UTF-8 JSON text):
// the store never parses them.

/// A journal sequence number: one strictly increasing counter, across restarts, starting at 1.
public typealias JournalSeq = Int64

/// Limits and retention; `SmarticoStore.updateOptions(_:)` applies new values (SIGHUP).
public struct StoreOptions: Sendable, Equatable {
    /// `outbox.max_messages`: beyond it `enqueue` throws `StoreError.queueFull`.
    public var maxOutboxMessages: Int
    /// `journal.retention_events`: at most this many journaled events are kept.
    public var retentionEvents: Int
    /// `journal.retention_hours`: events received longer ago than this are deleted.
    public var retentionHours: Int
    /// `journal.max_bytes`: the journaled events' data (the sum of their sizes) is kept under this
    /// many bytes; the newest event is kept whatever its size.
    public var maxJournalBytes: Int
    /// How many engagement uids are remembered per user, at least (the oldest are forgotten first;
    /// up to `SmarticoStore.seenPruneEvery(_:)` − 1 more are kept between two prunings).
    public var seenPerUser: Int
    /// How many durable subscription names are remembered; a new name beyond it throws
    /// `StoreError.tooManyCursors` (local peers choose the names, so the table must be bounded).
    public var maxCursors: Int
    /// `busy_timeout` in milliseconds (another process, such as `sqlite3`, holding the write lock).
    public var busyTimeoutMs: Int

    public init(
        maxOutboxMessages: Int = 10_000,
        retentionEvents: Int = 10_000,
        retentionHours: Int = 168,
        maxJournalBytes: Int = 67_108_864,
        seenPerUser: Int = 10_000,
        maxCursors: Int = 1_000,
        busyTimeoutMs: Int = 5_000
    ) {
        self.maxOutboxMessages = maxOutboxMessages
        self.retentionEvents = retentionEvents
        self.retentionHours = retentionHours
        self.maxJournalBytes = maxJournalBytes
        self.seenPerUser = seenPerUser
        self.maxCursors = maxCursors
        self.busyTimeoutMs = busyTimeoutMs
    }
}

/// One write of a batch (`SmarticoStore.journal(_:)`): an event to journal, and for an engagement the
/// (user, uid) that must not have been seen before (else nothing is journaled).
public struct JournalWrite: Sendable, Equatable {
    public var event: NewJournalEvent
    public var seen: (user: String, uid: String)?

    /// An event journaled unconditionally.
    public init(_ event: NewJournalEvent) {
        self.event = event
        seen = nil
    }

    /// An engagement journaled only the first time `uid` is seen for `user`.
    public init(_ event: NewJournalEvent, once uid: String, user: String) {
        self.event = event
        seen = (user, uid)
    }

    public static func == (a: JournalWrite, b: JournalWrite) -> Bool {
        a.event == b.event && a.seen?.user == b.seen?.user && a.seen?.uid == b.seen?.uid
    }
}

/// An event to journal.
public struct NewJournalEvent: Sendable, Equatable {
    /// The event name of socket-api.md (`engagement`, `minigame`, `deeplink`, `message`).
    public var name: String
    /// When the daemon received it, ms since the epoch.
    public var tsMs: Int64
    /// The event's `data` object as journaled, JSON bytes.
    public var data: [UInt8]

    public init(name: String, tsMs: Int64, data: [UInt8]) {
        self.name = name
        self.tsMs = tsMs
        self.data = data
    }

    /// The event whose journaled bytes are `body`'s.
    init(name: String, tsMs: Int64, body: EventBody) {
        self.init(name: name, tsMs: tsMs, data: body.journalBytes)
    }
}

/// An event's `data` on its way to the journal and the subscribers (the session driver and the socket
/// server use it; the store only takes its `journalBytes`): bytes as they are, or an engagement's,
/// which is journaled without its `bridge` and shown with it (``EngagementJournal``).
enum EventBody: Sendable, Equatable {
    /// The same bytes journaled and shown.
    case bytes([UInt8])
    /// An engagement: `{"message":…,"popup_url":…}` journaled, with `"bridge"` added when shown.
    case engagement(EngagementData)

    /// The journal row's size in bytes.
    var journalCount: Int {
        switch self {
        case .bytes(let b): b.count
        case .engagement(let e): e.journalCount
        }
    }

    /// Appends the journal row.
    func appendJournal(to out: inout [UInt8]) {
        switch self {
        case .bytes(let b): out.append(contentsOf: b)
        case .engagement(let e): e.appendJournal(to: &out)
        }
    }

    /// The journal row as an array of its own.
    var journalBytes: [UInt8] {
        switch self {
        case .bytes(let b): return b
        case .engagement(let e):
            var out: [UInt8] = []
            out.reserveCapacity(e.journalCount)
            e.appendJournal(to: &out)
            return out
        }
    }

    /// About the size of the line's `data` (exact for bytes), for backlog accounting and sizing.
    var lineCount: Int {
        switch self {
        case .bytes(let b): b.count
        case .engagement(let e): e.lineCountEstimate
        }
    }

    /// Appends the line's `data`.
    func appendLine(to out: inout [UInt8]) {
        switch self {
        case .bytes(let b): out.append(contentsOf: b)
        case .engagement(let e): e.appendLine(to: &out)
        }
    }

    /// The line's `data` as an array of its own.
    var lineBytes: [UInt8] {
        switch self {
        case .bytes(let b): return b
        case .engagement(let e):
            var out: [UInt8] = []
            out.reserveCapacity(e.lineCountEstimate)
            e.appendLine(to: &out)
            return out
        }
    }
}

/// A journaled event.
public struct JournalEvent: Sendable, Equatable {
    public var seq: JournalSeq
    public var name: String
    public var tsMs: Int64
    public var data: [UInt8]
}

/// The journal's bounds for `status`.
public struct JournalBounds: Sendable, Equatable {
    /// The smallest seq still stored, or nil when the journal holds no event.
    public var firstSeq: JournalSeq?
    /// The last seq ever assigned (0 before the first event); never goes backwards.
    public var lastSeq: JournalSeq
}

/// How an outbox message leaves the daemon.
public enum OutboxKind: String, Sendable, CaseIterable {
    /// A client message for the WebSocket.
    case socket
    /// A `push_report` for Smartico's public HTTP API.
    case http
}

/// A client message accepted while offline, waiting to be sent.
public struct OutboxMessage: Sendable, Equatable {
    /// Position in the outbox: strictly increasing in enqueue order.
    public var position: Int64
    /// The message's `uuid` (unique in the outbox).
    public var uuid: String
    /// The message's `cid`.
    public var cid: Int
    public var kind: OutboxKind
    /// The whole message as JSON bytes.
    public var payload: [UInt8]
    /// When it was accepted, ms since the epoch.
    public var createdMs: Int64
    /// How many times sending was attempted (`recordAttempt`).
    public var attempts: Int
    /// The user it was made for; nil: made on an anonymous session.
    public var user: String?
}

/// A "latest value only" message (the `language` op): a new value replaces the waiting one.
public struct LatestMessage: Sendable, Equatable {
    /// The slot, e.g. `language`.
    public var slot: String
    public var uuid: String
    public var cid: Int
    public var payload: [UInt8]
    public var createdMs: Int64
    /// The user it was made for; nil: anonymous.
    public var user: String?
}

/// Outbox numbers for `status`.
public struct OutboxStatus: Sendable, Equatable {
    /// Messages waiting: outbox rows plus filled latest-value slots.
    public var depth: Int
    /// When the oldest waiting message was accepted, or nil when nothing waits.
    public var oldestMs: Int64?
}

/// The current user, persisted so it is re-identified after restarts.
public struct StoredUser: Sendable, Equatable {
    public var extUserID: String
    /// The hash given with `identify` (nil when `user.hash_command` provides it).
    public var hash: String?
    /// `public_username` from the last IDENTIFY response.
    public var publicUsername: String?
    /// The public props as last known, JSON object bytes.
    public var props: [UInt8]?
    /// The time of the last activity (ms since the epoch), for the LOGIN-after-inactivity rule.
    public var lastActivityMs: Int64?
}

/// Push data sent with IDENTIFY / cid 1003; kept even while anonymous.
public struct StoredPush: Sendable, Equatable {
    public var token: String
    public var platform: Int
    public var status: Int
    public var appPackageID: String?
}

/// What can go wrong in the store. Every case names what failed and, where useful, what to do.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// SQLite failed; the error carries the code, extended code, message and SQL.
    case sqlite(SQLiteError)
    /// The state directory could not be created or the database file could not be opened.
    case fileSystem(path: String, operation: String, errno: Int32)
    /// The database was written by a newer smarticod.
    case databaseTooNew(path: String, found: Int, known: Int)
    /// The database (schema `found`), or event-log files beside it, were written by a development
    /// build of smarticod, whose format this one does not read.
    case developmentFormat(path: String, found: Int?)
    /// The file is an SQLite database, but not a smarticod store.
    case notAStore(path: String)
    /// The database is not in WAL mode after asking for it (e.g. a read-only or network file system).
    case walUnavailable(path: String, journalMode: String)
    /// The state directory, or the database file in it, is not safe to use (docs/security.md,
    /// "Files the daemon writes"): another user owns the directory or may write in it, or the
    /// database's name is a symbolic link. `reason` says which, and what to do.
    case unsafeStateDir(path: String, reason: String)
    /// The outbox holds `outbox.max_messages` messages.
    case queueFull(max: Int)
    /// A message with this uuid is already in the outbox.
    case duplicateUUID(String)
    /// A durable cursor was asked to move beyond the last assigned seq.
    case cursorBeyondLastSeq(name: String, seq: JournalSeq, lastSeq: JournalSeq)
    /// `maxCursors` durable subscription names exist; `name` would be one more.
    case tooManyCursors(name: String, max: Int)
    /// The durable subscription `name` belongs to uid `owner`; `uid` may not use or forget it.
    case cursorOwned(name: String, owner: UInt32, uid: UInt32)
    /// `uid` already owns `max` durable subscription names (`socket.max_durable_per_uid`).
    case tooManyCursorsForOwner(name: String, uid: UInt32, max: Int)
    /// A value was out of range (empty name, negative limit, ...).
    case invalidArgument(String)
    /// The store was closed.
    case closed
    /// Anything else, described.
    case other(String)

    public var description: String {
        switch self {
        case .sqlite(let error):
            return error.description
        case .fileSystem(let path, let operation, let code):
            return "\(operation) \(path) failed: \(String(cString: strerror(code))) (errno \(code)); "
                + "check that the state_dir exists or can be created and belongs to the daemon's user"
        case .databaseTooNew(let path, let found, let known):
            return "the database \(path) has schema version \(found), but this smarticod knows versions "
                + "up to \(known): it was written by a newer smarticod; run that version, or move the file "
                + "away to start with an empty store"
        case .developmentFormat(let path, let found):
            let what = found.map { "the store at \(path) was written by a development version of smarticod (schema \($0))" }
                ?? "\(path) holds event-log files of a development version of smarticod"
            return what + "; this smarticod cannot read it. Stop the daemon and move the database, its "
                + "-wal/-shm files and the events/ folder out of the state directory to start with an empty store"
        case .notAStore(let path):
            return "\(path) is an SQLite database but not a smarticod store; point state_dir elsewhere "
                + "or move the file away"
        case .walUnavailable(let path, let mode):
            return "the database \(path) could not be put in WAL mode (journal_mode is \(mode)); "
                + "state_dir must be on a local file system that supports shared memory"
        case .unsafeStateDir(_, let reason):
            return reason
        case .queueFull(let max):
            return "the outbox holds its maximum of \(max) messages (outbox.max_messages); "
                + "the message was not accepted"
        case .duplicateUUID(let uuid):
            return "a message with uuid \(uuid) is already in the outbox"
        case .cursorBeyondLastSeq(let name, let seq, let last):
            return "cannot acknowledge seq \(seq) for durable subscription \"\(name)\": the last seq is \(last)"
        case .tooManyCursors(let name, let max):
            return "cannot remember durable subscription \"\(name)\": \(max) names are already remembered; "
                + "reuse a name or remove unused ones"
        case .cursorOwned(let name, let owner, let uid):
            return "the durable subscription \"\(name)\" belongs to uid \(owner), not to uid \(uid); "
                + "use another name, or run as uid \(owner) or root"
        case .tooManyCursorsForOwner(let name, let uid, let max):
            return "cannot create the durable subscription \"\(name)\": uid \(uid) already has \(max) names "
                + "(socket.max_durable_per_uid); reuse one, or delete unused ones with the forget op (smarticoctl forget NAME)"
        case .invalidArgument(let text):
            return text
        case .closed:
            return "the store is closed"
        case .other(let text):
            return text
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What a row of the public HTTP API's queue asks for.
public enum HTTPCallKind: String, Sendable, CaseIterable {
    /// A `push_report` (002 §5, GET).
    case pushReport = "push_report"
    /// A push token registration (002 §4, POST).
    case pushToken = "push_token"
}

/// A call to Smartico's public HTTP API waiting to be sent (the `http_queue` table).
public struct HTTPCall: Sendable, Equatable {
    /// Position in the queue: strictly increasing in enqueue order.
    public var position: Int64
    public var uuid: String
    public var kind: HTTPCallKind
    /// The call's JSON object bytes.
    public var request: [UInt8]
    /// The user it is for; nil: made before any user was known (waits for one).
    public var user: String?
    public var createdMs: Int64
    /// Attempts made so far (network errors and 5xx).
    public var attempts: Int
    /// Not to be sent before this time (ms since the epoch; the backoff after a failed attempt).
    public var nextMs: Int64
    /// Why the last attempt failed, if one did.
    public var lastError: String?
}

/// The HTTP queue's numbers for `status` and the metrics.
public struct HTTPQueueStatus: Sendable, Equatable {
    public var depth: Int
    /// When the oldest waiting call was accepted, or nil when none waits.
    public var oldestMs: Int64?
}
