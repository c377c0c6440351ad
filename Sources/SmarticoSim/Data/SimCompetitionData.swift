import SmarticoProtocol

/// The simulated data API's tournaments, leaderboards, clans, history: one user's state and the routes that read and change it.
///
/// The tournament lobby (517) holds ten instances, one per branch of the SDK's derived flags:
/// registration open (opt-in, a points buy-in, one needing more points than the user has, one full),
/// qualified-pending-registration, published (gems and diamonds buy-ins), running (late registration
/// allowed, the user registered), a running clan tournament, finished, cancelled. Registering (521)
/// changes the next lobby and details; refusals carry the SDK's error codes.
public struct SimCompetitionData: Sendable {
    /// Instances the user registered in through 521 (besides those registered in the sample data).
    public var registered: Set<Int64> = []
    /// The user's clan (574 changes it); nil: clanless.
    public var clanID: Int64? = 12
    /// When the user joined their clan, epoch ms; nil: not set yet (the sample's join is a week ago).
    public var clanJoinedAt: Int64?

    public init() {}

    // Refusal codes of 521 (the SDK's registerInTournament documents them).
    static let notEnoughBalance: Int64 = 30002
    static let registrationClosed: Int64 = 30003
    static let alreadyRegistered: Int64 = 30004
    static let tournamentFull: Int64 = 30008

    static let routes: [SimDataRoute] = [
        SimDataRoute(517, 518) { _, data, env in ["tournaments": .array(lobby(data, env).map(JSONValue.object))] },
        SimDataRoute(519, 520) { request, data, env in details(request, data, env) },
        SimDataRoute(521, 522) { request, data, env in register(request, &data, env) },
        SimDataRoute(505, 506) { request, data, env in leaderboards(request, data, env) },
        SimDataRoute(570, 571) { _, data, env in clanList(data, env) },
        SimDataRoute(572, 573) { request, data, env in clanInfo(request, data, env) },
        SimDataRoute(574, 575) { request, data, env in joinClan(request, &data, env) },
        SimDataRoute(576, 577) { request, data, env in clanTournamentPlayers(request, data, env) },
        SimDataRoute(545, 546) { request, data, env in activityLog(request, data, env) },
    ] + historyRoutes

    // MARK: - Tournaments

    /// One sample tournament: what the lobby shows before the user's own registration is applied.
    struct Sample {
        var instance: Int64
        var name: String
        var status: Int64
        var registrationType: Int64
        var buyIn: Double?
        var count: Int64
        var max: Int64
        var startOffsetMs: Int64
        var durationMs: Int64
        var registeredInSample = false
        var registrationStatus: Int64?
        var lateRegistration = false
        var clanBased = false
        var labelTag: String?
        var featured = false
    }

    static let hour: Int64 = 3_600_000

    static let samples: [Sample] = [
        Sample(instance: 3001, name: "Daily Slots Sprint", status: 2, registrationType: 2, count: 41, max: 100,
               startOffsetMs: 1 * hour, durationMs: 2 * hour, labelTag: "hot", featured: true),
        Sample(instance: 3002, name: "Weekend Points Cup", status: 2, registrationType: 3, buyIn: 1000, count: 12, max: 0,
               startOffsetMs: 5 * hour, durationMs: 48 * hour, labelTag: "custom"),
        Sample(instance: 3003, name: "High Roller Buy-in", status: 2, registrationType: 3, buyIn: 20000, count: 3, max: 20,
               startOffsetMs: 6 * hour, durationMs: 4 * hour),
        Sample(instance: 3004, name: "Full House", status: 2, registrationType: 2, count: 50, max: 50,
               startOffsetMs: 2 * hour, durationMs: 2 * hour),
        Sample(instance: 3005, name: "Qualifier Final", status: 2, registrationType: 5, count: 8, max: 16,
               startOffsetMs: 3 * hour, durationMs: 1 * hour, registrationStatus: 6),
        Sample(instance: 3006, name: "Gem Rush", status: 1, registrationType: 6, buyIn: 5, count: 0, max: 0,
               startOffsetMs: 24 * hour, durationMs: 24 * hour, labelTag: "new"),
        Sample(instance: 3007, name: "Diamond Invitational", status: 1, registrationType: 7, buyIn: 2, count: 0, max: 10,
               startOffsetMs: 48 * hour, durationMs: 24 * hour, labelTag: "vip"),
        Sample(instance: 3008, name: "Running Race", status: 3, registrationType: 2, count: 27, max: 0,
               startOffsetMs: -1 * hour, durationMs: 3 * hour, registeredInSample: true, registrationStatus: 1, lateRegistration: true),
        Sample(instance: 3009, name: "Clan Clash", status: 3, registrationType: 1, count: 60, max: 0,
               startOffsetMs: -2 * hour, durationMs: 24 * hour, registeredInSample: true, registrationStatus: 1, clanBased: true),
        Sample(instance: 3010, name: "Last Week's Championship", status: 4, registrationType: 2, count: 88, max: 100,
               startOffsetMs: -7 * 24 * hour, durationMs: 24 * hour, registeredInSample: true, registrationStatus: 2),
        Sample(instance: 3011, name: "Cancelled Cup", status: 5, registrationType: 2, count: 1, max: 10,
               startOffsetMs: -3 * 24 * hour, durationMs: 24 * hour),
    ]

