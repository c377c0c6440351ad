import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

/// The `api` calls of mini-games, jackpots and raffles against the simulator (SimGameData):
/// the SDK's derived fields, the side effects (attempt event, acknowledge) and the state the
/// mutating calls change.
@Suite("Data API: game")
struct GameAPITests {
    static func byID(_ items: [JSONObject], _ key: String = "id") -> [Int64: JSONObject] {
        Dictionary(items.compactMap { o in o[key]?.int64Value.map { ($0, o) } }, uniquingKeysWith: { a, _ in a })
    }

    /// The `minigame_attempt` events the simulator received (cid 9), oldest first.
    static func attempts(_ f: DataAPIFixture) async throws -> [JSONObject] {
        try await f.received(cids: [9]).filter { $0["eventType"]?.stringValue == "minigame_attempt" }
    }

    static func acknowledged(_ f: DataAPIFixture) async throws -> [String] {
        try await f.received(cids: [704]).compactMap { $0["request_id"]?.stringValue }
    }

    @Test func miniGamesListPlayAcknowledgeAndBatches() async throws {
        try await DataAPIFixture.with { f in

            // The list: the derived fields of each branch.
            let games = Self.byID(try await f.call("minigames.list").objects)
            #expect(games.keys.sorted() == [11, 12, 13, 14, 15, 16])
            let wheel = try #require(games[11])
            #expect(wheel["name"]?.stringValue == "Lucky wheel" && wheel["description"]?.stringValue == "Three spins a day")
            #expect(wheel["saw_game_type"]?.stringValue == "wheel" && wheel["saw_buyin_type"]?.stringValue == "spins")
            #expect(wheel["spin_count"]?.int64Value == 3)
            #expect(wheel["thumbnail"]?.stringValue == "https://sim.smartico.invalid/img/wheel.png")  // the template's own
            #expect(wheel["buyin_cost_points"]?.isNull == true && wheel["buyin_cost_gems"]?.isNull == true)
            #expect(wheel["game_layout"]?.isNull == true, "layout only for lootboxes: \(wheel)")
            #expect(wheel["max_number_of_attempts"]?.doubleValue == 10 && wheel["max_spins_period_ms"]?.int64Value == 86_400_000)
            #expect(wheel["custom_data"]?["theme"]?.stringValue == "gold")
            #expect(wheel["saw_template_ui_definition"]?["sectors_count"]?.int64Value == 6)
            #expect(wheel["expose_user_spin_id"]?.isNull == true && wheel["custom_section_id"]?.int64Value == 7)
            let prizes = Self.byID(wheel["prizes"].objects)
            #expect(prizes[111]?["prize_type"]?.stringValue == "points" && prizes[111]?["prize_value"]?.doubleValue == 100)
            #expect(prizes[111]?["acknowledge_type"]?.stringValue == "quick-message")
            #expect(prizes[111]?["custom_data"]?.stringValue == "{\"color\":\"red\"}", "UI custom_data is passed as it is")
            #expect(prizes[111]?["sectors"] == [0, 3] && prizes[111]?["weekdays"] == [1, 2, 3, 4, 5])
            #expect(prizes[112]?["prize_type"]?.stringValue == "no-prize" && prizes[112]?["acknowledge_type"]?.stringValue == "silent")
            #expect(prizes[112]?["custom_data"] == .object([:]) && prizes[112]?["prize_modifiers"] == ["2x", "reset"])
            #expect(prizes[113]?["prize_type"]?.stringValue == "spin" && prizes[113]?["allow_split_decimal"]?.isNull == true)
            let scratch = try #require(games[12])
            #expect(scratch["saw_buyin_type"]?.stringValue == "points" && scratch["buyin_cost_points"]?.int64Value == 200)
            #expect(scratch["thumbnail"]?.stringValue == "https://sim.smartico.invalid/img/skins/scratch_gold/ico.png")  // skin folder
            let giftbox = try #require(games[13])
            #expect(giftbox["saw_buyin_type"]?.stringValue == "gems" && giftbox["buyin_cost_gems"]?.doubleValue == 5)
            #expect(giftbox["buyin_cost_points"]?.isNull == true)
            #expect(giftbox["thumbnail"]?.stringValue == "\(GameShapes.iconCDN)/giftbox_red/ico.png")  // CDN by skin key
            let calendar = try #require(games[14])
            #expect(calendar["saw_game_type"]?.stringValue == "lootbox_calendar_days" && calendar["game_layout"]?.stringValue == "horizontal")
            #expect(calendar["saw_buyin_type"]?.stringValue == "free" && calendar["next_available_spin_ts"]?.isNull == true)
            #expect(calendar["jackpot_symbol"]?.stringValue == "EUR" && calendar["jackpot_current"]?.doubleValue == 1250.5)
            #expect(calendar["steps_to_finish_game"]?.doubleValue == 24 && calendar["custom_data"] == .object([:]))
            let plinko = try #require(games[15])
            #expect(plinko["saw_buyin_type"]?.stringValue == "diamonds" && plinko["buyin_cost_diamonds"]?.doubleValue == 2)
            let unknown = try #require(games[16])
            #expect(unknown["saw_game_type"]?.isNull == true && unknown["saw_buyin_type"]?.stringValue == "unknown")
            #expect(unknown["thumbnail"]?.stringValue == "\(GameShapes.iconCDN)/null/ico.png")

            // raw: the server's 701 unchanged.
            let raw = try await f.call("minigames.list", raw: true)
            #expect(raw["cid"]?.int64Value == 701 && raw["templates"]?.arrayValue?.count == 6 && raw["templates"]?[0]?["saw_template_id"] != nil)

            // A play: the prize, the attempt event, the acknowledge, one spin fewer.
            let played = try await f.call("minigames.play", ["template_id": 11])
            #expect(played["err_code"]?.int64Value == 0 && played["prize_id"]?.int64Value == 111)
            let requestID = try #require(played["request_id"]?.stringValue)
            #expect(UUIDv4.isValidV4(requestID), "\(played)")
            let spin = try #require(try await f.received(cids: [702]).last)
            #expect(spin["saw_template_id"]?.int64Value == 11 && spin["request_id"]?.stringValue == requestID)
            #expect(try await Self.acknowledged(f) == [requestID])
            #expect(try await eventually(timeout: .seconds(5)) { try await Self.attempts(f).count == 1 })
            let attempt = try #require(try await Self.attempts(f).first)
            #expect(attempt["payload"]?["status"]?.stringValue == "OK" && attempt["payload"]?["saw_template_id"]?.int64Value == 11, "\(attempt)")
            #expect(Self.byID(try await f.call("minigames.list").objects)[11]?["spin_count"]?.int64Value == 2)

            // acknowledge=false: nothing acknowledged until minigames.acknowledge, which clears the pending win.
            let deferred = try await f.call("minigames.play", ["template_id": 11, "acknowledge": false])
            #expect(deferred["prize_id"]?.int64Value == 112)
            let deferredID = try #require(deferred["request_id"]?.stringValue)
            #expect(try await eventually(timeout: .seconds(5)) { try await Self.attempts(f).count == 2 })
            #expect(try await Self.acknowledged(f) == [requestID], "no acknowledge with acknowledge=false")
            let ack = try await f.call("minigames.acknowledge", ["request_id": .string(deferredID)])
            #expect(ack["request_id"]?.stringValue == deferredID && ack["cid"]?.doubleValue == 705 && ack["uuid"]?.stringValue != nil)
            #expect(try await Self.acknowledged(f) == [requestID, deferredID])
            let again = try await f.failure("minigames.acknowledge", ["request_id": .string(deferredID)])
            #expect(again["code"]?.stringValue == "server_error" && again["errCode"]?.int64Value == 1, "the win is no longer pending: \(again)")

            // The last spin, then none left: SAW_NO_SPINS, reported with its status text.
            _ = try await f.call("minigames.play", ["template_id": 11])
            #expect(Self.byID(try await f.call("minigames.list").objects)[11]?["spin_count"]?.int64Value == 0)
            let acksBeforeRefusal = try await Self.acknowledged(f).count
            let noSpins = try await f.failure("minigames.play", ["template_id": 11])
            #expect(noSpins["code"]?.stringValue == "server_error" && noSpins["errCode"]?.int64Value == 40001, "\(noSpins)")
            // The refused round is acknowledged too, as the SDK acknowledges every round.
            let refusedID = try #require(try await f.received(cids: [702]).last?["request_id"]?.stringValue)
            #expect(Array(try await Self.acknowledged(f).dropFirst(acksBeforeRefusal)) == [refusedID])
            #expect(try await eventually(timeout: .seconds(5)) { try await Self.attempts(f).count == 4 })
            #expect(try await Self.attempts(f).last?["payload"]?["status"]?.stringValue == "NO SPINS AVAILABLE")

            // The free lootbox: once a day; the list then shows when the next round comes. Its
            // acknowledge is refused (a 705 with errCode 7): the prize stands, with its request_id.
            try await f.dataFault(cid: 704, "error", ["errCode": 7, "errMsg": "not now"])
            let lootbox = try await f.call("minigames.play", ["template_id": 14])
            #expect(lootbox["prize_id"]?.int64Value == 141, "a refused acknowledge lost the prize: \(lootbox)")
            #expect(lootbox["request_id"]?.stringValue != nil)
            let nextFree = Self.byID(try await f.call("minigames.list").objects)[14]?["next_available_spin_ts"]?.int64Value
            #expect((nextFree ?? 0) > f.nowMs + 86_000_000)
            let maxReached = try await f.failure("minigames.play", ["template_id": 14])
            #expect(maxReached["errCode"]?.int64Value == 40004)
            #expect(try await eventually(timeout: .seconds(5)) { try await Self.attempts(f).last?["payload"]?["status"]?.stringValue == "MAX SPIN ATTEMPTS REACHED" })

            // A batch on the gem gift box: 40 gems buy 8 boxes of 5, the 9th is refused; each round acknowledged.
            let acksBefore = try await Self.acknowledged(f).count
            let batch = try await f.call("minigames.play_batch", ["template_id": 13, "spin_count": 9]).objects
            #expect(batch.count == 9)
            #expect(batch.prefix(8).allSatisfy { $0["errCode"]?.int64Value == 0 } && batch[0]["saw_prize_id"]?.int64Value == 131
                    && batch[1]["saw_prize_id"]?.int64Value == 132)
            #expect(batch[8]["errCode"]?.int64Value == 40011 && batch[8]["errMessage"]?.stringValue?.contains("gems") == true)
            #expect(batch[8].keys.sorted() == ["errCode", "errMessage", "first_spin_in_period", "jackpot_amount", "saw_prize_id"])
            let sentIDs = try #require(try await f.received(cids: [712]).last)["spins"].objects.compactMap { $0["request_id"]?.stringValue }
            #expect(sentIDs.count == 9 && Set(sentIDs).count == 9)
            #expect(Array(try await Self.acknowledged(f).dropFirst(acksBefore)) == sentIDs, "every result's request_id is acknowledged")
            #expect(try await eventually(timeout: .seconds(5)) {
                let last = try await Self.attempts(f).last?["payload"]
                return last?["status"]?.stringValue == "OK" && last?["saw_template_id"]?.int64Value == 13
            })
            // Diamonds: 5 buy two rounds of 2; a batch where every round fails reports BATCH FAIL.
            let diamonds = try await f.call("minigames.play_batch", ["template_id": 15, "spin_count": 3]).objects
            #expect(diamonds.map { $0["errCode"]?.int64Value } == [0, 0, 40012])
            let broke = try await f.call("minigames.play_batch", ["template_id": 15, "spin_count": 1]).objects
            #expect(broke.map { $0["errCode"]?.int64Value } == [40012])
            #expect(try await eventually(timeout: .seconds(5)) { try await Self.attempts(f).last?["payload"]?["status"]?.stringValue == "BATCH FAIL" })
        }
    }

    @Test func jackpotsAndRaffles() async throws {
        try await DataAPIFixture.with { f in

            // Jackpots, with the filters and the opt-in state.
            let jackpots = Self.byID(try await f.call("jackpots.list").objects, "jp_template_id")
            #expect(jackpots.keys.sorted() == [21, 22])
            let community = try #require(jackpots[21])
            #expect(community["is_opted_in"]?.boolValue == false && community["registration_count"]?.int64Value == 148)
            #expect(community["jp_public_meta"]?["name"]?.stringValue == "Community jackpot" && community["jp_public_meta"]?["priority"]?.stringValue == "1")
            #expect(community["jp_public_meta"]?["placeholder2"]?.isNull == true && community["jp_public_meta"]?["custom_data"]?["theme"]?.stringValue == "gold")
            #expect((community["pot"]?["current_pot_amount"]?.doubleValue ?? 0) >= 10_000 && community["pot"]?["explode_date_ts"]?.isNull == true)
            #expect(community["contribution_rules"]?[0]?["extEntityIds"] == ["sim-slot-2"] && community["related_games"] == .array([]))
            #expect(jackpots[22]?["is_opted_in"]?.boolValue == true && jackpots[22]?["pot"]?["current_pot_temperature"]?.int64Value == 3)
            #expect(jackpots[22]?["jp_public_meta"]?["custom_data"]?.isNull == true)
            #expect(try await f.call("jackpots.list", ["jp_template_id": 22]).objects.map { $0["jp_template_id"]?.int64Value } == [22])
            #expect(try await f.call("jackpots.list", ["related_game_id": "other-game"]).objects.map { $0["jp_template_id"]?.int64Value } == [22])
            #expect(try await f.call("jackpots.list", ["related_game_id": "sim-slot-1"]).objects.count == 2)
            let optIn = try await f.call("jackpots.opt_in", ["jp_template_id": 21])
            #expect(optIn["errCode"]?.int64Value == 0 && optIn["cid"]?.doubleValue == 805 && optIn["errMsg"]?.isNull == true)
            #expect(try await f.received(cids: [804]).last?["jp_template_id"]?.int64Value == 21)
            let joined = try await f.call("jackpots.list", ["jp_template_id": 21]).objects.first
            #expect(joined?["is_opted_in"]?.boolValue == true && joined?["registration_count"]?.int64Value == 149)
            let optOut = try await f.call("jackpots.opt_out", ["jp_template_id": 21])
            #expect(optOut["errCode"]?.int64Value == 0 && optOut["cid"]?.doubleValue == 807)
            #expect(try await f.call("jackpots.list", ["jp_template_id": 21]).objects.first?["is_opted_in"]?.boolValue == false)

            // Raffles: the loose flags made booleans, the prize and winner shapes.
            let raffles = Self.byID(try await f.call("raffles.list").objects)
            #expect(raffles.keys.sorted() == [31, 32])
            let weekly = try #require(raffles[31])
            #expect(weekly["name"]?.stringValue == "Weekly raffle" && weekly["custom_data"]?.stringValue == "{\"tier\":\"gold\"}")
            #expect(weekly["ticket_cap_visualization"]?.int64Value == 1 && (weekly["end_date"]?.int64Value ?? 0) > f.nowMs)
            let draws = Self.byID(weekly["draws"].objects)
            let daily = try #require(draws[311])
            #expect(daily["user_opted_in"] == false && daily["is_active"] == true && daily["requires_optin"] == false, "\(daily)")
            #expect(daily["is_grand"] == false && daily["execution_type"]?.int64Value == 2 && daily["winners_total"]?.doubleValue == 2)
            #expect(daily["my_last_tickets"]?[0] == .object(["ticekt_id": 880_001, "ticket_id_string": "880-001"]))
            let prize = try #require(daily["prizes"].objects.first)
            #expect(prize["id"]?.stringValue == "5001" && prize["name"]?.stringValue == "10 free spins")
            #expect(prize["should_claim"] == true && prize["requires_claim"] == true && prize["add_one_prize_per_each_x_tickets"]?.isNull == true)
            let winners = prize["winners"].objects
            #expect(winners.first?["username"]?.stringValue == "alice" && winners.first?["raf_won_id"]?.int64Value == 9001)
            #expect(winners.first?["avatar_url"]?.stringValue == "https://sim.smartico.invalid/img/avatar-7.png", "avatar_id when no avatar_url")
            #expect(winners.first?["claimed_date"]?.isNull == true && winners.first?["ticket"]?["ticket_id_string"]?.stringValue == "770-012")
            #expect(winners.last?["avatar_url"]?.stringValue == "https://sim.smartico.invalid/img/bob.png")
            let grand = try #require(draws[312])
            #expect(grand["requires_optin"] == true && grand["user_opted_in"] == false && grand["my_tickets_count"]?.int64Value == 0)
            #expect(grand["is_grand"] == true && grand["prizes"]?[0]?["hide_chance_to_win"] == true)
            let past = try #require(raffles[32])
            #expect(past["name"]?.isNull == true && past["draws"]?[0]?["user_opted_in"] == false && past["draws"]?[0]?["prizes"] == .array([]))
            #expect(past["draws"]?[0]?["current_state"]?.int64Value == 3)

            // raw
            let raw = try await f.call("raffles.list", raw: true)
            #expect(raw["cid"]?.int64Value == 903 && raw["items"]?[0]?["raffle_id"]?.int64Value == 31 && raw["items"]?[0]?["draws"]?[0]?["is_active"] == 1)

            // Opt into the grand draw: the next list shows it.
            let opted = try await f.call("raffles.opt_in", ["raffle_id": 31, "draw_id": 312, "raffle_run_id": 3201])
            #expect(opted == .object(["err_code": 0, "err_message": nil]))
            let sent = try #require(try await f.received(cids: [916]).last)
            #expect(sent["raffle_id"]?.int64Value == 31 && sent["draw_id"]?.int64Value == 312 && sent["raffle_run_id"]?.int64Value == 3201)
            let grandAfter = Self.byID(try #require(Self.byID(try await f.call("raffles.list").objects)[31])["draws"].objects)[312]
            #expect(grandAfter?["user_opted_in"] == true && grandAfter?["my_tickets_count"]?.int64Value == 3)
            let notNeeded = try await f.failure("raffles.opt_in", ["raffle_id": 31, "draw_id": 311, "raffle_run_id": 3117])
            #expect(notNeeded["code"]?.stringValue == "server_error" && notNeeded["errCode"]?.int64Value == 1)

            // Claim the won prize once; the second claim is refused.
            let claimed = try await f.call("raffles.claim_prize", ["won_id": 9001])
            #expect(claimed == .object(["errorCode": 0, "errorMessage": nil]))
            let afterClaim = Self.byID(try #require(Self.byID(try await f.call("raffles.list").objects)[31])["draws"].objects)[311]?["prizes"]?[0]
            #expect(afterClaim?["should_claim"] == false && (afterClaim?["winners"]?[0]?["claimed_date"]?.int64Value ?? 0) > 0)
            let twice = try await f.failure("raffles.claim_prize", ["won_id": 9001])
            #expect(twice["code"]?.stringValue == "server_error" && twice["errCode"]?.int64Value == 2, "\(twice)")
            let zero = try await f.failure("raffles.claim_prize", ["won_id": 0])
            #expect(zero["code"]?.stringValue == "bad_request" && zero["message"]?.stringValue?.contains("won_id") == true)
            #expect(try await f.received(cids: [908]).count == 2, "won_id 0 is refused before anything is sent")
        }
    }

    static let templateFields = [
        "id", "name", "description", "thumbnail", "visibile_when_can_spin", "saw_game_type", "saw_buyin_type", "buyin_cost_points",
        "buyin_cost_gems", "buyin_cost_diamonds", "spin_count", "next_available_spin_ts", "earliest_expiration_dt", "latest_expiration_dt",
        "over_limit_message", "no_attempts_message", "jackpot_current", "jackpot_add_on_attempt", "jackpot_symbol", "promo_image",
        "promo_text", "custom_data", "prizes", "expose_game_stat_on_api", "relative_period_timezone", "activeFromDate", "activeTillDate",
        "steps_to_finish_game", "min_steps_to_finish_game", "custom_section_id", "saw_template_ui_definition", "game_layout",
        "show_prize_history", "max_number_of_attempts", "max_spins_period_ms", "expose_user_spin_id",
    ]
    static let prizeFields = [
        "id", "name", "prize_type", "prize_value", "font_size", "font_size_mobile", "icon", "position", "sectors", "acknowledge_type",
        "aknowledge_message", "aknowledge_message_lose", "acknowledge_dp", "acknowledge_action_title", "acknowledge_dp_additional",
        "acknowledge_action_title_additional", "second_btn", "second_btn_action_title", "out_of_stock_message", "pool", "pool_initial",
        "wins_count", "weekdays", "active_from_ts", "active_till_ts", "relative_period_timezone", "is_surcharge", "is_deleted",
        "custom_data", "prize_modifiers", "allow_split_decimal", "hide_prize_from_history", "requirements_to_get_prize",
        "max_give_period_type_id",
    ]
    static let drawFields = [
        "id", "name", "description", "image_url", "image_url_mobile", "icon_url", "background_image_url", "background_image_url_mobile",
        "is_grand", "prizes", "current_state", "run_id", "execution_type", "execution_ts", "previous_run_ts", "previous_run_id",
        "ticket_start_ts", "allow_multi_prize_per_ticket", "total_tickets_count", "my_tickets_count", "my_last_tickets",
        "user_opted_in", "requires_optin", "is_active", "winners_limit", "winners_offset", "winners_total",
    ]

    /// Answers with loose types, extra and missing fields (data_fault replace): every field of the
    /// public shapes is still there, `null` where the server sent nothing, derived ones by the SDK's rules.
    @Test func shapesAreCompleteForSparseAndLooseAnswers() async throws {
        try await DataAPIFixture.with { f in
            try await f.dataFault(cid: 700, "replace", ["body": ["templates": [
                ["saw_template_id": "17", "saw_buyin_type_id": "4", "buyin_cost_points": 7.9, "added_by_server": true,
                 "prizes": [["saw_prize_id": 5, "prize_type_id": 42]]],
            ]]])
            let template = try #require(try await f.call("minigames.list").objects.first)
            #expect(Set(template.keys) == Set(Self.templateFields) && template.count == Self.templateFields.count, "\(template.keys)")
            #expect(template["id"]?.int64Value == 17 && template["saw_buyin_type"]?.stringValue == "gems")
            #expect(template["buyin_cost_gems"]?.doubleValue == 7, "the SDK reads the cost as an integer first")
            #expect(template["thumbnail"]?.stringValue == "\(GameShapes.iconCDN)/null/ico.png" && template["custom_data"] == .object([:]))
            #expect(template["name"]?.isNull == true && template["saw_template_ui_definition"]?.isNull == true && template["saw_game_type"]?.isNull == true)
            let prize = try #require(template["prizes"].objects.first)
            #expect(Set(prize.keys) == Set(Self.prizeFields) && prize.count == Self.prizeFields.count, "\(prize.keys)")
            #expect(prize["prize_type"]?.stringValue == "unknown" && prize["acknowledge_type"]?.isNull == true && prize["sectors"]?.isNull == true)

            try await f.dataFault(cid: 902, "replace", ["body": ["items": [["raffle_id": 1, "draws": [["draw_id": "2", "is_active": "true", "prizes": [["prize_id": 9, "winners": [["user_id": 3]]]]]]]]]])
            let raffle = try #require(try await f.call("raffles.list").objects.first)
            #expect(raffle.count == 14 && raffle["name"]?.isNull == true && raffle["custom_data"]?.isNull == true)
            let draw = try #require(raffle["draws"].objects.first)
            #expect(Set(draw.keys) == Set(Self.drawFields) && draw.count == Self.drawFields.count, "\(draw.keys)")
            #expect(draw["id"]?.int64Value == 2 && draw["is_active"] == true && draw["user_opted_in"] == false && draw["my_last_tickets"] == .array([]))
            let winner = try #require(draw["prizes"]?[0]?["winners"]?[0])
            #expect(winner == .object(["id": 3, "username": nil, "avatar_url": nil, "ticket": ["ticekt_id": nil, "ticket_id_string": nil],
                                       "raf_won_id": nil, "claimed_date": nil]))
            #expect(draw["prizes"]?[0]?["id"]?.stringValue == "9" && draw["prizes"]?[0]?.objectValue?.count == 18)

            try await f.dataFault(cid: 800, "replace", ["body": ["items": [["jp_template_id": 5, "pot": "soon"]]]])
            let jackpot = try #require(try await f.call("jackpots.list").objects.first)
            #expect(jackpot.count == 15 && jackpot["jp_template_id"]?.int64Value == 5 && jackpot["pot"]?.isNull == true)
            #expect(jackpot["contribution_rules"]?.isNull == true && jackpot["jp_public_meta"]?.isNull == true)
        }
    }
}

extension Optional where Wrapped == JSONValue {
    /// The elements of an array member as objects (empty when absent or not an array).
    fileprivate var objects: [JSONObject] { self?.objects ?? [] }
}

extension DataAPIFixture {
    /// Wall-clock milliseconds, to compare with the simulator's timestamps (relative to its now).
    fileprivate var nowMs: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// Runs `body` with a started fixture and stops it afterwards, also when `body` throws.
    fileprivate static func with(_ body: (DataAPIFixture) async throws -> Void) async throws {
        let f = try await start()
        do { try await body(f) } catch {
            await f.stop()
            throw error
        }
        await f.stop()
    }
}
