import SmarticoProtocol

// The vocabulary of the sans-I/O session machine: what goes in (`SessionInput`), what comes
// out (`SessionAction`), and the values both carry. See docs/session.md.

/// One WebSocket connection attempt. The machine numbers them; transport results carry the
/// id back so a late result of an abandoned connection is ignored.
public struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "conn#\(rawValue)" }
}

/// A local request (socket API op) waiting for its answer. The driver chooses the values;
/// the machine hands them back in `.reply`.
public struct SessionRequestID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "req#\(rawValue)" }
}

/// The machine's timers. The driver keeps at most one pending timer per kind:
/// `.schedule(kind, atMs:)` replaces the previous deadline of that kind, `.cancel(kind)` drops it.
public enum SessionTimer: String, Sendable, CaseIterable, CustomStringConvertible {
    /// `session.connect_timeout_s` for TCP + TLS + upgrade.
    case connect
    /// `session.response_timeout_s` while waiting for cid 4 or cid 6.
    case response
    /// `session.keepalive_s` of silence from the server: send our own PING.
    case keepalive
    /// `session.dead_after_s` after our own PING without any message: the connection is dead.
    case dead
    /// The reconnect delay (exponential backoff with full jitter).
    case backoff
    /// 60 s of a healthy (ready) session: the backoff attempt counter goes back to 0.
    case healthyReset
    /// ≤ 2 s for LOGOUT_RESPONSE (cid 12) after LOGOUT.
    case logoutWait
    /// ≤ 2 s for the server's close after our close 1000.
    case closeWait
    /// The earliest deadline of the local requests waiting for an answer (`request`, `identify`).
    case requests
    /// `user.reidentify_after_s` after the server answered IDENTIFY for the daemon's user: the
    /// connection is closed and made anew, so IDENTIFY's wrapper URLs (their hash is valid 24 h,
    /// 002 §1.6) are fresh again.
    case reidentify

    public var description: String { rawValue }
}

/// A value for each ``SessionTimer`` (the driver's loop timers and their deadlines).
struct SessionTimerSlots<Value> {
    private var slots: [SessionTimer: Value] = [:]

    subscript(timer: SessionTimer) -> Value? {
        get { slots[timer] }
        set { slots[timer] = newValue }
    }

    /// Removes the value of `timer`; returns what it was.
    @discardableResult
    mutating func removeValue(forKey timer: SessionTimer) -> Value? { slots.removeValue(forKey: timer) }

    /// The values set, in ``SessionTimer``'s order.
    var values: [Value] { SessionTimer.allCases.compactMap { slots[$0] } }

    mutating func removeAll() { slots.removeAll() }
}

/// The session state of the status object and of `session` events (socket-api.md).
public enum SessionState: String, Sendable, CaseIterable, CustomStringConvertible {
    case disconnected, connecting, initializing, identifying, ready, backoff, stopping
    public var description: String { rawValue }
}

/// What the machine needs from the store at start.
public struct SessionSnapshot: Sendable, Equatable {
    /// `store.deviceID()` (used when `client.device_id` is not configured).
    public var deviceID: String
    /// `ua.fp`: `ResolvedConfig.fingerprint(machineID:)`.
    public var fingerprint: Int32
    /// `store.user()`: a user given with the `identify` op earlier (wins over `user.ext_user_id`).
    public var user: StoredUser?
    /// `store.push()`: push data given with the `push_token` op earlier (wins over `user.push`).
    public var push: StoredPush?
    /// `store.languagesSent()`: per user ("" for the anonymous session), the `client.language`
    /// last queued for them (`.persistLanguageSent`).
    public var languagesSent: [String: String] = [:]
}

/// A message for the server's outbox: already stamped (`ts`, `uuid`) and serialized.
public struct OutboxEntry: Sendable, Equatable {
    public var uuid: String
    public var cid: Int
    public var bytes: [UInt8]
    public var createdMs: Int64
    /// The user it was made for; nil: made on an anonymous session (session rule 5).
    public var user: String?

    public init(uuid: String, cid: Int, bytes: [UInt8], createdMs: Int64, user: String? = nil) {
        self.uuid = uuid
        self.cid = cid
        self.bytes = bytes
        self.createdMs = createdMs
        self.user = user
    }
}

