import SmarticoProtocol

/// Builds the server pushes (without `ts`/`uuid`, which the session stamps when sending).
///
/// 110 follows 002 §1.10's example field by field; 105, 108 and 707 follow the notes. The bodies
/// of 504, 706, 708 and 808 are not documented anywhere: the simulator sends plausible fields
/// (named in docs/simulator.md) and a client must treat them as opaque.
public struct SimPushGenerator: Sendable {
    /// Size of `template_html` in bytes.
    public var templateBytes: Int
    private var engagementCounter: Int64 = 0
    private var pendingMessageCounter: Int64 = 0
    private var propsCounter: Int64 = 0
    private var deepLinkCounter = 0

    public init(templateBytes: Int) { self.templateBytes = max(0, templateBytes) }

    /// Deep links used by generated 105s, in turn.
    public static let deepLinks = ["dp:gf_missions", "dp:gf_levels", "dp:gf_store", "dp:cashier", "dp:gf_saw&id=5&standalone=true"]

    /// A push of `kind`; `uuid` gives fresh `engagement_uid`s.
    public mutating func make(_ kind: SimPushKind, random: inout SimRandom) -> JSONObject {
        switch kind {
        case .engagement:
            engagementCounter += 1
            return Self.engagement(uid: random.uuid(), engagementID: 236_356_782 + engagementCounter, templateBytes: templateBytes)
        case .deepLink:
            let dp = Self.deepLinks[deepLinkCounter % Self.deepLinks.count]
            deepLinkCounter += 1
            return ["engagement_uid": .string(random.uuid()), "payload": ["dp": .string(dp)], "cid": 105]
        case .props:
            propsCounter += 1
            return [
                "props": [
                    "ach_points_balance": .number(3570 + 10 * propsCounter),
                    "ach_points_ever": .number(3605 + 10 * propsCounter),
                    "ach_level_current": "Level E",
                ],
                "cid": 108,
            ]
        case .reloadAchievements:
            return ["cid": .number(ClassID.reloadAchievementsEvent.rawValue)]
        case .spinsCount:
            return ["saw_template_id": 5, "spin_count": 3, "cid": .number(ClassID.sawSpinsCountPush.rawValue)]
        case .showSpin:
            pendingMessageCounter += 1
            return ["saw_template_id": 5, "pending_message_id": .number(9_000_000 + pendingMessageCounter),
                    "saw_game_type_id": 1, "cid": 707]
        case .prizeDropWin:
            pendingMessageCounter += 1
            return [
                "saw_template_id": 7, "pending_message_id": .number(9_000_000 + pendingMessageCounter),
                "prize_name": "10 free spins", "cid": .number(ClassID.sawPrizeDropWinPush.rawValue),
            ]
        case .jackpotWin:
            return [
                "jp_template_id": 12, "winning_amount": 1000, "jp_currency": "EUR",
                "jp_public_meta": ["name": "Simulated jackpot"], "cid": .number(ClassID.jackpotWinPush.rawValue),
            ]
        }
    }

    /// A 110 with the fields of 002's example, in its order.
    public static func engagement(uid: String, engagementID: Int64, templateBytes: Int) -> JSONObject {
        var o = JSONObject()
        o["engagement_uid"] = .string(uid)
        o["activityType"] = 30  // popup
        o["engagement_id"] = .number(engagementID)
        o["root_audience_id"] = 31068
        o["audience_id"] = 31068
        o["resource_id"] = 5843
        o["resource_variation_id"] = 5843
        o["template_html"] = .string(templateHTML(bytes: templateBytes, engagementID: engagementID))
        o["template_engine"] = 1
        o["params"] = ["title": "Simulated popup", "button_dp": "dp:gf_levels"]
        o["source_product_id"] = 0
        o["cid"] = .number(ClassID.clientEngagementEvent.rawValue)
        return o
    }

    /// Popup HTML of exactly `bytes` UTF-8 bytes (ASCII): a small popup padded inside an HTML
    /// comment; below the popup's own size, a prefix of it.
    public static func templateHTML(bytes: Int, engagementID: Int64) -> String {
        let head = #"<div class="sim-popup" data-engagement-id="\#(engagementID)"><h1>Simulated popup</h1><a href="dp:gf_levels">Levels</a><!--"#
        let tail = "--></div>"
        let minimum = head.utf8.count + tail.utf8.count
        if bytes < minimum { return String((head + tail).prefix(max(0, bytes))) }
        // `String(repeating:count:)` appends one character at a time (half of the simulator's CPU
        // at 2 KB templates); filling the bytes directly is a memset.
        let padding = String(unsafeUninitializedCapacity: bytes - minimum) { buffer in
            buffer.initialize(repeating: UInt8(ascii: "x"))
            return buffer.count
        }
        return head + padding + tail
    }
}