    func isRegistered(_ s: Sample) -> Bool { s.registeredInSample || registered.contains(s.instance) }

    /// The other players of an instance: position, alias, scores.
    static func others(_ s: Sample) -> [(Int64, String, Double)] {
        guard s.status >= 3 else { return [] }
        return [(1, "LuckyLuke", 1520), (2, "SpinQueen", 1210.5), (4, "NightOwl", 640)]
    }

    /// The user's own row, when registered.
    func me(_ s: Sample, _ env: SimDataEnvironment) -> JSONObject? {
        guard isRegistered(s) else { return nil }
        let started = s.status >= 3 && s.registeredInSample
        return ["userAltName": .string(env.user), "cleanExtUserId": .string(env.user), "crmBrandId": 1, "userId": 900_001,
                "position": .number(started ? 3 : 0), "scores": .number(started ? 880 : 0), "isMe": true,
                "avatar_id": "av-me", "avatar_url": "https://img.smr.vc/avatar/av-me"]
    }

    static func prizes(_ s: Sample) -> JSONObject {
        ["prizes": [
            ["name": "1500 points", "description": "First place", "image_url": "https://img.smr.vc/prize/gold.png",
             "place_from": 1, "place_to": 1, "type": 12, "points": 1500],
            ["name": "Headphones", "description": "Second and third", "image_url": "https://img.smr.vc/prize/phones.png",
             "place_from": 2, "place_to": 3, "type": 8],
            ["name": "10 gems", "description": "Places 4 to 10", "place_from": 4, "place_to": 10, "type": 25, "gems": 10],
        ]]
    }

