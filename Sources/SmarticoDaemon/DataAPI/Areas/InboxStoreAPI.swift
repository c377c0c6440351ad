import SmarticoProtocol
import SmarticoSocketAPI

/// The `api` calls of inbox, store, bonuses, avatars, user: their implementations (the specs are in
/// SmarticoSocketAPI's DataAPICatalog). The public shapes follow the official SDK's `T…` types
/// (docs/api.md, "Inbox, store, bonuses, avatars and the user").
enum InboxStoreAPI {
    static let implementations: [String: DataAPIRun] = [
        "inbox.list": inboxList,
        "inbox.unread_count": inboxUnreadCount,
        "inbox.body": inboxBody,
        "inbox.mark_read": { ctx async throws(SocketAPIError) in
            try await markAction(ctx, cid: 529, ["engagement_uid": .string(try guid(ctx))])
        },
        "inbox.mark_starred": { ctx async throws(SocketAPIError) in
            try await markAction(ctx, cid: 531, ["engagement_uid": .string(try guid(ctx)),
                                                 "is_starred": .bool(ctx.args.bool("mark") ?? false)])
        },
        "inbox.delete": { ctx async throws(SocketAPIError) in
            try await markAction(ctx, cid: 535, ["engagement_uid": .string(try guid(ctx))])
        },
        "store.items": storeItems,
        "store.buy": storeBuy,
        "store.purchased_items": storePurchasedItems,
        "bonuses.list": bonusesList,
        "bonuses.claim": bonusesClaim,
        "avatars.list": avatarsList,
        "avatars.customized": avatarsCustomized,
        "avatars.prompts": avatarsPrompts,
        "avatars.set": avatarsSet,
        "avatars.customize": avatarsCustomize,
        "user.set_username": userSetUsername,
        "user.profile": userProfile,
        "user.level_counters": { ctx async throws(SocketAPIError) in
            let props = try await props(ctx)
            return .object(["level_counter_1": .of(props.int("ach_level_counter_1")), "level_counter_2": .of(props.int("ach_level_counter_2"))])
        },
        "user.ach_categories": userAchCategories,
        "user.segment_match": { ctx async throws(SocketAPIError) in
            guard let id = ctx.args.int("segment_id") else { throw .badRequest("field \"args.segment_id\" is required") }
            let rows = try await segmentMatches(ctx, [id])
            return .bool(rows.first?.1 == true)
        },
        "user.segment_list_match": userSegmentListMatch,
        "user.translations": userTranslations,
        "user.related_items": userRelatedItems,
    ]

    // MARK: - Inbox

    /// The SDK's page cap: a page holds at most 20 messages.
    static let inboxPageCap: Int64 = 20

    /// The `GET_INBOX_MESSAGES_REQUEST` payload for a page [from, to).
    static func inboxPagePayload(from: Int64, to: Int64, favoriteOnly: Bool, categoryID: Int64?, readStatus: Int64?) -> JSONObject {
        var payload: JSONObject = ["limit": .number(min(to - from, inboxPageCap)), "offset": .number(from),
                                   "starred_only": .bool(favoriteOnly)]
        if let categoryID { payload["category_id"] = .number(categoryID) }
        if let readStatus { payload["read_status"] = .number(readStatus) }
        return payload
    }

    static let inboxList: DataAPIRun = { ctx async throws(SocketAPIError) in
        let from = ctx.args.int("from") ?? 0
        let to = ctx.args.int("to") ?? 20
        guard to >= from else { throw .badRequest("field \"args.to\" (\(to)) must not be less than \"args.from\" (\(from))") }
        let answer = try await ctx.request(cid: 513, inboxPagePayload(
            from: from, to: to, favoriteOnly: ctx.args.bool("favorite_only") ?? false,
            categoryID: ctx.args.int("category_id"), readStatus: ctx.args.int("read_status")), expect: 514)
        return .array(answer.objects("log").map(inboxMessage))
    }

    /// Wire `InboxMessage` → `TInboxMessage`.
    static func inboxMessage(_ m: JSONObject) -> JSONValue {
        .object([
            "message_guid": .of(m.string("engagement_uid")),
            "sent_date": .of(m.string("createDate")),
            "read": .of(m.bool("is_read")),
            "favorite": .of(m.bool("is_starred")),
            "category_id": .of(m.int("category_id")),
            "expire_on_dt": .of(m.double("expire_on_dt")),
        ])
    }

