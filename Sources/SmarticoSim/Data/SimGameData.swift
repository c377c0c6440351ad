import SmarticoProtocol

/// The simulated data API's mini-games, jackpots, raffles: one user's state and the routes that read and change it.
public struct SimGameData: Sendable {
    public init() {}

    static let routes: [SimDataRoute] = []
}
