import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

/// missions.list, badges.list, levels.list, missions.opt_in, missions.claim_reward against the
/// simulator's sample achievements (SimAchievementData: one mission per availability branch, one
/// badge per time-limit state).
@Suite("Data API: achievements", .serialized)
struct AchievementAPITests {
    /// Every field of the SDK's TMissionOrBadge.
    static let missionFields: Set<String> = [
        "id", "type", "name", "sub_header", "description", "reward", "image", "is_completed", "is_locked",
        "unlock_mission_description", "is_requires_optin", "is_opted_in", "time_limit_ms", "active_from_ts", "active_till_ts",
        "dt_start", "progress", "cta_action", "cta_text", "custom_section_id", "only_in_custom_section", "custom_data", "tasks",
        "related_games", "category_ids", "hint_text", "position", "ribbon", "ach_completed_id", "requires_prize_claim",
        "prize_claimed_date_ts", "complete_date", "complete_date_ts", "completed_today", "completed_this_week",
        "completed_this_month", "custom_section_type_id", "max_completion_count", "completion_count", "next_recurrence_date_ts",
        "availability_status", "claim_button_title", "claim_button_action", "prize_claim_expiration_date",
        "prize_claim_period_type_id", "badgeTimeLimitState", "hide_locked_mission",
    ]

    static func byID(_ list: JSONValue) -> [Int64: JSONObject] {
        Dictionary(list.objects.compactMap { o in o["id"]?.int64Value.map { ($0, o) } }, uniquingKeysWith: { a, _ in a })
    }

    /// What the SDK's isWithinPeriod answers, computed here with Foundation's calendar.
    static func within(_ ts: Int64, _ period: Calendar.Component, now: Date) -> Bool {
        var cal = Calendar(identifier: .gregorian)
        cal.timeZone = .current
        cal.firstWeekday = 1
        let then = Date(timeIntervalSince1970: Double(ts) / 1000)
        switch period {
        case .day: return cal.isDate(then, inSameDayAs: now)
        case .month: return cal.isDate(then, equalTo: now, toGranularity: .month)
        default: return cal.isDate(then, equalTo: now, toGranularity: .weekOfYear)
        }
    }

