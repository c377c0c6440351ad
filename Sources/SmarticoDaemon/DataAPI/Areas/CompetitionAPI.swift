import SmarticoProtocol
import SmarticoSocketAPI

/// The `api` calls of tournaments, leaderboards, clans, history: their implementations (the specs are in
/// SmarticoSocketAPI's DataAPICatalog). The shapes follow the official SDK's public types (TTournament,
/// TTournamentDetailed, LeaderBoardDetailsT, TClans, TClanInfo, TActivityLog, …); docs/api.md says how
/// each derived field is computed.
enum CompetitionAPI {
    static let implementations: [String: DataAPIRun] = own.merging(CompetitionHistoryAPI.implementations) { a, _ in a }

    private static let own: [String: DataAPIRun] = [
        "tournaments.list": { ctx throws(SocketAPIError) in try await tournamentsList(ctx) },
        "tournaments.info": { ctx throws(SocketAPIError) in try await tournamentInfo(ctx) },
        "tournaments.register": { ctx throws(SocketAPIError) in try await tournamentRegister(ctx) },
        "leaderboards.get": { ctx throws(SocketAPIError) in try await leaderboardGet(ctx) },
        "leaderboards.list": { ctx throws(SocketAPIError) in try await leaderboardList(ctx) },
        "leaderboards.settings": { ctx throws(SocketAPIError) in await leaderboardSettings(ctx) },
        "clans.list": { ctx throws(SocketAPIError) in try await clansList(ctx) },
        "clans.info": { ctx throws(SocketAPIError) in try await clanInfo(ctx) },
        "clans.join": { ctx throws(SocketAPIError) in try await clanJoin(ctx) },
        "clans.tournament_players": { ctx throws(SocketAPIError) in try await clanTournamentPlayers(ctx) },
        "history.activity_log": { ctx throws(SocketAPIError) in try await activityLog(ctx) },
    ]

    // MARK: - Tournaments

    static func tournamentsList(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let answer = try await ctx.request(cid: 517, expect: 518)
        return .array(answer.objects("tournaments").compactMap { CompetitionShapes.tournament($0) }.map(JSONValue.object))
    }

    static func tournamentInfo(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let id = ctx.args.int("tournament_instance_id") ?? 0
        let answer = try await ctx.request(cid: 519, ["tournamentInstanceId": .number(id)], expect: 520)
        guard let lobby = answer.object("tournamentInfo")?.object("tournamentLobbyInfo") else {
            throw SocketAPIError(.serverError, "tournament \(id) not found or no longer active (the answer has no tournamentInfo.tournamentLobbyInfo)")
        }
        guard let detailed = CompetitionShapes.tournamentDetailed(answer, lobby: lobby) else {
            throw SocketAPIError(.serverError, "tournament \(id): its lobby info has no tournamentId ≥ 1")
        }
        return .object(detailed)
    }

    static func tournamentRegister(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let id = ctx.args.int("tournament_instance_id") ?? 0
        guard id != 0 else { throw SocketAPIError(.badRequest, "field \"args.tournament_instance_id\" must not be 0 (missing tournament instance id)") }
        let answer = try await ctx.request(cid: 521, ["tournamentInstanceId": .number(id)], expect: 522)
        return .errResult(answer)
    }

    // MARK: - Leaderboards

    static func leaderboardGet(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let period = ctx.args.int("period_type") ?? 0
        let previous = ctx.args.int("previous_period") ?? 0
        let answer = try await ctx.request(
            cid: 505, ["period_type_id": .number(period), "snapshot_offset": .number(previous), "include_users": true], expect: 506)
        guard let map = answer.object("map") else { return .null }
        // The board of the asked period; else the one whose key sorts first (as text), as the SDK falls back.
        guard let entry = map[String(period)] ?? map.map(\.key).sorted().first.flatMap({ map[$0] }) else { return .null }
        guard let board = entry.objectValue else {
            throw SocketAPIError(.serverError, "the leaderboard of period type \(period) is not an object")
        }
        return .object(CompetitionShapes.leaderboard(board, imageDomain: await ctx.imageDomain()))
    }

    static func leaderboardList(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let answer = try await ctx.request(cid: 505, expect: 506)
        guard let map = answer.object("map") else { return .array([]) }
        let domain = await ctx.imageDomain()
        return .array(CompetitionShapes.byNumericKey(map).compactMap { $0.value.objectValue }.map { .object(CompetitionShapes.leaderboard($0, imageDomain: domain)) })
    }

