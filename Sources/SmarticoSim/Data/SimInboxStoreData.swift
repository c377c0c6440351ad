import SmarticoProtocol

/// The simulated data API's inbox (bodies on the HTTP port), store, bonuses, avatars, user: one user's state and the routes that read and change it.
public struct SimInboxStoreData: Sendable {
    public init() {}

    static let routes: [SimDataRoute] = []
}