/// A message to write to the WebSocket (one text frame).
public struct OutgoingMessage: Sendable, Equatable, CustomStringConvertible {
    /// Compact JSON.
    public var bytes: [UInt8]
    public var cid: Int64
    public var uuid: String

    public init(bytes: [UInt8], cid: Int64, uuid: String) {
        self.bytes = bytes
        self.cid = cid
        self.uuid = uuid
    }

    /// For logs: the cid, its name and the uuid, never the bytes (IDENTIFY carries the user
    /// hash, 1003 the push token).
    public var description: String { "\(ClassID(cid)) uuid=\(uuid) (\(bytes.count) bytes)" }
}

/// Why the store could not take an outbox message (reported back with `.outboxStored`).
public enum OutboxStoreFailure: Error, Sendable, Equatable {
    /// `StoreError.queueFull(max:)`.
    case queueFull(max: Int)
    /// The state directory is full, read-only or failing (``StoreError/storageProblem``), described.
    case storageUnavailable(String)
    /// Any other store error, described.
    case failed(String)
}

/// What the hash command produced (`HashCommandRunner`).
public enum HashCommandOutcome: Sendable, Equatable {
    case hash(Secret)
    case failed(HashCommandError)
}

/// A local request from the socket API that the session handles. Argument checking that
/// needs no session state (types, required fields) is the socket layer's; the machine checks
/// the rest and answers `bad_request` with a message naming the field.
public enum SessionRequest: Sendable, Equatable {
    /// `identify`: `hash` may be nil when `user.hash_command` is configured.
    case identify(extUserID: String, hash: String?)
    case logout
    case login
    /// `push_token`: `platform` nil → `user.push.platform`.
    case pushToken(token: String, platform: Int?, status: Int, appPackageID: String?)
    case language(String)
    case event(eventType: String, payload: JSONObject?)
    case report(kind: EngagementReport.Kind, engagementUID: String, activityType: Int64, action: String?)
    case minigameAck(sawTemplateID: Int64, pendingMessageID: Int64?)
    /// `send`: a JSON object with an integer `cid`.
    case send(JSONObject)
    /// `request`: `expectCid` nil → the cid's response class id (`ClassID.responseClassID`, else cid + 1);
    /// `timeoutMs` nil → 30000.
    case request(message: JSONObject, expectCid: Int64?, timeoutMs: Int64?)
    /// `bridge`: a Native Bridge object with `bcid`.
    case bridge(JSONObject)
}

/// The kinds of events for subscribers (socket-api.md "Events"); the raw value is the event's
/// name on the line and in the journal.
public enum EventKind: String, Sendable, CaseIterable {
    case engagement, minigame, deeplink, message, session, identified, props
    case gameOpening = "game_opening"
    case bridge, error
    /// Written by the socket layer itself to a subscriber that fell behind retention
    /// (socket-api.md); the session never emits it.
    case gap
}

/// An event for subscribers (socket-api.md "Events").
public struct DaemonEvent: Sendable, Equatable {
    public var kind: EventKind
    /// The event's name on the line and in the journal.
    public var name: String { kind.rawValue }
    /// Written to the journal before anyone sees it.
    public var journaled: Bool
    /// The data as a tree, or an engagement's as bytes to copy.
    var payload: Payload
    /// What the server sent that the daemon could not act on as usual (session rule 7): the
    /// driver logs it at `warning`. Not part of `data` (a `message`'s or `minigame`'s `problem`
    /// carries it for subscribers) and not compared by `==`.
    public var warning: String?

    enum Payload: Sendable, Equatable {
        case tree(JSONValue)
        /// An `engagement` event whose 110 is kept as the bytes that arrived (``EngagementJournal``).
        case engagement(EngagementData)
    }

    /// An event whose data is given as a tree. An `engagement` built this way (`message`,
    /// `popup_url`, `bridge`) is kept as a received one is, the message's compact serialization
    /// as its bytes: every engagement event has the one shape, ``EngagementData``.
    public init(kind: EventKind, data: JSONValue, journaled: Bool, warning: String? = nil) {
        self.kind = kind
        self.payload = Self.payload(kind, data)
        self.journaled = journaled
        self.warning = warning
    }

