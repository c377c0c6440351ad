/// The `api` calls of inbox, store, bonuses, avatars, user (SDK: InboxApi, StoreApi, BonusesApi, AvatarsApi, UserApi, the store part of ActionsApi).
public enum DataAPIInboxStoreCalls {
    private static let guid = DataAPIArg("message_guid", .string, required: true, "the message's `message_guid` (wire `engagement_uid`)")

    public static let calls: [DataAPICallSpec] = [
        // Inbox (InboxApi)
        DataAPICallSpec("inbox.list", sdk: "getInboxMessages", args: [
            DataAPIArg("from", .integer, default: "0", range: 0...1_000_000, "index of the first message"),
            DataAPIArg("to", .integer, default: "20", range: 0...1_000_000, "index after the last; a page holds at most 20 (`limit` = min(to - from, 20))"),
            DataAPIArg("favorite_only", .boolean, default: "false", "only starred messages"),
            DataAPIArg("category_id", .integer, "only this category"),
            DataAPIArg("read_status", .integer, "sent as `read_status` when given"),
        ], cids: [513], result: "[TInboxMessage]", "the inbox's envelopes (guid, date, read, starred); bodies come from inbox.body"),
        DataAPICallSpec("inbox.unread_count", sdk: "getInboxUnreadCount", cids: [513], result: "Int64",
                        "the unread counter (a one-message page read for its `unread_count`)"),
        DataAPICallSpec("inbox.body", sdk: "getInboxMessageBody", args: [guid], cids: [], result: "TInboxMessageBody?",
                        "one message's body: HTTP GET INBOX_PUBLIC_CDN + guid + \".json\", cached by guid"),
        DataAPICallSpec("inbox.mark_read", sdk: "markInboxMessageAsRead", role: .control, args: [guid], cids: [529],
                        result: "InboxMarkMessageAction", "marks one message read"),
        DataAPICallSpec("inbox.mark_starred", sdk: "markUnmarkInboxMessageAsFavorite", role: .control, args: [
            guid, DataAPIArg("mark", .boolean, required: true, "true: star, false: unstar"),
        ], cids: [531], result: "InboxMarkMessageAction", "stars or unstars one message"),
        DataAPICallSpec("inbox.delete", sdk: "deleteInboxMessage", role: .control, args: [guid], cids: [535],
                        result: "InboxMarkMessageAction", "deletes one message"),
        // Store (StoreApi, ActionsApi.buyStoreItem, HistoryApi.getStorePurchasedItems)
        DataAPICallSpec("store.items", sdk: "getStoreItems", cids: [509], result: "[TStoreItem]",
                        "the store's items with type, price, ribbon and whether the user can buy them"),
        DataAPICallSpec("store.buy", sdk: "buyStoreItem", role: .control, args: [
            DataAPIArg("item_id", .integer, required: true, "the item's `id` (not 0)"),
        ], cids: [511], result: "TBuyStoreItemResult", "buys one item with the user's points, gems or diamonds"),
        DataAPICallSpec("store.purchased_items", sdk: "getStorePurchasedItems", args: [
            DataAPIArg("limit", .integer, default: "20", range: 0...1_000_000, "how many purchases (sent as `limit`)"),
            DataAPIArg("offset", .integer, default: "0", range: 0...1_000_000, "how many to skip (sent as `offset`)"),
        ], cids: [541], result: "[TStoreItem]", "what the user bought: the store item shape with purchase_ts and purchased_today/this_week/this_month"),
        // Bonuses (BonusesApi)
        DataAPICallSpec("bonuses.list", sdk: "getBonuses", cids: [600], result: "[TBonus]", "the operator bonuses awarded to the user"),
        DataAPICallSpec("bonuses.claim", sdk: "claimBonus", role: .control, args: [
            DataAPIArg("bonus_id", .integer, required: true, "the bonus's `bonus_id`"),
        ], cids: [602], result: "TClaimBonusResult", "claims a redeemable bonus"),
        // Avatars (AvatarsApi)
        DataAPICallSpec("avatars.list", sdk: "getAvatarsList", cids: [560], result: "[TAvatarDefinition]", "the avatar catalogue"),
        DataAPICallSpec("avatars.customized", sdk: "getAvatarsCustomized", cids: [562], result: "[TAvatarCustomized]",
                        "the user's AI-customized avatars"),
        DataAPICallSpec("avatars.prompts", sdk: "getAvatarPrompts", cids: [564], result: "[TAvatarPrompt]",
                        "the AI customization styles and their price"),
        DataAPICallSpec("avatars.set", sdk: "setAvatar", role: .control, args: [
            DataAPIArg("avatar_url", .string, required: true, "the catalogue entry's `url` (sent as `avatar_id`)"),
            DataAPIArg("avatar_real_id", .integer, required: true, "the catalogue entry's `avatar_real_id` (not 0)"),
        ], cids: [9, 157], result: "TSetAvatarResult", "sets the user's avatar (and sends the `gf_avatar_changed` event)"),
        DataAPICallSpec("avatars.customize", sdk: "avatarsCustomize", role: .control, args: [
            DataAPIArg("user_id", .integer, required: true, "the user's NUMERIC Smartico id (`user.profile`'s `user_id`), not the external id"),
            DataAPIArg("prompt_id", .integer, required: true, "the style: an `avatars.prompts` entry's `prompt_id`"),
            DataAPIArg("avatar_url", .string, required: true, "the base avatar: a catalogue entry's `url`"),
            DataAPIArg("avatar_real_id", .integer, required: true, "the base avatar's `avatar_real_id`"),
        ], cids: [], result: "AvatarCustomizeResponse",
           "AI-customizes an avatar: an HTTP POST to the avatar service (DYNAMIC_IMAGE_DOMAIN + `avatar-customize`); costs the prompt's price"),
        // The user (UserApi, the connection's changeUsername)
        DataAPICallSpec("user.set_username", sdk: "changeUsername", role: .control, args: [
            DataAPIArg("public_username", .string, required: true, "the new public name"),
        ], cids: [159, 9], result: "String?", "changes the public username (and sends the `gf_nickname_changed` event)"),
        DataAPICallSpec("user.profile", sdk: "getUserProfile", cids: [], result: "TUserProfile",
                        "the user's public props (kept from IDENTIFY and the 108 pushes; no request), with avatar_url"),
        DataAPICallSpec("user.level_counters", sdk: "getUserLevelExtraCounters", cids: [], result: "UserLevelExtraCountersT",
                        "the sliding-window level counters from the public props (no request)"),
        DataAPICallSpec("user.ach_categories", sdk: "getAchCategories", cids: [537], result: "[TAchCategory]",
                        "the mission/badge categories"),
        DataAPICallSpec("user.segment_match", sdk: "checkSegmentMatch", args: [
            DataAPIArg("segment_id", .integer, required: true, "the segment's id"),
        ], cids: [161], result: "Bool", "whether the user is in one segment"),
        DataAPICallSpec("user.segment_list_match", sdk: "checkSegmentListMatch", args: [
            DataAPIArg("segment_ids", .string, required: true, "segment ids separated by commas (`12,13`)"),
        ], cids: [161], result: "[TSegmentCheckResult]", "whether the user is in each of several segments"),
        DataAPICallSpec("user.translations", sdk: "getTranslations", args: [
            DataAPIArg("lang_code", .string, required: true, "the language (`EN`)"),
        ], cids: [13], result: "TGetTranslations", needsUser: false, "the operator's translations for a language"),
        DataAPICallSpec("user.related_items", sdk: "getRelatedItemsForGame", args: [
            DataAPIArg("related_game_id", .string, required: true, "the casino game's `ext_game_id`"),
        ], cids: [543], result: "GetRelatedAchTourResponse", "the missions and tournaments tied to a casino game"),
    ]
}
