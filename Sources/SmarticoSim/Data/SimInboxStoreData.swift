import SmarticoProtocol

/// The simulated data API's inbox (bodies on the HTTP port), store, bonuses, avatars, user: one user's state and the routes that read and change it.
public struct SimInboxStoreData: Sendable {
    /// One inbox envelope of the user.
    public struct Message: Sendable, Equatable {
        public var guid: String
        public var read: Bool
        public var starred: Bool
        public var deleted = false
        public var category: Int64
        /// How long before `now` it was sent.
        public var ageMs: Int64
        /// Expires this long after `now` (nil: never).
        public var expiresInMs: Int64?
    }

    public var inbox: [Message] = [
        Message(guid: "sim-msg-1", read: false, starred: false, category: 1, ageMs: 5 * 60_000, expiresInMs: 7 * 86_400_000),
        Message(guid: "sim-msg-2", read: true, starred: true, category: 2, ageMs: 86_400_000, expiresInMs: nil),
        Message(guid: "sim-msg-3", read: false, starred: false, category: 1, ageMs: 2 * 86_400_000, expiresInMs: nil),
        Message(guid: "sim-msg-4", read: true, starred: false, category: 2, ageMs: 3 * 86_400_000, expiresInMs: nil),
        Message(guid: "sim-msg-5", read: false, starred: true, category: 3, ageMs: 4 * 86_400_000, expiresInMs: nil),
    ]
    /// Bonus id → (redeemable, status id, redeemed at).
    public var bonuses: [Int64: (redeemable: Bool, status: Int64, redeemedAt: Int64?)] = [
        301: (true, 1, nil), 302: (false, 3, nil), 303: (false, 6, nil),
    ]
    /// The avatar in use (`avatar_real_id`).
    public var avatarInUse: Int64 = 401
    /// The custom public username once set.
    public var username: String?
    /// One store purchase: the item, when (ms before `now` for the sample one, else the time of
    /// the buy) and what it cost.
    public struct Purchase: Sendable, Equatable {
        public var itemID: Int64
        public var at: Int64
        public var amount: Int64
    }
    /// Store purchases, oldest first. `at` of the sample purchase is relative: ≤ 0 means that many ms before `now`.
    public var bought: [Purchase] = [Purchase(itemID: 13, at: -40 * 86_400_000, amount: 20)]

    public init() {}

    // MARK: - Sample catalogue (the same for every user)

    /// Inbox bodies by guid, as the CDN serves them (wire `InboxMessageBody`). The HTTP router serves
    /// these at `/inbox/<guid>.json`; it has no user state, so bodies depend on the guid only.
    public static func inboxBody(guid: String) -> JSONObject? {
        switch guid {
        case "sim-msg-1":
            return ["title": "Welcome to the simulator", "body": "Your rich inbox message.", "image": "https://sim.invalid/img/welcome.png",
                    "action": "dp:inbox", "type": 1, "html_body": "<p>Hello from <b>smartico-sim</b>.</p>",
                    "additional_buttons": [["action": "dp:gf_missions", "inbox_cta_text": "See missions"],
                                           ["action": "dp:gf_store", "inbox_cta_text": "Open store"]],
                    "show_preview": true, "custom_data": "{\"tier\":\"gold\"}"]
        case "sim-msg-2":
            return ["title": "Your weekly missions", "body": "Three new missions.", "action": "dp:gf_missions", "type": 1,
                    "html_body": "<p>ignored: not a dp:inbox message</p>", "custom_data": "plain note"]
        case "sim-msg-3":
            return ["title": "Level up", "body": "You are close to the next level.", "action": "dp:gf_levels", "type": 1]
        case "sim-msg-4":
            return ["title": "Store sale", "body": "Everything 10% off.", "action": "dp:gf_store", "type": 1]
        case "sim-msg-5":
            return ["title": "Bonus waiting", "body": "Claim your bonus.", "action": "dp:gf_bonuses", "type": 1]
        default:
            return nil
        }
    }

    struct Item {
        var id: Int64
        var type: Int64
        var name: String
        var price: Int64
        /// 0 points, 1 gems, 2 diamonds.
        var purchaseType: Int64
        var labelTag: String?
        var customLabelTag: String?
        var categories: [Int64]
        var priority: Int64
    }

