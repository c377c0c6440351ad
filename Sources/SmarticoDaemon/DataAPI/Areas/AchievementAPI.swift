#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SmarticoProtocol
import SmarticoSocketAPI

/// The `api` calls of missions, badges, levels, mission details: their implementations (the specs are in
/// SmarticoSocketAPI's DataAPICatalog).
enum AchievementAPI {
    /// These and the DetailsApi calls (AchievementDetailsAPI).
    static let implementations: [String: DataAPIRun] = lists.merging(AchievementDetailsAPI.implementations) { a, _ in a }

    private static let lists: [String: DataAPIRun] = [
        "missions.list": { ctx async throws(SocketAPIError) in try await achievements(ctx, type: AchievementWire.mission) },
        "badges.list": { ctx async throws(SocketAPIError) in try await achievements(ctx, type: AchievementWire.badge) },
        "levels.list": { ctx async throws(SocketAPIError) in
            let answer = try await ctx.request(cid: 500, expect: 501)
            return .array(AchievementShape.levels(answer.objects("levels")).map(JSONValue.object))
        },
        "levels.current": { ctx async throws(SocketAPIError) in
            let answer = try await ctx.request(cid: 500, expect: 501)
            guard let props = await ctx.publicProps() else { throw SocketAPIError(.notReady, "no user is identified") }
            return AchievementShape.currentLevel(AchievementShape.levels(answer.objects("levels")), props: props)
        },
        "missions.opt_in": { ctx async throws(SocketAPIError) in
            let id = try AchievementShape.nonZero(ctx, "mission_id")
            let answer = try await ctx.request(cid: 525, ["achievementId": .number(id)], expect: 526)
            return .errResult(answer)
        },
        "missions.claim_reward": { ctx async throws(SocketAPIError) in
            let id = try AchievementShape.nonZero(ctx, "mission_id")
            let completed = ctx.args.int("ach_completed_id") ?? 0
            let answer = try await ctx.request(cid: 539, ["ach_id": .number(id), "ach_completed_id": .number(completed)], expect: 540)
            return .errResult(answer)
        },
    ]

    /// The achievement map's entries of one `ach_type_id` (missions or badges) as `TMissionOrBadge`s.
    private static func achievements(_ ctx: DataAPIContext, type: Int64) async throws(SocketAPIError) -> JSONValue {
        let answer = try await ctx.request(cid: 502, expect: 503)
        let now = ctx.nowMs()
        return .array(answer.objects("achievements").filter { $0.int("ach_type_id") == type }
            .compactMap { AchievementShape.missionOrBadge($0, now: now) })
    }
}

/// The server's constants the achievement shapes use (the SDK's AchievementType, AchievementStatus, …).
enum AchievementWire {
    static let mission: Int64 = 1
    static let badge: Int64 = 2
    /// `ach_status_id`
    static let statusLocked: Int64 = 3
    static let statusRecurring: Int64 = 7
    static let statusRecurringUponCompletion: Int64 = 8
    /// `task_type_id` of the tasks that carry progress (the others unlock a mission and are not shown).
    static let taskComplete: Int64 = 1
}

/// The SDK's `AchievementAvailabilityStatus` values.
enum AvailabilityStatus {
    static let available: Int64 = 0
    static let availableInactive: Int64 = 1
    static let availableActive: Int64 = 2
    static let unavailableWithActiveFrom: Int64 = 3
    static let withActiveTill: Int64 = 4
    static let withActiveTillInactive: Int64 = 5
    static let withActiveTillActive: Int64 = 6
    static let limited: Int64 = 7
    static let limitedInactive: Int64 = 8
    static let limitedActive: Int64 = 9
    static let fullyLimited: Int64 = 10
    static let fullyLimitedInactive: Int64 = 11
    static let fullyLimitedActive: Int64 = 12
    static let missedByActiveTill: Int64 = 13
    static let missedByLimitInTime: Int64 = 14
}

/// The SDK's `BadgesTimeLimitStates` values.
enum BadgeTimeLimitState {
    static let beforeStart: Int64 = 0
    static let startedNoProgress: Int64 = 1
    static let startedNoProgressWithEnd: Int64 = 2
    static let startedWithProgressWithEnd: Int64 = 3
    static let endedNotStarted: Int64 = 4
    static let endedWithProgress: Int64 = 5
    static let startedWithProgress: Int64 = 6
}

/// Wire → public shapes of missions, badges and levels, computed as the SDK computes them.
enum AchievementShape {
    /// The integer argument `name`, which must not be 0 (the SDK's precondition).
    static func nonZero(_ ctx: DataAPIContext, _ name: String) throws(SocketAPIError) -> Int64 {
        let v = ctx.args.int(name) ?? 0
        if v == 0 { throw SocketAPIError(.badRequest, "field \"args.\(name)\" of call \"\(ctx.spec.name)\" must not be 0") }
        return v
    }

