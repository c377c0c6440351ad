/// The `api` calls of tournaments, leaderboards, clans, history (SDK: TournamentsApi, LeaderboardApi, ClansApi, HistoryApi, the tournaments part of ActionsApi).
public enum DataAPICompetitionCalls {
    public static let calls: [DataAPICallSpec] = [
        DataAPICallSpec(
            "tournaments.list", sdk: "getTournamentsList", cids: [517], result: "[TTournament]",
            "the tournament lobby: every tournament visible to the user, its state flags and the user's own row"),
        DataAPICallSpec(
            "tournaments.info", sdk: "getTournamentInstanceInfo",
            args: [DataAPIArg("tournament_instance_id", .integer, required: true, "the tournament's instance_id (tournaments.list)")],
            cids: [519], result: "TTournamentDetailed",
            "one tournament in full: the lobby fields, its players, prizes, the user's row and clan standings"),
        DataAPICallSpec(
            "tournaments.register", sdk: "registerInTournament", role: .control,
            args: [DataAPIArg("tournament_instance_id", .integer, required: true, "the tournament's instance_id; not 0")],
            cids: [521], result: "TTournamentRegistrationResult",
            "register the user in a tournament (a refusal is server_error with errCode 30002…30008)"),
        DataAPICallSpec(
            "leaderboards.get", sdk: "getLeaderBoard",
            args: [DataAPIArg("period_type", .integer, required: true, "1 daily, 2 weekly, 3 monthly"),
                   DataAPIArg("previous_period", .integer, default: "0", range: 0...1_000,
                              "0 the running period, 1 the previous one, 2 the one before, …")],
            cids: [505], result: "LeaderBoardDetailsT?",
            "one period's leaderboard with its ranked users and the user's own row (null when none)"),
        DataAPICallSpec(
            "leaderboards.list", sdk: "getLeaderBoards", cids: [505], result: "[LeaderBoardDetailsT]",
            "every leaderboard of the label, one per period type, ordered by period type"),
        DataAPICallSpec(
            "leaderboards.settings", sdk: "getLeaderBoardSettings", cids: [], result: "LeaderBoardSettingsT",
            needsUser: false,
            "the operator's privacy flags for drawing leaderboards (from INIT's label settings, no request)"),
        DataAPICallSpec(
            "clans.list", sdk: "getClans", cids: [570], result: "TClans",
            "the clans, the user's clan and their cooldown"),
        DataAPICallSpec(
            "clans.info", sdk: "getClanInfo",
            args: [DataAPIArg("clan_id", .integer, required: true, "the clan's clan_id (clans.list)")],
            cids: [572], result: "TClanInfo",
            "one clan in detail with its members and their contribution scores"),
        DataAPICallSpec(
            "clans.join", sdk: "joinClan", role: .control,
            args: [DataAPIArg("clan_id", .integer, required: true, "the clan to join")],
            cids: [574], result: "TClanJoinResult",
            "join a clan (a refusal is server_error with its errCode)"),
        DataAPICallSpec(
            "clans.tournament_players", sdk: "getClanTournamentPlayers",
            args: [DataAPIArg("tournament_instance_id", .integer, required: true, "a clan-based tournament's instance_id"),
                   DataAPIArg("clan_id", .integer, required: true, "the clan")],
            cids: [576], result: "TClanTournamentPlayers",
            "the members of one clan inside a clan-based tournament, with their scores"),
        DataAPICallSpec(
            "history.activity_log", sdk: "getActivityLog",
            args: [DataAPIArg("start_time_seconds", .integer, required: true, "the window's start, epoch seconds"),
                   DataAPIArg("end_time_seconds", .integer, required: true, "the window's end, epoch seconds"),
                   DataAPIArg("from", .integer, required: true, range: 0...1_000_000, "the first row (offset)"),
                   DataAPIArg("to", .integer, required: true, range: 0...1_000_000, "the row after the last; a page holds at most 50"),
                   DataAPIArg("types", .string, "activity types, comma-separated (3 points, 1 gems, 2 diamonds, …)"),
                   DataAPIArg("src_types", .string, "source type ids, comma-separated")],
            cids: [545], result: "[TActivityLog]",
            "the user's points/gems/diamonds and activity history within a time window"),
        DataAPICallSpec(
            "history.mini_games", sdk: "getMiniGamesHistory",
            args: [DataAPIArg("limit", .integer, default: "20", range: 1...1_000, "rows per page"),
                   DataAPIArg("offset", .integer, default: "0", range: 0...1_000_000, "the first row"),
                   DataAPIArg("saw_template_id", .integer, "only this mini-game template")],
            cids: [716], result: "[TSawHistory]",
            "the user's mini-game prize history, newest first"),
        DataAPICallSpec(
            "history.store_categories", sdk: "getStoreCategories", cids: [515], result: "[TStoreCategory]",
            "the store's categories"),
        DataAPICallSpec(
            "history.jackpot_winners", sdk: "getJackpotWinners",
            args: [DataAPIArg("limit", .integer, default: "20", range: 1...1_000, "rows per page"),
                   DataAPIArg("offset", .integer, default: "0", range: 0...1_000_000, "the first row"),
                   DataAPIArg("jp_template_id", .integer, "the jackpot template")],
            cids: [809], result: "[JackpotWinnerHistory]",
            "recent winners of a jackpot"),
        DataAPICallSpec(
            "history.jackpot_win_stats", sdk: "getJackpotWinStats",
            args: [DataAPIArg("limit", .integer, default: "20", range: 1...1_000, "rows per page"),
                   DataAPIArg("offset", .integer, default: "0", range: 0...1_000_000, "the first row"),
                   DataAPIArg("jp_template_id", .integer, "the jackpot template")],
            cids: [809], result: "TGetJackpotWinStatsResponse",
            "a winners page and the jackpot's win statistics"),
        DataAPICallSpec(
            "history.jackpot_eligible_games", sdk: "getJackpotEligibleGames",
            args: [DataAPIArg("jp_template_id", .integer, required: true, "the jackpot template")],
            cids: [811], result: "TGetJackpotEligibleGamesResponse",
            "the casino games that contribute to a jackpot"),
        DataAPICallSpec(
            "history.raffle_won_prizes", sdk: "getRaffleWonPrizes",
            args: [DataAPIArg("raffle_id", .integer, required: true, "the raffle; not 0"),
                   DataAPIArg("offset", .integer, default: "0", range: 0...1_000_000, "the first row"),
                   DataAPIArg("limit", .integer, default: "20", range: 1...1_000, "rows per page")],
            cids: [920], result: "GetRaffleWonPrizesResponse",
            "the prizes the user won in a raffle"),
        DataAPICallSpec(
            "history.custom_sections", sdk: "getCustomSections", cids: [523], result: "[TUICustomSection]",
            "the operator's custom sections, by id"),
    ]
}
