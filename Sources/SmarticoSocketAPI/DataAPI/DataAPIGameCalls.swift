/// The `api` calls of mini-games, jackpots, raffles (SDK: MiniGamesApi, JackpotsApi, RafflesApi, the mini-game and raffle parts of ActionsApi).
public enum DataAPIGameCalls {
    public static let calls: [DataAPICallSpec] = [
        DataAPICallSpec("minigames.list", sdk: "getMiniGames", cids: [700], result: "[TMiniGameTemplate]",
                        "the mini-games (wheel, scratch card, gift box, lootbox, …) with spins, buy-in and prizes"),
        DataAPICallSpec("minigames.play", sdk: "playMiniGame", role: .control, args: [
            DataAPIArg("template_id", .integer, required: true, "the mini-game's `id` (minigames.list)"),
            DataAPIArg("acknowledge", .boolean, default: "true", "acknowledge the win at once; false: call minigames.acknowledge with the returned request_id later"),
        ], cids: [702, 9, 704], result: "TMiniGamePlayResult",
        "play one round: the prize won, a minigame_attempt event, and the win acknowledged unless acknowledge=false"),
        DataAPICallSpec("minigames.play_batch", sdk: "playMiniGameBatch", role: .control, args: [
            DataAPIArg("template_id", .integer, required: true, "the mini-game's `id` (minigames.list)"),
            DataAPIArg("spin_count", .integer, required: true, range: 1...100, "how many rounds to play"),
        ], cids: [712, 9, 704], result: "[TMiniGamePlayBatchResult]",
        "play several rounds in one request; each win is acknowledged"),
        DataAPICallSpec("minigames.acknowledge", sdk: "miniGameWinAcknowledgeRequest", role: .control, args: [
            DataAPIArg("request_id", .string, required: true, "the `request_id` minigames.play returned"),
            DataAPIArg("lose", .boolean, "true: finalise the round as lost"),
        ], cids: [704], result: "SAWDoAknowledgeResponse", "confirm that the user saw a prize won with acknowledge=false"),
        DataAPICallSpec("jackpots.list", sdk: "jackpotGet", args: [
            DataAPIArg("related_game_id", .string, "only the jackpots this game contributes to"),
            DataAPIArg("jp_template_id", .integer, "only this jackpot"),
        ], cids: [800], result: "[JackpotDetails]", "the jackpots the user is eligible for, with their live pots"),
        DataAPICallSpec("jackpots.opt_in", sdk: "jackpotOptIn", role: .control, args: [
            DataAPIArg("jp_template_id", .integer, required: true, "the jackpot's `jp_template_id` (jackpots.list)"),
        ], cids: [804], result: "JackpotsOptinResponse", "join a jackpot"),
        DataAPICallSpec("jackpots.opt_out", sdk: "jackpotOptOut", role: .control, args: [
            DataAPIArg("jp_template_id", .integer, required: true, "the jackpot's `jp_template_id` (jackpots.list)"),
        ], cids: [806], result: "JackpotsOptoutResponse", "leave a jackpot"),
        DataAPICallSpec("raffles.list", sdk: "getRaffles", cids: [902], result: "[TRaffle]",
                        "the raffles with their draws, prizes, winners and the user's tickets"),
        DataAPICallSpec("raffles.opt_in", sdk: "requestRaffleOptin", role: .control, args: [
            DataAPIArg("raffle_id", .integer, required: true, "the raffle's `id`"),
            DataAPIArg("draw_id", .integer, required: true, "the draw's `id`"),
            DataAPIArg("raffle_run_id", .integer, required: true, "the draw's `run_id`"),
        ], cids: [916], result: "TRaffleOptinResponse", "opt into a draw that has requires_optin"),
        DataAPICallSpec("raffles.claim_prize", sdk: "claimRafflePrize", role: .control, args: [
            DataAPIArg("won_id", .integer, required: true, "the winner entry's `raf_won_id` (not 0)"),
        ], cids: [908], result: "TransformedRaffleClaimPrizeResponse", "claim a raffle prize the user won"),
    ]
}
