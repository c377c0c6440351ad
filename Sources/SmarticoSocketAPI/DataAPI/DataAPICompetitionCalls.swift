/// The `api` calls of tournaments, leaderboards, clans, history (SDK: TournamentsApi, LeaderboardApi, ClansApi, HistoryApi, the tournaments part of ActionsApi).
public enum DataAPICompetitionCalls {
    public static let calls: [DataAPICallSpec] = []
}