    static let inboxUnreadCount: DataAPIRun = { ctx async throws(SocketAPIError) in
        let answer = try await ctx.request(cid: 513, inboxPagePayload(from: 0, to: 1, favoriteOnly: false, categoryID: nil, readStatus: nil),
                                           expect: 514)
        return .number(answer.int("unread_count") ?? 0)
    }

    static func guid(_ ctx: DataAPIContext) throws(SocketAPIError) -> String {
        guard let g = ctx.args.string("message_guid"), !g.isEmpty else {
            throw .badRequest("field \"args.message_guid\" of call \"\(ctx.spec.name)\" must not be empty")
        }
        return g
    }

    /// The body over HTTP from the label's CDN, cached by guid. As the SDK: null when the label has
    /// no `INBOX_PUBLIC_CDN` or the body is missing (HTTP error, not JSON); a timeout is an error.
    static let inboxBody: DataAPIRun = { ctx async throws(SocketAPIError) in
        let guid = try guid(ctx)
        guard let cdn = await ctx.labelSetting("INBOX_PUBLIC_CDN")?.stringValue, !cdn.isEmpty else { return .null }
        // By guid under its CDN: a reload onto another label does not serve the old label's bodies.
        // The guid is percent-encoded into one path segment: `../services/public` cannot leave the
        // CDN's directory, nor `a?b#c` start a query; the `.json` after it keeps even `..` a name
        // (docs/security.md, "Untrusted text").
        let url = cdn + WrapperURL.percentEncode(guid) + ".json"
        let key = "inbox.body:" + url
        let raw: JSONObject
        if let cached = ctx.cache[key]?.objectValue {
            raw = cached
        } else {
            let fetched: JSONValue
            do throws(SocketAPIError) {
                fetched = try await ctx.httpGetJSON(url)
            } catch {
                if error.code == .timeout { throw error }
                return .null
            }
            guard let object = fetched.objectValue else { return .null }
            ctx.cache[key] = .object(object)
            raw = object
        }
        return inboxBody(raw)
    }

    /// Wire `InboxMessageBody` → `TInboxMessageBody`: html body and buttons only for `dp:inbox`.
    static func inboxBody(_ b: JSONObject) -> JSONValue {
        let rich = b.string("action") == "dp:inbox"
        var buttons: JSONValue = .null
        if rich, let list = b["additional_buttons"]?.arrayValue {
            buttons = .array(list.compactMap(\.objectValue).map { o in
                .object(["action": .of(o.string("action")), "text": .of(o.string("inbox_cta_text"))])
            })
        }
        return .object([
            "title": .of(b.string("title")),
            "preview_body": .of(b.string("body")),
            "icon": .of(b.string("image")),
            "action": .of(b.string("action")),
            "html_body": rich ? .of(b.string("html_body")) : .null,
            "buttons": buttons,
            "custom_data": .customData(b["custom_data"]),
        ])
    }

    /// A mark/delete request; its answer as `InboxMarkMessageAction`.
    static func markAction(_ ctx: DataAPIContext, cid: Int, _ payload: JSONObject) async throws(SocketAPIError) -> JSONValue {
        let answer = try await ctx.request(cid: cid, payload, expect: cid + 1)
        return .errResult(answer)
    }

    // MARK: - Store

    static let storeItems: DataAPIRun = { ctx async throws(SocketAPIError) in
        let answer = try await ctx.request(cid: 509, [:], expect: 510)
        return .array(answer.objects("items").filter { ($0.int("id") ?? 0) >= 1 }.map(storeItem))
    }

    static func storeItemTypeName(_ id: Int64?) -> String {
        switch id {
        case 1: "bonus"
        case 2: "tangible"
        case 3: "minigamespin"
        case 4: "changelevel"
        case 5: "prizedrop"
        case 6: "raffleticket"
        default: "unknown"
        }
    }

    static func purchaseTypeName(_ id: Int64?) -> String {
        switch id {
        case 1: "gems"
        case 2: "diamonds"
        default: "points"
        }
    }

