import SmarticoProtocol

/// The simulated data API's missions, badges, levels: one user's state and the routes that read and change it.
public struct SimAchievementData: Sendable {
    public init() {}

    static let routes: [SimDataRoute] = []
}
