import Foundation
import SmarticoProtocol
import Testing

/// The competition calls (tournaments, leaderboards, clans, history) against the simulator's sample data
/// (docs/simulator.md, "Data API: competition"): the SDK's derived fields for every branch the samples
/// cover, and the state the mutating calls change.
@Suite("Data API: competition")
struct CompetitionAPITests {
    /// One daemon and simulator for a test, stopped however the body ends.
    static func withFixture(_ body: (DataAPIFixture) async throws -> Void) async throws {
        let f = try await DataAPIFixture.start()
        do {
            try await body(f)
        } catch {
            await f.stop()
            throw error
        }
        await f.stop()
    }

    static func byInstance(_ list: JSONValue) -> [Int64: JSONObject] {
        Dictionary(list.objects.compactMap { t in t["instance_id"]?.int64Value.map { ($0, t) } }, uniquingKeysWith: { a, _ in a })
    }

    @Test("tournaments.list derives the state flags; register changes list, details and points; refusals carry the SDK's codes")
    func tournaments() async throws {
        try await Self.withFixture { f in

            let list = try await f.call("tournaments.list")
            let t = Self.byInstance(list)
            #expect(t.count == 11)
            // Registration open, opt-in, not registered: the server sends no registration status.
            let open = try #require(t[3001])
            #expect(open["tournament_id"]?.int64Value == 301)
            #expect(open["name"]?.stringValue == "Daily Slots Sprint")
            #expect(open["image1"]?.stringValue == "https://img.smr.vc/t/3001-1.png")
            #expect(open["registration_type"]?.stringValue == "OPT_IN")
            #expect(open["registration_status"]?.stringValue == "UNKNOWN")
            #expect(open["is_can_register"]?.boolValue == true)
            #expect(open["is_upcoming"]?.boolValue == true && open["is_active"]?.boolValue == true)
            #expect(open["is_in_progress"]?.boolValue == false && open["is_finished"]?.boolValue == false)
            #expect(open["ribbon"]?.stringValue == "hot" && open["is_featured"]?.boolValue == true)
            #expect(open["custom_data"]?["theme"]?.stringValue == "t3001")
            #expect(open["registration_cost_points"] == .null && open["me"] == .null)
            #expect(open["registration_count"]?.int64Value == 41)
            // The lobby's prizes keep the wire's numeric type as text (the details name it).
            #expect(open["prizes"]?.objects.first?["type"]?.stringValue == "12")
            #expect(open["prizes"]?.objects.first?["points"]?.int64Value == 1500)
            // A points buy-in with a custom ribbon; the buy-in goes to the field of its currency.
            #expect(t[3002]?["registration_cost_points"]?.int64Value == 1000)
            #expect(t[3002]?["registration_cost_gems"] == .null)
            #expect(t[3002]?["ribbon"]?.stringValue == "https://img.smr.vc/ribbon/cup.png")
            #expect(t[3002]?["custom_price_text"]?.stringValue == "Entry: 1000")
            // Full: no room.
            #expect(t[3004]?["is_can_register"]?.boolValue == false)
            // Qualified but not registered: may register whatever else holds.
            #expect(t[3005]?["registration_status"]?.stringValue == "QUALIFIED_PENDING_REGISTRATION")
            #expect(t[3005]?["registration_type"]?.stringValue == "REQUIRES_QUALIFICATION")
            #expect(t[3005]?["is_can_register"]?.boolValue == true)
            // Published: upcoming and active, but registration is not open yet.
            #expect(t[3006]?["registration_cost_gems"]?.doubleValue == 5)
            #expect(t[3006]?["is_can_register"]?.boolValue == false && t[3006]?["is_upcoming"]?.boolValue == true)
            #expect(t[3007]?["registration_cost_diamonds"]?.doubleValue == 2)
            #expect(t[3007]?["registration_type"]?.stringValue == "BUY_IN_DIAMONDS")
            // Running, the user registered: their row, in progress, cannot register again.
            let running = try #require(t[3008])
            #expect(running["is_in_progress"]?.boolValue == true && running["is_upcoming"]?.boolValue == false)
            #expect(running["is_user_registered"]?.boolValue == true && running["is_can_register"]?.boolValue == false)
            #expect(running["registration_status"]?.stringValue == "REGISTERED")
            #expect(running["me"]?["position"]?.int64Value == 3 && running["me"]?["user_ext_id"]?.stringValue == "alice")
            #expect(running["me"]?["scores"]?.doubleValue == 880 && running["me"]?["crm_brand_id"]?.int64Value == 1)
            #expect(t[3009]?["is_clan_based"]?.boolValue == true && t[3009]?["registration_type"]?.stringValue == "AUTO")
            // Finished and cancelled.
            #expect(t[3010]?["is_finished"]?.boolValue == true && t[3010]?["is_active"]?.boolValue == false)
            #expect(t[3010]?["registration_status"]?.stringValue == "FINISHED")
            #expect(t[3011]?["is_cancelled"]?.boolValue == true && t[3011]?["is_finished"]?.boolValue == true)
            #expect(t[3011]?["is_can_register"]?.boolValue == false)
            let start = try #require(open["start_time"]?.int64Value)
            #expect(open["end_time"]?.int64Value == start + 2 * 3_600_000 && open["duration_ms"]?.int64Value == 2 * 3_600_000)

            // The details of the running clan tournament: players, the user's row, prizes by name, clan standings.
            let clash = try await f.call("tournaments.info", ["tournament_instance_id": 3009])
            #expect(clash["instance_id"]?.int64Value == 3009 && clash["is_clan_based"]?.boolValue == true)
            #expect(clash["players"]?.objects.count == 4)
            #expect(clash["players"]?.objects.first?["public_username"]?.stringValue == "LuckyLuke")
            #expect(clash["players"]?.objects.first?["is_me"]?.boolValue == false)
            #expect(clash["players"]?.objects.last?["is_me"]?.boolValue == true)
            #expect(clash["me"]?["public_username"]?.stringValue == "alice")
            #expect(clash["prizes"]?.objects.compactMap { $0["type"]?.stringValue } == ["POINTS_ADD", "TANGIBLE", "GEMS_AND_DIAMONDS_ADD"])
            let clans = clash["clan_leaderboard"]?.objects ?? []
            #expect(clans.count == 2)
            #expect(clans.first?["clan_id"]?.int64Value == 12 && clans.first?["position"]?.int64Value == 1)
            #expect(clans.first?["total_score"]?.doubleValue == 5400 && clans.first?["contributing_members"]?.doubleValue == 3)
            #expect(clans.first?["public_meta"]?["name"]?.stringValue == "Night Owls")
            #expect(clash["user_clan_id"]?.int64Value == 12)
            #expect(clash["user_position_in_clan"] == .null)
            #expect(clash["clan_prize_structure"]?.arrayValue?.count == 1)
            let unknown = try await f.failure("tournaments.info", ["tournament_instance_id": 9999])
            #expect(unknown["code"]?.stringValue == "server_error")

            // Register in 3001: the next list and details show it.
            let registered = try await f.call("tournaments.register", ["tournament_instance_id": 3001])
            #expect(registered["err_code"]?.int64Value == 0 && registered["err_message"] == .null)
            let after = Self.byInstance(try await f.call("tournaments.list"))
            #expect(after[3001]?["is_user_registered"]?.boolValue == true)
            #expect(after[3001]?["registration_count"]?.int64Value == 42)
            #expect(after[3001]?["registration_status"]?.stringValue == "REGISTERED")
            #expect(after[3001]?["is_can_register"]?.boolValue == false)
            #expect(after[3001]?["me"]?["public_username"]?.stringValue == "alice")
            let info = try await f.call("tournaments.info", ["tournament_instance_id": 3001])
            #expect(info["is_user_registered"]?.boolValue == true)
            #expect(info["players"]?.objects.map { $0["is_me"]?.boolValue } == [true])
            #expect(info["me"]?["user_ext_id"]?.stringValue == "alice")
            let sent = try await f.received(cids: [521])
            #expect(sent.last?["tournamentInstanceId"]?.int64Value == 3001)

            // Refusals: again (30004), full (30008), closed (30003); a points buy-in is paid, one too dear refused (30002).
            for (id, code) in [(3001, 30004), (3004, 30008), (3011, 30003)] as [(Int64, Int64)] {
                let e = try await f.failure("tournaments.register", ["tournament_instance_id": .number(id)])
                #expect(e["code"]?.stringValue == "server_error" && e["errCode"]?.int64Value == code, "instance \(id)")
            }
            #expect(try await f.call("tournaments.register", ["tournament_instance_id": 3002])["err_code"]?.int64Value == 0)
            let dear = try await f.failure("tournaments.register", ["tournament_instance_id": 3003])
            #expect(dear["errCode"]?.int64Value == 30002)
            // The activity log's newest points row carries the balance: 5000 − 1000.
            let now = Int64(Date().timeIntervalSince1970)
            let log = try await f.call("history.activity_log", ["start_time_seconds": .number(now - 3600), "end_time_seconds": .number(now + 60),
                                                                "from": 0, "to": 10, "types": "3"])
            #expect(log.objects.first?["balance"]?.doubleValue == 4000)
            // The id is checked before anything is sent.
            let zero = try await f.failure("tournaments.register", ["tournament_instance_id": 0])
            #expect(zero["code"]?.stringValue == "bad_request")
            #expect(zero["message"]?.stringValue?.contains("tournament_instance_id") == true)
            #expect(try await f.received(cids: [521]).count == 6)
        }
    }

