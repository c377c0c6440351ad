import SmarticoProtocol

/// The SDK's public shapes of mini-games, jackpots and raffles, made from the server's wire
/// objects (SAWTemplate, JackpotDetails, Raffle). Every field of a shape is present (`null` when
/// the server left it out); docs/api.md says how the derived ones are computed.
enum GameShapes {
    /// The SDK's fallback host for mini-game thumbnails (neither the template nor its skin has one).
    static let iconCDN = "https://d312ucx3huj7iy.cloudfront.net/gf/images/saw"

    static let gameTypeNames: [Int64: String] = [
        1: "wheel", 2: "scratch", 3: "matchx", 4: "giftbox", 5: "prizedrop", 6: "quiz", 7: "lootbox_weekdays",
        8: "lootbox_calendar_days", 9: "treasure_hunt", 10: "voyager", 11: "plinko", 12: "coin_flip", 13: "custom_minigame",
    ]
    static let buyInNames: [Int64: String] = [1: "free", 2: "points", 3: "spins", 4: "gems", 5: "diamonds"]
    static let layoutNames: [Int64: String] = [1: "horizontal", 2: "vertical-map"]
    static let acknowledgeNames: [Int64: String] = [1: "silent", 2: "quick-message", 3: "full-message", 4: "explicity-acknowledge"]
    static let prizeTypeNames: [Int64: String] = [
        1: "no-prize", 2: "points", 3: "bonus", 4: "manual", 5: "spin", 6: "jackpot", 7: "change-level", 8: "mission",
        9: "raffle-ticket", 10: "gems-and-diamonds",
    ]

    /// `cid`, `ts`, `uuid` of a protocol answer (the SDK's response types keep them) and `extra`.
    static func envelope(_ answer: JSONObject, extra: JSONObject) -> JSONValue {
        var o: JSONObject = ["cid": .of(answer.double("cid")), "ts": .of(answer.double("ts")), "uuid": .of(answer.string("uuid"))]
        for (k, v) in extra { o[k] = v }
        return .object(o)
    }

    /// A JSON member kept as it is, absent or `null` → `{}` (the SDK's custom_data of UI definitions).
    static func jsonOrEmpty(_ v: JSONValue?) -> JSONValue {
        switch v {
        case nil, .null?: return .object([:])
        case let v?: return v
        }
    }

    static func nonEmpty(_ s: String?) -> String? { s.flatMap { $0.isEmpty ? nil : $0 } }

    // MARK: - Mini-games

    /// `TMiniGameTemplate` from a wire `SAWTemplate`.
    static func miniGame(_ r: JSONObject) -> JSONValue {
        let ui = r.object("saw_template_ui_definition")
        let type = r.int("saw_game_type_id")
        let buyIn = r.int("saw_buyin_type_id")
        let cost = r.int("buyin_cost_points")
        let thumbnail = nonEmpty(ui?.string("thumbnail"))
            ?? nonEmpty(r.object("saw_skin_ui_definition")?.string("skin_folder")).map { "\($0)/ico.png" }
            ?? "\(iconCDN)/\(r.string("saw_skin_key") ?? "null")/ico.png"
        let isLootbox = type == 7 || type == 8
        let o: JSONObject = [
            "id": .of(r.int("saw_template_id")),
            "name": .of(ui?.string("name")),
            "description": .of(ui?.string("description")),
            "thumbnail": .string(thumbnail),
            "visibile_when_can_spin": .of(r.bool("visibile_when_can_spin")),
            "saw_game_type": .of(type.flatMap { gameTypeNames[$0] }),
            "saw_buyin_type": .string(buyIn.flatMap { buyInNames[$0] } ?? "unknown"),
            "buyin_cost_points": buyIn == 2 ? .of(cost) : .null,
            "buyin_cost_gems": buyIn == 4 ? .of(cost.map(Double.init)) : .null,
            "buyin_cost_diamonds": buyIn == 5 ? .of(cost.map(Double.init)) : .null,
            "spin_count": .of(r.int("spin_count")),
            "next_available_spin_ts": .of(r.int("next_available_spin_ts")),
            "earliest_expiration_dt": .of(r.double("earliest_expiration_dt")),
            "latest_expiration_dt": .of(r.double("latest_expiration_dt")),
            "over_limit_message": .of(ui?.string("over_limit_message")),
            "no_attempts_message": .of(ui?.string("no_attempts_message")),
            "jackpot_current": .of(r.double("jackpot_current")),
            "jackpot_add_on_attempt": .of(r.double("jackpot_add_on_attempt")),
            "jackpot_symbol": .of(ui?.string("jackpot_symbol")),
            "promo_image": .of(ui?.string("promo_image")),
            "promo_text": .of(ui?.string("promo_text")),
            "custom_data": jsonOrEmpty(ui?["custom_data"]),
            "prizes": .array(r.objects("prizes").map(miniGamePrize)),
            "expose_game_stat_on_api": .of(r.bool("expose_game_stat_on_api")),
            "relative_period_timezone": .of(r.double("relative_period_timezone")),
            "activeFromDate": .of(r.double("activeFromDate")),
            "activeTillDate": .of(r.double("activeTillDate")),
            "steps_to_finish_game": .of(ui?.double("steps_to_finish_game")),
            "min_steps_to_finish_game": .of(ui?.double("min_steps_to_finish_game")),
            "custom_section_id": .of(ui?.int("custom_section_id")),
            "saw_template_ui_definition": .of(ui),
            "game_layout": isLootbox ? .of(ui?.int("game_layout").flatMap { layoutNames[$0] }) : .null,
            "show_prize_history": .of(r.bool("show_prize_history")),
            "max_number_of_attempts": .of(r.int("maxSpinsCount").map(Double.init)),
            "max_spins_period_ms": .of(r.double("maxSpinsPediodMs").map(JSONObject.truncate)),
            "expose_user_spin_id": .null,
        ]
        return .object(o)
    }