    // MARK: - Missions and badges

    /// `TMissionOrBadge` of one achievement-map entry; nil for entries without an id ≥ 1 (dropped, as the SDK does).
    static func missionOrBadge(_ r: JSONObject, now: Int64) -> JSONValue? {
        guard let id = r.int("ach_id"), id >= 1 else { return nil }
        let meta = r.object("ach_public_meta") ?? [:]
        let type = r.int("ach_type_id")
        let completeTs = r.int("complete_date_ts")
        let status = r.int("ach_status_id")
        // Badges with an active window get their time-limit state; anything else passes the server's value on.
        let badgeState: Int64? = type == AchievementWire.badge && (r.int("active_from_ts") != nil || r.int("active_till_ts") != nil)
            ? badgeTimeLimitState(r, now: now) : r.int("badgeTimeLimitState")
        let ribbonText = meta.string("label_tag") == "custom" ? meta.string("custom_label_tag") : meta.string("label_tag")
        var o: JSONObject = [
            "id": .number(id),
            "type": .string(type == AchievementWire.mission ? "mission" : "badge"),
            "name": .of(meta.string("name")),
            "sub_header": .of(meta.string("sub_header")),
            "description": .of(meta.string("description")),
            "reward": .of(meta.string("reward")),
            "image": .of(meta.string("image_url")),
            "is_completed": .of(r.bool("isCompleted")),
            "is_locked": .of(r.bool("isLocked")),
            "unlock_mission_description": .of(meta.string("unlock_mission_description")),
            "is_requires_optin": .of(r.bool("requiresOptin")),
            "is_opted_in": .of(r.bool("isOptedIn")),
            "time_limit_ms": .of(r.int("time_limit_ms")),
            "active_from_ts": .of(r.int("active_from_ts")),
            "active_till_ts": .of(r.int("active_till_ts")),
            "dt_start": .of(r.int("start_date_ts")),
            "progress": .of(r.double("progress")),
            "cta_action": .of(meta.string("cta_action")),
            "cta_text": .of(meta.string("cta_text")),
            "custom_section_id": .of(meta.int("custom_section_id")),
            "only_in_custom_section": .of(meta.bool("only_in_custom_section")),
            "custom_data": .customData(meta["custom_data"]),
            "tasks": .array(r.objects("achievementTasks").filter { $0.int("task_type_id") == AchievementWire.taskComplete }.map(task)),
            "related_games": .array(relatedGames(r.objects("related_games"))),
            "category_ids": .of(r.ints("ach_categories")),
            "hint_text": .of(meta.string("hint_text")),
            "position": .of(meta.int("position")),
            "ribbon": .of(ribbonText),
            "ach_completed_id": .of(r.int("ach_completed_id")),
            "requires_prize_claim": .of(r.bool("requires_prize_claim")),
            "prize_claimed_date_ts": .of(r.int("prize_claimed_date_ts")),
            "complete_date": .of(r.string("complete_date")),
            "complete_date_ts": .of(completeTs),
            "completed_today": .bool(completeTs.map { LocalCalendar.within($0, .today, now: now) } ?? false),
            "completed_this_week": .bool(completeTs.map { LocalCalendar.within($0, .thisWeek, now: now) } ?? false),
            "completed_this_month": .bool(completeTs.map { LocalCalendar.within($0, .thisMonth, now: now) } ?? false),
            "custom_section_type_id": .of(meta.int("custom_section_type_id")),
            "max_completion_count": .null,
            "completion_count": .null,
            "next_recurrence_date_ts": .null,
            "availability_status": .of(availabilityStatus(r, now: now)),
            "claim_button_title": .of(meta.string("claim_button_title")),
            "claim_button_action": .of(meta.string("claim_button_action")),
            "prize_claim_expiration_date": .of(r.int("prize_claim_expiration_date")),
            "prize_claim_period_type_id": .of(r.int("prize_claim_period_type_id")),
            "badgeTimeLimitState": .of(badgeState),
            "hide_locked_mission": .of(meta.bool("hide_locked_mission")),
        ]
        if status == AchievementWire.statusRecurring {
            o["next_recurrence_date_ts"] = .number(now + (r.int("milliseconds_till_available") ?? 0))
        } else if status == AchievementWire.statusRecurringUponCompletion {
            o["completion_count"] = .of(r.int("completed_count"))
            o["max_completion_count"] = .of(r.int("recurring_quantity"))
        }
        return .object(o)
    }