    /// Wire `StoreItem` → `TStoreItem`: all 32 of its fields. The five purchase fields are null
    /// here; `store.purchased_items` fills them.
    static func storeItem(_ r: JSONObject) -> JSONValue {
        let meta = r.object("itemPublicMeta") ?? [:]
        let tag = meta.string("label_tag")
        let ribbon = tag == "custom" ? meta.string("custom_label_tag") : tag
        return .object([
            "id": .of(r.int("id")),
            "name": .of(meta.string("name")),
            "description": .of(meta.string("description")),
            "image": .of(meta.string("image_url")),
            "type": .string(storeItemTypeName(r.int("itemTypeId"))),
            "price": .of(meta.double("price")),
            "ribbon": .of(ribbon),
            "limit_message": .of(meta.string("limit_message")),
            "purchase_limit_message": .of(meta.string("purchase_limit_message")),
            "priority": .number(meta.int("priority") ?? 0),
            "related_item_ids": .of(meta.ints("related_items")),
            "related_games": r["relatedGames"].flatMap { $0.arrayValue.map(JSONValue.array) } ?? .null,
            "can_buy": .of(r.bool("canBuy")),
            "category_ids": .of(r.ints("categoryIds") ?? []),
            "pool": .of(r.double("shopPool")),
            "custom_data": .customData(meta["custom_data"]),
            "hint_text": .of(meta.string("hint_text")),
            "purchase_ts": .null,
            "purchase_points_amount": .null,
            "purchased_today": .null,
            "purchased_this_week": .null,
            "purchased_this_month": .null,
            "purchase_type": .string(purchaseTypeName(meta.int("purchase_type"))),
            "active_till_date": .of(r.int("activeTillDate")),
            "show_timer": .of(meta.bool("show_timer")),
            "discounted_price": .of(meta.double("discount_prize")),
            "discount_price_ribbon": .of(meta.string("discount_prize_ribbon")),
            "custom_ribbon_image": .of(meta.string("custom_ribbon_image")),
            "custom_section_id": .of(meta.int("custom_section_id")),
            "only_in_custom_section": .of(meta.bool("only_in_custom_section")),
            "custom_section_type_id": .of(meta.int("custom_section_type_id")),
            "cant_buy_message": .of(meta.string("cant_buy_message")),
        ])
    }

    static let storeBuy: DataAPIRun = { ctx async throws(SocketAPIError) in
        guard let id = ctx.args.int("item_id"), id != 0 else { throw .badRequest("field \"args.item_id\" must not be 0 (Missing item id)") }
        let answer = try await ctx.request(cid: 511, ["itemId": .number(id)], expect: 512)
        return .errResult(answer)
    }

    /// `ACH_SHOP_ITEM_HISTORY_REQUEST` with the SDK's `limit`/`offset` (20/0): the purchases as
    /// `TStoreItem`s (the store.items shape, id < 1 dropped) with the purchase fields the wire's
    /// purchased item adds: `purchase_ts`, `purchase_points_amount`, and the `purchased_today` /
    /// `_this_week` / `_this_month` flags from `purchase_ts` (false when it is missing).
    static let storePurchasedItems: DataAPIRun = { ctx async throws(SocketAPIError) in
        let payload: JSONObject = ["limit": .number(ctx.args.int("limit") ?? 20), "offset": .number(ctx.args.int("offset") ?? 0)]
        let answer = try await ctx.request(cid: 541, payload, expect: 542)
        let now = ctx.nowMs()
        return .array(answer.objects("items").filter { ($0.int("id") ?? 0) >= 1 }.map { r in
            guard case .object(var item) = storeItem(r) else { return .null }
            let ts = r.int("purchase_ts")
            item["purchase_ts"] = .of(ts)
            item["purchase_points_amount"] = .of(r.int("purchase_points_amount"))
            item["purchased_today"] = .bool(ts.map { LocalCalendar.within($0, .today, now: now) } ?? false)
            item["purchased_this_week"] = .bool(ts.map { LocalCalendar.within($0, .thisWeek, now: now) } ?? false)
            item["purchased_this_month"] = .bool(ts.map { LocalCalendar.within($0, .thisMonth, now: now) } ?? false)
            return .object(item)
        })
    }

    // MARK: - Bonuses

