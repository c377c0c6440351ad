import SmarticoProtocol
import SmarticoSocketAPI

/// The calls of the SDK's HistoryApi (histories, catalogs and paged look-ups). Nested objects the SDK
/// types (a mini-game `template`, a jackpot `winner`, raffle prizes) are passed on as the server sent them.
enum CompetitionHistoryAPI {
    static let implementations: [String: DataAPIRun] = [
        "history.mini_games": { ctx throws(SocketAPIError) in try await miniGames(ctx) },
        "history.store_categories": { ctx throws(SocketAPIError) in try await storeCategories(ctx) },
        "history.jackpot_winners": { ctx throws(SocketAPIError) in
            .array(try await jackpotWinners(ctx).objects("winners").map { .object(winner($0)) })
        },
        "history.jackpot_win_stats": { ctx throws(SocketAPIError) in try await jackpotWinStats(ctx) },
        "history.jackpot_eligible_games": { ctx throws(SocketAPIError) in try await eligibleGames(ctx) },
        "history.raffle_won_prizes": { ctx throws(SocketAPIError) in try await raffleWonPrizes(ctx) },
        "history.custom_sections": { ctx throws(SocketAPIError) in try await customSections(ctx) },
    ]

    static func miniGames(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        var payload: JSONObject = ["limit": .number(ctx.args.int("limit") ?? 20), "offset": .number(ctx.args.int("offset") ?? 0)]
        if let template = ctx.args.int("saw_template_id") { payload["saw_template_id"] = .number(template) }
        let r = try await ctx.request(cid: 716, payload, expect: 717)
        return .array(r.objects("prizes").map { p in
            .object([
                "template": p.object("template").map(JSONValue.object) ?? .null,
                "saw_template_id": .of(p.int("saw_template_id")),
                "saw_prize_id": .of(p.int("saw_prize_id")),
                "prize_amount": .of(p.double("prize_amount")),
                "client_request_id": .of(p.string("client_request_id")),
                "is_claimed": .of(p.bool("is_claimed")),
                "create_date_ts": .of(p.int("create_date_ts")),
                "acknowledge_date_ts": .of(p.int("acknowledge_date_ts")),
            ])
        })
    }

    static func storeCategories(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let r = try await ctx.request(cid: 515, expect: 516)
        return .array(r.objects("categories").map { c in
            .object(["id": .of(c.int("id")), "name": .of(c.object("publicMeta")?.string("name")),
                     "order": .of(c.object("publicMeta")?.int("order"))])
        })
    }

    static func jackpotWinners(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONObject {
        var payload: JSONObject = [:]
        if let template = ctx.args.int("jp_template_id") { payload["jp_template_id"] = .number(template) }
        payload["limit"] = .number(ctx.args.int("limit") ?? 20)
        payload["offset"] = .number(ctx.args.int("offset") ?? 0)
        return try await ctx.request(cid: 809, payload, expect: 810)
    }

    static func winner(_ w: JSONObject) -> JSONObject {
        ["jp_pot_id": .of(w.int("jp_pot_id")), "win_date_ts": .of(w.int("win_date_ts")),
         "winner": w.object("winner").map(JSONValue.object) ?? .null]
    }

    static func jackpotWinStats(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let r = try await jackpotWinners(ctx)
        let stats = r.object("win_stats")
        return .object([
            "winners": .array(r.objects("winners").map { .object(winner($0)) }),
            "win_stats": .object([
                "total_wins": .number(stats?.int("total_wins") ?? 0),
                "highest_win": stats?.object("highest_win").map(JSONValue.object) ?? .null,
                "last_win": stats?.object("last_win").map(JSONValue.object) ?? .null,
            ]),
        ])
    }

    static func eligibleGames(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let r = try await ctx.request(cid: 811, ["jp_template_id": .number(ctx.args.int("jp_template_id") ?? 0)], expect: 812)
        let games: [JSONValue] = r.objects("eligible_games").enumerated().map { i, g in
            let meta = g.object("game_public_meta")
            func text(_ key: String) -> JSONValue { .of(meta?[key]?.stringValue) }
            let enabled: Bool? = switch meta?["enabled"]?.stringValue { case "true": true; case "false": false; default: nil }
            return .object([
                "game_id": .of(g.int("ach_game_id")), "ext_game_id": .of(g.string("ext_game_id")),
                "name": text("name"), "link": text("link"), "image": text("image"), "enabled": .of(enabled),
                "game_provider": text("game_provider"), "mobile_spec_link": text("mobile_spec_link"),
                "priority": .number(i + 1),
            ])
        }
        return .object(["eligible_games": .array(games)])
    }

    static func raffleWonPrizes(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let raffle = ctx.args.int("raffle_id") ?? 0
        guard raffle != 0 else { throw SocketAPIError(.badRequest, "field \"args.raffle_id\" must not be 0 (raffle_id is required)") }
        let r = try await ctx.request(cid: 920, ["raffle_id": .number(raffle), "offset": .number(ctx.args.int("offset") ?? 0),
                                                 "limit": .number(ctx.args.int("limit") ?? 20)], expect: 921)
        return .object([
            "cid": .of(r.double("cid")), "ts": .of(r.double("ts")), "uuid": .of(r.string("uuid")),
            "errCode": .of(r.int("errCode")), "errMsg": .of(r.string("errMsg")),
            "user": r.object("user").map(JSONValue.object) ?? .null,
            "won_prizes": r["won_prizes"]?.arrayValue.map { .array($0.filter { $0.objectValue != nil }) } ?? .null,
            "total": .of(r.double("total")), "offset": .of(r.double("offset")), "limit": .of(r.double("limit")),
        ])
    }

    static func customSections(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let r = try await ctx.request(cid: 523, expect: 524)
        guard let sections = r.object("customSections") else { return .array([]) }
        var out: [JSONValue] = []
        for (key, value) in CompetitionShapes.byNumericKey(sections) {
            guard let s = value.objectValue, let type = s.int("section_type_id"), type >= 1 else { continue }
            out.append(.object([
                "id": .of(Int64(key)), "body": .of(s.string("body")), "menu_img": .of(s.string("menu_img")),
                "menu_name": .of(s.string("menu_name")), "custom_skin_images": .of(s.string("custom_skin_images")),
                "section_type_id": .number(type), "theme": .of(s.string("theme")),
                "generic_custom_css": .of(s.string("generic_custom_css")),
                "mission_tabs_options": .of(s.int("mission_tabs_options")),
                "overview_missions_filter": .of(s.int("overview_missions_filter")),
                "overview_missions_count": .of(s.int("overview_missions_count")),
                "url_or_dp": .of(s.string("url_or_dp")), "liquid_entity_data": .of(s.ints("liquid_entity_data")),
                "ach_tournament_id": .of(s.int("ach_tournament_id")), "show_raw_data": .of(s.bool("show_raw_data")),
                "liquid_template": .of(s.double("liquid_template")), "ach_category_ids": .of(s.ints("ach_category_ids")),
                "shop_category_ids": .of(s.ints("shop_category_ids")), "raffle_id": .of(s.int("raffle_id")),
            ]))
        }
        return .array(out)
    }
}
