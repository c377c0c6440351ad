import SmarticoProtocol
import SmarticoSocketAPI

/// The `api` calls of mini-games, jackpots, raffles: their implementations (the specs are in
/// SmarticoSocketAPI's DataAPICatalog). The public shapes are the SDK's `TMiniGameTemplate`,
/// `TMiniGamePlayResult`, `JackpotDetails`, `TRaffle`, … (docs/api.md, "Mini-games, jackpots and raffles").
enum GameAPI {
    static let implementations: [String: DataAPIRun] = [
        "minigames.list": { ctx throws(SocketAPIError) in
            let answer = try await ctx.request(cid: 700)
            return .array(answer.objects("templates").map(GameShapes.miniGame))
        },
        "minigames.play": { ctx throws(SocketAPIError) in try await playMiniGame(ctx) },
        "minigames.play_batch": { ctx throws(SocketAPIError) in try await playMiniGameBatch(ctx) },
        "minigames.acknowledge": { ctx throws(SocketAPIError) in
            var payload: JSONObject = ["request_id": .string(ctx.args.string("request_id") ?? "")]
            if let lose = ctx.args.bool("lose") { payload["lose"] = .bool(lose) }
            let answer = try await ctx.request(cid: 704, payload)
            return GameShapes.envelope(answer, extra: ["request_id": .of(answer.string("request_id"))])
        },
        "jackpots.list": { ctx throws(SocketAPIError) in
            var payload: JSONObject = [:]
            if let game = ctx.args.string("related_game_id") { payload["related_game_id"] = .string(game) }
            if let id = ctx.args.int("jp_template_id") { payload["jp_template_id"] = .number(id) }
            let answer = try await ctx.request(cid: 800, payload)
            return .array(answer.objects("items").map(GameShapes.jackpot))
        },
        "jackpots.opt_in": { ctx throws(SocketAPIError) in
            let answer = try await ctx.request(cid: 804, ["jp_template_id": .number(ctx.args.int("jp_template_id") ?? 0)])
            return GameShapes.envelope(answer, extra: ["errCode": .of(answer.int("errCode")), "errMsg": .of(answer.string("errMsg"))])
        },
        "jackpots.opt_out": { ctx throws(SocketAPIError) in
            let answer = try await ctx.request(cid: 806, ["jp_template_id": .number(ctx.args.int("jp_template_id") ?? 0)])
            return GameShapes.envelope(answer, extra: ["errCode": .of(answer.int("errCode")), "errMsg": .of(answer.string("errMsg"))])
        },
        "raffles.list": { ctx throws(SocketAPIError) in
            let answer = try await ctx.request(cid: 902)
            return .array(answer.objects("items").map(GameShapes.raffle))
        },
        "raffles.opt_in": { ctx throws(SocketAPIError) in
            let answer = try await ctx.request(cid: 916, [
                "raffle_id": .number(ctx.args.int("raffle_id") ?? 0),
                "draw_id": .number(ctx.args.int("draw_id") ?? 0),
                "raffle_run_id": .number(ctx.args.int("raffle_run_id") ?? 0),
            ])
            return .errResult(answer)
        },
        "raffles.claim_prize": { ctx throws(SocketAPIError) in
            let wonID = ctx.args.int("won_id") ?? 0
            guard wonID != 0 else { throw SocketAPIError(.badRequest, "field \"args.won_id\" of call \"raffles.claim_prize\" must not be 0 (the prize's raf_won_id)") }
            let answer = try await ctx.request(cid: 908, ["won_id": .number(wonID)])
            // This one is named errorCode/errorMessage (a number), unlike its siblings.
            return .object(["errorCode": .of(answer.int("errCode").map(Double.init)), "errorMessage": .of(answer.string("errMsg"))])
        },
    ]

