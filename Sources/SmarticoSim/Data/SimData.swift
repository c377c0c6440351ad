import SmarticoProtocol

// The simulator's side of Smartico's data API (docs/api.md, docs/simulator.md): plausible answers
// shaped like the server's wire types, from a state per user that the mutating requests change
// (an opted-in mission shows as opted in, a bought item costs points). The areas each keep their
// part of the state and their handlers in a file of their own (SimAchievementData, …).

/// What one user has in the simulated data API. Starts from each area's sample data.
public struct SimUserData: Sendable {
    /// The gamification balances (`ach_points_balance`, gems, diamonds), spent by the store and
    /// mini-games.
    public var points: Int64 = 5000
    public var gems: Int64 = 40
    public var diamonds: Int64 = 5
    public var achievements = SimAchievementData()
    public var inboxStore = SimInboxStoreData()
    public var competition = SimCompetitionData()
    public var games = SimGameData()

    public init() {}
}

/// What a handler may read besides the request and the user's state.
public struct SimDataEnvironment: Sendable {
    /// The identified user's ext id.
    public var user: String
    /// Wall-clock milliseconds.
    public var now: Int64
    /// Base URL of the simulator's HTTP port, no trailing slash (inbox bodies are served there).
    public var httpBaseURL: String
}

/// Answers one data API request: the body of the answer (`cid`, `errCode` 0 and `errMsg` null are
/// added unless the body sets them; an `errCode` ≠ 0 is a refusal). Also gets fire-and-forget
/// requests when `response` is nil (the answer is ignored).
public typealias SimDataHandler = @Sendable (_ request: JSONObject, _ data: inout SimUserData, _ env: SimDataEnvironment) -> JSONObject

/// One request class id the simulated data API answers.
public struct SimDataRoute: Sendable {
    public var request: Int64
    /// The answer's class id; nil: no answer.
    public var response: Int64?
    public var handle: SimDataHandler

    public init(_ request: Int64, _ response: Int64?, _ handle: @escaping SimDataHandler) {
        self.request = request
        self.response = response
        self.handle = handle
    }
}

public enum SimData {
    /// Every area's routes (a request cid appears once: SimDataTests checks it).
    public static let allRoutes: [SimDataRoute] =
        SimAchievementData.routes + SimInboxStoreData.routes + SimCompetitionData.routes + SimGameData.routes

    /// Every route, by request cid.
    public static let routes: [Int64: SimDataRoute] = Dictionary(allRoutes.map { ($0.request, $0) }, uniquingKeysWith: { first, _ in first })
}

/// A one-shot replacement of a data API answer (`data_fault` control op).
public enum SimDataFault: Sendable, Equatable {
    /// `errCode`/`errMsg` instead of the data.
    case error(code: Int64, message: String?)
    /// No answer at all.
    case silent
    /// This body (the answer's fields) instead of the data.
    case replace(JSONObject)
}