    static let bonusesList: DataAPIRun = { ctx async throws(SocketAPIError) in
        let answer = try await ctx.request(cid: 600, [:], expect: 601)
        return .array(answer.objects("bonuses").filter { ($0.int("id") ?? 0) >= 1 }.map { r in
            .object([
                "bonus_id": .of(r.int("id")),
                "is_redeemable": .of(r.bool("redeemable")),
                "create_date": .of(r.string("createDate")),
                "redeem_date": .of(r.string("redeemDate")),
                "label_bonus_template_id": .of(r.int("labelBonusTemplateId")),
                "bonus_status_id": .of(r.int("bonusStatusId")),
                "label_bonus_template_meta_map": .of(r.object("labelBonusTemplateMetaMap")),
                "bonus_meta_map": .of(r.object("bonusMetaMap")),
            ])
        })
    }

    static let bonusesClaim: DataAPIRun = { ctx async throws(SocketAPIError) in
        guard let id = ctx.args.int("bonus_id") else { throw .badRequest("field \"args.bonus_id\" is required") }
        let answer = try await ctx.request(cid: 602, ["bonusId": .number(id)], expect: 603)
        return .errResult(answer, extra: ["success": .of(answer.bool("success"))])
    }

    // MARK: - Avatars

    /// Where relative avatar paths are resolved (``ImageDomain``).
    static func avatarDomain(_ ctx: DataAPIContext) async -> String {
        await ctx.imageDomain()
    }

    /// `url` as it is when it starts with `http`, else on `domain` (one `/` between them); null
    /// unless the result is an http or https URL with a host (``WebURL``).
    static func absoluteURL(_ url: String?, _ domain: String) -> JSONValue {
        guard let url else { return .null }
        return .of(WebURL.checked(url.hasPrefix("http") ? url : domain + (url.hasPrefix("/") ? url : "/" + url)))
    }

    static let avatarsList: DataAPIRun = { ctx async throws(SocketAPIError) in
        let answer = try await ctx.request(cid: 560, [:], expect: 561)
        let domain = await avatarDomain(ctx)
        return .array(answer.objects("avatars").map { a in
            let meta = a.object("public_meta") ?? [:]
            return .object([
                "avatar_real_id": .of(a.int("avatar_real_id")),
                "is_default": .of(a.bool("is_default")),
                "hide_until_achieved": .of(a.bool("hide_until_achieved")),
                "priority": .of(a.int("priority")),
                "description": .of(meta["description"]?.stringValue),
                "url": .url(meta["url"]?.stringValue),
                "avatar_url": absoluteURL(meta["url"]?.stringValue, domain),
                "avatar_source_type_id": .of(a.int("avatar_source_type_id")),
                "active_from_date": .of(a.string("active_from_date")),
                "active_till_date": .of(a.string("active_till_date")),
                "is_given": .of(a.bool("is_given")),
                "is_in_use": .of(a.bool("is_in_use")),
            ])
        })
    }

    static let avatarsCustomized: DataAPIRun = { ctx async throws(SocketAPIError) in
        let answer = try await ctx.request(cid: 562, [:], expect: 563)
        let domain = await avatarDomain(ctx)
        return .array(answer.objects("avatars").map { a in
            .object(["avatar_real_id": .of(a.int("avatar_real_id")), "url": absoluteURL(a.string("url"), domain),
                     "dt_created": .of(a.string("dt_created"))])
        })
    }

    static let avatarsPrompts: DataAPIRun = { ctx async throws(SocketAPIError) in
        let answer = try await ctx.request(cid: 564, [:], expect: 565)
        let domain = await avatarDomain(ctx)
        return .array(answer.objects("prompts").map { p in
            let meta = p.object("public_meta") ?? [:]
            return .object([
                "prompt_id": .of(p.int("prompt_id")),
                "name": .of(meta["name"]?.stringValue),
                "icon_url": absoluteURL(meta["icon_url"]?.stringValue, domain),
                "cost_currency_type_id": .of(p.int("cost_currency_type_id")),
                "cost_value": .of(p.double("cost_value")),
            ])
        })
    }

    static let avatarsSet: DataAPIRun = { ctx async throws(SocketAPIError) in
        guard let url = ctx.args.string("avatar_url"), !url.isEmpty else { throw .badRequest("field \"args.avatar_url\" must not be empty (avatar_url is required)") }
        guard let realID = ctx.args.int("avatar_real_id"), realID != 0 else {
            throw .badRequest("field \"args.avatar_real_id\" must not be 0 (avatar_real_id is required)")
        }
        // As the SDK: the event travels alongside the request (missions listen for it).
        try await ctx.event("gf_avatar_changed", payload: [:])
        let answer = try await ctx.request(cid: 157, ["avatar_id": .string(url), "avatar_real_id": .number(realID)], expect: 158)
        return .object(["err_code": .number(answer.int("errCode") ?? 0), "err_message": .of(answer.string("errMsg"))])
    }

