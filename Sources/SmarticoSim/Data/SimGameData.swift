import SmarticoProtocol

/// The simulated data API's mini-games, jackpots, raffles: one user's state and the routes that read and change it.
///
/// Mini-games (700 → 701): six templates covering the SDK's derived fields (every buy-in type, the
/// three thumbnail sources, lootbox layouts, an unknown game type). A play (702) costs a spin,
/// points, gems or diamonds (`SimUserData`) or nothing, answers the next prize of the template in
/// turn and leaves the win pending until acknowledged (704); refusals carry the SDK's
/// `SAWSpinErrorCode`s. Batches (712) play each round the same way. Jackpots (800) with opt-in
/// and opt-out (804/806); raffles (902) with one draw that needs an opt-in (916) and one prize the
/// user won, claimed once (908). docs/simulator.md, "Data API: mini-games, jackpots and raffles".
public struct SimGameData: Sendable {
    /// Spin attempts of the `spins` buy-in templates, by template id.
    public var spins: [Int64: Int64] = [11: 3]
    /// Rounds played per template (the prize of a round is the template's next one in turn).
    public var plays: [Int64: Int64] = [:]
    /// When the free lootbox (one round per day) was last played.
    public var freePlayedAt: Int64?
    /// Wins not acknowledged yet: request_id → (template, prize).
    public var pendingWins: [String: PendingWin] = [:]
    public var nextSpinID: Int64 = 70_001
    /// Jackpots the user is opted into, by jp_template_id.
    public var jackpotOptedIn: [Int64: Bool] = [21: false, 22: true]
    /// Whether the user opted into the grand draw (312).
    public var grandDrawOptedIn = false
    /// When the user claimed the prize won in the daily draw (raf_won_id 9001).
    public var claimedAt: Int64?

    public struct PendingWin: Sendable, Equatable {
        public var template: Int64
        public var prize: Int64
    }

    public init() {}

    // Error codes (SDK SAWSpinErrorCode) and the simulator's own refusals.
    static let noSpins: Int64 = 40001, notEnoughPoints: Int64 = 40003, maxSpinsReached: Int64 = 40004
    static let notActive: Int64 = 40007, notInSegment: Int64 = 40009, noGems: Int64 = 40011, noDiamonds: Int64 = 40012
    static let refused: Int64 = 1, alreadyDone: Int64 = 2

    static let dayMs: Int64 = 86_400_000
    static let imageBase = "https://sim.smartico.invalid/img"

    static let routes: [SimDataRoute] = [
        SimDataRoute(700, 701) { _, data, env in ["templates": .array(templates(data, env).map(JSONValue.object))] },
        SimDataRoute(702, 703) { request, data, env in
            var round = play(request, &data, env)
            round["request_id"] = nil  // the real server does not echo it here (the SDK: "the server echoes no request_id")
            return round
        },
        SimDataRoute(712, 713) { request, data, env in
            let results = (request["spins"]?.arrayValue ?? []).compactMap(\.objectValue).map { play($0, &data, env) }
            return ["results": .array(results.map(JSONValue.object))]
        },
        SimDataRoute(704, 705) { request, data, _ in
            let id = request["request_id"]?.stringValue ?? ""
            guard data.games.pendingWins.removeValue(forKey: id) != nil else {
                return ["errCode": .number(refused), "errMsg": .string("no pending win with request_id \"\(id.prefix(64))\""), "request_id": .string(id)]
            }
            return ["request_id": .string(id)]
        },
        SimDataRoute(800, 801) { request, data, env in
            let only = request["jp_template_id"]?.lenientInt64
            let game = request["related_game_id"]?.stringValue
            let items = jackpots(data, env).filter { j in
                let id = j["jp_template_id"]?.lenientInt64 ?? 0
                guard only == nil || id == only else { return false }
                guard let game else { return true }
                return jackpotGames[id].map { games in games.map { $0.contains(game) } ?? true } ?? false
            }
            return ["items": .array(items.map(JSONValue.object))]
        },
        SimDataRoute(804, 805) { request, data, _ in setJackpot(request, &data, optedIn: true) },
        SimDataRoute(806, 807) { request, data, _ in setJackpot(request, &data, optedIn: false) },
        SimDataRoute(902, 903) { _, data, env in ["items": .array(raffles(data, env).map(JSONValue.object))] },
        SimDataRoute(916, 917) { request, data, _ in
            let raffle = request["raffle_id"]?.lenientInt64, draw = request["draw_id"]?.lenientInt64
            let run = request["raffle_run_id"]?.lenientInt64
            if raffle == 31, draw == 311 {
                return ["errCode": .number(refused), "errMsg": "draw 311 does not require an opt-in"]
            }
            guard raffle == 31, draw == 312, run == 3201 else {
                return ["errCode": .number(refused),
                        "errMsg": .string("no draw \(draw.map(String.init) ?? "?") run \(run.map(String.init) ?? "?") in raffle \(raffle.map(String.init) ?? "?") to opt into")]
            }
            data.games.grandDrawOptedIn = true
            return [:]
        },
        SimDataRoute(908, 909) { request, data, env in
            let won = request["won_id"]?.lenientInt64 ?? 0
            guard won == 9001 else {
                return ["errCode": .number(refused), "errMsg": .string("no prize won by this user with won_id \(won)")]
            }
            guard data.games.claimedAt == nil else {
                return ["errCode": .number(alreadyDone), "errMsg": "the prize was already claimed"]
            }
            data.games.claimedAt = env.now
            return [:]
        },
    ]

