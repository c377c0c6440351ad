import SmarticoProtocol

/// The simulated data API's missions, badges, levels: one user's state and the routes that read and change it.
///
/// The achievement map (502 → 503) is built at each request with timestamps relative to `env.now`,
/// so every mission stays in the availability state it was written for (docs/simulator.md, "Data API:
/// achievements"). Opt-in (525 → 526) and prize claims (539 → 540) change this user's state.
public struct SimAchievementData: Sendable {
    /// Missions this user has opted into, with the opt-in time (the mission's `start_date_ts`).
    public var optedIn: [Int64: Int64] = [:]
    /// Prizes claimed: mission id → claim time.
    public var claimed: [Int64: Int64] = [:]

    public init() {}

    static let routes: [SimDataRoute] = [
        SimDataRoute(500, 501) { _, _, _ in ["levels": .array(levels.map(JSONValue.object))] },
        SimDataRoute(502, 503) { _, data, env in ["achievements": .array(data.achievements.wireMap(at: env.now))] },
        SimDataRoute(525, 526) { request, data, env in data.achievements.optIn(request, now: env.now) },
        SimDataRoute(539, 540) { request, data, env in
            let body = data.achievements.claim(request, now: env.now)
            if body["errCode"] == nil { data.points += prizePoints }
            return body
        },
    ] + detailRoutes

    /// Points a claimed mission prize adds to the shared balance.
    static let prizePoints: Int64 = 100

    // MARK: - Error codes of the refusals (non-zero errCode)

    static let errNotFound: Int64 = 404
    static let errNoOptIn: Int64 = 40_001
    static let errNotClaimable: Int64 = 40_002
    static let errAlreadyClaimed: Int64 = 40_003
    static let errWrongCompletion: Int64 = 40_004

    // MARK: - Levels (server order is not ladder order; the daemon ranks them)