    /// A lobby row (`Tournament` wire shape), with the user's registration applied.
    func tournament(_ s: Sample, _ env: SimDataEnvironment) -> JSONObject {
        let registeredNow = registered.contains(s.instance) && !s.registeredInSample
        let start = env.now + s.startOffsetMs
        var meta: JSONObject = [
            "name": .string(s.name), "description": .string("<p>\(s.name): play the listed games to score.</p>"),
            "image_url": .string("https://img.smr.vc/t/\(s.instance)-1.png"),
            "image_url2": .string("https://img.smr.vc/t/\(s.instance)-2.png"),
            "image_url2_mobile": .string("https://img.smr.vc/t/\(s.instance)-2m.png"),
            "prize_pool_short": "3 prizes", "segment_dont_match_message": "This tournament is for VIP players",
            "featured": .bool(s.featured), "position": .number(s.instance - 3000),
            "custom_data": .string(#"{"theme":"t\#(s.instance)"}"#),
        ]
        if let tag = s.labelTag { meta["label_tag"] = .string(tag) }
        if s.labelTag == "custom" { meta["custom_label_tag"] = "https://img.smr.vc/ribbon/cup.png" }
        if let buyIn = s.buyIn { meta["custom_price_text"] = .string("Entry: \(Int64(buyIn))") }
        var t: JSONObject = [
            "tournamentId": .number(s.instance - 2700), "tournamentInstanceId": .number(s.instance), "tournamentType": 1,
            "publicMeta": .object(meta),
            "startTime": .string("start+\(s.startOffsetMs / Self.hour)h"), "endTime": .string("start+\((s.startOffsetMs + s.durationMs) / Self.hour)h"),
            "startTimeTs": .number(start), "endTimeTs": .number(start + s.durationMs),
            "registrationCount": .number(s.count + (registeredNow ? 1 : 0)),
            "registrationType": .number(s.registrationType), "tournamentInstanceStatus": .number(s.status),
            "isUserRegistered": .bool(isRegistered(s)), "allowLateRegistration": .bool(s.lateRegistration),
            "playersMinCount": 2, "playersMaxCount": .number(s.max), "durationMs": .number(s.durationMs),
            "prizeStructure": .object(Self.prizes(s)),
            "minScoreToWin": 100, "hideLeaderboardsMinScores": false,
            "totalScores": JSONValue(floatLiteral: Self.others(s).reduce(0) { $0 + $1.2 } + (s.registeredInSample && s.status >= 3 ? 880 : 0)),
            "isClanBased": .bool(s.clanBased),
        ]
        if let buyIn = s.buyIn { t["buyInAmount"] = JSONValue(floatLiteral: buyIn) }
        if registeredNow { t["tournamentRegistrationStatus"] = 1 } else if let rs = s.registrationStatus { t["tournamentRegistrationStatus"] = .number(rs) }
        if let me = me(s, env) { t["tournamentPlayer"] = .object(me) }
        return t
    }

    static func lobby(_ data: SimUserData, _ env: SimDataEnvironment) -> [JSONObject] {
        samples.map { data.competition.tournament($0, env) }
    }

    static func details(_ request: JSONObject, _ data: SimUserData, _ env: SimDataEnvironment) -> JSONObject {
        let id = request["tournamentInstanceId"]?.lenientInt64 ?? 0
        guard let s = samples.first(where: { $0.instance == id }) else {
            return ["tournamentInfo": .null]
        }
        let c = data.competition
        var players: [JSONValue] = others(s).map { pos, name, scores in
            .object(["userAltName": .string(name), "cleanExtUserId": .string(name.lowercased()), "crmBrandId": 1,
                     "userId": .number(800_000 + pos), "position": .number(pos), "scores": JSONValue(floatLiteral: scores),
                     "isMe": false, "avatar_id": .string("av-\(pos)")])
        }
        let me = c.me(s, env)
        if let me { players.append(.object(me)) }
        var o: JSONObject = [
            "tournamentInfo": ["tournamentLobbyInfo": .object(c.tournament(s, env)), "players": .array(players)],
            "prizeStructure": .object(prizes(s)),
        ]
        if let me { o["userPosition"] = .object(me) }
        if s.clanBased {
            o["clanLeaderboard"] = [
                ["clanId": 12, "publicMeta": ["name": "Night Owls", "image_url": "https://img.smr.vc/clan/12.png"],
                 "rank": 1, "totalScore": 5400, "memberCount": 3],
                ["clanId": 11, "publicMeta": ["name": "Red Dragons"], "rank": 2, "totalScore": 4100.5, "memberCount": 2],
            ]
            o["userClanId"] = c.clanID.map { .number($0) } ?? .null
            o["clanPrizes"] = [["place_from": 1, "place_to": 1, "name": "Clan chest", "points": 5000]]
        }
        return o
    }

    static func register(_ request: JSONObject, _ data: inout SimUserData, _ env: SimDataEnvironment) -> JSONObject {
        let id = request["tournamentInstanceId"]?.lenientInt64 ?? 0
        guard let s = samples.first(where: { $0.instance == id }) else {
            return ["errCode": .number(registrationClosed), "errMsg": .string("tournament instance \(id) is not open")]
        }
        if data.competition.isRegistered(s) {
            return ["errCode": .number(alreadyRegistered), "errMsg": "already registered"]
        }
        let open = s.status == 2 || (s.status == 3 && s.lateRegistration)
        guard open, s.registrationType != 1 else {
            return ["errCode": .number(registrationClosed), "errMsg": "registration is closed"]
        }
        if s.max > 0 && s.count >= s.max {
            return ["errCode": .number(tournamentFull), "errMsg": "the tournament is full"]
        }
        let cost = Int64(s.buyIn ?? 0)
        switch s.registrationType {
        case 3:
            guard data.points >= cost else {
                return ["errCode": .number(notEnoughBalance), "errMsg": .string("not enough points: \(data.points) < \(cost)")]
            }
            data.points -= cost
        case 6:
            guard data.gems >= cost else { return ["errCode": .number(notEnoughBalance), "errMsg": "not enough gems"] }
            data.gems -= cost
        case 7:
            guard data.diamonds >= cost else { return ["errCode": .number(notEnoughBalance), "errMsg": "not enough diamonds"] }
            data.diamonds -= cost
        default:
            break
        }
        data.competition.registered.insert(id)
        return [:]
    }

    // MARK: - Leaderboards

    /// The running period (snapshot_offset 0) of each period type, or an earlier finalized snapshot.
    static func leaderboards(_ request: JSONObject, _ data: SimUserData, _ env: SimDataEnvironment) -> JSONObject {
        let include = request["include_users"]?.boolValue == true
        let offset = request["snapshot_offset"]?.lenientInt64 ?? 0
        let asked = request["period_type_id"]?.lenientInt64
        let names: [(Int64, String)] = [(1, "Daily"), (2, "Weekly"), (3, "Monthly")]
        var map = JSONObject()
        for (period, name) in names where asked == nil || asked == period {
            var board: JSONObject = [
                "board_id": .number(40 + period), "period_type_id": .number(period),
                "create_date": .number(offset == 0 ? 0 : env.now - offset * 86_400_000),
                "versiod_id": .number(offset == 0 ? 0 : 700 + period * 10 + offset),
                "reward_points": .array([1000, 500, 250].map { .number($0 * period) }),
                "board_public_meta": .object(["name": .string("\(name) leaderboard"), "description": .string("Top players of the \(name.lowercased()) period"),
                                              "rules": "Points collected in the period count."]),
            ]
            if include {
                let scale = period * (offset + 1)
                board["positions"] = .array([
                    ["public_username": "LuckyLuke", "position_in_board": 1, "points_accumulated": .number(900 * scale), "level_id": 3,
                     "avatar_id": "av-1", "is_me": false],
                    ["user_alt_name": "SpinQueen", "position_in_board": 2, "points_accumulated": .number(700 * scale), "level_id": 2,
                     "avatar_url": "https://cdn.example/avatars/q.png", "is_me": false],
                    ["public_username": .string(env.user), "position_in_board": 3, "points_accumulated": .number(500 * scale), "level_id": 2,
                     "avatar_id": "https://img.smr.vc/avatar/av-me", "is_me": true],
                ])
                board["userPosition"] = ["public_username": .string(env.user), "position_in_board": 3,
                                         "points_accumulated": .number(500 * scale), "level_id": 2, "avatar_id": "av-me"]
            }
            map[String(period)] = .object(board)
        }
        return ["map": .object(map)]
    }

    // MARK: - Clans

    struct ClanSample {
        var id: Int64
        var name: String
        var members: Int64
        var capacity: Int64
        var feeType: Int64
        var fee: Double
        var position: Int64
        var score: Double
    }

    static let clans: [ClanSample] = [
        ClanSample(id: 11, name: "Red Dragons", members: 2, capacity: 30, feeType: 3, fee: 0, position: 2, score: 4100.5),
        ClanSample(id: 12, name: "Night Owls", members: 3, capacity: 30, feeType: 0, fee: 200, position: 1, score: 5400),
        ClanSample(id: 13, name: "Tiny Club", members: 5, capacity: 5, feeType: 1, fee: 3, position: 3, score: 900),
    ]

    func memberCount(_ c: SimCompetitionData.ClanSample) -> Int64 {
        c.members + (clanID == c.id && c.id != 12 ? 1 : 0) - (clanID != 12 && c.id == 12 ? 1 : 0)
    }

    func clan(_ c: ClanSample) -> JSONObject {
        var meta: JSONObject = ["name": .string(c.name), "image_url": .string("https://img.smr.vc/clan/\(c.id).png")]
        if c.id != 13 { meta["description"] = .string("\(c.name) play together") }
        return ["clan_id": .number(c.id), "public_meta": .object(meta), "member_count": .number(memberCount(c)),
                "capacity_limit": .number(c.capacity), "entry_fee_currency_type_id": .number(c.feeType),
                "entry_fee_amount": JSONValue(floatLiteral: c.fee), "rating_position": .number(c.position),
                "rating_score": JSONValue(floatLiteral: c.score)]
    }

    static func clanList(_ data: SimUserData, _ env: SimDataEnvironment) -> JSONObject {
        let c = data.competition
        return ["clans": .array(clans.map { .object(c.clan($0)) }),
                "user_clan_id": c.clanID.map { .number($0) } ?? .null,
                "cooldown_until": c.clanJoinedAt == nil ? .null : "29/03/2030 10:00:00",
                "join_date": .number(c.clanJoinedAt ?? env.now - 7 * 24 * hour)]
    }

    static func clanInfo(_ request: JSONObject, _ data: SimUserData, _ env: SimDataEnvironment) -> JSONObject {
        let id = request["clan_id"]?.lenientInt64 ?? 0
        guard let sample = clans.first(where: { $0.id == id }) else {
            return ["errCode": 40001, "errMsg": .string("clan \(id) not found")]
        }
        let c = data.competition
        var info = c.clan(sample)
        info["label_id"] = 1
        var members: [JSONValue] = []
        let names = ["LuckyLuke", "SpinQueen", "NightOwl", "Ace", "Blaze", "Comet"]
        let others = Int(c.memberCount(sample)) - (c.clanID == id ? 1 : 0)
        for i in 0..<max(0, others) {
            members.append(.object(["user_id": .number(800_001 + Int64(i)), "public_username": .string(names[i % names.count]),
                                    "avatar_id": .string("av-\(i + 1)"), "avatar_real_id": .number(Int64(i + 1)),
                                    "position": .number(Int64(i + 1)), "contribution_score": .number(Int64(2000 - 300 * i)),
                                    "is_me": false, "clean_ext_user_id": .string(names[i % names.count].lowercased())]))
        }
        if c.clanID == id {
            members.append(.object(["user_id": 900_001, "public_username": .string(env.user), "avatar_id": "https://cdn.example/me.png",
                                    "avatar_real_id": 77, "position": .number(Int64(members.count + 1)), "contribution_score": 150.5,
                                    "is_me": true, "clean_ext_user_id": .string(env.user)]))
        }
        info["members"] = .array(members)
        info["cooldown_until"] = c.clanID == id && c.clanJoinedAt != nil ? "29/03/2030 10:00:00" : .null
        return ["clanInfo": .object(info)]
    }

    static func joinClan(_ request: JSONObject, _ data: inout SimUserData, _ env: SimDataEnvironment) -> JSONObject {
        let id = request["clan_id"]?.lenientInt64 ?? 0
        guard let sample = clans.first(where: { $0.id == id }) else {
            return ["errCode": 40001, "errMsg": .string("clan \(id) not found")]
        }
        if data.competition.clanID == id { return ["errCode": 40002, "errMsg": "already a member of this clan"] }
        if data.competition.memberCount(sample) >= sample.capacity { return ["errCode": 40003, "errMsg": "the clan is full"] }
        if data.competition.clanJoinedAt != nil { return ["errCode": 40004, "errMsg": "clan switch on cooldown"] }
        if sample.feeType == 0 {
            guard data.points >= Int64(sample.fee) else { return ["errCode": 40005, "errMsg": "not enough points for the entry fee"] }
            data.points -= Int64(sample.fee)
        }
        data.competition.clanID = id
        data.competition.clanJoinedAt = env.now
        return [:]
    }

    static func clanTournamentPlayers(_ request: JSONObject, _ data: SimUserData, _ env: SimDataEnvironment) -> JSONObject {
        let tournament = request["tournament_instance_id"]?.lenientInt64 ?? 0
        let clan = request["clan_id"]?.lenientInt64 ?? 0
        guard samples.contains(where: { $0.instance == tournament && $0.clanBased }), clans.contains(where: { $0.id == clan }) else {
            return ["tournament_instance_id": .number(tournament), "players": []]
        }
        var players: [JSONValue] = [
            ["userId": .number(800_000 + clan), "cleanExtUserId": "luckyluke", "userAltName": "LuckyLuke", "avatar_id": "av-1",
             "avatar_real_id": 1, "position": 1, "scores": 2500, "isMe": false, "registration_status": 1, "crmBrandId": 1,
             "avatar_url": "https://img.smr.vc/avatar/av-1"],
            ["userId": .number(800_100 + clan), "cleanExtUserId": "nightowl", "userAltName": "NightOwl", "avatar_id": "av-4",
             "avatar_real_id": 4, "position": 2, "scores": 1750.25, "isMe": false, "registration_status": 1, "crmBrandId": 1],
        ]
        if data.competition.clanID == clan {
            players.append(["userId": 900_001, "cleanExtUserId": .string(env.user), "userAltName": .string(env.user),
                            "position": 3, "scores": 880, "isMe": true, "registration_status": 1, "crmBrandId": 1])
        }
        return ["tournament_instance_id": .number(tournament), "players": .array(players)]
    }

    // MARK: - Activity log

    /// The user's history (newest first): wallet rows of each balance and richer activity rows; the
    /// request's window (epoch seconds), `types`, `offset` and `limit` select from it.
    static func activityLog(_ request: JSONObject, _ data: SimUserData, _ env: SimDataEnvironment) -> JSONObject {
        let nowS = env.now / 1000
        let brand: JSONValue = "1"
        let rows: [JSONObject] = [
            ["create_date": ["seconds": .number(nowS - 600)], "user_ext_id": .string(env.user), "crm_brand_id": brand, "type": 3,
             "ctx_1": 1, "source_type_id": 18, "source_ref_id": 3008, "source_root_id": 308,
             "amount": 150, "balance": .number(data.points), "user_points_balance": .number(data.points),
             "user_points_ever": .number(data.points + 1200), "points_collected": -1,
             "ctx_meta": ["name": "Running Race", "position": 3]],
            ["create_date": .number(nowS - 3600), "user_ext_id": .string(env.user), "crm_brand_id": brand, "type": 1,
             "ctx_1": 1, "source_type_id": 7, "source_ref_id": 51, "amount": 5, "balance": .number(data.gems)],
            ["create_date": ["seconds": .number(nowS - 7200)], "user_ext_id": .string(env.user), "crm_brand_id": brand, "type": 2,
             "ctx_1": 2, "source_type_id": 13, "amount": -1, "balance": .number(data.diamonds)],
            ["create_date": ["seconds": .number(nowS - 86_400)], "user_ext_id": .string(env.user), "crm_brand_id": brand, "type": 3,
             "ctx_1": 1, "source_type_id": 11, "source_ref_id": 801, "points_collected": 300,
             "user_points_balance": .number(data.points - 150), "user_points_ever": .number(data.points + 1050)],
            ["create_date": ["seconds": .number(nowS - 2 * 86_400)], "user_ext_id": .string(env.user), "crm_brand_id": brand, "type": 11,
             "ctx_1": 2, "source_type_id": 11, "source_ref_id": 801, "source_root_id": 80,
             "ctx_meta": ["name": "Play 10 spins", "image_url": "https://img.smr.vc/m/801.png"]],
        ]
        let start = request["startTimeSeconds"]?.lenientInt64 ?? 0
        let end = request["endTimeSeconds"]?.lenientInt64 ?? Int64.max
        let types = request["types"]?.arrayValue.map { Set($0.compactMap(\.lenientInt64)) }
        let offset = Int(max(0, request["offset"]?.lenientInt64 ?? 0))
        let limit = Int(max(0, min(50, request["limit"]?.lenientInt64 ?? 50)))
        let selected = rows.filter { row in
            let at = row["create_date"]?["seconds"]?.lenientInt64 ?? row["create_date"]?.lenientInt64 ?? 0
            guard at >= start, at <= end else { return false }
            return types.map { $0.contains(row["type"]?.lenientInt64 ?? -1) } ?? true
        }
        return ["logHistory": .array(selected.dropFirst(offset).prefix(limit).map(JSONValue.object))]
    }
}

// MARK: - Histories and catalogs (the SDK's HistoryApi)

extension SimCompetitionData {
    static let historyRoutes: [SimDataRoute] = [
        SimDataRoute(716, 717) { request, _, env in
            let all: [JSONObject] = [
                ["template": ["saw_template_id": 5, "saw_template_ui_definition": ["name": "Simulated wheel"]],
                 "saw_template_id": 5, "saw_prize_id": 51, "prize_amount": 10, "client_request_id": "req-2",
                 "is_claimed": false, "create_date_ts": .number(env.now - 60_000)],
                ["saw_template_id": 6, "saw_prize_id": 61, "prize_amount": 2.5, "client_request_id": "req-1",
                 "is_claimed": true, "create_date_ts": .number(env.now - 86_400_000), "acknowledge_date_ts": .number(env.now - 86_000_000)],
            ]
            let template = request["saw_template_id"]?.lenientInt64
            return ["prizes": .array(page(all.filter { template == nil || $0["saw_template_id"]?.lenientInt64 == template }, request).map(JSONValue.object))]
        },
        SimDataRoute(515, 516) { _, _, _ in
            ["categories": [["id": 1, "publicMeta": ["name": "Bonuses", "order": 2]],
                            ["id": 2, "publicMeta": ["name": "Merchandise", "order": 1]]]]
        },
        SimDataRoute(809, 810) { request, _, env in
            let all: [JSONObject] = [
                ["jp_pot_id": 8101, "win_date_ts": .number(env.now - 3_600_000),
                 "winner": ["public_username": "LuckyLuke", "win_amount": 1250.5, "avatar_url": "https://img.smr.vc/avatar/av-1"]],
                ["jp_pot_id": 8100, "win_date_ts": .number(env.now - 7 * 86_400_000),
                 "winner": ["public_username": "SpinQueen", "win_amount": 980]],
            ]
            return ["winners": .array(page(all, request).map(JSONValue.object)),
                    "win_stats": ["total_wins": 2, "highest_win": ["amount": 1250.5, "date_ts": .number(env.now - 3_600_000)],
                                  "last_win": ["amount": 1250.5, "date_ts": .number(env.now - 3_600_000)]]]
        },
        SimDataRoute(811, 812) { _, _, _ in
            ["eligible_games": [
                ["ach_game_id": 901, "ext_game_id": "book-of-sim",
                 "game_public_meta": ["name": "Book of Sim", "link": "https://casino.example/book", "image": "https://img.smr.vc/g/901.png",
                                      "enabled": "true", "game_provider": "SimSoft", "mobile_spec_link": "https://m.casino.example/book"]],
                ["ach_game_id": 902, "ext_game_id": "sim-roulette", "game_public_meta": ["name": "Sim Roulette", "enabled": true]],
            ]]
        },
        SimDataRoute(920, 921) { request, _, env in
            let raffle = request["raffle_id"]?.lenientInt64 ?? 0
            guard raffle == 70 else { return ["won_prizes": [], "total": 0, "offset": 0, "limit": 20] }
            let all: [JSONObject] = [
                ["raf_won_id": 7002, "prize_id": 71, "name": "Weekend trip", "draw_id": 701, "is_claimed": false,
                 "won_date": .number(env.now - 86_400_000)],
                ["raf_won_id": 7001, "prize_id": 72, "name": "100 points", "draw_id": 700, "is_claimed": true,
                 "won_date": .number(env.now - 8 * 86_400_000)],
            ]
            let offset = request["offset"]?.lenientInt64 ?? 0, limit = request["limit"]?.lenientInt64 ?? 20
            return ["user": ["public_username": .string(env.user), "avatar_url": "https://img.smr.vc/avatar/av-me"],
                    "won_prizes": .array(page(all, request).map(JSONValue.object)), "total": 2,
                    "offset": .number(offset), "limit": .number(limit)]
        },
        SimDataRoute(523, 524) { _, _, _ in
            ["customSections": [
                "12": ["menu_name": "Weekly race", "menu_img": "https://img.smr.vc/s/12.png", "section_type_id": 3,
                       "ach_tournament_id": 305, "liquid_entity_data": [2]],
                "4": ["menu_name": "Rules", "section_type_id": 1, "body": "<h1>Rules</h1>"],
                "7": ["menu_name": "Draft", "section_type_id": 0],
            ]]
        },
    ]

    /// `offset`/`limit` of a request applied to rows.
    static func page(_ rows: [JSONObject], _ request: JSONObject) -> [JSONObject] {
        let offset = Int(max(0, request["offset"]?.lenientInt64 ?? 0))
        let limit = Int(max(0, request["limit"]?.lenientInt64 ?? 20))
        return Array(rows.dropFirst(offset).prefix(limit))
    }
}
