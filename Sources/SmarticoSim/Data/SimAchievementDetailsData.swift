import SmarticoProtocol

// The simulated answers of the SDK's DetailsApi requests (docs/simulator.md, "Data API: achievements"):
// the activity log (545 → 546), a raffle's past draw runs (906 → 907), one draw run (904 → 905) and
// the leaderboards (505 → 506). The inbox's mark-all requests (529, 535) are the inbox's routes
// (SimInboxStoreData), which take `all_read` / `all_deleted`.
extension SimAchievementData {
    static let detailRoutes: [SimDataRoute] = [
        SimDataRoute(545, 546) { request, data, env in ["logHistory": .array(activityLog(request, data: data, now: env.now, user: env.user))] },
        SimDataRoute(906, 907) { request, _, env in drawHistory(request, now: env.now) },
        SimDataRoute(904, 905) { request, _, env in drawRun(request, now: env.now) },
        SimDataRoute(505, 506) { _, data, env in leaderboards(user: env.user, points: data.points) },
    ]

    /// The log rows, newest first: a points credit, a gems spend, a diamonds credit, a mission and a
    /// level change; `types`/`src_types` filter them, `offset`/`limit` page them.
    static func activityLog(_ request: JSONObject, data: SimUserData, now: Int64, user: String) -> [JSONValue] {
        let seconds = now / 1000
        let rows: [JSONObject] = [
            ["create_date": ["seconds": .string(String(seconds - 60)), "nanos": 0], "user_ext_id": .string(user), "crm_brand_id": "12",
             "type": 3, "ctx_1": 1, "source_type_id": 11, "source_ref_id": 115, "source_root_id": 115,
             "amount": 100, "points_collected": -1, "user_points_balance": .number(data.points), "user_points_ever": 3605,
             "ctx_meta": ["name": "Claim your prize", "user_points_balance_before": .number(data.points - 100), "points_requested": 100,
                          "affects_level": true, "server_only": "x"]],
            ["create_date": .number(seconds - 3600), "type": 1, "ctx_1": 2, "source_type_id": 6, "amount": -5,
             "balance": .number(data.gems), "ctx_meta": ["amount_requested": 5, "balance_before": .number(data.gems + 5)]],
            ["create_date": .number(seconds - 7200), "type": 2, "source_type_id": 6, "amount": 1, "balance": .number(data.diamonds)],
            ["create_date": .number(seconds - 86_400), "type": 11, "ctx_1": 2, "source_type_id": 11, "source_ref_id": 101,
             "points_collected": 50, "user_points_balance": 3520, "ctx_meta": ["name": "Play 3 rounds", "is_recurring": false]],
            ["create_date": .number(seconds - 2 * 86_400), "type": 4, "source_type_id": 4, "source_ref_id": 3,
             "ctx_meta": ["from_level_id": 2, "to_level_id": 3, "to_level_public_meta": ["name": "Level E"]]],
        ]
        let types = request["types"]?.arrayValue?.compactMap(\.lenientInt64)
        let sources = request["src_types"]?.arrayValue?.compactMap(\.lenientInt64)
        let picked = rows.filter { row in
            (types.map { $0.contains(row["type"]?.lenientInt64 ?? -1) } ?? true)
                && (sources.map { $0.contains(row["source_type_id"]?.lenientInt64 ?? -1) } ?? true)
        }
        let offset = max(0, Int(request["offset"]?.lenientInt64 ?? 0))
        let limit = max(0, Int(request["limit"]?.lenientInt64 ?? 50))
        return picked.dropFirst(offset).prefix(limit).map(JSONValue.object)
    }

    /// Raffle 31's past runs: draw 1 (daily, two runs, the user won the older one and has not claimed
    /// it) and draw 2 (the grand draw); other raffles have none.
    static func drawHistory(_ request: JSONObject, now: Int64) -> JSONObject {
        guard request["raffle_id"]?.lenientInt64 == 31 else { return ["draw_runs": []] }
        let runs: [JSONObject] = [
            ["draw_id": 1, "run_id": 1002, "execution_ts": .number(now - day), "actual_execution_ts": .number(now - day + 2000),
             "ticket_start_ts": .number(now - 2 * day), "is_winner": false, "has_unclaimed_prize": false,
             "public_meta": ["name": "Daily draw", "description": "Every day at noon", "image_url": "https://sim.smartico.invalid/raf/1.png",
                             "icon_url": "https://sim.smartico.invalid/raf/1i.png", "is_grand": false]],
            ["draw_id": 1, "run_id": 1001, "execution_ts": .number(now - 2 * day), "actual_execution_ts": .number(now - 2 * day + 1500),
             "ticket_start_ts": .number(now - 3 * day), "is_winner": true, "has_unclaimed_prize": true,
             "public_meta": ["name": "Daily draw", "is_grand": false]],
            ["draw_id": 2, "run_id": 2001, "execution_ts": .number(now - 7 * day), "is_winner": false,
             "public_meta": ["name": "Grand draw", "is_grand": true, "background_image_url": "https://sim.smartico.invalid/raf/2bg.png"]],
        ]
        let draw = request["draw_id"]?.lenientInt64
        return ["draw_runs": .array(runs.filter { draw == nil || $0["draw_id"]?.lenientInt64 == draw }.map(JSONValue.object))]
    }

