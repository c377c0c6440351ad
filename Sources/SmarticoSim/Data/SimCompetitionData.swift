import SmarticoProtocol

/// The simulated data API's tournaments, leaderboards, clans, history: one user's state and the routes that read and change it.
public struct SimCompetitionData: Sendable {
    public init() {}

    static let routes: [SimDataRoute] = []
}