    // MARK: - Mini-games

    struct Template {
        var id: Int64
        var buyIn: Int64
        var cost: Int64
        var prizes: [(id: Int64, type: Int64)]
    }

    static let playable: [Int64: Template] = [
        11: Template(id: 11, buyIn: 3, cost: 0, prizes: [(111, 2), (112, 1), (113, 5)]),
        12: Template(id: 12, buyIn: 2, cost: 200, prizes: [(121, 2), (122, 1)]),
        13: Template(id: 13, buyIn: 4, cost: 5, prizes: [(131, 10), (132, 3)]),
        14: Template(id: 14, buyIn: 1, cost: 0, prizes: [(141, 6), (142, 9), (143, 8)]),
        15: Template(id: 15, buyIn: 5, cost: 2, prizes: [(151, 4), (152, 7)]),
    ]

    static func jackpotOf14(_ data: SimUserData) -> Double { 1250.5 + 0.5 * Double(data.games.plays[14] ?? 0) }

    /// One round (`{saw_template_id, request_id}`): its answer (`request_id` echoed; `errCode` on a refusal).
    static func play(_ request: JSONObject, _ data: inout SimUserData, _ env: SimDataEnvironment) -> JSONObject {
        let id = request["saw_template_id"]?.lenientInt64 ?? 0
        let requestID = request["request_id"]?.stringValue
        var out: JSONObject = ["request_id": requestID.map(JSONValue.string) ?? .null]
        func refuse(_ code: Int64, _ message: String) -> JSONObject {
            out["errCode"] = .number(code)
            out["errMsg"] = .string(message)
            return out
        }
        if id == 16 { return refuse(notInSegment, "the user is not in the segment of mini-game 16") }
        guard let t = playable[id] else { return refuse(notActive, "no active mini-game template \(id)") }
        switch t.buyIn {
        case 3:
            let left = data.games.spins[id] ?? 0
            guard left > 0 else { return refuse(noSpins, "no spins left for mini-game \(id)") }
            data.games.spins[id] = left - 1
        case 2:
            guard data.points >= t.cost else { return refuse(notEnoughPoints, "\(t.cost) points needed, \(data.points) in the balance") }
            data.points -= t.cost
        case 4:
            guard data.gems >= t.cost else { return refuse(noGems, "\(t.cost) gems needed, \(data.gems) in the balance") }
            data.gems -= t.cost
        case 5:
            guard data.diamonds >= t.cost else { return refuse(noDiamonds, "\(t.cost) diamonds needed, \(data.diamonds) in the balance") }
            data.diamonds -= t.cost
        default:
            if let at = data.games.freePlayedAt, env.now - at < dayMs {
                out["first_spin_in_period"] = .number(at)
                return refuse(maxSpinsReached, "mini-game \(id) can be played once a day")
            }
            data.games.freePlayedAt = env.now
        }
        let n = data.games.plays[id] ?? 0
        let prize = t.prizes[Int(n % Int64(t.prizes.count))]
        if prize.type == 6, let amount = JSONNumber(jackpotOf14(data)) { out["jackpot_amount"] = .number(amount) }
        data.games.plays[id] = n + 1
        if let requestID { data.games.pendingWins[requestID] = PendingWin(template: id, prize: prize.id) }
        out["errCode"] = 0  // each batch result carries its own (the SDK looks for any 0)
        out["errMsg"] = .null
        out["saw_prize_id"] = .number(prize.id)
        out["spin_id"] = .number(data.games.nextSpinID)
        data.games.nextSpinID += 1
        return out
    }