    static let items: [Item] = [
        Item(id: 11, type: 3, name: "Free spin", price: 300, purchaseType: 0, labelTag: "hot", categories: [1], priority: 1),
        Item(id: 12, type: 1, name: "Bonus 10 EUR", price: 4800, purchaseType: 0, labelTag: "custom", customLabelTag: "Best value",
             categories: [2], priority: 2),
        Item(id: 13, type: 2, name: "T-shirt", price: 20, purchaseType: 1, categories: [3], priority: 3),
        Item(id: 14, type: 4, name: "Level boost", price: 3, purchaseType: 2, categories: [2], priority: 4),
        Item(id: 15, type: 6, name: "Raffle ticket", price: 100_000, purchaseType: 0, categories: [1, 2], priority: 5),
        Item(id: 16, type: 5, name: "Prize drop", price: 50, purchaseType: 0, categories: [1], priority: 6),
        // Filtered out by the SDK (id < 1).
        Item(id: 0, type: 1, name: "Draft item", price: 1, purchaseType: 0, categories: [], priority: 99),
    ]

    static func balance(_ data: SimUserData, _ purchaseType: Int64) -> Int64 {
        switch purchaseType {
        case 1: data.gems
        case 2: data.diamonds
        default: data.points
        }
    }

    /// `dd/MM/yyyy HH:mm:ss` (UTC) of epoch milliseconds, as the inbox's `createDate`.
    static func inboxDate(_ ms: Int64) -> String {
        let secs = ms / 1000
        let days = secs >= 0 ? secs / 86_400 : (secs - 86_399) / 86_400
        let rem = secs - days * 86_400
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(two(d))/\(two(m))/\(y) \(two(rem / 3600)):\(two(rem / 60 % 60)):\(two(rem % 60))"
    }

    /// One item as the wire's `StoreItem` (canBuy from the balance of the item's currency).
    static func wireItem(_ item: Item, _ data: SimUserData, _ env: SimDataEnvironment) -> JSONObject {
        var meta: JSONObject = ["name": .string(item.name), "description": .string("\(item.name) (sample data)"),
                                "image_url": .string("https://sim.invalid/store/\(item.id).png"),
                                "price": .string(String(item.price)), "purchase_type": .number(item.purchaseType),
                                "priority": .number(item.priority)]
        if let tag = item.labelTag { meta["label_tag"] = .string(tag) }
        if let custom = item.customLabelTag { meta["custom_label_tag"] = .string(custom) }
        if item.id == 11 { meta["related_items"] = [12, 16]; meta["custom_data"] = "{\"promo\":true}" }
        if item.id == 15 { meta["cant_buy_message"] = "Not enough points yet"; meta["show_timer"] = true }
        var o: JSONObject = ["id": .number(item.id), "itemTypeId": .number(item.type), "itemPublicMeta": .object(meta),
                             "categoryIds": .array(item.categories.map { .number($0) }),
                             "canBuy": .bool(balance(data, item.purchaseType) >= item.price)]
        if item.id == 15 { o["activeTillDate"] = .number(env.now + 86_400_000) }
        if item.id == 16 { o["shopPool"] = 7 }
        return o
    }

    static func refuse(_ code: Int64, _ message: String) -> JSONObject { ["errCode": .number(code), "errMsg": .string(message)] }

    // MARK: - Routes

