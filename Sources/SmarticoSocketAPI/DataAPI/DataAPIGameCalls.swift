/// The `api` calls of mini-games, jackpots, raffles (SDK: MiniGamesApi, JackpotsApi, RafflesApi, the mini-game and raffle parts of ActionsApi).
public enum DataAPIGameCalls {
    public static let calls: [DataAPICallSpec] = []
}