    @Test func listsDeriveStatusStateRecurrenceAndShape() async throws {
        let f = try await DataAPIFixture.start()
        do {
            let before = Int64(Date().timeIntervalSince1970 * 1000)
            let missions = try await f.call("missions.list")
            let after = Int64(Date().timeIntervalSince1970 * 1000)
            let m = Self.byID(missions)
            // Only missions, the id-0 entry dropped, every field present.
            #expect(Set(m.keys) == Set(101...117), "\(m.keys.sorted())")
            for (id, o) in m {
                #expect(Set(o.keys) == Self.missionFields, "mission \(id): \(Set(o.keys).symmetricDifference(Self.missionFields))")
                #expect(o["type"]?.stringValue == "mission")
            }
            // One mission per branch of the availability rule.
            let expected: [Int64: Int64] = [101: 0, 102: 1, 103: 2, 104: 1, 105: 2, 106: 3, 107: 13, 108: 4, 109: 5,
                                            110: 7, 111: 8, 112: 14, 113: 10, 114: 11, 115: 0, 116: 0, 117: 0]
            for (id, status) in expected {
                #expect(m[id]?["availability_status"]?.int64Value == status, "mission \(id): \(m[id]?["availability_status"] ?? .null)")
            }
            // Display fields out of ach_public_meta; ribbon; custom data parsed; categories truncated.
            let play = try #require(m[101])
            #expect(play["name"]?.stringValue == "Play 3 rounds" && play["image"]?.stringValue?.hasSuffix("/101.png") == true)
            #expect(play["ribbon"]?.stringValue == "hot")
            #expect(m[102]?["ribbon"]?.stringValue == "https://sim.smartico.invalid/ribbon.png", "custom ribbon")
            #expect(m[103]?["ribbon"] == .null)
            #expect(play["custom_data"] == ["theme": "blue"])
            #expect(m[102]?["custom_data"] == .object([:]))
            #expect(play["category_ids"] == [1, 2])
            #expect(play["cta_text"]?.stringValue == "Play now" && play["position"]?.int64Value == 1)
            // Tasks: only the progress-bearing type, renamed.
            let tasks = play["tasks"]?.objects ?? []
            #expect(tasks.count == 1 && tasks.first?["id"]?.int64Value == 1011, "\(tasks)")
            #expect(tasks.first?["execution_count_expected"]?.doubleValue == 3 && tasks.first?["execution_count_actual"]?.doubleValue == 0)
            #expect(tasks.first?["points_reward"]?.int64Value == 50 && tasks.first?["gems_reward"]?.doubleValue == 1.5)
            #expect(tasks.first?["priority"]?.int64Value == 2 && tasks.first?["display_progress_as_count"] == true)
            #expect(tasks.first?["diamonds_reward"] == .null && tasks.first?["stage_image"] == .null)
            // Related games: ach_game_id hidden, meta picked and given its 1-based priority.
            let games = play["related_games"]?.objects ?? []
            #expect(games.count == 2)
            #expect(games.first?["ach_game_id"] == .null && games.first?["ext_game_id"]?.stringValue == "slot-7")
            let gameMeta = games.first?["game_public_meta"]?.objectValue ?? [:]
            #expect(Set(gameMeta.keys) == ["name", "link", "image", "enabled", "game_categories", "game_provider", "mobile_spec_link", "priority"])
            #expect(gameMeta["priority"]?.int64Value == 1 && games.last?["game_public_meta"]?["priority"]?.int64Value == 2)
            // Locked mission text; time-limited start date.
            #expect(m[104]?["is_locked"] == true && m[104]?["unlock_mission_description"]?.stringValue?.contains("Play 3 rounds") == true)
            #expect(m[110]?["time_limit_ms"]?.int64Value == 86_400_000 && (m[110]?["dt_start"]?.int64Value ?? 0) > 0)
            // Recurrence: Recurring gets next_recurrence_date_ts = now + milliseconds_till_available;
            // Recurring-upon-completion its counts; others none.
            let next = m[116]?["next_recurrence_date_ts"]?.int64Value ?? 0
            #expect(next >= before + 3_600_000 - 5_000 && next <= after + 3_600_000 + 5_000, "next recurrence \(next)")
            #expect(m[117]?["completion_count"]?.int64Value == 2 && m[117]?["max_completion_count"]?.int64Value == 5)
            #expect(m[101]?["completion_count"] == .null && m[101]?["next_recurrence_date_ts"] == .null && m[116]?["completion_count"] == .null)
            // completed_today/this_week/this_month as the local calendar says (115: an hour ago, 116: 40 days ago).
            let now = Date()
            for id: Int64 in [115, 116] {
                let ts = try #require(m[id]?["complete_date_ts"]?.int64Value)
                #expect(m[id]?["completed_today"]?.boolValue == Self.within(ts, .day, now: now), "mission \(id) today")
                #expect(m[id]?["completed_this_week"]?.boolValue == Self.within(ts, .weekOfYear, now: now), "mission \(id) week")
                #expect(m[id]?["completed_this_month"]?.boolValue == Self.within(ts, .month, now: now), "mission \(id) month")
            }
            #expect(m[116]?["completed_this_month"] == false && m[101]?["completed_today"] == false)
            #expect(m[115]?["requires_prize_claim"] == true && m[115]?["ach_completed_id"]?.int64Value == 7001)
            #expect(m[115]?["claim_button_title"]?.stringValue == "Claim" && m[115]?["prize_claimed_date_ts"] == .null)

            // Badges: the same map; the time-limit state for those with a window.
            let b = Self.byID(try await f.call("badges.list"))
            #expect(Set(b.keys) == Set(201...209), "\(b.keys.sorted())")
            let states: [Int64: JSONValue] = [201: .null, 202: 0, 203: 1, 204: 6, 205: 2, 206: 3, 207: 4, 208: 5, 209: .null]
            for (id, state) in states {
                #expect(b[id]?["badgeTimeLimitState"] == state, "badge \(id): \(b[id]?["badgeTimeLimitState"] ?? .null)")
                #expect(b[id]?["type"]?.stringValue == "badge" && Set(b[id]?.keys ?? []) == Self.missionFields)
            }
            #expect(b[201]?["is_completed"] == true && b[202]?["availability_status"]?.int64Value == 3)
            #expect(b[201]?["tasks"] == [] && b[201]?["is_opted_in"] == .null)

            // Levels: server order kept, ordinal_position by required_points.
            let levels = try await f.call("levels.list").objects
            #expect(levels.map { $0["id"]?.int64Value ?? -1 } == [3, 1, 2, 5, 4])
            #expect(levels.map { $0["ordinal_position"]?.int64Value ?? -1 } == [3, 1, 2, 5, 4])
            #expect(levels.map { $0["name"]?.stringValue ?? "" } == ["Level E", "Level A", "Level B", "Level V", "Level X"])
            #expect(levels[0]["custom_data"] == ["color": "gold"] && levels[2]["custom_data"] == "plain text" && levels[1]["custom_data"] == .object([:]))
            #expect(levels[3]["visibility_points"]?.int64Value == 5000 && levels[0]["visibility_points"] == .null)
            #expect(Set(levels[0].keys) == ["id", "name", "description", "image", "required_points", "visibility_points",
                                             "required_level_counter_1", "required_level_counter_2", "custom_data", "ordinal_position"])