    /// The text the SDK reports as a round's `status` in the `minigame_attempt` event.
    static func spinStatus(_ errCode: Int64) -> String {
        switch errCode {
        case 0: "OK"
        case 40001: "NO SPINS AVAILABLE"
        case 40002: "PRIZE POOL IS EMPTY"
        case 40003: "NOT ENOUGH POINTS"
        case 40004: "MAX SPIN ATTEMPTS REACHED"
        case 40007: "MINIGAME IS NOT IN ACTIVE PERIOD"
        case 40009: "USER IS NOT IN SEGMENT"
        case 40011: "NOT ENOUGH GEMS"
        case 40012: "NOT ENOUGH DIAMONDS"
        default: "OTHER"
        }
    }

    static func newRequestID() -> String {
        var g = SystemRandomNumberGenerator()
        return UUIDv4.random(using: &g).string
    }

    /// The attempt event, as the SDK sends it; its failure does not fail the round (the SDK ignores it too).
    static func reportAttempt(_ ctx: DataAPIContext, templateID: Int64, status: String) async {
        try? await ctx.event("minigame_attempt", payload: ["saw_template_id": .number(templateID), "status": .string(status)])
    }

    /// 702 with our request_id; the attempt event with the round's status; 704 unless
    /// `acknowledge` is false — after a refused round too (which then fails the call with
    /// `server_error`), as the SDK acknowledges every round. A 705 refusing the acknowledge does
    /// not fail the call: the prize was won and its `request_id` is the app's to acknowledge
    /// again (the SDK returns the round whatever the 705 says).
    static func playMiniGame(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let templateID = ctx.args.int("template_id") ?? 0
        let requestID = newRequestID()
        let acknowledge = ctx.args.bool("acknowledge") ?? true
        let answer: JSONObject
        do {
            answer = try await ctx.request(cid: 702, ["saw_template_id": .number(templateID), "request_id": .string(requestID)])
        } catch {
            if error.code == .serverError, let code = error.errCode {
                await reportAttempt(ctx, templateID: templateID, status: spinStatus(code))
                if acknowledge { _ = try? await ctx.request(cid: 704, ["request_id": .string(requestID)]) }
            }
            throw error
        }
        await reportAttempt(ctx, templateID: templateID, status: spinStatus(answer.int("errCode") ?? 0))
        if acknowledge {
            do {
                _ = try await ctx.request(cid: 704, ["request_id": .string(requestID)])
            } catch {
                // A refused acknowledge leaves the prize won; anything else (a timeout) fails the call.
                if error.code != .serverError { throw error }
            }
        }
        return .errResult(answer, extra: ["prize_id": .of(answer.int("saw_prize_id")), "request_id": .string(requestID)])
    }

    /// 712 with a request_id per round; the attempt event ("OK" when any round succeeded, else
    /// "BATCH FAIL"); 704 for each result's request_id (a refused acknowledge is ignored, as the SDK does).
    static func playMiniGameBatch(_ ctx: DataAPIContext) async throws(SocketAPIError) -> JSONValue {
        let templateID = ctx.args.int("template_id") ?? 0
        let count = max(0, ctx.args.int("spin_count") ?? 0)
        let spins: [JSONValue] = (0..<count).map { _ in
            .object(["request_id": .string(newRequestID()), "saw_template_id": .number(templateID)])
        }
        let answer = try await ctx.request(cid: 712, ["spins": .array(spins)])
        let results = answer.objects("results")
        let anyOK = results.contains { $0.int("errCode") == 0 }
        await reportAttempt(ctx, templateID: templateID, status: anyOK ? "OK" : "BATCH FAIL")
        for id in results.compactMap({ $0.string("request_id") }) {
            _ = try? await ctx.request(cid: 704, ["request_id": .string(id)])
        }
        return .array(results.map { r in
            .object([
                "saw_prize_id": .of(r.int("saw_prize_id")),
                "errCode": .of(r.int("errCode")),
                "errMessage": .of(r.string("errMsg")),
                "jackpot_amount": .of(r.double("jackpot_amount")),
                "first_spin_in_period": .of(r.double("first_spin_in_period")),
            ])
        })
    }
}