    @Test("leaderboards: one period (current and previous), all boards, the privacy settings; raw answers")
    func leaderboards() async throws {
        try await Self.withFixture { f in

            let weekly = try await f.call("leaderboards.get", ["period_type": 2])
            #expect(weekly["board_id"]?.int64Value == 42 && weekly["period_type_id"]?.int64Value == 2)
            #expect(weekly["name"]?.stringValue == "Weekly leaderboard")
            #expect(weekly["rules"]?.stringValue == "Points collected in the period count.")
            #expect(weekly["version_id"]?.int64Value == 0 && weekly["create_date"]?.int64Value == 0)
            let rewards = weekly["rewards"]?.objects ?? []
            #expect(rewards.map { $0["place"]?.int64Value } == [1, 2, 3])
            #expect(rewards.map { $0["points"]?.int64Value } == [2000, 1000, 500])
            let users = weekly["users"]?.objects ?? []
            #expect(users.count == 3)
            // avatar_id expanded against the image host (INIT's DYNAMIC_IMAGE_DOMAIN: the simulator's
            // pages, ImageDomain); a URL kept; user_alt_name when no public_username.
            #expect(users[0]["avatar_url"]?.stringValue == f.sim.httpURL + "/avatar/av-1")
            #expect(users[0]["points"]?.int64Value == 1800 && users[0]["position"]?.int64Value == 1)
            #expect(users[1]["public_username"]?.stringValue == "SpinQueen")
            #expect(users[1]["avatar_url"]?.stringValue == "https://cdn.example/avatars/q.png")
            #expect(users[2]["avatar_url"]?.stringValue == "https://img.smr.vc/avatar/av-me")
            #expect(users[2]["is_me"]?.boolValue == true && users[0]["is_me"]?.boolValue == false)
            // `me` is the user by definition, though the wire row has no is_me.
            #expect(weekly["me"]?["is_me"]?.boolValue == true && weekly["me"]?["position"]?.int64Value == 3)
            #expect(weekly["me"]?["level_id"]?.int64Value == 2)

            let previous = try await f.call("leaderboards.get", ["period_type": 2, "previous_period": 1])
            #expect(previous["version_id"]?.int64Value == 721)
            #expect((previous["create_date"]?.int64Value ?? 0) > 0)
            #expect(previous["me"]?["points"]?.int64Value == 2000)
            let sent = try await f.received(cids: [505])
            #expect(sent.last?["period_type_id"]?.int64Value == 2 && sent.last?["snapshot_offset"]?.int64Value == 1)
            #expect(sent.last?["include_users"]?.boolValue == true)
            // No board for the period: null.
            #expect(try await f.call("leaderboards.get", ["period_type": 9]) == .null)

            let all = try await f.call("leaderboards.list")
            #expect(all.objects.map { $0["period_type_id"]?.int64Value } == [1, 2, 3])
            #expect(all.objects.allSatisfy { $0["users"]?.arrayValue?.isEmpty == true && $0["me"] == .null })
            #expect(all.objects.last?["rewards"]?.objects.first?["points"]?.int64Value == 3000)

            // The simulator's label sets hide_avatars, leaves leaderboard_hide_other_points unset (→ hidden).
            let settings = try await f.call("leaderboards.settings")
            #expect(settings["hide_avatars"]?.boolValue == true)
            #expect(settings["hide_levels"]?.boolValue == false)
            #expect(settings["hide_other_points"]?.boolValue == true)

            let raw = try await f.call("tournaments.list", raw: true)
            #expect(raw["cid"]?.int64Value == 518)
            #expect(raw["tournaments"]?.objects.first?["tournamentInstanceId"]?.int64Value == 3001)
            #expect(raw["tournaments"]?.objects.first?["publicMeta"]?["label_tag"]?.stringValue == "hot")
            let rawBoards = try await f.call("leaderboards.list", raw: true)
            #expect(rawBoards["map"]?["2"]?["versiod_id"]?.int64Value == 0)
        }
    }

