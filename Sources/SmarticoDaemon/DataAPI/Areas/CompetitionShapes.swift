import SmarticoProtocol

/// The public shapes of the competition calls, built from the server's wire objects (lenient: a field
/// of another type reads as absent and becomes `null`).
enum CompetitionShapes {
    // Tournament instance status, registration type and registration status (the SDK's enums).
    enum Status {
        static let published: Int64 = 1, register: Int64 = 2, started: Int64 = 3, finished: Int64 = 4
        static let cancelled: Int64 = 5, finalizing: Int64 = 7
    }
    enum RegistrationType {
        static let auto: Int64 = 1, buyInPoints: Int64 = 3, buyInGems: Int64 = 6, buyInDiamonds: Int64 = 7
    }
    static let qualifiedPendingRegistration: Int64 = 6


    static func registrationTypeName(_ type: Int64?) -> String {
        switch type {
        case 1: "AUTO"
        case 2: "OPT_IN"
        case 3: "BUY_IN_POINTS"
        case 4: "MANUAL_APPROVAL"
        case 5: "REQUIRES_QUALIFICATION"
        case 6: "BUY_IN_GEMS"
        case 7: "BUY_IN_DIAMONDS"
        default: "UNKNOWN"
        }
    }

    /// The server sends no status for a user without a registration row, so that is "UNKNOWN".
    static func registrationStatusName(_ status: Int64?) -> String {
        switch status {
        case 0: "NOT_REGISTERED"
        case 1: "REGISTERED"
        case 2: "FINISHED"
        case 3: "PENDING"
        case 4: "CANCELLED"
        case 5: "REGISTERED_PENDING_QUALIFICATION"
        case 6: "QUALIFIED_PENDING_REGISTRATION"
        default: "UNKNOWN"
        }
    }

    /// A prize's activity type (ActivityTypeLimited) by the name the public API documents.
    static func prizeTypeName(_ type: Int64?) -> String? {
        switch type {
        case 8: "TANGIBLE"
        case 12: "POINTS_ADD"
        case 21: "POINTS_DEDUCT"
        case 22: "POINTS_RESET"
        case 16: "MINI_GAME_ATTEMPT"
        case 100: "BONUS"
        case 25: "GEMS_AND_DIAMONDS_ADD"
        case 26: "GEMS_AND_DIAMONDS_DEDUCT"
        case 27: "GEMS_AND_DIAMONDS_RESET"
        default: nil
        }
    }

    /// Whether the user may still register: a qualified user always may; otherwise not registered
    /// yet, room left, not auto-registration, and registration open (or started with late registration).
    static func canRegister(_ t: JSONObject) -> Bool {
        if t.int("tournamentRegistrationStatus") == qualifiedPendingRegistration { return true }
        let max = t.int("playersMaxCount")
        let hasRoom = max == nil || max == 0 || max != t.int("registrationCount")
        let status = t.int("tournamentInstanceStatus")
        let open = status == Status.register || (status == Status.started && t.bool("allowLateRegistration") == true)
        return t.bool("isUserRegistered") != true && hasRoom && t.int("registrationType") != RegistrationType.auto && open
    }

    /// A lobby row (`Tournament`) as `TTournament`; nil when its `tournamentId` is below 1 (the SDK drops those).
    static func tournament(_ r: JSONObject) -> JSONObject? {
        tournamentFields(r, detailed: false)
    }

