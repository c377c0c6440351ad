/// The `api` calls of inbox, store, bonuses, avatars, user (SDK: InboxApi, StoreApi, BonusesApi, AvatarsApi, UserApi, the store part of ActionsApi).
public enum DataAPIInboxStoreCalls {
    public static let calls: [DataAPICallSpec] = []
}