    // MARK: - Sample data (JSON text: quick to compile; `{{name}}` filled in, "@now±ms" made a timestamp)

    /// `text` with each `{{key}}` replaced, parsed, and every string "@now", "@now+N", "@now-N" turned into `now` ± N ms.
    static func sample(_ text: String, _ values: [String: String] = [:], now: Int64) -> JSONValue {
        var filled = text
        for (key, value) in values { filled = filled.replacing("{{\(key)}}", with: value) }
        guard let parsed = try? JSONValue(parsing: filled) else { preconditionFailure("SimGameData: a sample is not JSON:\n\(filled)") }
        return resolveTimes(parsed, now: now)
    }

    static func resolveTimes(_ v: JSONValue, now: Int64) -> JSONValue {
        switch v {
        case .string(let s) where s.hasPrefix("@now"):
            let rest = s.dropFirst(4)
            if rest.isEmpty { return .number(now) }
            let sign: Int64 = rest.first == "-" ? -1 : 1
            return .number(now + sign * (Int64(rest.dropFirst()) ?? 0))
        case .array(let a): return .array(a.map { resolveTimes($0, now: now) })
        case .object(let o):
            var out = JSONObject()
            for (k, x) in o { out.append(key: k, value: resolveTimes(x, now: now)) }
            return .object(out)
        default: return v
        }
    }

    static func number(_ d: Double) -> String { JSONNumber(d)?.literal ?? "0" }

    /// The SAWTemplate list with the user's spins, plays and the free lootbox's next availability.
    static func templates(_ data: SimUserData, _ env: SimDataEnvironment) -> [JSONObject] {
        let next = data.games.freePlayedAt.map { String($0 + dayMs) } ?? "null"
        let values = ["spins11": String(data.games.spins[11] ?? 0), "next14": next,
                      "jackpot14": number(jackpotOf14(data)), "img": imageBase]
        return (sample(templatesText, values, now: env.now).arrayValue ?? []).compactMap(\.objectValue)
    }

