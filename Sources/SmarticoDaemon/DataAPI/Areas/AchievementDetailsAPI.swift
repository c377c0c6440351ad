import SmarticoProtocol
import SmarticoSocketAPI

/// The `api` calls of the SDK's DetailsApi: the activity log, a raffle's past draw runs, the inbox's
/// mark-all actions and the engagement impression/click reports.
enum AchievementDetailsAPI {
    static let implementations: [String: DataAPIRun] = [
        "activity.log": { ctx async throws(SocketAPIError) in
            let from = ctx.args.int("from") ?? 0
            let to = ctx.args.int("to") ?? 0
            var payload: JSONObject = [
                "startTimeSeconds": .number(ctx.args.int("start_time_seconds") ?? 0),
                "endTimeSeconds": .number(ctx.args.int("end_time_seconds") ?? 0),
                // The server pages at most 50 rows.
                "limit": .number(min(to - from, 50)),
                "offset": .number(from),
            ]
            if let types = try idList(ctx, "types") { payload["types"] = .array(types.map { .number($0) }) }
            if let types = try idList(ctx, "src_types") { payload["src_types"] = .array(types.map { .number($0) }) }
            let answer = try await ctx.request(cid: 545, payload, expect: 546)
            return .array(answer.objects("logHistory").map(activityLogEntry))
        },
        "raffles.draw_history": { ctx async throws(SocketAPIError) in
            let raffle = try AchievementShape.nonZero(ctx, "raffle_id")
            var payload: JSONObject = ["raffle_id": .number(raffle)]
            if let draw = ctx.args.int("draw_id") { payload["draw_id"] = .number(draw) }
            let answer = try await ctx.request(cid: 906, payload, expect: 907)
            return .array(answer.objects("draw_runs").map(drawRun))
        },
        "raffles.draw_run": { ctx async throws(SocketAPIError) in
            let raffle = ctx.args.int("raffle_id") ?? 0, run = ctx.args.int("run_id") ?? 0
            if raffle == 0 || run == 0 {
                throw SocketAPIError(.badRequest, "fields \"args.raffle_id\" and \"args.run_id\" of call \"\(ctx.spec.name)\" must both be given and not 0")
            }
            var payload: JSONObject = ["raffle_id": .number(raffle), "run_id": .number(run)]
            if let from = ctx.args.int("winners_from") { payload["winners_offset"] = .number(from) }
            if let to = ctx.args.int("winners_to") { payload["winners_limit"] = .number(to) }
            let answer = try await ctx.request(cid: 904, payload, expect: 905)
            guard let draw = answer.object("draw") else {
                throw SocketAPIError(.serverError, "draw run \(run) not found for raffle \(raffle)")
            }
            return raffleDraw(draw)
        },
        "leaderboards.list": { ctx async throws(SocketAPIError) in
            let answer = try await ctx.request(cid: 505, expect: 506)
            guard let map = answer.object("map") else { return [] }
            let domain = await ctx.labelSetting("DYNAMIC_IMAGE_DOMAIN")?.stringValue
            return .array(byNumericKey(map).compactMap { $0.objectValue.map { board($0, avatarDomain: domain) } })
        },
        "inbox.mark_all_read": { ctx async throws(SocketAPIError) in
            AchievementShape.errResult(try await ctx.request(cid: 529, ["all_read": true], expect: 530))
        },
        "inbox.delete_all": { ctx async throws(SocketAPIError) in
            AchievementShape.errResult(try await ctx.request(cid: 535, ["all_deleted": true], expect: 536))
        },
        "engagement.impression": { ctx async throws(SocketAPIError) in
            try await ctx.send(cid: 103, ["engagement_uid": .string(ctx.args.string("engagement_uid") ?? ""),
                                          "activityType": .number(ctx.args.int("activity_type") ?? 0)])
            return .null
        },
        "engagement.click": { ctx async throws(SocketAPIError) in
            var payload: JSONObject = ["engagement_uid": .string(ctx.args.string("engagement_uid") ?? ""),
                                       "activityType": .number(ctx.args.int("activity_type") ?? 0)]
            if let action = ctx.args.string("action") { payload["action"] = .string(action) }
            try await ctx.send(cid: 104, payload)
            return .null
        },
    ]