            // The current level: the sim's props have no ach_level_current_id, so by ach_points_ever
            // (3605): Level E [3000, 6000), progress (3605 - 3000) * 100 / 3000.
            let current = try #require(try await f.call("levels.current").objectValue)
            #expect(current["id"] == 3 && current["name"] == "Level E" && current["ordinal_position"] == 3)
            #expect(current["required_points"] == 3000 && current["description"] == "Expert")
            let progress = try #require(current["progress"]?.doubleValue)
            #expect(abs(progress - 605.0 * 100 / 3000) < 1e-9, "\(progress)")
            #expect(current["custom_data"] == .string(#"{"color":"gold"}"#))
            #expect(Set(current.keys) == Set(levels[0].keys).union(["progress"]))

            // raw: the server's 503 unchanged (with the entry the shape drops).
            let raw = try #require(try await f.call("missions.list", raw: true).objectValue)
            #expect(raw["cid"]?.int64Value == 503)
            let rawIDs = raw["achievements"]?.objects.compactMap { $0["ach_id"]?.int64Value } ?? []
            #expect(rawIDs.contains(0) && rawIDs.contains(201) && raw["achievements"]?[0]?["ach_public_meta"] != nil)
        } catch {
            await f.stop()
            throw error
        }
        await f.stop()
    }

    @Test func optInAndClaimChangeTheNextList() async throws {
        let f = try await DataAPIFixture.start()
        do {
            // Opt in to three kinds: plain (1 → 2), with active_till (5 → 6), time-limited (8 → 9).
            for id: Int64 in [102, 109, 111] {
                let r = try await f.call("missions.opt_in", ["mission_id": .number(id)])
                #expect(r == ["err_code": 0, "err_message": nil], "opt_in \(id): \(r)")
            }
            let sent = try await f.received(cids: [525]).map { $0["achievementId"]?.int64Value ?? -1 }
            #expect(sent == [102, 109, 111])
            let before = Int64(Date().timeIntervalSince1970 * 1000)
            let m = Self.byID(try await f.call("missions.list"))
            for (id, status) in [(Int64(102), Int64(2)), (109, 6), (111, 9)] {
                #expect(m[id]?["is_opted_in"] == true && m[id]?["availability_status"]?.int64Value == status, "mission \(id): \(m[id] ?? [:])")
            }
            #expect((m[111]?["dt_start"]?.int64Value ?? 0) > before - 60_000, "the opt-in time is the start date")
            // A mission without opt-in: the server refuses; mission_id 0 is refused before sending.
            let refused = try await f.failure("missions.opt_in", ["mission_id": 101])
            #expect(refused["code"]?.stringValue == "server_error" && refused["errCode"]?.int64Value == 40_001, "\(refused)")
            let zero = try await f.failure("missions.opt_in", ["mission_id": 0])
            #expect(zero["code"]?.stringValue == "bad_request" && zero["message"]?.stringValue?.contains("mission_id") == true)
            #expect(try await f.received(cids: [525]).count == 4, "mission_id 0 was not sent")

            // Claim the completed mission's prize: claimed in the next list; a second claim is refused.
            let claim = try await f.call("missions.claim_reward", ["mission_id": 115, "ach_completed_id": 7001])
            #expect(claim == ["err_code": 0, "err_message": nil])
            let request = try #require(try await f.received(cids: [539]).last)
            #expect(request["ach_id"]?.int64Value == 115 && request["ach_completed_id"]?.int64Value == 7001)
            let claimed = try #require(Self.byID(try await f.call("missions.list"))[115])
            #expect(claimed["requires_prize_claim"] == false && (claimed["prize_claimed_date_ts"]?.int64Value ?? 0) >= before - 60_000, "\(claimed)")
            let again = try await f.failure("missions.claim_reward", ["mission_id": 115, "ach_completed_id": 7001])
            #expect(again["code"]?.stringValue == "server_error" && again["errCode"]?.int64Value == 40_003, "\(again)")
            let missing = try await f.failure("missions.claim_reward", ["mission_id": 115])
            #expect(missing["code"]?.stringValue == "bad_request" && missing["message"]?.stringValue?.contains("ach_completed_id") == true)
        } catch {
            await f.stop()
            throw error
        }
        await f.stop()
    }

    @Test func detailsCalls() async throws {
        let f = try await DataAPIFixture.start()
        do {
            // raffles.draw_history: meta flattened, draw_id filters.
            let runs = try await f.call("raffles.draw_history", ["raffle_id": 31]).objects
            #expect(runs.map { $0["run_id"]?.int64Value ?? -1 } == [1002, 1001, 2001])
            #expect(runs[1]["id"]?.int64Value == 1 && runs[1]["is_winner"] == true && runs[1]["has_unclaimed_prize"] == true)
            #expect(runs[0]["name"]?.stringValue == "Daily draw" && runs[0]["icon_url"]?.stringValue?.hasSuffix("1i.png") == true)
            #expect(runs[2]["is_grand"] == true && runs[2]["background_image_url"] != .null && runs[2]["actual_execution_ts"] == .null)
            #expect(runs.allSatisfy { $0.keys.count == 15 })
            let grand = try await f.call("raffles.draw_history", ["raffle_id": 31, "draw_id": 2]).objects
            #expect(grand.count == 1 && grand.first?["name"]?.stringValue == "Grand draw")
            #expect(try await f.received(cids: [906]).last?["draw_id"]?.int64Value == 2)
            let noRaffle = try await f.failure("raffles.draw_history", ["raffle_id": 0])
            #expect(noRaffle["code"]?.stringValue == "bad_request")

            // raffles.draw_run: prizes with winners (ticket renamed), loose booleans made strict.
            let draw = try #require(try await f.call("raffles.draw_run", ["raffle_id": 31, "run_id": 1001, "winners_from": 0, "winners_to": 1]).objectValue)
            #expect(draw.keys.count == 27 && draw["id"]?.int64Value == 1 && draw["name"]?.stringValue == "Daily draw" && draw["icon_url"] == .null)
            #expect(draw["user_opted_in"] == true && draw["requires_optin"] == false && draw["is_active"] == false, "1 reads true, \"yes\" not a boolean: false")
            #expect(draw["my_last_tickets"] == [["ticekt_id": 555, "ticket_id_string": "T-555"], ["ticekt_id": 554, "ticket_id_string": "T-554"]])
            let prizes = draw["prizes"]?.objects ?? []
            #expect(prizes.count == 2 && prizes[0]["id"]?.stringValue == "p-1" && prizes[0]["custom_data"]?.stringValue == #"{"sku":"ph"}"#)
            #expect(prizes[0]["add_one_prize_per_each_x_tickets"] == .null && prizes[0]["chances_to_win_perc"]?.doubleValue == 0.7 && prizes[0].keys.count == 18)
            #expect(prizes[0]["winners"] == [["id": 7, "username": "alice", "avatar_url": "a7.png", "ticket": ["ticekt_id": 555, "ticket_id_string": "T-555"],
                                              "raf_won_id": 9001, "claimed_date": nil]], "winners_to 1 → one winner: \(prizes[0]["winners"] ?? .null)")
            let runRequest = try #require(try await f.received(cids: [904]).last)
            #expect(runRequest["winners_offset"]?.int64Value == 0 && runRequest["winners_limit"]?.int64Value == 1)
            let noRun = try await f.failure("raffles.draw_run", ["raffle_id": 31, "run_id": 999])
            #expect(noRun["code"]?.stringValue == "server_error" && noRun["message"]?.stringValue?.contains("999") == true)
            let zeroRun = try await f.failure("raffles.draw_run", ["raffle_id": 31, "run_id": 0])
            #expect(zeroRun["code"]?.stringValue == "bad_request")

            // The inbox's mark-all actions: the unread count drops to 0, then the list empties.
            #expect(try await f.call("inbox.unread_count").int64Value ?? 0 > 0, "the sample inbox starts with unread messages")
            #expect(try await f.call("inbox.mark_all_read") == ["err_code": 0, "err_message": nil])
            #expect(try await f.received(cids: [529]).last?["all_read"] == true)
            #expect(try await f.call("inbox.unread_count") == 0)
            #expect(try await f.call("inbox.delete_all") == ["err_code": 0, "err_message": nil])
            #expect(try await f.received(cids: [535]).last?["all_deleted"] == true)
            #expect(try await f.call("inbox.list") == [])

            // Engagement reports: sent, nothing awaited.
            #expect(try await f.call("engagement.impression", ["engagement_uid": "eng-1", "activity_type": 31]) == .null)
            #expect(try await f.call("engagement.click", ["engagement_uid": "eng-1", "activity_type": 31, "action": "dp:gf_missions"]) == .null)
            let reported = try await eventually(timeout: .seconds(10)) { try await f.received(cids: [103, 104]).count >= 2 }
            let reports = try await f.received(cids: [103, 104])
            #expect(reported, "\(reports)")
            #expect(reports.first?["cid"]?.int64Value == 103 && reports.first?["engagement_uid"]?.stringValue == "eng-1"
                    && reports.first?["activityType"]?.int64Value == 31)
            #expect(reports.last?["cid"]?.int64Value == 104 && reports.last?["action"]?.stringValue == "dp:gf_missions")
        } catch {
            await f.stop()
            throw error
        }
        await f.stop()
    }

    /// levels.current's choice and progress on each branch of the SDK's getCurrentLevel.
    @Test func currentLevelByIDThenByPointsEver() throws {
        let ladder: [JSONObject] = [
            ["id": 3, "required_points": 3000, "custom_data": .object([:])],
            ["id": 1, "required_points": 0, "custom_data": "plain"],
            ["id": 2, "required_points": 1000, "custom_data": .object(["k": 1])],
        ]
        func pick(_ props: JSONObject) -> (Int64?, Double?) {
            let o = AchievementShape.currentLevel(ladder, props: props).objectValue
            return (o?["id"]?.int64Value, o?["progress"]?.doubleValue)
        }
        // By id even when the points say otherwise; progress below the level's floor clamps to 0.
        #expect(pick(["ach_level_current_id": 2, "ach_points_ever": 500]) == (2, 0))
        // No id: the level whose [required, next's required) holds the points.
        #expect(pick(["ach_points_ever": 1500]) == (2, 25))
        #expect(pick([:]) == (1, 0))
        // The top level: progress 100.
        #expect(pick(["ach_points_ever": 5000]) == (3, 100))
        // An unknown id and points below every level: the top level.
        #expect(pick(["ach_level_current_id": 99, "ach_points_ever": -5]) == (3, 100))
        // custom_data as text.
        let one = AchievementShape.currentLevel(ladder, props: ["ach_level_current_id": 1]).objectValue
        #expect(one?["custom_data"] == "plain")
        let two = AchievementShape.currentLevel(ladder, props: ["ach_level_current_id": 2]).objectValue
        #expect(two?["custom_data"] == .string(#"{"k":1}"#))
        // No levels: null.
        #expect(AchievementShape.currentLevel([], props: ["ach_points_ever": 10]) == .null)
    }
}