    /// `TMiniGamePrize` from a wire `SAWPrize`.
    static func miniGamePrize(_ p: JSONObject) -> JSONValue {
        let ui = p.object("saw_prize_ui_definition")
        let o: JSONObject = [
            "id": .of(p.int("saw_prize_id")),
            "name": .of(ui?.string("name")),
            "prize_type": .string(p.int("prize_type_id").flatMap { prizeTypeNames[$0] } ?? "unknown"),
            "prize_value": .of(p.double("prize_value")),
            "font_size": .of(ui?.double("font_size")),
            "font_size_mobile": .of(ui?.double("font_size_mobile")),
            "icon": .of(ui?.string("icon")),
            "position": .of(ui?.int("position")),
            "sectors": doubles(ui, "sectors"),
            "acknowledge_type": .of(ui?.int("acknowledge_type").flatMap { acknowledgeNames[$0] }),
            "aknowledge_message": .of(ui?.string("aknowledge_message")),
            "aknowledge_message_lose": .of(ui?.string("aknowledge_message_lose")),
            "acknowledge_dp": .of(ui?.string("acknowledge_dp")),
            "acknowledge_action_title": .of(ui?.string("acknowledge_action_title")),
            "acknowledge_dp_additional": .of(ui?.string("acknowledge_dp_additional")),
            "acknowledge_action_title_additional": .of(ui?.string("acknowledge_action_title_additional")),
            "second_btn": .of(ui?.string("second_btn")),
            "second_btn_action_title": .of(ui?.string("second_btn_action_title")),
            "out_of_stock_message": .of(ui?.string("out_of_stock_message")),
            "pool": .of(p.double("pool")),
            "pool_initial": .of(p.double("pool_initial")),
            "wins_count": .of(p.int("wins_count")),
            "weekdays": .of(p.ints("weekdays")),
            "active_from_ts": .of(p.int("active_from_ts")),
            "active_till_ts": .of(p.int("active_till_ts")),
            "relative_period_timezone": .of(p.double("relative_period_timezone")),
            "is_surcharge": .of(p.bool("is_surcharge")),
            "is_deleted": .of(p.bool("is_deleted")),
            "custom_data": jsonOrEmpty(ui?["custom_data"]),
            "prize_modifiers": strings(ui, "prize_modifiers"),
            "allow_split_decimal": .null,
            "hide_prize_from_history": .of(ui?.bool("hide_prize_from_history")),
            "requirements_to_get_prize": .of(ui?.string("requirements_to_get_prize")),
            "max_give_period_type_id": .of(p.int("max_give_period_type_id")),
        ]
        return .object(o)
    }