    static let levels: [JSONObject] = [
        level(3, "Level E", "Expert", 3000, visibility: nil, custom: #"{"color":"gold"}"#),
        level(1, "Level A", "Welcome", 0, visibility: nil, custom: nil, first: true),
        level(2, "Level B", "Regular", 1000, visibility: nil, custom: "plain text"),
        level(5, "Level V", "VIP", 10_000, visibility: 5000, custom: nil),
        level(4, "Level X", "Master", 6000, visibility: 2000, custom: nil),
    ]

    private static func level(_ id: Int64, _ name: String, _ description: String, _ points: Int64, visibility: Int64?,
                              custom: String?, first: Bool = false) -> JSONObject {
        var meta: JSONObject = ["name": .string(name), "description": .string(description),
                                "image_url": .string("https://sim.smartico.invalid/levels/\(id).png")]
        if let visibility { meta["visibility_points"] = .number(visibility) }
        if let custom { meta["custom_data"] = .string(custom) }
        return ["level_id": .number(id), "level_public_meta": .object(meta), "required_points": .number(points),
                "is_first_level": .bool(first), "level_status_id": 1]
    }

    // MARK: - The achievement map

    /// One mission or badge as defined by the sample; `entry(now:state:)` makes its wire shape.
    struct Sample: Sendable {
        var id: Int64
        var type: Int64 = 1
        var name: String
        var status: Int64 = 2
        var requiresOptin = false
        var optedInAtStart = false
        var locked: Bool?
        var activeFrom: Int64?
        var activeTill: Int64?
        var timeLimit: Int64?
        var startOffset: Int64?
        var progress: Double = 0
        var completedAgo: Int64?
        var requiresClaim = false
        var completedId: Int64?
        var extra: JSONObject = [:]
        var meta: JSONObject = [:]
    }

    static let hour: Int64 = 3_600_000
    static let day: Int64 = 86_400_000

    static let samples: [Sample] = [
        // Missions (ach_type_id 1): one per availability branch.
        Sample(id: 101, name: "Play 3 rounds", progress: 33.3,
               extra: ["ach_categories": [1, 2.0],
                       "related_games": [
                           ["ach_game_id": 9001, "ext_game_id": "slot-7",
                            "game_public_meta": ["name": "Lucky 7", "link": "dp:game?id=7", "image": "https://sim.smartico.invalid/g7.png",
                                                 "enabled": true, "game_categories": ["slots"], "game_provider": "SimGames",
                                                 "mobile_spec_link": "dp:game?id=7&m=1", "internal_rtp": 96.5]],
                           ["ach_game_id": 9002, "ext_game_id": "roulette-1", "game_public_meta": ["name": "Roulette"]],
                       ]],
               meta: ["label_tag": "hot", "custom_data": #"{"theme":"blue"}"#, "cta_text": "Play now", "cta_action": "dp:gf_missions",
                      "position": 1, "hint_text": "T&C apply", "custom_section_id": 7, "only_in_custom_section": false]),
        Sample(id: 102, name: "Weekend opt-in", requiresOptin: true,
               meta: ["label_tag": "custom", "custom_label_tag": "https://sim.smartico.invalid/ribbon.png"]),
        Sample(id: 103, name: "Already opted in", requiresOptin: true, optedInAtStart: true, progress: 10),
        Sample(id: 104, name: "Locked mission", status: 3, locked: true,
               meta: ["unlock_mission_description": "Finish 'Play 3 rounds' first", "hide_locked_mission": false]),
        Sample(id: 105, name: "Unlocked mission", status: 3, locked: false, startOffset: -hour),
        Sample(id: 106, name: "Starts in two days", activeFrom: 2 * day),
        Sample(id: 107, name: "Ended yesterday", activeFrom: -10 * day, activeTill: -day),
        Sample(id: 108, name: "Ends in three days", activeTill: 3 * day),
        Sample(id: 109, name: "Opt in before Friday", requiresOptin: true, activeTill: 3 * day),
        Sample(id: 110, name: "One day to finish", timeLimit: day, startOffset: -2 * hour, progress: 50),
        Sample(id: 111, name: "Opt in and race", requiresOptin: true, timeLimit: day),
        Sample(id: 112, name: "Ran out of time", timeLimit: day, startOffset: -2 * day),
        Sample(id: 113, name: "Window and limit", activeTill: 5 * day, timeLimit: 2 * day, startOffset: -hour),
        Sample(id: 114, name: "Locked with window and limit", status: 3, locked: true, activeTill: 5 * day, timeLimit: day),
        Sample(id: 115, name: "Claim your prize", progress: 100, completedAgo: hour, requiresClaim: true, completedId: 7001,
               meta: ["claim_button_title": "Claim", "claim_button_action": "dp:gf_missions", "reward": "100 points"]),
        Sample(id: 116, name: "Daily recurring", status: 7, progress: 100, completedAgo: 40 * day,
               extra: ["milliseconds_till_available": .number(hour)]),
        Sample(id: 117, name: "Repeat five times", status: 8, progress: 20,
               extra: ["completed_count": 2, "recurring_quantity": 5]),
        // A malformed entry the SDK drops (ach_id < 1).
        Sample(id: 0, name: "Broken"),
        // Badges (ach_type_id 2): one per time-limit state.
        Sample(id: 201, type: 2, name: "First deposit", progress: 100, completedAgo: 3 * day),
        Sample(id: 202, type: 2, name: "Coming soon", activeFrom: day),
        Sample(id: 203, type: 2, name: "Open, not started", activeFrom: -day),
        Sample(id: 204, type: 2, name: "Open, started", activeFrom: -day, progress: 40),
        Sample(id: 205, type: 2, name: "Ends soon, not started", activeTill: 2 * day),
        Sample(id: 206, type: 2, name: "Ends soon, started", activeTill: 2 * day, progress: 50),
        Sample(id: 207, type: 2, name: "Ended, not started", activeFrom: -5 * day, activeTill: -day),
        Sample(id: 208, type: 2, name: "Ended, started", activeTill: -day, progress: 30),
        Sample(id: 209, type: 2, name: "Done in time", activeTill: 2 * day, progress: 100, completedAgo: hour),
    ]

    /// The achievement map's entries for this user at `now`.
    func wireMap(at now: Int64) -> [JSONValue] {
        Self.samples.map { .object(entry($0, now: now)) }
    }

    private func entry(_ s: Sample, now: Int64) -> JSONObject {
        var meta: JSONObject = ["name": .string(s.name), "sub_header": .string("Sample \(s.id)"),
                                "description": .string("\(s.name): sample data of the simulator"),
                                "image_url": .string("https://sim.smartico.invalid/ach/\(s.id).png")]
        for (k, v) in s.meta { meta[k] = v }
        let optedAt: Int64? = optedIn[s.id] ?? (s.optedInAtStart ? now - Self.hour : nil)
        var o: JSONObject = ["ach_id": .number(s.id), "ach_type_id": .number(s.type), "ach_public_meta": .object(meta),
                             "ach_status_id": .number(s.status), "progress": JSONNumber(s.progress).map(JSONValue.number) ?? 0,
                             "isCompleted": .bool(s.completedAgo != nil)]
        if s.type == 1 {
            o["requiresOptin"] = .bool(s.requiresOptin)
            o["isOptedIn"] = .bool(optedAt != nil)
        }
        if let locked = s.locked { o["isLocked"] = .bool(locked) }
        if let f = s.activeFrom { o["active_from_ts"] = .number(now + f) }
        if let t = s.activeTill { o["active_till_ts"] = .number(now + t) }
        if let l = s.timeLimit { o["time_limit_ms"] = .number(l) }
        if let start = optedAt ?? s.startOffset.map({ now + $0 }) { o["start_date_ts"] = .number(start) }
        if let ago = s.completedAgo {
            o["complete_date_ts"] = .number(now - ago)
            o["complete_date"] = .string("01/01/2026 00:00:00")
        }
        if s.requiresClaim {
            o["ach_completed_id"] = s.completedId.map { .number($0) } ?? .null
            let claimedAt = claimed[s.id]
            o["requires_prize_claim"] = .bool(claimedAt == nil)
            o["prize_claimed_date_ts"] = claimedAt.map { .number($0) } ?? .null
            o["prize_claim_expiration_date"] = .number(now + 7 * Self.day)
            o["prize_claim_period_type_id"] = 1
        }
        if s.type == 1, s.id != 0 {
            o["achievementTasks"] = [
                ["task_id": .number(s.id * 10 + 1), "task_type_id": 1, "isCompleted": .bool(s.progress >= 100),
                 "userProgress": JSONNumber(s.progress).map(JSONValue.number) ?? 0, "executionCount": 3,
                 "userExecutedCount": .number(Int64(s.progress * 3 / 100)), "points_reward": 50, "gems_reward": 1.5,
                 "task_public_meta": ["name": .string("Task of \(s.name)"), "display_progress_as_count": true, "priority": 2]],
                ["task_id": .number(s.id * 10 + 2), "task_type_id": 2, "isCompleted": false,
                 "task_public_meta": ["name": "Unlock step (not shown)"]],
            ]
        }
        for (k, v) in s.extra { o[k] = v }
        return o
    }

    // MARK: - Opt-in and claims

    mutating func optIn(_ request: JSONObject, now: Int64) -> JSONObject {
        guard let id = request["achievementId"]?.lenientInt64, let s = Self.samples.first(where: { $0.id == id && $0.type == 1 && id > 0 }) else {
            return ["errCode": .number(Self.errNotFound), "errMsg": "no such mission"]
        }
        guard s.requiresOptin else { return ["errCode": .number(Self.errNoOptIn), "errMsg": .string("mission \(id) does not take an opt-in")] }
        if optedIn[id] == nil && !s.optedInAtStart { optedIn[id] = now }
        return [:]
    }

    mutating func claim(_ request: JSONObject, now: Int64) -> JSONObject {
        guard let id = request["ach_id"]?.lenientInt64, let s = Self.samples.first(where: { $0.id == id && id > 0 }) else {
            return ["errCode": .number(Self.errNotFound), "errMsg": "no such mission"]
        }
        guard s.requiresClaim else { return ["errCode": .number(Self.errNotClaimable), "errMsg": .string("mission \(id) has no prize to claim")] }
        guard request["ach_completed_id"]?.lenientInt64 == s.completedId else {
            return ["errCode": .number(Self.errWrongCompletion), "errMsg": .string("mission \(id) has no completion with that ach_completed_id")]
        }
        guard claimed[id] == nil else { return ["errCode": .number(Self.errAlreadyClaimed), "errMsg": .string("the prize of mission \(id) is already claimed")] }
        claimed[id] = now
        return [:]
    }
}