    static func leaderboardSettings(_ ctx: DataAPIContext) async -> JSONValue {
        var settings: JSONObject?
        if case .string(let text)? = await ctx.labelSetting("GAMIFICATION_UI_SETTINGS_V2"), !text.isEmpty,
           let parsed = (try? JSONValue(parsing: text))?.objectValue, !parsed.isEmpty {
            settings = parsed
        }
        func flag(_ key: String) -> Bool? { settings?[key]?.boolValue }
        return .object([
            "hide_avatars": .bool(flag("hide_avatars_leaderboards") == true),
            "hide_levels": .bool(flag("leaderboard_hide_levels") == true),
            // Hidden unless the operator turned it off: the SDK's deliberate asymmetry.
            "hide_other_points": .bool(flag("leaderboard_hide_other_points") != false),
        ])
    }

    // MARK: - Clans

    static func clansList(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let r = try await ctx.request(cid: 570, expect: 571)
        return .object([
            "clans": .array(r.objects("clans").map { .object(CompetitionShapes.clan($0)) }),
            "user_clan_id": .of(r.int("user_clan_id")),
            "cooldown_until": .of(r.string("cooldown_until")),
            "join_date": .of(r.int("join_date")),
        ])
    }

    static func clanInfo(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let id = ctx.args.int("clan_id") ?? 0
        let r = try await ctx.request(cid: 572, ["clan_id": .number(id)], expect: 573)
        let c = r.object("clanInfo")
        let domain = await ctx.imageDomain()
        let members: [JSONValue] = (c?.objects("members") ?? []).map { m in
            .object([
                "user_id": .of(m.int("user_id")),
                "public_username": .of(m.string("public_username")),
                "avatar_id": .of(m.string("avatar_id")),
                "avatar_real_id": .of(m.int("avatar_real_id")),
                "avatar_url": .url(m.string("avatar_id").flatMap { ImageDomain.avatarURL($0, domain: domain) }),
                "position": .of(m.int("position")),
                "contribution_score": .of(m.double("contribution_score")),
                "is_me": .of(m.bool("is_me")),
                "clean_ext_user_id": .of(m.string("clean_ext_user_id")),
            ])
        }
        var info = CompetitionShapes.clan(c)
        info.append(key: "cooldown_until", value: .of(c?.string("cooldown_until")))
        info.append(key: "members", value: .array(members))
        return .object(info)
    }

    static func clanJoin(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let id = ctx.args.int("clan_id") ?? 0
        let r = try await ctx.request(cid: 574, ["clan_id": .number(id), "join_source_id": 0], expect: 575)
        return .object(["errCode": .number(r.int("errCode") ?? 0), "errMsg": .string(r.string("errMsg") ?? "")])
    }

    static func clanTournamentPlayers(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let tournament = ctx.args.int("tournament_instance_id") ?? 0
        let clan = ctx.args.int("clan_id") ?? 0
        let r = try await ctx.request(cid: 576, ["tournament_instance_id": .number(tournament), "clan_id": .number(clan)], expect: 577)
        let players: [JSONValue] = r.objects("players").map { p in
            .object([
                "user_id": .of(p.double("userId")),
                "clean_ext_user_id": .of(p.string("cleanExtUserId")),
                "public_username": .of(p.string("userAltName")),
                "avatar_id": .of(p.string("avatar_id")),
                "avatar_real_id": .of(p.int("avatar_real_id")),
                "avatar_url": .url(p.string("avatar_url")),
                "position": .of(p.int("position")),
                "scores": .of(p.double("scores")),
                "is_me": .of(p.bool("isMe")),
            ])
        }
        return .object(["tournament_instance_id": .of(r.int("tournament_instance_id")), "players": .array(players)])
    }

    // MARK: - History

    static func activityLog(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let from = ctx.args.int("from") ?? 0
        let to = ctx.args.int("to") ?? 0
        var payload: JSONObject = [
            "startTimeSeconds": .number(ctx.args.int("start_time_seconds") ?? 0),
            "endTimeSeconds": .number(ctx.args.int("end_time_seconds") ?? 0),
            "limit": .number(to - from > 50 ? 50 : to - from),
            "offset": .number(from),
        ]
        for (arg, key) in [("types", "types"), ("src_types", "src_types")] {
            guard let text = ctx.args.string(arg) else { continue }
            var ids: [JSONValue] = []
            for part in text.split(separator: ",") {
                let trimmed = part.filter { $0 != " " }
                guard let id = Int64(trimmed) else {
                    throw SocketAPIError(.badRequest, "field \"args.\(arg)\" must be integers separated by commas, got \"\(text.prefix(64))\"")
                }
                ids.append(.number(id))
            }
            payload[key] = .array(ids)
        }
        let r = try await ctx.request(cid: 545, payload, expect: 546)
        return .array(r.objects("logHistory").map { .object(CompetitionShapes.activity($0)) })
    }
}
