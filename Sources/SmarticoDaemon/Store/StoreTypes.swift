// The plain values the store takes and returns. JSON payloads are bytes (`[UInt8]`, UTF-8 JSON text):
// the store never parses them.

/// A journal sequence number: one strictly increasing counter, across restarts, starting at 1.
public typealias JournalSeq = Int64

/// Limits and retention; `SmarticoStore.updateOptions(_:)` applies new values (SIGHUP).
public struct StoreOptions: Sendable, Equatable {
    /// `outbox.max_messages`: beyond it `enqueue` throws `StoreError.queueFull`.
    public var maxOutboxMessages: Int
    /// `journal.retention_events`: this many journaled events are kept; appends delete older ones
    /// in batches (``SmarticoStore/retentionSlack``: up to 1/64 more are kept between two deletions).
    public var retentionEvents: Int
    /// `journal.retention_hours`: events older than this are deleted.
    public var retentionHours: Int
    /// How many engagement uids are remembered per user, at least (the oldest are forgotten first;
    /// up to `min(256, seenPerUser / 16) - 1` more are kept between two prunings).
    public var seenPerUser: Int
    /// How many durable subscription names are remembered; a new name beyond it throws
    /// `StoreError.tooManyCursors` (local peers choose the names, so the table must be bounded).
    public var maxCursors: Int
    /// `busy_timeout` in milliseconds (another process, such as `sqlite3`, holding the write lock).
    public var busyTimeoutMs: Int
    /// The event log starts a new segment file once the newest holds this many bytes; retention
    /// deletes whole segments (docs/store.md, "The event log").
    public var segmentBytes: Int
    /// The next segment is written full of zeros ahead of time, on a thread of its own, so appends
    /// sync data blocks only (docs/store.md, "Preallocated segments"). Tests turn it off to see
    /// segment files grow record by record.
    public var preallocateSegments: Bool

    public init(
        maxOutboxMessages: Int = 10_000,
        retentionEvents: Int = 10_000,
        retentionHours: Int = 168,
        seenPerUser: Int = 10_000,
        maxCursors: Int = 1_000,
        busyTimeoutMs: Int = 5_000,
        segmentBytes: Int = 4 << 20,
        preallocateSegments: Bool = true
    ) {
        self.maxOutboxMessages = maxOutboxMessages
        self.retentionEvents = retentionEvents
        self.retentionHours = retentionHours
        self.seenPerUser = seenPerUser
        self.maxCursors = maxCursors
        self.busyTimeoutMs = busyTimeoutMs
        self.segmentBytes = segmentBytes
        self.preallocateSegments = preallocateSegments
    }
}

/// An event to journal.
/// One write of a group commit (`SmarticoStore.journal(_:)`): an event to journal, and for an
/// engagement the (user, uid) that must not have been seen before (else nothing is journaled).
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

public struct NewJournalEvent: Sendable, Equatable {
    /// The event name of socket-api.md (`engagement`, `minigame`, `deeplink`, `message`).
    public var name: String
    /// When the daemon received it, ms since the epoch.
    public var tsMs: Int64
    /// The row's bytes, or the pieces they are copied from into the event log's batch.
    var body: EventBody

    public init(name: String, tsMs: Int64, data: [UInt8]) {
        self.name = name
        self.tsMs = tsMs
        self.body = .bytes(data)
    }

    init(name: String, tsMs: Int64, body: EventBody) {
        self.name = name
        self.tsMs = tsMs
        self.body = body
    }

    /// The event's `data` object as journaled, as JSON bytes (assembled when it is an engagement's).
    public var data: [UInt8] {
        get { body.journalBytes }
        set { body = .bytes(newValue) }
    }

    /// Same name, time and journaled bytes, however they are kept.
    public static func == (a: NewJournalEvent, b: NewJournalEvent) -> Bool {
        a.name == b.name && a.tsMs == b.tsMs && (a.body == b.body || a.data == b.data)
    }
}

/// An event's `data` on its way to the journal and the subscribers: bytes as they are, or an
/// engagement's, which is journaled without its `bridge` and shown with it (``EngagementJournal``).
/// An engagement's row and line are never assembled as arrays of their own on the live path: each
/// is appended from the 110's bytes where it is written (the event log's batch, a subscriber's
/// output), two copies of the 110 fewer per event than assembling both first.
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
}

/// A "latest value only" message (the `language` op): a new value replaces the waiting one.
public struct LatestMessage: Sendable, Equatable {
    /// The slot, e.g. `language`.
    public var slot: String
    public var uuid: String
    public var cid: Int
    public var payload: [UInt8]
    public var createdMs: Int64
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

    public init(
        extUserID: String, hash: String? = nil, publicUsername: String? = nil,
        props: [UInt8]? = nil, lastActivityMs: Int64? = nil
    ) {
        self.extUserID = extUserID
        self.hash = hash
        self.publicUsername = publicUsername
        self.props = props
        self.lastActivityMs = lastActivityMs
    }
}

/// Push data sent with IDENTIFY / cid 1003; kept even while anonymous.
public struct StoredPush: Sendable, Equatable {
    public var token: String
    public var platform: Int
    public var status: Int
    public var appPackageID: String?

    public init(token: String, platform: Int, status: Int, appPackageID: String? = nil) {
        self.token = token
        self.platform = platform
        self.status = status
        self.appPackageID = appPackageID
    }
}

/// What can go wrong in the store. Every case names what failed and, where useful, what to do.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// SQLite failed; the error carries the code, extended code, message and SQL.
    case sqlite(SQLiteError)
    /// The state directory could not be created or the database file could not be opened.
    case fileSystem(path: String, operation: String, errno: Int32)
    /// The database was written by a newer smarticod.
    case databaseTooNew(path: String, found: Int, known: Int)
    /// A migration step failed; the database stays at `fromVersion`.
    case migrationFailed(path: String, fromVersion: Int, toVersion: Int, underlying: SQLiteError)
    /// The database is not in WAL mode after asking for it (e.g. a read-only or network file system).
    case walUnavailable(path: String, journalMode: String)
    /// The outbox holds `outbox.max_messages` messages.
    case queueFull(max: Int)
    /// A message with this uuid is already in the outbox.
    case duplicateUUID(String)
    /// A durable cursor was asked to move beyond the last assigned seq.
    case cursorBeyondLastSeq(name: String, seq: JournalSeq, lastSeq: JournalSeq)
    /// `maxCursors` durable subscription names exist; `name` would be one more.
    case tooManyCursors(name: String, max: Int)
    /// A value was out of range (empty name, negative limit, ...).
    case invalidArgument(String)
    /// The store was closed.
    case closed
    /// A chunk of the seen-set (`seen_chunk`, row `id`) cannot be read from byte `offset` on: the
    /// file was damaged or written by something other than smarticod.
    case damagedSeenChunk(path: String, id: Int64, offset: Int)
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
        case .migrationFailed(let path, let from, let to, let underlying):
            return "migrating \(path) from schema version \(from) to \(to) failed, nothing was changed: "
                + underlying.description
        case .walUnavailable(let path, let mode):
            return "the database \(path) could not be put in WAL mode (journal_mode is \(mode)); "
                + "state_dir must be on a local file system that supports shared memory"
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
        case .invalidArgument(let text):
            return text
        case .closed:
            return "the store is closed"
        case .damagedSeenChunk(let path, let id, let offset):
            return "\(path): the seen-set's chunk \(id) (table seen_chunk) is damaged at byte \(offset); "
                + "its user's seen uids cannot be read (clearing that user's seen-set, or the state directory, repairs it)"
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
