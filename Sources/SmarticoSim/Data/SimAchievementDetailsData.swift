import SmarticoProtocol

// The simulated answers of the SDK's DetailsApi requests (docs/simulator.md, "Data API: achievements"):
// a raffle's past draw runs (906 → 907) and one draw run (904 → 905); the activity log (545) and the
// leaderboards (505) are SimCompetitionData's. The inbox's mark-all requests (529, 535) are the inbox's routes
// (SimInboxStoreData), which take `all_read` / `all_deleted`.
extension SimAchievementData {
    static let detailRoutes: [SimDataRoute] = [
        SimDataRoute(906, 907) { request, _, env in drawHistory(request, now: env.now) },
        SimDataRoute(904, 905) { request, _, env in drawRun(request, now: env.now) },
    ]

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
