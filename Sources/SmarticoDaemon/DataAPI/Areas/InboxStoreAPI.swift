import SmarticoProtocol
import SmarticoSocketAPI

/// The `api` calls of inbox, store, bonuses, avatars, user: their implementations (the specs are in
/// SmarticoSocketAPI's DataAPICatalog).
enum InboxStoreAPI {
    static let implementations: [String: DataAPIRun] = [:]
}