    @Test("clans: list, info, join (the list shows the new clan and its cooldown), tournament players; activity log rows")
    func clansAndHistory() async throws {
        try await Self.withFixture { f in

            let list = try await f.call("clans.list")
            let clans = list["clans"]?.objects ?? []
            #expect(clans.map { $0["clan_id"]?.int64Value } == [11, 12, 13])
            #expect(list["user_clan_id"]?.int64Value == 12 && list["cooldown_until"] == .null)
            #expect(list["join_date"]?.int64Value != nil)
            #expect(clans[1]["public_meta"]?["name"]?.stringValue == "Night Owls")
            #expect(clans[1]["entry_fee_amount"]?.doubleValue == 200 && clans[1]["rating_position"]?.int64Value == 1)
            // The meta holds the fields present only.
            #expect(clans[2]["public_meta"]?.objectValue?.map(\.key).sorted() == ["image_url", "name"])
            #expect(clans[1]["member_count"]?.int64Value == 3)

            let info = try await f.call("clans.info", ["clan_id": 12])
            let members = info["members"]?.objects ?? []
            #expect(info["clan_id"]?.int64Value == 12 && members.count == 3)
            #expect(members.first?["avatar_url"]?.stringValue == f.sim.httpURL + "/avatar/av-1")
            #expect(members.last?["is_me"]?.boolValue == true)
            #expect(members.last?["avatar_url"]?.stringValue == "https://cdn.example/me.png")
            #expect(members.last?["contribution_score"]?.doubleValue == 150.5)
            #expect(members.last?["clean_ext_user_id"]?.stringValue == "alice")

            let joined = try await f.call("clans.join", ["clan_id": 11])
            #expect(joined["errCode"]?.int64Value == 0 && joined["errMsg"]?.stringValue == "")
            #expect(try await f.received(cids: [574]).last?["join_source_id"]?.int64Value == 0)
            let after = try await f.call("clans.list")
            #expect(after["user_clan_id"]?.int64Value == 11)
            #expect(after["cooldown_until"]?.stringValue == "29/03/2030 10:00:00")
            #expect(after["clans"]?.objects.map { $0["member_count"]?.int64Value } == [3, 2, 5])
            let again = try await f.failure("clans.join", ["clan_id": 12])
            #expect(again["code"]?.stringValue == "server_error" && again["errCode"]?.int64Value == 40004)

            let players = try await f.call("clans.tournament_players", ["tournament_instance_id": 3009, "clan_id": 11])
            #expect(players["tournament_instance_id"]?.int64Value == 3009)
            let rows = players["players"]?.objects ?? []
            #expect(rows.count == 3)
            #expect(rows.first?["user_id"]?.int64Value == 800_011 && rows.first?["public_username"]?.stringValue == "LuckyLuke")
            #expect(rows.first?["avatar_url"]?.stringValue == "https://img.smr.vc/avatar/av-1")
            #expect(rows[1]["avatar_url"] == .null && rows[1]["scores"]?.doubleValue == 1750.25)
            #expect(rows.last?["is_me"]?.boolValue == true && rows.last?["clean_ext_user_id"]?.stringValue == "alice")

            // The activity log: a page larger than 50 is sent as 50; the types filter is sent as numbers.
            let now = Int64(Date().timeIntervalSince1970)
            let log = try await f.call("history.activity_log", ["start_time_seconds": .number(now - 3 * 86_400),
                                                                "end_time_seconds": .number(now + 60),
                                                                "from": 0, "to": 120, "types": "3, 1"])
            let sent = try #require(try await f.received(cids: [545]).last)
            #expect(sent["limit"]?.int64Value == 50 && sent["offset"]?.int64Value == 0)
            #expect(sent["types"]?.arrayValue?.compactMap(\.int64Value) == [3, 1] && sent["src_types"] == nil)
            let entries = log.objects
            #expect(entries.count == 3)
            // A points row: balance type 0, its create_date from {seconds}, the after-balance, the total ever.
            #expect(entries[0]["type"]?.int64Value == 0 && entries[0]["activity_type_id"]?.int64Value == 3)
            let created = entries[0]["create_date"]?.int64Value ?? 0
            #expect(abs(created - (now - 600)) <= 5)
            #expect(entries[0]["amount"]?.doubleValue == 150 && entries[0]["balance"]?.doubleValue == 5000)
            #expect(entries[0]["total_ever"]?.doubleValue == 6200 && entries[0]["crm_brand_id"]?.int64Value == 1)
            #expect(entries[0]["meta"]?["name"]?.stringValue == "Running Race")
            #expect(entries[0]["source_reference_id"]?.int64Value == 3008 && entries[0]["source_root_id"]?.int64Value == 308)
            #expect(entries[0]["source_entity_name"] == .null && entries[0]["is_wallet_entry"] == .null)
            // A gems row: balance type 1, create_date a plain number.
            #expect(entries[1]["type"]?.int64Value == 1 && entries[1]["amount"]?.doubleValue == 5)
            #expect(abs((entries[1]["create_date"]?.int64Value ?? 0) - (now - 3600)) <= 5)
            // No amount on the wire: points_collected; no balance: user_points_balance.
            #expect(entries[2]["amount"]?.doubleValue == 300 && entries[2]["balance"]?.doubleValue == 4850)
            let bad = try await f.failure("history.activity_log", ["start_time_seconds": 0, "end_time_seconds": 1, "from": 0, "to": 1, "types": "3,x"])
            #expect(bad["code"]?.stringValue == "bad_request")
        }
    }