    private static func tournamentFields(_ r: JSONObject, detailed: Bool) -> JSONObject? {
        guard let templateID = r.double("tournamentId"), templateID >= 1 else { return nil }
        let meta = r.object("publicMeta")
        let status = r.int("tournamentInstanceStatus")
        let type = r.int("registrationType")
        func statusIn(_ set: Set<Int64>) -> Bool { status.map(set.contains) ?? false }
        let ribbon = meta?.string("label_tag") == "custom" ? meta?.string("custom_label_tag") : meta?.string("label_tag")
        var o: JSONObject = [
            "instance_id": .of(r.int("tournamentInstanceId")),
            "tournament_id": .of(Int64(templateID)),
            "name": .of(meta?.string("name")),
            "description": .of(meta?.string("description")),
            "image1": .of(meta?.string("image_url")),
            "image2": .of(meta?.string("image_url2")),
            "image2_mobile": .of(meta?.string("image_url2_mobile")),
            "prize_pool_short": .of(meta?.string("prize_pool_short")),
            "custom_price_text": .of(meta?.string("custom_price_text")),
            "segment_dont_match_message": .of(meta?.string("segment_dont_match_message")),
            "custom_section_id": .of(meta?.int("custom_section_id")),
            "only_in_custom_section": .of(meta?.bool("only_in_custom_section")),
            "custom_data": .customData(meta?.string("custom_data").map(JSONValue.string)),
            "is_featured": .of(meta?.bool("featured")),
            "ribbon": .of(ribbon),
            "priority": .of(meta?.int("position")),
        ]
        if !detailed {
            o["me"] = r.object("tournamentPlayer").map { .object(me($0)) } ?? .null
            o["prizes"] = prizes(r.object("prizeStructure")?["prizes"], typeNames: false)
        }
        let rest: JSONObject = [
            "start_time": .of(r.int("startTimeTs")),
            "end_time": .of(r.int("endTimeTs")),
            "registration_type": .string(registrationTypeName(type)),
            "registration_count": .of(r.int("registrationCount")),
            "is_user_registered": .of(r.bool("isUserRegistered")),
            "players_min_count": .of(r.int("playersMinCount")),
            "players_max_count": .of(r.int("playersMaxCount")),
            "registration_status": .string(registrationStatusName(r.int("tournamentRegistrationStatus"))),
            "duration_ms": .of(r.int("durationMs")),
            "registration_cost_points": type == RegistrationType.buyInPoints ? .of(r.int("buyInAmount")) : .null,
            "registration_cost_gems": type == RegistrationType.buyInGems ? .of(r.double("buyInAmount")) : .null,
            "registration_cost_diamonds": type == RegistrationType.buyInDiamonds ? .of(r.double("buyInAmount")) : .null,
            "is_active": .bool(statusIn([Status.published, Status.register, Status.started])),
            "is_can_register": .bool(canRegister(r)),
            "is_cancelled": .bool(status == Status.cancelled),
            "is_finished": .bool(statusIn([Status.finished, Status.cancelled, Status.finalizing])),
            "is_in_progress": .bool(status == Status.started),
            "is_upcoming": .bool(statusIn([Status.published, Status.register])),
            "min_scores_win": .of(r.double("minScoreToWin")),
            "hide_leaderboard_min_scores": .of(r.bool("hideLeaderboardsMinScores")),
            "total_scores": .of(r.double("totalScores")),
            "is_clan_based": .of(r.bool("isClanBased")),
        ]
        for (k, v) in rest { o.append(key: k, value: v) }
        return o
    }

    /// A tournament's prizes with the public field names; not an array of objects → null. The lobby's
    /// keep `type` as its text, as the SDK decodes them; the details' (`TournamentPrize`,
    /// `typeNames`) turn the numeric type into its name.
    static func prizes(_ value: JSONValue?, typeNames: Bool) -> JSONValue {
        guard let items = value?.arrayValue else { return .null }
        var out: [JSONValue] = []
        for item in items {
            guard let p = item.objectValue else { return .null }
            out.append(.object([
                "name": .of(p.string("name")), "description": .of(p.string("description")),
                "image_url": .of(p.string("image_url")), "place_from": .of(p.double("place_from")),
                "place_to": .of(p.double("place_to")),
                "type": .of(typeNames ? prizeTypeName(p.int("type")) : p.string("type")), "points": .of(p.int("points")),
            ]))
        }
        return .array(out)
    }

    /// `TournamentPlayer` → `TTournamentMe`.
    static func me(_ p: JSONObject) -> JSONObject { tournamentPlayer(p, withIsMe: false) }