    static let routes: [SimDataRoute] = [
        // GET_INBOX_MESSAGES: limit/offset, starred_only, category_id, read_status (1 read, 2 unread).
        SimDataRoute(513, 514) { request, data, env in
            let starredOnly = request["starred_only"]?.boolValue ?? false
            let category = request["category_id"]?.int64Value
            let readStatus = request["read_status"]?.int64Value
            let visible = data.inboxStore.inbox.filter { !$0.deleted }
            let matching = visible.filter { m in
                (!starredOnly || m.starred) && (category == nil || m.category == category)
                    && (readStatus != 1 || m.read) && (readStatus != 2 || !m.read)
            }
            let offset = max(0, Int(clamping: request["offset"]?.int64Value ?? 0))
            let limit = max(0, Int(clamping: request["limit"]?.int64Value ?? 20))
            let page = matching.dropFirst(offset).prefix(limit)
            let log: [JSONValue] = page.map { m in
                .object(["createDate": .string(inboxDate(env.now - m.ageMs)), "engagement_uid": .string(m.guid),
                         "is_read": .bool(m.read), "is_starred": .bool(m.starred), "is_deleted": false,
                         "category_id": .number(m.category),
                         "expire_on_dt": m.expiresInMs.map { .number(env.now + $0) } ?? .null])
            }
            return ["log": .array(log), "unread_count": .number(Int64(visible.filter { !$0.read }.count))]
        },
        SimDataRoute(529, 530) { request, data, _ in
            markInbox(request, &data) { $0.read = true }
        },
        SimDataRoute(531, 532) { request, data, _ in
            let star = request["is_starred"]?.boolValue ?? false
            return markInbox(request, &data) { $0.starred = star }
        },
        SimDataRoute(535, 536) { request, data, _ in
            markInbox(request, &data) { $0.deleted = true }
        },
        // GET_SHOP_ITEMS: canBuy from the balance of the item's currency.
        SimDataRoute(509, 510) { _, data, env in
            ["items": .array(items.map { .object(wireItem($0, data, env)) })]
        },
        // BUY_SHOP_ITEM: deducts the price; refuses with the SDK's codes when the balance is short.
        SimDataRoute(511, 512) { request, data, env in
            guard let id = request["itemId"]?.int64Value, id >= 1, let item = items.first(where: { $0.id == id }) else {
                return refuse(1, "no store item \(request["itemId"].map { String(decoding: $0.serialized(), as: UTF8.self) } ?? "(none)")")
            }
            guard balance(data, item.purchaseType) >= item.price else {
                let code: Int64 = item.purchaseType == 1 ? 11011 : item.purchaseType == 2 ? 11012 : 11000
                return refuse(code, "not enough balance: \(item.name) costs \(item.price)")
            }
            switch item.purchaseType {
            case 1: data.gems -= item.price
            case 2: data.diamonds -= item.price
            default: data.points -= item.price
            }
            data.inboxStore.bought.append(Purchase(itemID: id, at: env.now, amount: item.price))
            return [:]
        },
        // ACH_SHOP_ITEM_HISTORY: the purchases, newest first, paged by limit/offset; each the store
        // item as 510 lists it plus purchase_ts and purchase_points_amount.
        SimDataRoute(541, 542) { request, data, env in
            let offset = max(0, Int(clamping: request["offset"]?.int64Value ?? 0))
            let limit = max(0, Int(clamping: request["limit"]?.int64Value ?? 20))
            let page = data.inboxStore.bought.reversed().dropFirst(offset).prefix(limit)
            let list: [JSONValue] = page.compactMap { p in
                guard let item = items.first(where: { $0.id == p.itemID }) else { return nil }
                var o = wireItem(item, data, env)
                o["purchase_ts"] = .number(p.at <= 0 ? env.now + p.at : p.at)
                o["purchase_points_amount"] = .number(p.amount)
                return .object(o)
            }
            return ["items": .array(list)]
        },
        SimDataRoute(600, 601) { _, data, env in
            let list: [JSONValue] = data.inboxStore.bonuses.keys.sorted().map { id in
                let b = data.inboxStore.bonuses[id]!
                return .object([
                    "id": .number(id), "redeemable": .bool(b.redeemable),
                    "createDate": .string(inboxDate(env.now - 86_400_000 * (id - 300))),
                    "redeemDate": b.redeemedAt.map { .string(inboxDate($0)) } ?? .null,
                    "labelBonusTemplateId": .number(90 + id - 300), "bonusStatusId": .number(b.status),
                    "labelBonusTemplateMetaMap": ["description": .string("Template \(id)"), "acknowledge": "Claim"],
                    "bonusMetaMap": ["uiAmount": .string("\(10 * (id - 300)) EUR")],
                ])
            } + [.object(["id": 0, "redeemable": false])]  // dropped by the SDK (id < 1)
            return ["bonuses": .array(list)]
        },
        SimDataRoute(602, 603) { request, data, env in
            guard let id = request["bonusId"]?.int64Value, let b = data.inboxStore.bonuses[id] else {
                return refuse(1, "no bonus \(request["bonusId"]?.int64Value.map(String.init) ?? "(none)")")
            }
            guard b.redeemable else { return ["errCode": 2, "errMsg": .string("bonus \(id) is not redeemable"), "success": false] }
            data.inboxStore.bonuses[id] = (false, 3, env.now)
            return ["success": true]
        },
        SimDataRoute(560, 561) { _, data, _ in
            let list: [JSONValue] = [(401, "avatars/401.png", true), (402, "avatars/402.png", false),
                                     (403, "https://cdn.sim.invalid/avatars/403.png", false)].map { (id: Int64, url: String, isDefault: Bool) in
                .object(["avatar_real_id": .number(id), "is_default": .bool(isDefault), "hide_until_achieved": .bool(id == 403),
                         "priority": .number(id - 400), "public_meta": ["url": .string(url), "description": .string("Avatar \(id)")],
                         "avatar_source_type_id": .number(id == 403 ? 1 : 0), "active_from_date": .null, "active_till_date": .null,
                         "is_given": .bool(id != 403), "is_in_use": .bool(data.inboxStore.avatarInUse == id)])
            }
            return ["avatars": .array(list)]
        },
        SimDataRoute(562, 563) { _, _, _ in
            ["avatars": [["avatar_real_id": 451, "url": "avatars/custom/451.png", "dt_created": "2026-01-02T03:04:05Z"]]]
        },
        SimDataRoute(564, 565) { _, _, _ in
            ["prompts": [["prompt_id": 1, "public_meta": ["name": "Pirate", "icon_url": "prompts/pirate.png"],
                          "cost_currency_type_id": 0, "cost_value": 250],
                         ["prompt_id": 2, "public_meta": ["name": "Astronaut", "icon_url": "https://cdn.sim.invalid/prompts/astro.png"],
                          "cost_currency_type_id": 1, "cost_value": 5]]]
        },
        SimDataRoute(157, 158) { request, data, _ in
            guard let id = request["avatar_real_id"]?.int64Value, [401, 402, 403, 451].contains(id) else {
                return refuse(1, "unknown avatar_real_id")
            }
            data.inboxStore.avatarInUse = id
            return [:]
        },
        SimDataRoute(159, 160) { request, data, _ in
            guard let name = request["public_username_custom"]?.stringValue, !name.isEmpty, name.count <= 32 else {
                return refuse(1, "public_username_custom must be 1 to 32 characters")
            }
            data.inboxStore.username = name
            return ["public_username_custom": .string(name)]
        },
        SimDataRoute(537, 538) { _, _, _ in
            ["categories": [["id": 1, "publicMeta": ["name": "Daily", "order": 1]],
                            ["id": 2, "publicMeta": ["name": "Weekly", "order": 2]]]]
        },
        // CHECK_SEGMENT_MATCH: the user is in the even segments.
        SimDataRoute(161, 162) { request, _, _ in
            let ids = (request["segment_id"]?.arrayValue ?? []).compactMap(\.int64Value)
            return ["segments": .array(ids.map { .object(["segment_id": .number($0), "is_matching": .bool($0 % 2 == 0)]) })]
        },
        SimDataRoute(543, 544) { request, _, _ in
            guard request["related_game_id"]?.stringValue == "sim-game-1" else { return ["achievements": [], "tournaments": []] }
            return ["achievements": [["ach_id": 7001, "ach_public_meta": ["name": "Play sim-game-1 ten times"]]],
                    "tournaments": [["tournamentId": 8001, "publicMeta": ["name": "sim-game-1 cup"]]]]
        },
    ]

    /// Applies `change` to the message `engagement_uid` names; errCode 1 when there is none.
    static func markInbox(_ request: JSONObject, _ data: inout SimUserData, _ change: (inout Message) -> Void) -> JSONObject {
        // Every message at once (`all_read` / `all_deleted`: the achievements area's inbox.mark_all_read / delete_all).
        if request["all_read"]?.boolValue == true || request["all_deleted"]?.boolValue == true {
            for i in data.inboxStore.inbox.indices where !data.inboxStore.inbox[i].deleted { change(&data.inboxStore.inbox[i]) }
            return [:]
        }
        guard let guid = request["engagement_uid"]?.stringValue,
              let i = data.inboxStore.inbox.firstIndex(where: { $0.guid == guid && !$0.deleted }) else {
            return refuse(1, "no inbox message \(request["engagement_uid"]?.stringValue ?? "(none)")")
        }
        change(&data.inboxStore.inbox[i])
        return [:]
    }
}