    /// An `engagement` event whose data is assembled from the 110's bytes, not built as a tree.
    init(engagement: EngagementData, warning: String? = nil) {
        self.kind = .engagement
        self.payload = .engagement(engagement)
        self.journaled = true
        self.warning = warning
    }

    /// The event's `data`. For an engagement kept as bytes this parses the line's data (each
    /// time it is read): the daemon itself copies the bytes (``EngagementJournal``).
    public var data: JSONValue {
        get {
            switch payload {
            case .tree(let v): return v
            case .engagement(let e): return (try? JSONValue(parsing: e.assemble().line, options: JSONParseOptions(maxDepth: .max))) ?? .null
            }
        }
        set { payload = Self.payload(kind, newValue) }
    }

    private static func payload(_ kind: EventKind, _ data: JSONValue) -> Payload {
        if kind == .engagement, let engagement = EngagementJournal.engagementData(fromTree: data) {
            return .engagement(engagement)
        }
        return .tree(data)
    }

    /// The event's `data` on its way to the journal and the lines: a tree serialized once, an
    /// engagement's bytes as they are.
    var body: EventBody {
        switch payload {
        case .tree(let v): .bytes(v.serialized())
        case .engagement(let e): .engagement(e)
        }
    }

    /// The journal row for this event (an engagement's without its `bridge`, see ``EngagementJournal``).
    public func journalEvent(tsMs: Int64) -> NewJournalEvent {
        NewJournalEvent(name: name, tsMs: tsMs, body: body)
    }

    /// Same name, journaling and data (as JSON values, whatever form they are kept in).
    public static func == (lhs: DaemonEvent, rhs: DaemonEvent) -> Bool {
        guard lhs.name == rhs.name, lhs.journaled == rhs.journaled else { return false }
        if lhs.payload == rhs.payload { return true }
        return lhs.data == rhs.data
    }
}

/// An input of the machine. Every input comes with the current time (`handle(_:now:)`).
public enum SessionInput: Sendable, Equatable {
    /// Begin: connect. Given once, first.
    case start(SessionSnapshot)
    /// The WebSocket of `conn` is open (after the HTTP upgrade).
    case connected(ConnectionID)
    /// DNS, TCP, TLS, proxy or upgrade failed. `reason` is a short snake_case word for the
    /// `session` event (`dns_error`, `tls_error`, `connect_refused`, …), `message` the detail.
    case connectFailed(ConnectionID, reason: String, message: String)
    /// One text (or binary) message from the server, undecoded.
    case received(ConnectionID, [UInt8])
    /// The connection ended (close frame received, reset, EOF). `code` is the close code when
    /// known; `clean`: the close handshake completed (a close frame each way, no transport error).
    /// After a close the machine started (`.close`), a clean end proves the server read every
    /// message written before it.
    case closed(ConnectionID, code: Int?, reason: String, clean: Bool)
    /// A timer the machine scheduled is due. Late or cancelled-but-delivered timers are ignored.
    case timerFired(SessionTimer)
    /// The result of `.runHashCommand(token:…)`.
    case hashResult(token: UInt64, HashCommandOutcome)
    /// The result of `.storeOutbox` / `.storeLatest` for `uuid`.
    case outboxStored(uuid: String, failure: OutboxStoreFailure?)
    /// The result of `.loadOutbox`: the waiting messages, oldest first.
    case outboxLoaded([OutboxEntry])
    /// The result of `.dropOutbox(user:)`: how many messages were removed.
    case outboxDropped(user: String?, count: Int)
    /// A socket API request, and who made it (``RequestOwner``: the read role is rationed).
    case request(SessionRequestID, SessionRequest, owner: RequestOwner = .daemon)
    /// The peer that made these requests went away: forget them (no answer is sent).
    case abandon([SessionRequestID])
    /// SIGTERM/SIGINT.
    case shutdown
    /// SIGHUP with the reloaded configuration.
    case reload(ResolvedConfig)
    /// The machine's routes, addresses or links changed (rtnetlink, debounced): in backoff, the
    /// backoff is reset and a connection tried at once; connected, the connection is checked with
    /// a PING (docs/session.md, "Network changes").
    case networkChanged
}

