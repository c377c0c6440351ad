import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

/// The data API's inbox, store, bonuses, avatars and user calls against the simulator
/// (SimInboxStoreData): the SDK's public shapes, their derived fields, paging, the inbox body over
/// HTTP with its cache, and the state the mutating calls change.
@Suite("Data API: inbox, store, bonuses, avatars, user", .serialized)
struct InboxStoreAPITests {
    /// The simulator's recorded fetches of inbox bodies (client `http`, path `/inbox/…`).
    private func inboxFetches(_ f: DataAPIFixture) async throws -> [String] {
        try await f.sim.receivedEntries().filter { $0["client"] == "http" }
            .compactMap { $0["http"]?["path"]?.stringValue }.filter { $0.hasPrefix("/inbox/") }
    }

    /// Runs `body` with a started fixture and stops it whatever happens.
    private func withFixture(_ body: (DataAPIFixture) async throws -> Void) async throws {
        let f = try await DataAPIFixture.start()
        do { try await body(f) } catch {
            await f.stop()
            throw error
        }
        await f.stop()
    }

    private func guids(_ v: JSONValue) -> [String] { v.objects.compactMap { $0["message_guid"]?.stringValue } }

    @Test func inboxPagesBodiesAndMarks() async throws { try await withFixture(inboxCalls) }