    /// The label's boards keyed by period type (2 weekly before 1 daily on the wire), the user third
    /// on the daily one.
    static func leaderboards(user: String, points: Int64) -> JSONObject {
        func row(_ name: String, _ place: Int64, _ pts: Int64, me: Bool = false, avatar: String? = nil) -> JSONValue {
            var o: JSONObject = ["public_username": .string(name), "position_in_board": .number(place), "points_accumulated": .number(pts),
                                 "is_me": .bool(me), "level_id": 3]
            if let avatar { o["avatar_id"] = .string(avatar) }
            return .object(o)
        }
        let daily: JSONObject = [
            "board_id": 11, "period_type_id": 1, "versiod_id": 0, "create_date": 0, "reward_points": [500, 200, 100],
            "board_public_meta": ["name": "Daily race", "description": "Points today", "rules": "Top 3 win"],
            "positions": [row("ace", 1, 900, avatar: "a1.png"), row("bob", 2, 700), row(user, 3, 650, me: true)],
            "userPosition": ["user_alt_name": .string(user), "position_in_board": 3, "points_accumulated": 650, "avatar_id": "https://cdn.example/u.png"],
        ]
        let weekly: JSONObject = [
            "board_id": 12, "period_type_id": 2, "versiod_id": 0, "reward_points": [1000],
            "board_public_meta": ["name": "Weekly race"], "positions": [],
            "userPosition": ["position_in_board": -1, "points_accumulated": .number(points / 100)],
        ]
        return ["map": ["2": .object(weekly), "1": .object(daily)]]
    }

    /// Run 1001 of raffle 31 (the user won its first prize); no `draw` for any other run.
    static func drawRun(_ request: JSONObject, now: Int64) -> JSONObject {
        guard request["raffle_id"]?.lenientInt64 == 31, request["run_id"]?.lenientInt64 == 1001 else { return [:] }
        let winners: [JSONValue] = [
            ["user_id": 7, "public_username": "alice", "avatar_id": "a7.png", "ticket": ["id": 555, "s": "T-555"], "raf_won_id": 9001],
            ["user_id": 8, "public_username": "bob", "ticket": ["id": 556, "s": "T-556"], "raf_won_id": 9002, "claimed_date": .number(now - day)],
        ]
        let limit = Int(request["winners_limit"]?.lenientInt64 ?? 20), offset = Int(request["winners_offset"]?.lenientInt64 ?? 0)
        return ["draw": [
            "draw_id": 1, "run_id": 1001, "current_state": 3, "execution_type": 2, "execution_ts": .number(now - 2 * day),
            "previous_run_ts": .number(now - 3 * day), "previous_run_id": 1000, "ticket_start_ts": .number(now - 3 * day),
            "allow_multi_prize_per_ticket": false, "total_tickets_count": 420, "my_tickets_count": 3,
            "my_last_tickets": [["id": 555, "s": "T-555"], ["id": 554, "s": "T-554"]],
            "user_opted_in": 1, "requires_optin": "yes", "is_active": false,
            "winners_limit": .number(Int64(limit)), "winners_offset": .number(Int64(offset)), "winners_total": 2,
            "public_meta": ["name": "Daily draw", "description": "Every day at noon", "is_grand": false],
            "prizes": [
                ["prize_id": "p-1", "prizes_per_run": 1, "prizes_per_run_actual": 1, "chances_to_win_perc": 0.7, "requires_claim": true,
                 "add_one_prize_per_each_x_tickets": 1000, "priority": 1, "should_claim": true,
                 "public_meta": ["name": "Phone", "custom_data": #"{"sku":"ph"}"#, "hide_chance_to_win": false],
                 "winners": .array(Array(winners.dropFirst(offset).prefix(limit)))],
                ["prize_id": "p-2", "prizes_per_run": 5, "priority": 2, "public_meta": ["name": "100 points"], "winners": []],
            ],
        ]]
    }
}