    /// `TournamentPlayer` → `TTournamentPlayer`: `TTournamentMe` with `is_me` after `scores`.
    static func player(_ p: JSONObject) -> JSONObject { tournamentPlayer(p, withIsMe: true) }

    private static func tournamentPlayer(_ p: JSONObject, withIsMe: Bool) -> JSONObject {
        var o: JSONObject = [
            "public_username": .of(p.string("userAltName")),
            "avatar_url": .url(p.string("avatar_url")),
            "position": .of(p.int("position")),
            "scores": .of(p.double("scores")),
        ]
        if withIsMe { o.append(key: "is_me", value: .of(p.bool("isMe"))) }
        o.append(key: "user_ext_id", value: .of(p.string("cleanExtUserId")))
        o.append(key: "crm_brand_id", value: .of(p.int("crmBrandId")))
        o.append(key: "user_id", value: .of(p.int("userId")))
        return o
    }

    /// The 520 answer as `TTournamentDetailed`: the lobby half as a list row, then the details.
    static func tournamentDetailed(_ answer: JSONObject, lobby: JSONObject) -> JSONObject? {
        guard var o = tournamentFields(lobby, detailed: true) else { return nil }
        let info = answer.object("tournamentInfo")
        let games: JSONValue = lobby["related_games"]?.arrayValue.map { items in
            .array(items.compactMap(\.objectValue).map { g in
                .object(["ach_game_id": .of(g.int("ach_game_id")), "ext_game_id": .of(g.string("ext_game_id")),
                         "game_public_meta": g.value("game_public_meta")])
            })
        } ?? .null
        o.append(key: "related_games", value: games)
        o.append(key: "players", value: info?["players"]?.arrayValue.map { .array($0.compactMap(\.objectValue).map { .object(player($0)) }) } ?? .null)
        o.append(key: "me", value: answer.object("userPosition").map { .object(me($0)) } ?? .null)
        o.append(key: "prizes", value: prizes(answer.object("prizeStructure")?["prizes"], typeNames: true))
        let clans: JSONValue = answer["clanLeaderboard"]?.arrayValue.map { items in
            .array(items.compactMap(\.objectValue).map { c in
                // The public names, else the wire's (clanId, publicMeta, rank, totalScore, memberCount).
                .object([
                    "clan_id": .of(c.int("clan_id") ?? c.int("clanId")),
                    "public_meta": c.object("public_meta").map(JSONValue.object) ?? c.object("publicMeta").map(JSONValue.object) ?? .null,
                    "position": .of(c.int("position") ?? c.int("rank")),
                    "total_score": .of(c.double("total_score") ?? c.double("totalScore")),
                    "contributing_members": .of(c.double("contributing_members") ?? c.double("memberCount")),
                ])
            })
        } ?? .null
        o.append(key: "clan_leaderboard", value: clans)
        o.append(key: "user_clan_id", value: .of(answer.int("userClanId")))
        o.append(key: "user_position_in_clan", value: .null)
        o.append(key: "user_score_in_clan", value: .null)
        o.append(key: "clan_prize_structure", value: answer["clanPrizes"] ?? .null)
        return o
    }

    // MARK: - Leaderboards

    /// `LeaderBoardDetails` → `LeaderBoardDetailsT`.
    /// `imageDomain`: where avatar ids resolve (``ImageDomain``).
    static func leaderboard(_ b: JSONObject, imageDomain: String) -> JSONObject {
        let meta = b.object("board_public_meta")
        let rewards: JSONValue = b.ints("reward_points").map { points in
            .array(points.enumerated().map { i, p in .object(["place": .number(i + 1), "points": .number(p)]) })
        } ?? .null
        return [
            "board_id": .of(b.int("board_id")),
            "name": .of(meta?.string("name")),
            "description": .of(meta?.string("description")),
            "rules": .of(meta?.string("rules")),
            "period_type_id": .of(b.int("period_type_id")),
            "version_id": .of(b.int("versiod_id")),
            "create_date": .of(b.int("create_date")),
            "rewards": rewards,
            "users": .array(b.objects("positions").map { .object(leaderboardUser($0, isMe: false, imageDomain: imageDomain)) }),
            "me": b.object("userPosition").map { .object(leaderboardUser($0, isMe: true, imageDomain: imageDomain)) } ?? .null,
        ]
    }