    private func inboxCalls(_ f: DataAPIFixture) async throws {
        let before = Int64(Date().timeIntervalSince1970 * 1000)

        // The envelopes: guid, date as dd/MM/yyyy HH:mm:ss, read/starred, category, expiry.
        let all = try await f.call("inbox.list")
        #expect(guids(all) == ["sim-msg-1", "sim-msg-2", "sim-msg-3", "sim-msg-4", "sim-msg-5"])
        let first = try #require(all.objects.first)
        #expect(first["read"] == false && first["favorite"] == false && first["category_id"] == 1)
        #expect(Set(first.keys) == ["message_guid", "sent_date", "read", "favorite", "category_id", "expire_on_dt"])
        let date = try #require(first["sent_date"]?.stringValue)
        #expect(date.wholeMatch(of: /\d\d\/\d\d\/\d{4} \d\d:\d\d:\d\d/) != nil, "\(date)")
        let expiry = try #require(first["expire_on_dt"]?.doubleValue)
        #expect(expiry >= Double(before) + 7 * 86_400_000 - 60_000 && expiry <= Double(before) + 7 * 86_400_000 + 120_000)
        #expect(all.objects[1]["favorite"] == true && all.objects[1]["read"] == true && all.objects[1]["expire_on_dt"] == .null)
        var sent = try #require(try await f.received(cids: [513]).last)
        #expect(sent["limit"] == 20 && sent["offset"] == 0 && sent["starred_only"] == false && sent["category_id"] == nil)

        // The page cap: to = 50 asks for 20.
        _ = try await f.call("inbox.list", ["to": 50])
        sent = try #require(try await f.received(cids: [513]).last)
        #expect(sent["limit"] == 20 && sent["offset"] == 0)
        // A window [1, 3).
        #expect(guids(try await f.call("inbox.list", ["from": 1, "to": 3])) == ["sim-msg-2", "sim-msg-3"])
        sent = try #require(try await f.received(cids: [513]).last)
        #expect(sent["limit"] == 2 && sent["offset"] == 1)
        // The filters, sent as the SDK names them.
        #expect(guids(try await f.call("inbox.list", ["favorite_only": true])) == ["sim-msg-2", "sim-msg-5"])
        #expect(try await f.received(cids: [513]).last?["starred_only"] == true)
        #expect(guids(try await f.call("inbox.list", ["category_id": 1])) == ["sim-msg-1", "sim-msg-3"])
        #expect(try await f.received(cids: [513]).last?["category_id"] == 1)
        #expect(guids(try await f.call("inbox.list", ["read_status": 2])) == ["sim-msg-1", "sim-msg-3", "sim-msg-5"])
        #expect(try await f.received(cids: [513]).last?["read_status"] == 2)
        let bad = try await f.failure("inbox.list", ["from": 5, "to": 2])
        #expect(bad["code"] == "bad_request")

        // The unread counter: a one-message page.
        #expect(try await f.call("inbox.unread_count") == 3)
        sent = try #require(try await f.received(cids: [513]).last)
        #expect(sent["limit"] == 1 && sent["offset"] == 0)

        // The body over HTTP (INBOX_PUBLIC_CDN + guid + ".json"): a dp:inbox message has its html and buttons.
        let body = try await f.call("inbox.body", ["message_guid": "sim-msg-1"])
        #expect(body["title"] == "Welcome to the simulator" && body["preview_body"] == "Your rich inbox message.")
        #expect(body["icon"] == "https://sim.invalid/img/welcome.png" && body["action"] == "dp:inbox")
        #expect(body["html_body"] == "<p>Hello from <b>smartico-sim</b>.</p>")
        #expect(canonical(body["buttons"]) == canonical([["action": "dp:gf_missions", "text": "See missions"],
                                                          ["action": "dp:gf_store", "text": "Open store"]]))
        #expect(canonical(body["custom_data"]) == canonical(["tier": "gold"]))
        #expect(try await inboxFetches(f) == ["/inbox/sim-msg-1.json"])
        // The second time from the cache: the simulator saw one GET.
        let again = try await f.call("inbox.body", ["message_guid": "sim-msg-1"])
        #expect(canonical(again) == canonical(body))
        #expect(try await inboxFetches(f) == ["/inbox/sim-msg-1.json"])
        // Not dp:inbox: no html body nor buttons; plain-text custom_data stays text.
        let plain = try await f.call("inbox.body", ["message_guid": "sim-msg-2"])
        #expect(plain["action"] == "dp:gf_missions" && plain["html_body"] == .null && plain["buttons"] == .null)
        #expect(plain["custom_data"] == "plain note")
        let none = try await f.call("inbox.body", ["message_guid": "sim-msg-3"])
        #expect(canonical(none["custom_data"]) == "{}" && none["icon"] == .null)
        // An unknown guid: 404 → null, as the SDK.
        #expect(try await f.call("inbox.body", ["message_guid": "no-such"]) == .null)
        #expect(try await inboxFetches(f).last == "/inbox/no-such.json")

        // Mark read: the counter goes down and the envelope says read.
        let marked = try await f.call("inbox.mark_read", ["message_guid": "sim-msg-1"])
        #expect(canonical(marked) == canonical(["err_code": 0, "err_message": .null]))
        #expect(try await f.received(cids: [529]).last?["engagement_uid"] == "sim-msg-1")
        #expect(try await f.call("inbox.unread_count") == 2)
        #expect(try await f.call("inbox.list").objects.first?["read"] == true)
        // Star, unstar.
        _ = try await f.call("inbox.mark_starred", ["message_guid": "sim-msg-3", "mark": true])
        #expect(try await f.received(cids: [531]).last?["is_starred"] == true)
        #expect(guids(try await f.call("inbox.list", ["favorite_only": true])) == ["sim-msg-2", "sim-msg-3", "sim-msg-5"])
        _ = try await f.call("inbox.mark_starred", ["message_guid": "sim-msg-2", "mark": false])
        #expect(guids(try await f.call("inbox.list", ["favorite_only": true])) == ["sim-msg-3", "sim-msg-5"])
        // Delete: gone from the list and the counter.
        _ = try await f.call("inbox.delete", ["message_guid": "sim-msg-5"])
        #expect(guids(try await f.call("inbox.list")) == ["sim-msg-1", "sim-msg-2", "sim-msg-3", "sim-msg-4"])
        #expect(try await f.call("inbox.unread_count") == 1)
        // A refusal (no such message) is the server's errCode.
        let refused = try await f.failure("inbox.mark_read", ["message_guid": "sim-msg-5"])
        #expect(refused["code"] == "server_error" && refused["errCode"] == 1)

        // raw: the server's answer unchanged.
        let raw = try await f.call("inbox.list", ["to": 2], raw: true)
        #expect(raw["cid"] == 514 && raw["log"]?.arrayValue?.first?["engagement_uid"] == "sim-msg-1" && raw["unread_count"] == 1)
        let rawBody = try await f.call("inbox.body", ["message_guid": "sim-msg-4"], raw: true)
        #expect(rawBody["title"] == "Store sale")
    }

    /// Issue 43: a guid is one percent-encoded path segment under the CDN's `/inbox/`, whatever it
    /// holds: `../services/public` does not climb to the public API, `a/b?c#d` starts no
    /// directory, query or fragment.
    @Test func aGuidIsOneEncodedPathSegmentUnderTheCDN() async throws { try await withFixture(guidCalls) }

    private func guidCalls(_ f: DataAPIFixture) async throws {
        for (guid, target) in [("../services/public", "/inbox/..%2Fservices%2Fpublic.json"),
                               ("a/b?c#d", "/inbox/a%2Fb%3Fc%23d.json"),
                               ("..", "/inbox/...json"),
                               ("é %", "/inbox/%C3%A9%20%25.json")] {
            // No such body: null, as for any unknown guid, and the fetch stayed under /inbox/.
            #expect(try await f.call("inbox.body", ["message_guid": .string(guid)]) == .null)
            let targets = try await f.sim.receivedEntries().filter { $0["client"] == "http" }.compactMap { $0["http"]?["target"]?.stringValue }
            #expect(targets.last == target, "guid \(guid): \(targets)")
        }
        // Nothing reached the public API.
        #expect(try await f.sim.receivedEntries().filter { $0["http"]?["path"]?.stringValue == "/services/public" }.isEmpty)
    }

    @Test func storeAndBonuses() async throws { try await withFixture(storeAndBonusCalls) }

    private func storeAndBonusCalls(_ f: DataAPIFixture) async throws {

        // The items (id 0 dropped), their derived type, price, ribbon and currency.
        let items = try await f.call("store.items")
        let byID = Dictionary(uniqueKeysWithValues: items.objects.compactMap { o in o["id"]?.int64Value.map { ($0, o) } })
        #expect(byID.keys.sorted() == [11, 12, 13, 14, 15, 16])
        let spin = try #require(byID[11])
        #expect(spin["type"] == "minigamespin" && spin["price"]?.doubleValue == 300 && spin["ribbon"] == "hot")
        #expect(spin["purchase_type"] == "points" && spin["can_buy"] == true && spin["priority"] == 1)
        #expect(canonical(spin["related_item_ids"]) == "[12,16]" && canonical(spin["category_ids"]) == "[1]")
        #expect(canonical(spin["custom_data"]) == canonical(["promo": true]) && spin["name"] == "Free spin")
        #expect(spin["related_games"] == .null && spin["pool"] == .null && spin["discounted_price"] == .null)
        // All 32 fields of the SDK's TStoreItem, the purchase ones null outside the purchase history.
        #expect(spin.keys.count == 32)
        #expect(["purchase_ts", "purchase_points_amount", "purchased_today", "purchased_this_week", "purchased_this_month"]
            .allSatisfy { spin[$0] == .null })
        #expect(byID[12]?["ribbon"] == "Best value" && byID[12]?["type"] == "bonus" && byID[12]?["can_buy"] == true)
        #expect(byID[13]?["type"] == "tangible" && byID[13]?["purchase_type"] == "gems")
        #expect(byID[14]?["type"] == "changelevel" && byID[14]?["purchase_type"] == "diamonds")
        let ticket = try #require(byID[15])
        #expect(ticket["type"] == "raffleticket" && ticket["can_buy"] == false && ticket["cant_buy_message"] == "Not enough points yet")
        #expect(ticket["active_till_date"]?.int64Value != nil && ticket["show_timer"] == true)
        #expect(byID[16]?["type"] == "prizedrop" && byID[16]?["pool"]?.doubleValue == 7)

        // The purchase history before buying: the sample purchase (T-shirt, 40 days ago).
        let history = try await f.call("store.purchased_items").objects
        #expect(history.compactMap { $0["id"]?.int64Value } == [13])
        let shirt = try #require(history.first)
        #expect(shirt["name"] == "T-shirt" && shirt["type"] == "tangible" && shirt["purchase_type"] == "gems")
        #expect(shirt["purchase_points_amount"] == 20 && shirt.keys.count == 32)
        #expect(shirt["purchased_today"] == false && shirt["purchased_this_week"] == false && shirt["purchased_this_month"] == false)
        let shirtTs = try #require(shirt["purchase_ts"]?.int64Value)
        #expect(abs(shirtTs - (Int64(Date().timeIntervalSince1970 * 1000) - 40 * 86_400_000)) < 120_000)
        var sentHistory = try #require(try await f.received(cids: [541]).last)
        #expect(sentHistory["limit"] == 20 && sentHistory["offset"] == 0)

        // Buying takes the price from the points: item 12 (4800) is no longer affordable after 11 (300).
        let beforeBuy = Int64(Date().timeIntervalSince1970 * 1000)
        let bought = try await f.call("store.buy", ["item_id": 11])
        #expect(canonical(bought) == canonical(["err_code": 0, "err_message": .null]))
        #expect(try await f.received(cids: [511]).last?["itemId"] == 11)
        let after = try await f.call("store.items").objects
        #expect(after.first { $0["id"] == 12 }?["can_buy"] == false && after.first { $0["id"] == 11 }?["can_buy"] == true)
        // The bought item heads the history: bought now, for its price.
        let afterBuy = Int64(Date().timeIntervalSince1970 * 1000)
        let newest = try await f.call("store.purchased_items").objects
        #expect(newest.compactMap { $0["id"]?.int64Value } == [11, 13])
        let spinBought = try #require(newest.first)
        #expect(spinBought["name"] == "Free spin" && spinBought["type"] == "minigamespin" && spinBought["price"]?.doubleValue == 300)
        #expect(spinBought["purchase_points_amount"] == 300 && spinBought["ribbon"] == "hot")
        let ts = try #require(spinBought["purchase_ts"]?.int64Value)
        #expect(ts >= beforeBuy - 1000 && ts <= afterBuy + 1000, "\(ts)")
        let nowDate = Date()
        #expect(spinBought["purchased_today"] == .bool(AchievementAPITests.within(ts, .day, now: nowDate)))
        #expect(spinBought["purchased_this_week"] == .bool(AchievementAPITests.within(ts, .weekOfYear, now: nowDate)))
        #expect(spinBought["purchased_this_month"] == .bool(AchievementAPITests.within(ts, .month, now: nowDate)))
        // Paging as the SDK: limit/offset sent through.
        #expect(try await f.call("store.purchased_items", ["limit": 1, "offset": 1]).objects.compactMap { $0["id"]?.int64Value } == [13])
        sentHistory = try #require(try await f.received(cids: [541]).last)
        #expect(sentHistory["limit"] == 1 && sentHistory["offset"] == 1)
        let rawHistory = try await f.call("store.purchased_items", raw: true)
        #expect(rawHistory["cid"] == 542 && rawHistory["items"]?[0]?["purchase_ts"]?.int64Value == ts)

        let short = try await f.failure("store.buy", ["item_id": 12])
        #expect(short["code"] == "server_error" && short["errCode"] == 11000)
        let zero = try await f.failure("store.buy", ["item_id": 0])
        #expect(zero["code"] == "bad_request")

        // Bonuses: the claimable one changes status once claimed.
        let bonuses = try await f.call("bonuses.list").objects
        #expect(bonuses.compactMap { $0["bonus_id"]?.int64Value } == [301, 302, 303])
        let claimable = try #require(bonuses.first)
        #expect(claimable["is_redeemable"] == true && claimable["bonus_status_id"] == 1 && claimable["redeem_date"] == .null)
        #expect(claimable["label_bonus_template_id"] == 91 && claimable["bonus_meta_map"]?["uiAmount"] == "10 EUR")
        #expect(claimable["label_bonus_template_meta_map"]?["acknowledge"] == "Claim" && claimable.keys.count == 8)
        let claim = try await f.call("bonuses.claim", ["bonus_id": 301])
        #expect(canonical(claim) == canonical(["err_code": 0, "err_message": .null, "success": true]))
        #expect(try await f.received(cids: [602]).last?["bonusId"] == 301)
        let claimed = try #require(try await f.call("bonuses.list").objects.first)
        #expect(claimed["is_redeemable"] == false && claimed["bonus_status_id"] == 3 && claimed["redeem_date"]?.stringValue != nil)
        let again = try await f.failure("bonuses.claim", ["bonus_id": 301])
        #expect(again["code"] == "server_error" && again["errCode"] == 2)

        let raw = try await f.call("store.items", raw: true)
        #expect(raw["cid"] == 510 && raw["items"]?.arrayValue?.count == 7)
    }

    @Test func avatarsAndUser() async throws { try await withFixture(avatarAndUserCalls) }

    private func avatarAndUserCalls(_ f: DataAPIFixture) async throws {
        let domain = f.sim.httpURL + "/"  // INIT's DYNAMIC_IMAGE_DOMAIN

        let avatars = try await f.call("avatars.list").objects
        #expect(avatars.compactMap { $0["avatar_real_id"]?.int64Value } == [401, 402, 403])
        #expect(avatars[0]["url"] == "avatars/401.png" && avatars[0]["avatar_url"] == .string(domain + "avatars/401.png"))
        #expect(avatars[2]["avatar_url"] == "https://cdn.sim.invalid/avatars/403.png" && avatars[2]["description"] == "Avatar 403")
        #expect(avatars[0]["is_in_use"] == true && avatars[1]["is_in_use"] == false && avatars[0].keys.count == 12)
        // Setting one: the request, the event, and the catalogue's in-use flag.
        let set = try await f.call("avatars.set", ["avatar_url": "avatars/402.png", "avatar_real_id": 402])
        #expect(canonical(set) == canonical(["err_code": 0, "err_message": .null]))
        let setRequest = try #require(try await f.received(cids: [157]).last)
        #expect(setRequest["avatar_id"] == "avatars/402.png" && setRequest["avatar_real_id"] == 402)
        let inUse = try await f.call("avatars.list").objects
        #expect(inUse[0]["is_in_use"] == false && inUse[1]["is_in_use"] == true)
        #expect(try await eventually(timeout: .seconds(10)) {
            try await f.received(cids: [9]).contains { $0["eventType"] == "gf_avatar_changed" }
        })
        #expect(try await f.failure("avatars.set", ["avatar_url": "x", "avatar_real_id": 0])["code"] == "bad_request")

        let customized = try await f.call("avatars.customized").objects
        #expect(customized.first?["url"] == .string(domain + "avatars/custom/451.png") && customized.first?["dt_created"] == "2026-01-02T03:04:05Z")
        let prompts = try await f.call("avatars.prompts").objects
        #expect(prompts.first?["name"] == "Pirate" && prompts.first?["icon_url"] == .string(domain + "prompts/pirate.png"))
        #expect(prompts.first?["cost_value"]?.doubleValue == 250 && prompts.last?["cost_currency_type_id"] == 1)
        #expect(prompts.last?["icon_url"] == "https://cdn.sim.invalid/prompts/astro.png")

        // The username: stored, answered, and the gf_nickname_changed event sent (empty payload).
        #expect(try await f.call("user.set_username", ["public_username": "Neo"]) == "Neo")
        #expect(try await f.received(cids: [159]).last?["public_username_custom"] == "Neo")
        #expect(try await eventually(timeout: .seconds(10)) {
            try await f.received(cids: [9]).contains { $0["eventType"] == "gf_nickname_changed" && canonical($0["payload"]) == "{}" }
        })
        let tooLong = try await f.failure("user.set_username", ["public_username": .string(String(repeating: "n", count: 40))])
        #expect(tooLong["code"] == "server_error" && tooLong["errCode"] == 1)

        // The profile: the props the daemon keeps (IDENTIFY's, then merged with a 108 push), avatar_url derived.
        let profile = try await f.call("user.profile")
        #expect(profile.objectValue?.keys.count == 31)
        #expect(profile["public_username"] == "alice" && profile["ach_points_balance"] == 3570 && profile["ach_points_ever"] == 3605)
        #expect(profile["ach_level_current"] == "Level E" && profile["core_is_test_account"] == false && profile["user_id"] == .null)
        let avatarID = try #require(profile["avatar_id"]?.stringValue)
        #expect(profile["avatar_url"] == .string(f.sim.httpURL + "/avatar/" + avatarID))
        let pushed = try await f.sim.control(["op": "emit", "kind": "props", "user": "alice"])
        #expect(pushed["ok"] == true, "\(pushed)")
        #expect(try await eventually(timeout: .seconds(10)) {
            try await f.call("user.profile")["ach_points_ever"] == 3615
        })
        let counters = try await f.call("user.level_counters")
        #expect(canonical(counters) == canonical(["level_counter_1": .null, "level_counter_2": .null]))

        let categories = try await f.call("user.ach_categories")
        #expect(canonical(categories) == canonical([["id": 1, "name": "Daily", "order": 1], ["id": 2, "name": "Weekly", "order": 2]]))
        #expect(try await f.call("user.segment_match", ["segment_id": 4]) == true)
        #expect(try await f.call("user.segment_match", ["segment_id": 3]) == false)
        let list = try await f.call("user.segment_list_match", ["segment_ids": "2, 3,8"])
        #expect(canonical(list) == canonical([["segment_id": 2, "is_matching": true], ["segment_id": 3, "is_matching": false],
                                              ["segment_id": 8, "is_matching": true]]))
        #expect(canonical(try await f.received(cids: [161]).last?["segment_id"]) == "[2,3,8]")
        #expect(try await f.failure("user.segment_list_match", ["segment_ids": "2,x"])["code"] == "bad_request")

        let translations = try await f.call("user.translations", ["lang_code": "EN"])
        #expect(translations["translations"]?["gf_levels"] == "Levels")
        #expect(try await f.received(cids: [13]).last?["lang_code"] == "EN")
        let related = try await f.call("user.related_items", ["related_game_id": "sim-game-1"])
        #expect(related["achievements"]?.arrayValue?.count == 1 && related["tournaments"]?.arrayValue?.count == 1)
        #expect(related["errCode"] == 0 && related["cid"]?.doubleValue == 544)
        let unrelated = try await f.call("user.related_items", ["related_game_id": "other"])
        #expect(unrelated["achievements"]?.arrayValue?.isEmpty == true)
    }

    @Test func avatarsCustomizePostsToTheAvatarService() async throws { try await withFixture(avatarCustomizeCalls) }

    /// The simulator's recorded POSTs to its avatar service.
    private func avatarPosts(_ f: DataAPIFixture) async throws -> [JSONObject] {
        try await f.sim.receivedEntries().filter { $0["client"] == "http" && $0["http"]?["path"] == "/avatar-customize" }
    }

    private func avatarCustomizeCalls(_ f: DataAPIFixture) async throws {
        // A control call (a state change that costs the user points), with no socket request.
        let spec = try #require(DataAPICatalog.call(named: "avatars.customize"))
        #expect(spec.role == .control && spec.cids.isEmpty && spec.sdkMethod == "avatarsCustomize")
        #expect(spec.args.map(\.name) == ["user_id", "prompt_id", "avatar_url", "avatar_real_id"] && spec.args.allSatisfy(\.required))

        // Success: the service's cdn_url; errCode and errMessage present and null.
        let args: JSONObject = ["user_id": 1234, "prompt_id": 1, "avatar_url": "avatars/401.png", "avatar_real_id": 401]
        let made = try await f.call("avatars.customize", args)
        #expect(made.objectValue.map { Set($0.keys) } == ["cdn_url", "errCode", "errMessage"])
        let cdn = try #require(made["cdn_url"]?.stringValue)
        #expect(cdn.hasPrefix("http://127.0.0.1:") && cdn.hasSuffix("/avatar/custom-401-p1-u1234"), "\(cdn)")
        #expect(made["errCode"] == .null && made["errMessage"] == .null)

        // What the service received: the SDK's body (the label key without its -2, the user's ext id,
        // no brand_key: the fixture configures none) as JSON, at DYNAMIC_IMAGE_DOMAIN + avatar-customize.
        var posts = try await avatarPosts(f)
        try #require(posts.count == 1, "\(posts)")
        let post = posts[0]
        #expect(post["http"]?["method"] == "POST" && post["http"]?["status"] == 200)
        #expect(post["http"]?["content_type"] == "application/json; charset=utf-8" && post["http"]?["accept"] == "application/json")
        #expect(post["user"] == "alice")
        #expect(post["message"]?.objectValue == [
            "label_api_key": "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f", "user_id": 1234, "user_ext_id": "alice",
            "prompt_id": 1, "avatar_url": "avatars/401.png", "avatar_real_id": 401,
        ])

        // A bad prompt (0: none chosen): the service's error is the result, as in the SDK.
        var badArgs = args
        badArgs["prompt_id"] = 0
        let bad = try await f.call("avatars.customize", badArgs)
        #expect(bad == ["cdn_url": .null, "errCode": -1, "errMessage": "unknown prompt_id 0"])

        // A body the service refuses with HTTP 400: server_error naming the URL, the status and its answer.
        var emptyURL = args
        emptyURL["avatar_url"] = ""
        let refused = try await f.failure("avatars.customize", emptyURL)
        let message = refused["message"]?.stringValue ?? ""
        #expect(refused["code"] == "server_error")
        #expect(message.contains("POST http://127.0.0.1:") && message.contains("/avatar-customize: HTTP 400")
                && message.contains("avatar_url is required"), "\(message)")

        // raw: the service's answer as it came.
        let raw = try await f.call("avatars.customize", ["user_id": 1234, "prompt_id": 2, "avatar_url": "avatars/402.png", "avatar_real_id": 402], raw: true)
        #expect(raw.objectValue?.keys.sorted() == ["cdn_url"] && raw["cdn_url"]?.stringValue?.hasSuffix("/avatar/custom-402-p2-u1234") == true)

        posts = try await avatarPosts(f)
        #expect(posts.map { $0["http"]?["status"] } == [200, 200, 400, 200])
        #expect(posts[2]["error"] == "avatar_url is required")
        // No socket request was made for it.
        #expect(try await f.received(cids: [560, 562, 564, 157]).isEmpty)
    }
}