    /// `TMissionOrBadgeTask` of a progress-bearing task.
    static func task(_ t: JSONObject) -> JSONValue {
        let meta = t.object("task_public_meta") ?? [:]
        return [
            "id": .of(t.int("task_id")),
            "name": .of(meta.string("name")),
            "is_completed": .of(t.bool("isCompleted")),
            "progress": .of(t.double("userProgress")),
            "points_reward": .of(t.int("points_reward")),
            "gems_reward": .of(t.double("gems_reward")),
            "diamonds_reward": .of(t.double("diamonds_reward")),
            "execution_count_expected": .of(t.int("executionCount").map(Double.init)),
            "execution_count_actual": .of(t.int("userExecutedCount").map(Double.init)),
            "display_progress_as_count": .of(meta.bool("display_progress_as_count")),
            "stage_image": .of(meta.string("stage_image")),
            "priority": .number(meta.int("priority") ?? 0),
        ]
    }

    /// The game fields a related game shows; `priority` is its 1-based place in the list, and the
    /// internal `ach_game_id` is not passed on.
    static let relatedGameKeys = ["name", "link", "image", "enabled", "game_categories", "game_provider", "mobile_spec_link"]

    static func relatedGames(_ games: [JSONObject]) -> [JSONValue] {
        games.enumerated().map { i, g in
            var publicMeta = JSONValue.null
            if let meta = g.object("game_public_meta") {
                var picked = JSONObject()
                for key in relatedGameKeys { if let v = meta[key] { picked[key] = v } }
                picked["priority"] = .number(Int64(i + 1))
                publicMeta = .object(picked)
            }
            return ["ach_game_id": .null, "ext_game_id": .of(g.string("ext_game_id")), "game_public_meta": publicMeta]
        }
    }

    /// The SDK's availability rule: the active window, the time limit, opt-in and lock state in one value.
    static func availabilityStatus(_ m: JSONObject, now: Int64) -> Int64? {
        typealias S = AvailabilityStatus
        let from = m.int("active_from_ts")
        let till = m.int("active_till_ts")
        let start = m.int("start_date_ts") ?? 0
        let limit = m.int("time_limit_ms") ?? 0
        let needsOptIn = m.bool("requiresOptin") == true
        let optedIn = m.bool("isOptedIn") == true
        let lockedKind = m.int("ach_status_id") == AchievementWire.statusLocked
        let locked = m.bool("isLocked") == true

        // Opt-in missions are active once opted in, lockable ones once unlocked; others are plain.
        func gate(active: Int64, inactive: Int64, plain: Int64) -> Int64 {
            if needsOptIn { return optedIn ? active : inactive }
            if lockedKind { return locked ? inactive : active }
            return plain
        }
        // With a time limit: inactive until opted in / unlocked, then measured from the start date;
        // plain missions measure it from the later of the start date and active_from.
        func limited(active: Int64, inactive: Int64, plain: Int64) -> Int64 {
            if needsOptIn || lockedKind {
                if (needsOptIn ? !optedIn : locked) { return inactive }
                return start + limit > now ? active : S.missedByLimitInTime
            }
            let begin = from.map { max($0, start) } ?? start
            return begin + limit > now ? plain : S.missedByLimitInTime
        }

        if from == nil && till == nil && limit == 0 {
            return gate(active: S.availableActive, inactive: S.availableInactive, plain: S.available)
        }
        if let from, from > now { return S.unavailableWithActiveFrom }
        if till == nil && limit == 0 {
            return gate(active: S.availableActive, inactive: S.availableInactive, plain: S.available)
        }
        if let till, limit == 0 {
            if till <= now { return S.missedByActiveTill }
            return gate(active: S.withActiveTillActive, inactive: S.withActiveTillInactive, plain: S.withActiveTill)
        }
        if limit > 0 && till == nil {
            return limited(active: S.limitedActive, inactive: S.limitedInactive, plain: S.limited)
        }
        if limit > 0, let till {
            if till <= now { return S.missedByActiveTill }
            return limited(active: S.fullyLimitedActive, inactive: S.fullyLimitedInactive, plain: S.fullyLimited)
        }
        return nil
    }

    /// A time-boxed badge's state: not started, running (with or without progress, with or without an
    /// end), or over; nil for a badge completed before its end.
    static func badgeTimeLimitState(_ b: JSONObject, now: Int64) -> Int64? {
        typealias S = BadgeTimeLimitState
        let from = b.int("active_from_ts")
        let till = b.int("active_till_ts")
        let started = (b.double("progress") ?? 0) != 0
        if b.bool("isCompleted") == true, till.map({ (b.int("complete_date_ts") ?? 0) < $0 }) ?? true { return nil }
        if let from, from > now { return S.beforeStart }
        guard let till else { return started ? S.startedWithProgress : S.startedNoProgress }
        if now < till { return started ? S.startedWithProgressWithEnd : S.startedNoProgressWithEnd }
        return started ? S.endedWithProgress : S.endedNotStarted
    }

    // MARK: - Levels

