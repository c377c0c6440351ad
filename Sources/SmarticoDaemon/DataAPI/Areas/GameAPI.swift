import SmarticoProtocol
import SmarticoSocketAPI

/// The `api` calls of mini-games, jackpots, raffles: their implementations (the specs are in
/// SmarticoSocketAPI's DataAPICatalog).
enum GameAPI {
    static let implementations: [String: DataAPIRun] = [:]
}