    /// The numbers of an array member (others skipped); `null` when absent.
    static func doubles(_ o: JSONObject?, _ key: String) -> JSONValue {
        guard let a = o?[key]?.arrayValue else { return .null }
        return .array(a.compactMap { $0.doubleValue.flatMap { JSONNumber($0) }.map(JSONValue.number) })
    }

    /// The texts of an array member (others skipped); `null` when absent.
    static func strings(_ o: JSONObject?, _ key: String) -> JSONValue {
        guard let a = o?[key]?.arrayValue else { return .null }
        return .array(a.compactMap { $0.stringValue.map(JSONValue.string) })
    }

    // MARK: - Jackpots

    /// `JackpotDetails`: the wire shape is the public one; read field by field so that each is there.
    static func jackpot(_ j: JSONObject) -> JSONValue {
        let meta = j.object("jp_public_meta").map { m -> JSONValue in
            .object([
                "name": .of(m.string("name")),
                "description": .of(m.string("description")),
                "image_url": .of(m.string("image_url")),
                "winner_template": .of(m.object("winner_template")),
                "not_winner_template": .of(m.object("not_winner_template")),
                "placeholder1": .of(m.string("placeholder1")),
                "placeholder2": .of(m.string("placeholder2")),
                "priority": .of(m.string("priority")),
                "custom_data": m["custom_data"] ?? .null,
            ])
        } ?? .null
        let pot = j.object("pot").map { p -> JSONValue in
            .object([
                "jp_template_id": .of(p.int("jp_template_id")),
                "jp_pot_id": .of(p.int("jp_pot_id")),
                "current_pot_amount": .of(p.double("current_pot_amount")),
                "current_pot_amount_user_currency": .of(p.double("current_pot_amount_user_currency")),
                "explode_date_ts": .of(p.int("explode_date_ts")),
                "user_id": .of(p.int("user_id")),
                "current_pot_temperature": .of(p.int("current_pot_temperature")),
            ])
        } ?? .null
        let rules: JSONValue = j["contribution_rules"]?.arrayValue == nil ? .null : .array(j.objects("contribution_rules").map { r in
            .object([
                "ruleId": .of(r.double("ruleId")),
                "jpTemplateId": .of(r.double("jpTemplateId")),
                "type": .of(r.int("type")),
                "extEntityIds": strings(r, "extEntityIds"),
                "contributionValue": .of(r.double("contributionValue")),
            ])
        })
        return .object([
            "jp_template_id": .of(j.int("jp_template_id")),
            "jp_type_id": .of(j.int("jp_type_id")),
            "jp_public_meta": meta,
            "jp_currency": .of(j.string("jp_currency")),
            "user_currency": .of(j.string("user_currency")),
            "contribution_type": .of(j.int("contribution_type")),
            "contribution_value": .of(j.double("contribution_value")),
            "contribution_rules": rules,
            "related_games": j["related_games"]?.arrayValue.map(JSONValue.array) ?? .null,
            "pot": pot,
            "is_opted_in": .of(j.bool("is_opted_in")),
            "is_auto_opt_in": .of(j.bool("is_auto_opt_in")),
            "ach_related_game_allow_all": .of(j.bool("ach_related_game_allow_all")),
            "registration_count": .of(j.int("registration_count")),
            "expose_winners_over_api": .of(j.bool("expose_winners_over_api")),
        ])
    }

    // MARK: - Raffles

    /// `TRaffle` from a wire `Raffle` (display fields lifted from `public_meta`).
    static func raffle(_ r: JSONObject) -> JSONValue {
        let meta = r.object("public_meta")
        return .object([
            "id": .of(r.int("raffle_id")),
            "name": .of(meta?.string("name")),
            "description": .of(meta?.string("description")),
            "custom_section_id": .of(meta?.int("custom_section_id")),
            "image_url": .of(meta?.string("image_url")),
            "image_url_mobile": .of(meta?.string("image_url_mobile")),
            "hint_text": .of(meta?.string("hint_text")),
            "custom_data": .of(meta?.string("custom_data")),
            "start_date": .of(r.int("start_date_ts")),
            "end_date": .of(r.int("end_date_ts")),
            "max_tickets_count": .of(r.int("max_tickets_count")),
            "current_tickets_count": .of(r.int("current_tickets_count")),
            "draws": .array(r.objects("draws").map(raffleDraw)),
            "ticket_cap_visualization": .of(meta?.int("ticket_cap_visualization")),
        ])
    }