    @Test("history: mini-game prizes, store categories, jackpot winners and stats, eligible games, raffle prizes, custom sections")
    func histories() async throws {
        try await Self.withFixture { f in
            let spins = try await f.call("history.mini_games", ["limit": 1])
            #expect(spins.objects.count == 1)
            #expect(spins.objects.first?["saw_prize_id"]?.int64Value == 51 && spins.objects.first?["is_claimed"]?.boolValue == false)
            #expect(spins.objects.first?["template"]?["saw_template_id"]?.int64Value == 5)
            #expect(spins.objects.first?["acknowledge_date_ts"] == .null)
            let sent = try #require(try await f.received(cids: [716]).last)
            #expect(sent["limit"]?.int64Value == 1 && sent["offset"]?.int64Value == 0 && sent["saw_template_id"] == nil)
            let six = try await f.call("history.mini_games", ["saw_template_id": 6])
            #expect(six.objects.map { $0["prize_amount"]?.doubleValue } == [2.5])
            #expect(try await f.received(cids: [716]).last?["limit"]?.int64Value == 20)

            let categories = try await f.call("history.store_categories")
            #expect(categories.objects.map { $0["name"]?.stringValue } == ["Bonuses", "Merchandise"])
            #expect(categories.objects.first?["order"]?.int64Value == 2)

            let winners = try await f.call("history.jackpot_winners", ["jp_template_id": 81])
            #expect(winners.objects.map { $0["jp_pot_id"]?.int64Value } == [8101, 8100])
            #expect(winners.objects.first?["winner"]?["public_username"]?.stringValue == "LuckyLuke")
            #expect(try await f.received(cids: [809]).last?["jp_template_id"]?.int64Value == 81)
            let stats = try await f.call("history.jackpot_win_stats", ["limit": 1])
            #expect(stats["winners"]?.objects.count == 1)
            #expect(stats["win_stats"]?["total_wins"]?.int64Value == 2)
            #expect(stats["win_stats"]?["highest_win"]?["amount"]?.doubleValue == 1250.5)

            let games = try await f.call("history.jackpot_eligible_games", ["jp_template_id": 81])
            let list = games["eligible_games"]?.objects ?? []
            #expect(list.map { $0["game_id"]?.int64Value } == [901, 902])
            #expect(list.map { $0["priority"]?.int64Value } == [1, 2])
            #expect(list[0]["name"]?.stringValue == "Book of Sim" && list[0]["enabled"]?.boolValue == true)
            // `enabled` counts only as the text "true"/"false".
            #expect(list[1]["enabled"] == .null && list[1]["link"] == .null)

            let won = try await f.call("history.raffle_won_prizes", ["raffle_id": 70, "limit": 1])
            #expect(won["total"]?.doubleValue == 2 && won["limit"]?.doubleValue == 1)
            #expect(won["won_prizes"]?.objects.first?["raf_won_id"]?.int64Value == 7002)
            #expect(won["user"]?["public_username"]?.stringValue == "alice" && won["errCode"]?.int64Value == 0)
            let zero = try await f.failure("history.raffle_won_prizes", ["raffle_id": 0])
            #expect(zero["code"]?.stringValue == "bad_request")

            // By id; a section without a type (≥ 1) is left out; the id comes from the key.
            let sections = try await f.call("history.custom_sections")
            #expect(sections.objects.map { $0["id"]?.int64Value } == [4, 12])
            #expect(sections.objects.last?["liquid_entity_data"]?.arrayValue?.compactMap(\.int64Value) == [2])
            #expect(sections.objects.first?["body"]?.stringValue == "<h1>Rules</h1>" && sections.objects.first?["theme"] == .null)
        }
    }
}