    /// `avatars.customize`: POSTs the SDK's body to the avatar service and answers its
    /// `AvatarCustomizeResponse` (`cdn_url` on success, `errCode`/`errMessage` on failure: a service
    /// error is a result, as in the SDK, not a thrown one). The SDK posts to its environment's image
    /// host (`https://img<env>.smr.vc/avatar-customize`); the daemon takes the host of the avatar
    /// images (``ImageDomain``). No argument checks: the SDK makes none.
    static let avatarsCustomize: DataAPIRun = { ctx async throws(SocketAPIError) in
        let url = await avatarDomain(ctx) + "/avatar-customize"
        let label = await ctx.labelKeys()
        var body: JSONObject = [
            "label_api_key": .string(label.key),
            "user_id": .of(ctx.args.int("user_id")),
            "user_ext_id": .string(ctx.userExtID ?? ""),
        ]
        // The service prices the prompt per brand: sent when the daemon has one.
        if let brand = label.brandKey { body["brand_key"] = .string(brand) }
        body["prompt_id"] = .of(ctx.args.int("prompt_id"))
        body["avatar_url"] = .of(ctx.args.string("avatar_url"))
        body["avatar_real_id"] = .of(ctx.args.int("avatar_real_id"))
        let answer = try await ctx.httpPostJSON(url, body: body,
                                                headers: ["Content-Type": "application/json; charset=utf-8", "Accept": "application/json"])
        guard let r = answer.objectValue else {
            throw SocketAPIError(.serverError, "POST \(url): the answer is not a JSON object")
        }
        return .object(["cdn_url": .url(r.string("cdn_url")), "errCode": .of(r.int("errCode")), "errMessage": .of(r.string("errMessage"))])
    }

    // MARK: - The user

    static let userSetUsername: DataAPIRun = { ctx async throws(SocketAPIError) in
        guard let name = ctx.args.string("public_username") else { throw .badRequest("field \"args.public_username\" is required") }
        let answer = try await ctx.request(cid: 159, ["public_username_custom": .string(name)], expect: 160)
        guard let stored = answer["public_username_custom"]?.stringValue else { return .null }
        // The request only stores the name; "changed the nickname" missions listen for this event.
        try await ctx.event("gf_nickname_changed", payload: [:])
        return .string(stored)
    }

