import SmarticoProtocol
import SmarticoSocketAPI

/// The `api` calls of tournaments, leaderboards, clans, history: their implementations (the specs are in
/// SmarticoSocketAPI's DataAPICatalog).
enum CompetitionAPI {
    static let implementations: [String: DataAPIRun] = [:]
}