    /// `TRaffleDraw`: the three flags are real booleans (absent → false), lists are never null.
    static func raffleDraw(_ d: JSONObject) -> JSONValue {
        let meta = d.object("public_meta")
        return .object([
            "id": .of(d.int("draw_id")),
            "name": .of(meta?.string("name")),
            "description": .of(meta?.string("description")),
            "image_url": .of(meta?.string("image_url")),
            "image_url_mobile": .of(meta?.string("image_url_mobile")),
            "icon_url": .of(meta?.string("icon_url")),
            "background_image_url": .of(meta?.string("background_image_url")),
            "background_image_url_mobile": .of(meta?.string("background_image_url_mobile")),
            "is_grand": .of(meta?.bool("is_grand")),
            "prizes": .array(d.objects("prizes").map(rafflePrize)),
            "current_state": .of(d.int("current_state")),
            "run_id": .of(d.int("run_id")),
            "execution_type": .of(d.int("execution_type")),
            "execution_ts": .of(d.int("execution_ts")),
            "previous_run_ts": .of(d.int("previous_run_ts")),
            "previous_run_id": .of(d.int("previous_run_id")),
            "ticket_start_ts": .of(d.int("ticket_start_ts")),
            "allow_multi_prize_per_ticket": .of(d.bool("allow_multi_prize_per_ticket")),
            "total_tickets_count": .of(d.int("total_tickets_count")),
            "my_tickets_count": .of(d.int("my_tickets_count")),
            "my_last_tickets": .array(d.objects("my_last_tickets").map(ticket)),
            "user_opted_in": .bool(d.bool("user_opted_in") == true),
            "requires_optin": .bool(d.bool("requires_optin") == true),
            "is_active": .bool(d.bool("is_active") == true),
            "winners_limit": .of(d.double("winners_limit")),
            "winners_offset": .of(d.double("winners_offset")),
            "winners_total": .of(d.double("winners_total")),
        ])
    }

    /// `TRafflePrize`; `add_one_prize_per_each_x_tickets` is in the type but the SDK never fills it.
    static func rafflePrize(_ p: JSONObject) -> JSONValue {
        let meta = p.object("public_meta")
        return .object([
            "id": .of(p.string("prize_id")),
            "name": .of(meta?.string("name")),
            "description": .of(meta?.string("description")),
            "image_url": .of(meta?.string("image_url")),
            "custom_data": .of(meta?.string("custom_data")),
            "hide_chance_to_win": .of(meta?.bool("hide_chance_to_win")),
            "prizes_per_run": .of(p.double("prizes_per_run")),
            "prizes_per_run_actual": .of(p.double("prizes_per_run_actual")),
            "chances_to_win_perc": .of(p.double("chances_to_win_perc")),
            "min_required_total_tickets": .of(p.int("min_required_total_tickets")),
            "add_one_prize_per_each_x_tickets": .null,
            "requires_claim": .of(p.bool("requires_claim")),
            "min_required_tickets_for_user": .of(p.int("min_required_tickets_for_user")),
            "cap_prizes_per_run": .of(p.double("cap_prizes_per_run")),
            "priority": .of(p.int("priority")),
            "stock_items_per_draw": .of(p.double("stock_items_per_draw")),
            "should_claim": .of(p.bool("should_claim")),
            "winners": .array(p.objects("winners").map { w in
                .object([
                    "id": .of(w.int("user_id")),
                    "username": .of(w.string("public_username")),
                    "avatar_url": .url(w.string("avatar_url") ?? w.string("avatar_id")),
                    "ticket": ticket(w.object("ticket") ?? [:]),
                    "raf_won_id": .of(w.int("raf_won_id")),
                    "claimed_date": .of(w.int("claimed_date")),
                ])
            }),
        ])
    }

    /// `TRaffleTicket` from the wire's abbreviated `{id, s}` (the SDK's field name `ticekt_id` kept).
    static func ticket(_ t: JSONObject) -> JSONValue {
        .object(["ticekt_id": .of(t.int("id")), "ticket_id_string": .of(t.string("s"))])
    }
}