    static func props(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONObject {
        guard let props = await ctx.publicProps() else { throw SocketAPIError(.notReady, "no user is identified") }
        return props
    }

    /// `TUserProfile`'s fields and how each is read from the props.
    private enum PropType { case string, int, double, bool, strings }
    private static let profileFields: [(String, PropType)] = [
        ("core_user_language", .string), ("ach_points_balance", .int), ("ach_points_ever", .int),
        ("ach_gems_balance", .double), ("ach_diamonds_balance", .double), ("core_public_tags", .strings),
        ("ach_level_current_id", .int), ("core_is_test_account", .bool), ("avatar_url", .string),
        ("public_username", .string), ("core_inbox_unread_count", .int), ("core_recommended_deposit_amount", .double),
        ("core_recommended_casino_bet_amount", .double), ("core_recommended_sport_bet_amount", .double),
        ("ach_level_current", .string), ("ach_gamification_in_control_group", .bool), ("user_id", .int),
        ("user_country", .string), ("core_wallet_currency", .string), ("core_registration_date", .int),
        ("user_last_session_push_state", .string), ("acc_bonus_abuser", .bool), ("avatar_id", .string),
        ("avatar_real_id", .int), ("core_avatar_real_id", .int), ("core_clan_id", .string),
        ("core_clan_is_kicked", .bool), ("core_clan_kicked_out_id", .int),
        ("aff_referred_by_friend_ext_user_id", .string), ("aff_refer_friend_url", .string), ("aff_refered_friends_count", .int),
    ]

    /// The public props as `TUserProfile`; `avatar_url` from `avatar_id`: as it is when it starts with
    /// `http`, else the image domain (``ImageDomain``) + `/avatar/` + id.
    static let userProfile: DataAPIRun = { ctx async throws(SocketAPIError) in
        var props = try await props(ctx)
        if let id = props.string("avatar_id") {
            props["avatar_url"] = .of(ImageDomain.avatarURL(id, domain: await avatarDomain(ctx)).flatMap(WebURL.checked))
        }
        var out: JSONObject = [:]
        for (name, type) in profileFields {
            switch type {
            case .string: out[name] = .of(props.string(name))
            case .int: out[name] = .of(props.int(name))
            case .double: out[name] = .of(props.double(name))
            case .bool: out[name] = .of(props.bool(name))
            case .strings: out[name] = props[name]?.arrayValue.map { .array($0.compactMap { $0.stringValue.map(JSONValue.string) }) } ?? .null
            }
        }
        return .object(out)
    }

    static let userAchCategories: DataAPIRun = { ctx async throws(SocketAPIError) in
        let answer = try await ctx.request(cid: 537, [:], expect: 538)
        return .array(answer.objects("categories").map { c in
            let meta = c.object("publicMeta") ?? [:]
            return .object(["id": .of(c.int("id")), "name": .of(meta.string("name")), "order": .of(meta.int("order"))])
        })
    }

    /// `CHECK_SEGMENT_MATCH_REQUEST` with `segment_id` = the ids; (id, matching) per id asked, in
    /// order (false when the answer does not say). The answer's `segments` may be an array of
    /// `{segment_id, is_matching}` or an object keyed by id; only exact true/false count.
    static func segmentMatches(_ ctx: DataAPIContext, _ ids: [Int64]) async throws(SocketAPIError) -> [(Int64, Bool)] {
        let answer = try await ctx.request(cid: 161, ["segment_id": .array(ids.map { .number($0) })], expect: 162)
        func strict(_ v: JSONValue?) -> Bool? {
            switch v {
            case .bool(let b)?: b
            case .string("true")?: true
            case .string("false")?: false
            default: nil
            }
        }
        var matched: [Int64: Bool] = [:]
        if let rows = answer["segments"]?.arrayValue {
            for row in rows.compactMap(\.objectValue) {
                if let id = row.int("segment_id"), let m = strict(row["is_matching"]) { matched[id] = m }
            }
        } else if let byID = answer["segments"]?.objectValue {
            for (key, value) in byID {
                if let id = Int64(key), let m = strict(value) { matched[id] = m }
            }
        }
        return ids.map { ($0, matched[$0] ?? false) }
    }

    static let userSegmentListMatch: DataAPIRun = { ctx async throws(SocketAPIError) in
        let text = ctx.args.string("segment_ids") ?? ""
        var ids: [Int64] = []
        for part in text.split(separator: ",") {
            let t = part.filter { $0 != " " }
            guard let id = Int64(t) else {
                throw .badRequest("field \"args.segment_ids\" must be integers separated by commas, got \"\(String(part).prefix(40))\"")
            }
            ids.append(id)
        }
        return .array(try await segmentMatches(ctx, ids).map { .object(["segment_id": .number($0.0), "is_matching": .bool($0.1)]) })
    }

    static let userTranslations: DataAPIRun = { ctx async throws(SocketAPIError) in
        let lang = ctx.args.string("lang_code") ?? ""
        let answer = try await ctx.request(cid: 13, ["lang_code": .string(lang), "areas": .array([])], expect: 14)
        return .object(["translations": .of(answer.object("translations"))])
    }

    /// As the SDK: the wire answer (`achievements`, `tournaments` as the server sends them).
    static let userRelatedItems: DataAPIRun = { ctx async throws(SocketAPIError) in
        let answer = try await ctx.request(cid: 543, ["related_game_id": .string(ctx.args.string("related_game_id") ?? "")], expect: 544)
        return .object([
            "cid": .of(answer.double("cid")), "ts": .of(answer.double("ts")), "uuid": .of(answer.string("uuid")),
            "errCode": .of(answer.int("errCode")), "errMsg": .of(answer.string("errMsg")),
            "achievements": answer["achievements"]?.arrayValue.map(JSONValue.array) ?? .null,
            "tournaments": answer["tournaments"]?.arrayValue.map(JSONValue.array) ?? .null,
        ])
    }
}