    static func leaderboardUser(_ p: JSONObject, isMe: Bool, imageDomain: String) -> JSONObject {
        [
            "public_username": .of(p.string("public_username") ?? p.string("user_alt_name")),
            "avatar_url": .url(p.string("avatar_url") ?? p.string("avatar_id").flatMap { ImageDomain.avatarURL($0, domain: imageDomain) }),
            "level_id": .of(p.int("level_id")),
            "position": .of(p.int("position_in_board")),
            "points": .of(p.int("points_accumulated")),
            "is_me": isMe ? .bool(true) : .of(p.bool("is_me")),
        ]
    }

    /// A server map's entries keyed by id, ids ascending; a member whose name is not an id (a field
    /// the server added to the map) is not an entry.
    static func byNumericKey(_ map: JSONObject) -> [(key: String, value: JSONValue)] {
        map.compactMap { k, v in Int64(k).map { (id: $0, key: k, value: v) } }
            .sorted { $0.id < $1.id }
            .map { (key: $0.key, value: $0.value) }
    }

    // MARK: - Clans

    /// The fields `TClans`' rows and `TClanInfo` share, from a wire clan (`clanInfo` or a `clans`
    /// row): every one `null` when the clan is absent.
    static func clan(_ c: JSONObject?) -> JSONObject {
        [
            "clan_id": .of(c?.int("clan_id")),
            "public_meta": clanMeta(c?.object("public_meta")),
            "member_count": .of(c?.int("member_count")),
            "capacity_limit": .of(c?.double("capacity_limit")),
            "entry_fee_currency_type_id": .of(c?.int("entry_fee_currency_type_id")),
            "entry_fee_amount": .of(c?.double("entry_fee_amount")),
            "rating_position": .of(c?.int("rating_position")),
            "rating_score": .of(c?.double("rating_score")),
        ]
    }

    /// `ClanPublicMeta` as an object of the fields present (name, description, image_url); null when absent.
    static func clanMeta(_ meta: JSONObject?) -> JSONValue {
        guard let meta else { return .null }
        var o = JSONObject()
        for key in ["name", "description", "image_url"] {
            if let v = meta.string(key) { o.append(key: key, value: .string(v)) }
        }
        return .object(o)
    }

    // MARK: - Activity log

    /// `ActivityLogEntry` → `TActivityLog`.
    static func activity(_ e: JSONObject) -> JSONObject {
        let kind = e.int("type")
        let balanceType: Int64 = kind == 1 ? 1 : kind == 2 ? 2 : 0
        let created: Int64? = e.object("create_date")?.int("seconds") ?? e.int("create_date")
        return [
            "create_date": .of(created),
            "user_ext_id": .of(e.string("user_ext_id")),
            "crm_brand_id": .of(e.string("crm_brand_id").flatMap { Int64($0) }),
            "type": .number(balanceType),
            "amount": .of(e.double("amount") ?? e.int("points_collected").map(Double.init)),
            "balance": .of(e.double("balance") ?? e.int("user_points_balance").map(Double.init)),
            "total_ever": .of(e.int("user_points_ever").map(Double.init)),
            "source_type_id": .of(e.int("source_type_id")),
            "activity_type_id": .of(kind),
            "context_value_1": .of(e.double("ctx_1")),
            "meta": e.object("ctx_meta").map(JSONValue.object) ?? .null,
            "source_entity_name": .null,
            "source_entity_id": .null,
            "source_reference_id": .of(e.int("source_ref_id")),
            "source_root_id": .of(e.int("source_root_id")),
            "is_wallet_entry": .null,
        ]
    }
}
