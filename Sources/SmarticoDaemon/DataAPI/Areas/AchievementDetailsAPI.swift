import SmarticoProtocol
import SmarticoSocketAPI

/// The `api` calls of the SDK's DetailsApi (but its activity log, leaderboards and tournament
/// details, which are CompetitionAPI's): a raffle's past draw runs, the inbox's
/// mark-all actions and the engagement impression/click reports.
enum AchievementDetailsAPI {
    static let implementations: [String: DataAPIRun] = [
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
        "inbox.mark_all_read": { ctx async throws(SocketAPIError) in
            .errResult(try await ctx.request(cid: 529, ["all_read": true], expect: 530))
        },
        "inbox.delete_all": { ctx async throws(SocketAPIError) in
            .errResult(try await ctx.request(cid: 535, ["all_deleted": true], expect: 536))
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
             "avatar_url": .url(w.string("avatar_url") ?? w.string("avatar_id")),
             "ticket": w.object("ticket").map(ticket) ?? ["ticekt_id": nil, "ticket_id_string": nil],
             "raf_won_id": .of(w.int("raf_won_id")), "claimed_date": .of(w.int("claimed_date"))]
        })
        return .object(o)
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