    static let templatesText = #"""
    [
     {"saw_template_id": 11, "saw_game_type_id": 1, "saw_buyin_type_id": 3, "spin_count": {{spins11}},
      "visibile_when_can_spin": false, "is_visible": true, "maxSpinsCount": 10, "maxSpinsPediodMs": 86400000.7,
      "earliest_expiration_dt": "@now+86400000", "latest_expiration_dt": "@now+604800000",
      "relative_period_timezone": -180, "show_prize_history": true, "expose_game_stat_on_api": true, "saw_skin_key": "wheel_classic",
      "saw_template_ui_definition": {"name": "Lucky wheel", "description": "Three spins a day", "skin": "wheel_classic",
        "thumbnail": "{{img}}/wheel.png", "game_layout": 2, "no_attempts_message": "No spins left",
        "over_limit_message": "Come back tomorrow", "custom_data": {"theme": "gold"}, "custom_section_id": 7, "sectors_count": 6},
      "prizes": [
        {"saw_prize_id": 111, "prize_type_id": 2, "prize_value": 100, "pool": 950, "pool_initial": 1000, "wins_count": 50,
         "weekdays": [1, 2, 3, 4, 5], "is_deleted": false,
         "saw_prize_ui_definition": {"name": "100 points", "acknowledge_type": 2, "aknowledge_message": "You won 100 points!",
           "icon": "{{img}}/prize-111.png", "sectors": [0, 3], "font_size": 14, "custom_data": "{\"color\":\"red\"}"}},
        {"saw_prize_id": 112, "prize_type_id": 1, "pool_initial": 1000, "is_deleted": false,
         "saw_prize_ui_definition": {"name": "No luck", "acknowledge_type": 1, "sectors": [1, 4], "prize_modifiers": ["2x", "reset"]}},
        {"saw_prize_id": 113, "prize_type_id": 5, "prize_value": 1, "is_deleted": false,
         "saw_prize_ui_definition": {"name": "1 extra spin", "acknowledge_type": 3, "sectors": [2, 5], "acknowledge_dp": "dp:gf_saw&id=11"}}
      ]},
     {"saw_template_id": 12, "saw_game_type_id": 2, "saw_buyin_type_id": 2, "buyin_cost_points": 200, "spin_count": 0,
      "visibile_when_can_spin": true, "saw_skin_key": "scratch_gold",
      "saw_skin_ui_definition": {"skin_folder": "{{img}}/skins/scratch_gold", "skin_css": ""},
      "saw_template_ui_definition": {"name": "Scratch & win", "description": "200 points a card", "promo_text": "Scratch now",
        "promo_image": "{{img}}/scratch-promo.png"},
      "prizes": [
        {"saw_prize_id": 121, "prize_type_id": 2, "prize_value": 500, "saw_prize_ui_definition": {"name": "500 points", "acknowledge_type": 3, "position": 1}},
        {"saw_prize_id": 122, "prize_type_id": 1, "saw_prize_ui_definition": {"name": "Try again", "acknowledge_type": 1, "position": 2}}
      ]},
     {"saw_template_id": 13, "saw_game_type_id": 4, "saw_buyin_type_id": 4, "buyin_cost_points": 5, "spin_count": 0,
      "saw_skin_key": "giftbox_red",
      "saw_template_ui_definition": {"name": "Gem gift box", "description": "5 gems a box", "thumbnail": ""},
      "prizes": [
        {"saw_prize_id": 131, "prize_type_id": 10, "prize_value": 10, "prize_details_json": {"gems": 10, "_gems_diamonds_type": "diamonds"},
         "saw_prize_ui_definition": {"name": "10 diamonds", "acknowledge_type": 2}},
        {"saw_prize_id": 132, "prize_type_id": 3,
         "saw_prize_ui_definition": {"name": "Deposit bonus", "acknowledge_type": 4, "second_btn": "dp:deposit", "second_btn_action_title": "Deposit"}}
      ]},
     {"saw_template_id": 14, "saw_game_type_id": 8, "saw_buyin_type_id": 1, "spin_count": 0,
      "maxSpinsCount": 1, "maxSpinsPediodMs": 86400000, "next_available_spin_ts": {{next14}},
      "jackpot_current": {{jackpot14}}, "jackpot_add_on_attempt": 0.5, "jackpot_guaranteed": 1000,
      "activeFromDate": "@now-864000000", "activeTillDate": "@now+1728000000",
      "saw_template_ui_definition": {"name": "Advent calendar", "game_layout": 1, "jackpot_symbol": "EUR",
        "thumbnail": "{{img}}/calendar.png", "steps_to_finish_game": 24, "min_steps_to_finish_game": 3},
      "prizes": [
        {"saw_prize_id": 141, "prize_type_id": 6, "max_give_period_type_id": 2, "saw_prize_ui_definition": {"name": "The jackpot", "acknowledge_type": 3}},
        {"saw_prize_id": 142, "prize_type_id": 9, "prize_value": 2, "prize_details_json": {"tickets_count": 2},
         "saw_prize_ui_definition": {"name": "2 raffle tickets", "acknowledge_type": 2}},
        {"saw_prize_id": 143, "prize_type_id": 8,
         "saw_prize_ui_definition": {"name": "A secret mission", "acknowledge_type": 2, "requirements_to_get_prize": "Open it on day 24",
           "hide_prize_from_history": true}}
      ]},
     {"saw_template_id": 15, "saw_game_type_id": 11, "saw_buyin_type_id": 5, "buyin_cost_points": 2, "spin_count": 0,
      "saw_skin_key": "plinko_neon",
      "saw_template_ui_definition": {"name": "Diamond plinko", "thumbnail": "{{img}}/plinko.png"},
      "prizes": [
        {"saw_prize_id": 151, "prize_type_id": 4, "is_surcharge": true, "pool": 0, "saw_prize_ui_definition": {"name": "A signed shirt", "acknowledge_type": 4}},
        {"saw_prize_id": 152, "prize_type_id": 7, "saw_prize_ui_definition": {"name": "Next level", "acknowledge_type": 3}}
      ]},
     {"saw_template_id": 16, "saw_game_type_id": 99, "saw_buyin_type_id": 9, "spin_count": 0,
      "saw_template_ui_definition": {"name": "Coming soon"}, "prizes": []}
    ]
    """#

    // MARK: - Jackpots

    /// Which jackpots a `related_game_id` selects: 21 the two sim slots, 22 every game.
    static let jackpotGames: [Int64: [String]?] = [21: ["sim-slot-1", "sim-slot-2"], 22: nil]

    static func jackpots(_ data: SimUserData, _ env: SimDataEnvironment) -> [JSONObject] {
        // The shared pot grows a cent a second (what a 1 Hz poll shows).
        let shared = 10_000 + Double((env.now / 1000) % 86_400) / 100
        let community = data.games.jackpotOptedIn[21] ?? false
        let values = ["pot21": number(shared), "pot21user": number(shared * 1.08), "opted21": String(community),
                      "count21": String(148 + (community ? 1 : 0)), "opted22": String(data.games.jackpotOptedIn[22] ?? false),
                      "img": imageBase]
        return (sample(jackpotsText, values, now: env.now).arrayValue ?? []).compactMap(\.objectValue)
    }

    static let jackpotsText = #"""
    [
     {"jp_template_id": 21, "jp_type_id": 1,
      "jp_public_meta": {"name": "Community jackpot", "description": "Everyone's bets grow one pot", "image_url": "{{img}}/jackpot.png",
        "placeholder1": "Hot!", "priority": 1, "winner_template": {"title": "You won!", "content": "<b>{{amount}}</b>"},
        "not_winner_template": {"title": "Someone won", "content": "Next time"}, "custom_data": {"theme": "gold"}},
      "jp_currency": "EUR", "user_currency": "USD", "contribution_type": 2, "contribution_value": 0.5,
      "contribution_rules": [{"ruleId": 1, "jpTemplateId": 21, "type": 1, "extEntityIds": ["sim-slot-2"], "contributionValue": 0.25}],
      "related_games": [],
      "pot": {"jp_template_id": 21, "jp_pot_id": 2101, "current_pot_amount": {{pot21}}, "current_pot_amount_user_currency": {{pot21user}},
        "explode_date_ts": null, "user_id": null, "current_pot_temperature": 1},
      "is_opted_in": {{opted21}}, "is_auto_opt_in": false, "ach_related_game_allow_all": false,
      "registration_count": {{count21}}, "expose_winners_over_api": true},
     {"jp_template_id": 22, "jp_type_id": 2,
      "jp_public_meta": {"name": "My pot", "description": "A pot of your own", "priority": "2"},
      "jp_currency": "EUR", "user_currency": "EUR", "contribution_type": 1, "contribution_value": 0.1,
      "contribution_rules": [], "related_games": [],
      "pot": {"jp_template_id": 22, "jp_pot_id": 2201, "current_pot_amount": 87.5, "current_pot_amount_user_currency": 87.5,
        "user_id": 1001, "current_pot_temperature": 3},
      "is_opted_in": {{opted22}}, "is_auto_opt_in": true, "ach_related_game_allow_all": true,
      "registration_count": 1, "expose_winners_over_api": false}
    ]
    """#

    static func setJackpot(_ request: JSONObject, _ data: inout SimUserData, optedIn: Bool) -> JSONObject {
        let id = request["jp_template_id"]?.lenientInt64 ?? 0
        guard data.games.jackpotOptedIn[id] != nil else {
            return ["errCode": .number(refused), "errMsg": .string("no jackpot with jp_template_id \(id)")]
        }
        data.games.jackpotOptedIn[id] = optedIn
        return [:]
    }

    // MARK: - Raffles

    static func raffles(_ data: SimUserData, _ env: SimDataEnvironment) -> [JSONObject] {
        let grand = data.games.grandDrawOptedIn
        let claimed = data.games.claimedAt
        var user = ""
        for scalar in env.user.unicodeScalars.prefix(64) where scalar != "\"" && scalar != "\\" && scalar.value >= 0x20 {
            user.unicodeScalars.append(scalar)
        }
        let values = ["user": user, "img": imageBase, "should_claim": String(claimed == nil),
                      "claimed": claimed.map(String.init) ?? "null", "opted312": String(grand),
                      "tickets312": grand ? "3" : "0", "last312": grand ? #"[{"id": 880001, "s": "880-001"}]"# : "[]",
                      "chance312": grand ? "0.13" : "0"]
        return (sample(rafflesText, values, now: env.now).arrayValue ?? []).compactMap(\.objectValue)
    }

    static let rafflesText = #"""
    [
     {"raffle_id": 31, "start_date_ts": "@now-259200000", "end_date_ts": "@now+345600000",
      "max_tickets_count": 10000, "current_tickets_count": 2345,
      "public_meta": {"name": "Weekly raffle", "description": "Tickets from every deposit", "custom_section_id": 7,
        "image_url": "{{img}}/raffle.png", "image_url_mobile": "{{img}}/raffle-m.png",
        "hint_text": "One ticket per 10 EUR deposited", "custom_data": "{\"tier\":\"gold\"}", "ticket_cap_visualization": 1},
      "draws": [
        {"draw_id": 311, "run_id": 3117, "execution_type": 2, "current_state": 1,
         "execution_ts": "@now+21600000", "previous_run_ts": "@now-64800000", "previous_run_id": 3116,
         "ticket_start_ts": "@now-64800000", "allow_multi_prize_per_ticket": false,
         "total_tickets_count": 420, "my_tickets_count": 3,
         "my_last_tickets": [{"id": 880001, "s": "880-001"}, {"id": 880002, "s": "880-002"}, {"id": 880003, "s": "880-003"}],
         "user_opted_in": 0, "requires_optin": false, "is_active": 1,
         "winners_limit": 20, "winners_offset": 0, "winners_total": 2,
         "public_meta": {"name": "Daily draw", "description": "Every day at 18:00", "icon_url": "{{img}}/daily.png", "is_grand": false},
         "prizes": [
           {"prize_id": 5001, "prizes_per_run": 2, "prizes_per_run_actual": 2, "chances_to_win_perc": 0.71,
            "min_required_total_tickets": 100, "requires_claim": true, "min_required_tickets_for_user": 1,
            "cap_prizes_per_run": 5, "priority": 1, "stock_items_per_draw": 40, "should_claim": {{should_claim}},
            "public_meta": {"name": "10 free spins", "description": "On any sim slot", "hide_chance_to_win": false,
              "image_url": "{{img}}/spins.png"},
            "winners": [
              {"user_id": 1001, "public_username": "{{user}}", "avatar_id": "{{img}}/avatar-7.png",
               "ticket": {"id": 770012, "s": "770-012"}, "raf_won_id": 9001, "claimed_date": {{claimed}}},
              {"user_id": 2002, "public_username": "bob", "avatar_url": "{{img}}/bob.png",
               "ticket": {"id": 770044, "s": "770-044"}, "raf_won_id": 9002, "claimed_date": "@now-43200000"}
            ]}
         ]},
        {"draw_id": 312, "run_id": 3201, "execution_type": 3, "current_state": 1,
         "execution_ts": "@now+345600000", "ticket_start_ts": "@now-259200000",
         "allow_multi_prize_per_ticket": true, "total_tickets_count": 2345, "my_tickets_count": {{tickets312}},
         "my_last_tickets": {{last312}},
         "user_opted_in": {{opted312}}, "requires_optin": true, "is_active": true,
         "winners_limit": 20, "winners_offset": 0, "winners_total": 0,
         "public_meta": {"name": "Grand draw", "description": "Opt in to take part", "is_grand": true,
           "background_image_url": "{{img}}/grand-bg.png"},
         "prizes": [
           {"prize_id": "5002", "prizes_per_run": 1, "chances_to_win_perc": {{chance312}}, "requires_claim": false, "priority": 1,
            "should_claim": false, "public_meta": {"name": "A simulated car", "hide_chance_to_win": true, "custom_data": "blue"},
            "winners": []}
         ]}
      ]},
     {"raffle_id": 32, "start_date_ts": "@now-2592000000", "end_date_ts": "@now-1728000000",
      "max_tickets_count": 500, "current_tickets_count": 500,
      "draws": [{"draw_id": 321, "run_id": 3301, "execution_type": 1, "current_state": 3,
                 "execution_ts": "@now-1728000000", "total_tickets_count": 500, "my_tickets_count": 0}]}
    ]
    """#
}
