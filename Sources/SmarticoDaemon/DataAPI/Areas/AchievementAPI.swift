import SmarticoProtocol
import SmarticoSocketAPI

/// The `api` calls of missions, badges, levels, mission details: their implementations (the specs are in
/// SmarticoSocketAPI's DataAPICatalog).
enum AchievementAPI {
    static let implementations: [String: DataAPIRun] = [:]
}