    /// A comma-separated list of integers (`"1,3"`), nil when the argument is absent.
    static func idList(_ ctx: DataAPIContext, _ name: String) throws(SocketAPIError) -> [Int64]? {
        guard let text = ctx.args.string(name) else { return nil }
        var ids: [Int64] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: true) {
            let trimmed = part.filter { $0 != " " }
            guard let id = Int64(trimmed) else {
                throw SocketAPIError(.badRequest, "field \"args.\(name)\" of call \"\(ctx.spec.name)\" must be integers separated by commas, got \"\(text.prefix(64))\"")
            }
            ids.append(id)
        }
        return ids
    }

    // MARK: - Activity log

    /// The wire `type` of gems and diamonds rows (ActivityLogActivities); the public `type` is the
    /// balance (UserBalanceType: points 0, gems 1, diamonds 2), points for every other activity.
    static func balanceType(_ activity: Int64?) -> Int64 {
        switch activity {
        case 1: 1
        case 2: 2
        default: 0
        }
    }

    static let activityMetaInts = ["position", "user_points_balance_before", "points_requested", "user_points_ever",
                                   "from_level_id", "to_level_id"]
    static let activityMetaDoubles = ["amount_requested", "balance_before"]
    static let activityMetaBools = ["affects_level", "affects_leaderboard", "affects_current_balance", "user_initialization", "is_recurring"]

    /// `ActivityLogMeta`: its fields only, null when missing.
    static func activityMeta(_ m: JSONObject) -> JSONValue {
        var o: JSONObject = ["name": .of(m.string("name")), "image_url": .of(m.string("image_url"))]
        for k in activityMetaInts { o[k] = .of(m.int(k)) }
        for k in activityMetaDoubles { o[k] = .of(m.double(k)) }
        for k in activityMetaBools { o[k] = .of(m.bool(k)) }
        o["from_level_public_meta"] = m.value("from_level_public_meta")
        o["to_level_public_meta"] = m.value("to_level_public_meta")
        return .object(o)
    }

    /// `create_date`: `{seconds}` (an integer) or a plain number (truncated), in seconds.
    static func createDate(_ v: JSONValue?) -> Int64? {
        if let seconds = v?.objectValue?["seconds"] { return seconds.lenientString.flatMap { Int64($0) } }
        guard let text = v?.lenientString, let d = Double(text), d.isFinite, abs(d) < 9.2e18 else { return nil }
        return Int64(d)
    }

    /// `TActivityLog` of one wire row.
    static func activityLogEntry(_ r: JSONObject) -> JSONValue {
        let activity = r.int("type")
        return [
            "create_date": .of(createDate(r["create_date"])),
            "user_ext_id": .of(r.string("user_ext_id")),
            "crm_brand_id": .of(r.string("crm_brand_id").flatMap { Int64($0) }),
            "type": .number(balanceType(activity)),
            "amount": .of(r.double("amount") ?? r.int("points_collected").map(Double.init)),
            "balance": .of(r.double("balance") ?? r.int("user_points_balance").map(Double.init)),
            "total_ever": .of(r.int("user_points_ever").map(Double.init)),
            "source_type_id": .of(r.int("source_type_id")),
            "activity_type_id": .of(activity),
            "context_value_1": .of(r.double("ctx_1")),
            "meta": r.object("ctx_meta").map(activityMeta) ?? .null,
            "source_entity_name": .null,
            "source_entity_id": .null,
            "source_reference_id": .of(r.int("source_ref_id")),
            "source_root_id": .of(r.int("source_root_id")),
            "is_wallet_entry": .null,
        ]
    }

    // MARK: - A raffle draw

    static let prizeDoubles = ["prizes_per_run", "prizes_per_run_actual", "chances_to_win_perc"]

    /// `TRaffleDraw`: the draw with its public meta flattened, its prizes and the user's last tickets;
    /// `user_opted_in`, `requires_optin`, `is_active` are `true` only when the wire says `true`.
    static func raffleDraw(_ d: JSONObject) -> JSONValue {
        let meta = d.object("public_meta") ?? [:]
        var o: JSONObject = ["id": .of(d.int("draw_id"))]
        for k in drawMetaStrings { o[k] = .of(meta.string(k)) }
        o["is_grand"] = .of(meta.bool("is_grand"))
        o["prizes"] = .array(d.objects("prizes").map(rafflePrize))
        for k in ["current_state", "run_id", "execution_type", "execution_ts", "previous_run_ts", "previous_run_id", "ticket_start_ts"] {
            o[k] = .of(d.int(k))
        }
        o["allow_multi_prize_per_ticket"] = .of(d.bool("allow_multi_prize_per_ticket"))
        o["total_tickets_count"] = .of(d.int("total_tickets_count"))
        o["my_tickets_count"] = .of(d.int("my_tickets_count"))
        o["my_last_tickets"] = .array(d.objects("my_last_tickets").map(ticket))
        for k in ["user_opted_in", "requires_optin", "is_active"] { o[k] = .bool(d.bool(k) == true) }
        for k in ["winners_limit", "winners_offset", "winners_total"] { o[k] = .of(d.double(k)) }
        return .object(o)
    }

    /// `TRaffleTicket` of the wire's abbreviated `{id, s}`.
    static func ticket(_ t: JSONObject) -> JSONValue {
        ["ticekt_id": .of(t.int("id")), "ticket_id_string": .of(t.string("s"))]
    }

    /// `TRafflePrize` (`add_one_prize_per_each_x_tickets` stays null, as in the SDK).
    static func rafflePrize(_ p: JSONObject) -> JSONValue {
        let meta = p.object("public_meta") ?? [:]
        var o: JSONObject = ["id": .of(p.string("prize_id")), "name": .of(meta.string("name")), "description": .of(meta.string("description")),
                             "image_url": .of(meta.string("image_url")), "custom_data": .of(meta.string("custom_data")),
                             "hide_chance_to_win": .of(meta.bool("hide_chance_to_win"))]
        for k in prizeDoubles { o[k] = .of(p.double(k)) }
        o["min_required_total_tickets"] = .of(p.int("min_required_total_tickets"))
        o["add_one_prize_per_each_x_tickets"] = .null
        o["requires_claim"] = .of(p.bool("requires_claim"))
        o["min_required_tickets_for_user"] = .of(p.int("min_required_tickets_for_user"))
        o["cap_prizes_per_run"] = .of(p.double("cap_prizes_per_run"))
        o["priority"] = .of(p.int("priority"))
        o["stock_items_per_draw"] = .of(p.double("stock_items_per_draw"))
        o["should_claim"] = .of(p.bool("should_claim"))
        o["winners"] = .array(p.objects("winners").map { w in
            ["id": .of(w.int("user_id")), "username": .of(w.string("public_username")),
             "avatar_url": .of(w.string("avatar_url") ?? w.string("avatar_id")),
             "ticket": w.object("ticket").map(ticket) ?? ["ticekt_id": nil, "ticket_id_string": nil],
             "raf_won_id": .of(w.int("raf_won_id")), "claimed_date": .of(w.int("claimed_date"))]
        })
        return .object(o)
    }

    // MARK: - Leaderboards

    /// The values of a map keyed by id, ordered by id. A member whose name is not an id is not an
    /// entry (a field the server added to the map), where the SDK would make an empty board of it.
    static func byNumericKey(_ map: JSONObject) -> [JSONValue] {
        map.compactMap { member in Int64(member.key).map { ($0, member.value) } }.sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// `LeaderBoardDetailsT`: `reward_points[i]` is place i + 1's reward; `me` is the user's row.
    static func board(_ b: JSONObject, avatarDomain: String?) -> JSONValue {
        let meta = b.object("board_public_meta") ?? [:]
        let rewards: JSONValue = b.ints("reward_points").map { points in
            .array(points.enumerated().map { i, p in ["place": .number(Int64(i + 1)), "points": .number(p)] })
        } ?? .null
        return [
            "board_id": .of(b.int("board_id")),
            "name": .of(meta.string("name")),
            "description": .of(meta.string("description")),
            "rules": .of(meta.string("rules")),
            "period_type_id": .of(b.int("period_type_id")),
            "version_id": .of(b.int("versiod_id")),
            "create_date": .of(b.int("create_date")),
            "rewards": rewards,
            "users": .array(b.objects("positions").map { boardUser($0, avatarDomain: avatarDomain, isMe: false) }),
            "me": b.object("userPosition").map { boardUser($0, avatarDomain: avatarDomain, isMe: true) } ?? .null,
        ]
    }

    /// `LeaderBoardUserT`; an `avatar_id` becomes `<DYNAMIC_IMAGE_DOMAIN>/avatar/<id>` (an http URL is kept).
    static func boardUser(_ p: JSONObject, avatarDomain: String?, isMe: Bool) -> JSONValue {
        var avatar = p.string("avatar_url")
        if avatar == nil, let id = p.string("avatar_id") {
            if id.hasPrefix("http") {
                avatar = id
            } else if let domain = avatarDomain {
                var base = Substring(domain)
                while base.hasSuffix("/") { base = base.dropLast() }
                avatar = String(base) + "/avatar/" + id
            }
        }
        return [
            "public_username": .of(p.string("public_username") ?? p.string("user_alt_name")),
            "avatar_url": .of(avatar),
            "level_id": .of(p.int("level_id")),
            "position": .of(p.int("position_in_board")),
            "points": .of(p.int("points_accumulated")),
            "is_me": isMe ? true : .of(p.bool("is_me")),
        ]
    }

    // MARK: - Raffle draw runs

    static let drawMetaStrings = ["name", "description", "image_url", "image_url_mobile", "icon_url", "background_image_url",
                                  "background_image_url_mobile"]

    /// `TRaffleDrawRun`: the run with its public meta flattened.
    static func drawRun(_ r: JSONObject) -> JSONValue {
        let meta = r.object("public_meta") ?? [:]
        var o: JSONObject = ["id": .of(r.int("draw_id")), "run_id": .of(r.int("run_id"))]
        for k in drawMetaStrings { o[k] = .of(meta.string(k)) }
        o["is_grand"] = .of(meta.bool("is_grand"))
        for k in ["execution_ts", "actual_execution_ts", "ticket_start_ts"] { o[k] = .of(r.int(k)) }
        o["is_winner"] = .of(r.bool("is_winner"))
        o["has_unclaimed_prize"] = .of(r.bool("has_unclaimed_prize"))
        return .object(o)
    }
}