    /// `TLevel`s in the server's order; `ordinal_position` is the 1-based rank by `required_points`
    /// (absent: 0), ties in server order.
    static func levels(_ raw: [JSONObject]) -> [JSONObject] {
        var shaped: [JSONObject] = raw.map { l in
            let meta = l.object("level_public_meta") ?? [:]
            return [
                "id": .of(l.int("level_id")),
                "name": .of(meta.string("name")),
                "description": .of(meta.string("description")),
                "image": .of(meta.string("image_url")),
                "required_points": .of(l.int("required_points")),
                "visibility_points": .of(meta.int("visibility_points")),
                "required_level_counter_1": .of(l.int("required_level_counter_1")),
                "required_level_counter_2": .of(l.int("required_level_counter_2")),
                "custom_data": .customData(meta["custom_data"]),
                "ordinal_position": .null,
            ]
        }
        let ranked = raw.indices.sorted { a, b in
            let pa = raw[a].int("required_points") ?? 0, pb = raw[b].int("required_points") ?? 0
            return pa != pb ? pa < pb : a < b
        }
        // As the SDK, by id: levels sharing an id (or without one) share the last rank given.
        var rankByID: [Int64?: Int64] = [:]
        for (rank, i) in ranked.enumerated() { rankByID[raw[i].int("level_id")] = Int64(rank + 1) }
        for i in shaped.indices { shaped[i]["ordinal_position"] = .of(rankByID[raw[i].int("level_id")]) }
        return shaped
    }
}

extension AchievementShape {
    /// `TLevelCurrent?` from the `TLevel`s and the public props, as the SDK's getCurrentLevel: the
    /// ladder sorted by `required_points` (absent: 0); the level whose id is the props'
    /// `ach_level_current_id`, else the one whose [required_points, next's) holds `ach_points_ever`
    /// (absent: 0), else the top one; `progress` = (points_ever − its required) × 100 / (next's
    /// required − its required), 100 at the top or for an empty span, clamped to 0…100.
    /// `custom_data` as text (TLevelCurrent's is a string): a string as it is, else its JSON. null without levels.
    static func currentLevel(_ shaped: [JSONObject], props: JSONObject) -> JSONValue {
        let points: (JSONObject) -> Int64 = { $0.int("required_points") ?? 0 }
        let ladder = shaped.enumerated().sorted { a, b in
            points(a.element) != points(b.element) ? points(a.element) < points(b.element) : a.offset < b.offset
        }.map(\.element)
        guard !ladder.isEmpty else { return .null }
        let currentID = props.int("ach_level_current_id")
        let pointsEver = props.int("ach_points_ever") ?? 0
        let i = ladder.firstIndex { $0.int("id") == currentID }
            ?? ladder.indices.first { i in
                pointsEver >= points(ladder[i]) && (i + 1 == ladder.count || pointsEver < points(ladder[i + 1]))
            }
            ?? ladder.count - 1
        var level = ladder[i]
        var progress = 100.0
        if i + 1 < ladder.count {
            let span = points(ladder[i + 1]) - points(level)
            if span > 0 { progress = Double(pointsEver - points(level)) * 100 / Double(span) }
        }
        level["progress"] = .of(min(max(progress, 0), 100))
        switch level["custom_data"] {
        case nil, .null?, .string?: break
        case let other?: level["custom_data"] = .string(other.serializedString())
        }
        return .object(level)
    }
}

/// Same day / week (Sunday to Saturday) / month as now, in the local time zone (the SDK's
/// `isWithinPeriod`).
enum LocalCalendar {
    enum Period { case today, thisWeek, thisMonth }

    static func within(_ timestamp: Int64, _ period: Period, now: Int64) -> Bool {
        let n = local(now), t = local(timestamp)
        switch period {
        case .today: return n.tm_year == t.tm_year && n.tm_mon == t.tm_mon && n.tm_mday == t.tm_mday
        case .thisMonth: return n.tm_year == t.tm_year && n.tm_mon == t.tm_mon
        case .thisWeek:
            var first = n
            first.tm_mday -= n.tm_wday
            first.tm_hour = 0; first.tm_min = 0; first.tm_sec = 0; first.tm_isdst = -1
            var last = n
            last.tm_mday += 6 - n.tm_wday
            last.tm_hour = 23; last.tm_min = 59; last.tm_sec = 59; last.tm_isdst = -1
            let start = Int64(mktime(&first)) * 1000
            let end = Int64(mktime(&last)) * 1000 + 999
            return timestamp >= start && timestamp <= end
        }
    }

    private static func local(_ ms: Int64) -> tm {
        var seconds = time_t(ms >= 0 ? ms / 1000 : (ms - 999) / 1000)
        var out = tm()
        _ = localtime_r(&seconds, &out)
        return out
    }
}