/// What the driver must do. Perform the actions of one `handle` call in order.
public enum SessionAction: Sendable, Equatable {
    /// Open a WebSocket to `url` (headers, TLS, proxy, compression from the configuration);
    /// report `.connected` or `.connectFailed` for `conn`.
    case connect(ConnectionID, url: String)
    /// Write one text message on `conn`. A write that fails means the connection is going
    /// away: its `.closed` follows (nothing else to report).
    case send(ConnectionID, OutgoingMessage)
    /// Send a close frame and let the transport finish closing. The machine reports nothing
    /// more for `conn` unless it waits for `.closed` (graceful paths schedule `closeWait`).
    case close(ConnectionID, code: Int, reason: String)
    /// Drop the connection at once (no close handshake).
    case abort(ConnectionID)
    /// Arm the timer `kind` at `atMs` (same clock as `now`), replacing an earlier one.
    case schedule(SessionTimer, atMs: Int64)
    /// Disarm the timer `kind`.
    case cancel(SessionTimer)
    /// Run `argv` (no shell) with `SMARTICO_EXT_USER_ID=user` in the environment
    /// (`HashCommandRunner`); report `.hashResult(token:…)`.
    case runHashCommand(token: UInt64, argv: [String], user: String)
    /// `store.setUser(user)` (a user given with `identify`; the store clears the previous
    /// user's seen-set).
    case persistUser(StoredUser)
    /// `store.updateUserProfile(publicUsername:props:)` (no-op when no user row exists).
    case persistProfile(publicUsername: String?, props: [UInt8])
    /// `store.recordActivity(atMs:)` (throttled to about once a minute).
    case recordActivity(atMs: Int64)
    /// `store.keepSeen(only: user)`: the server accepted the daemon's user; other users' seen-sets go
    /// (kept until now so that a refused switch brings the previous user back with its own).
    case userAccepted(String)
    /// `store.clearUser()` (logout).
    case clearUser
    /// `store.setPush(push)`.
    case persistPush(StoredPush)
    /// `store.setLanguageSent(language, user:)`: `client.language` was queued for `user` (nil:
    /// the anonymous session); it is not sent to them again until it changes.
    case persistLanguageSent(user: String?, language: String)
    /// `store.enqueue(uuid:cid:kind: .socket, payload:createdMs:)`; report `.outboxStored`.
    case storeOutbox(OutboxEntry)
    /// `store.putLatest(slot:…)`; report `.outboxStored`.
    case storeLatest(slot: String, OutboxEntry)
    /// `store.peek(limit:kind: .socket)`, followed (when fewer than `limit`) by
    /// `store.latestMessages()`; report `.outboxLoaded` with both, in that order. (The machine
    /// skips the messages it already wrote on the connection.)
    case loadOutbox(limit: Int)
    /// `store.dropOutbox(user:)`: these messages can never be sent under their own user; report
    /// `.outboxDropped`.
    case dropOutbox(user: String?)
    /// `store.markSent(uuids)`: the server proved it read these outbox messages (a PONG to a
    /// PING written after them, or the clean end of a close we started); they leave the outbox.
    /// Outbox messages written but never confirmed stay and are sent again, same uuid, on the
    /// next connection.
    case markSent([String])
    /// Publish `event`: journal it first when `event.journaled` (`store.appendEvents`), then
    /// hand it to subscribers with its seq.
    case emit(DaemonEvent)
    /// Journal and publish `event` only the first time `uid` is seen for `user`
    /// (`store.appendEngagement(user:uid:event:)`; nil seq → drop it silently).
    case journalOnce(user: String, uid: String, DaemonEvent)
    /// Answer the socket request `id`.
    case reply(SessionRequestID, Result<JSONValue, SocketAPIError>)
    /// The public state changed (systemd `STATUS=`, `hello`).
    case statusChanged(SessionState)
    /// Shutdown finished: flush and close the store, exit 0.
    case stopped
}

extension SessionTimerSlots: Sendable where Value: Sendable {}