/// Engagements (110) sent to a user and not yet reported with 103/104/106, per user, in order.
/// Bounded: beyond `maxPerUser` a user's oldest is dropped, and beyond `maxBytes` in total
/// (serialized sizes) the oldest of the user being added to, then of other users, are dropped.
///
/// Adding is O(1) amortised whatever the number pending (a push to a user with 1,000 pending must
/// cost what a push to a new user costs): each user's queue is taken out of the dictionary while
/// it is changed (no copy-on-write of the list), the oldest are dropped by advancing a head index,
/// and a set of uids answers "is this uid already pending" without scanning.
public struct SimPendingEngagements: Sendable {
    private struct Entry: Sendable {
        var uid: String
        var message: JSONObject
        var size: Int
    }

    private struct Queue: Sendable {
        var entries: [Entry] = []
        /// Entries before `head` are dropped (cleared, waiting for compaction).
        var head = 0
        var uids: Set<String> = []

        var count: Int { entries.count - head }
        var isEmpty: Bool { head == entries.count }
        var live: ArraySlice<Entry> { entries[head...] }

        mutating func append(_ e: Entry) {
            entries.append(e)
            uids.insert(e.uid)
        }

        mutating func removeOldest() -> Entry {
            let e = entries[head]
            entries[head] = Entry(uid: "", message: JSONObject(), size: 0)
            head += 1
            uids.remove(e.uid)
            if head >= 32 && head * 2 >= entries.count {
                entries.removeFirst(head)
                head = 0
            }
            return e
        }

        func index(of uid: String) -> Int? {
            guard uids.contains(uid) else { return nil }
            return entries[head...].firstIndex { $0.uid == uid }
        }

        mutating func remove(at i: Int) -> Entry {
            let e = entries.remove(at: i)
            uids.remove(e.uid)
            return e
        }
    }

    private var queues: [String: Queue] = [:]
    public var maxPerUser: Int
    public var maxBytes: Int
    public private(set) var byteCount = 0

    public init(maxPerUser: Int, maxBytes: Int = 256 << 20) {
        self.maxPerUser = max(1, maxPerUser)
        self.maxBytes = max(1, maxBytes)
    }

    /// Every user's pending engagements, oldest first (users with none are absent).
    public var byUser: [String: [JSONObject]] { queues.mapValues { $0.live.map(\.message) } }

    /// Adds (or replaces, same `engagement_uid`) an engagement for `user`. `serializedSize` is
    /// `engagement.serialized().count` when the caller has it (it is serialized here otherwise).
    public mutating func add(_ engagement: JSONObject, user: String, serializedSize: Int? = nil) {
        guard let uid = engagement["engagement_uid"]?.stringValue else { return }
        let size = serializedSize ?? engagement.serialized().count
        var q = queues.removeValue(forKey: user) ?? Queue()  // owned while changed: no copy
        if let i = q.index(of: uid) {
            byteCount += size - q.entries[i].size
            q.entries[i].message = engagement
            q.entries[i].size = size
        } else {
            q.append(Entry(uid: uid, message: engagement, size: size))
            byteCount += size
            while q.count > maxPerUser { byteCount -= q.removeOldest().size }
        }
        while byteCount > maxBytes, q.count > 1 { byteCount -= q.removeOldest().size }
        queues[user] = q
        while byteCount > maxBytes, let other = queues.keys.first(where: { $0 != user }) {
            var o = queues.removeValue(forKey: other)!
            byteCount -= o.removeOldest().size
            if !o.isEmpty { queues[other] = o }
        }
    }

    /// Removes the engagement `uid` of `user`; true when it was pending.
    @discardableResult
    public mutating func remove(uid: String, user: String) -> Bool {
        guard var q = queues.removeValue(forKey: user) else { return false }
        defer { if !q.isEmpty { queues[user] = q } }
        guard let i = q.index(of: uid) else { return false }
        byteCount -= q.remove(at: i).size
        return true
    }

    /// The engagements still pending for `user`, oldest first.
    public func pending(for user: String) -> [JSONObject] { queues[user].map { $0.live.map(\.message) } ?? [] }
}
