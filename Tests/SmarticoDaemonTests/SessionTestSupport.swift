import Foundation
import SmarticoTestSupport
import SmarticoProtocol
import Testing
@testable import SmarticoDaemon

enum SessionFixtures {
    static let labelKey = "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2"
    static let url = "ws://127.0.0.1:8080/websocket/services?master&domain=app.example&version=1.2.3"
    static let t0: Int64 = 1_700_000_000_000

    static func config(
        url: String? = SessionFixtures.url, user: String? = nil, hash: String? = nil, hashCommand: [String]? = nil,
        policy: DaemonConfig.LoginPolicy = .logicalSession, language: String? = nil, keepalive: Int = 29,
        push: DaemonConfig.User.Push = DaemonConfig.User.Push(),
        reidentifyAfterS: Int = DaemonConfig.User.defaultReidentifyAfterS
    ) -> ResolvedConfig {
        let cfg = DaemonConfig(
            server: .init(url: url, labelKey: Secret(labelKey), brandKey: "brand-1"),
            client: .init(trackerVersion: "1.2.3", domain: "app.example", agent: "smarticod-test", language: language),
            user: .init(extUserID: user, hash: hash.map { Secret($0) }, hashCommand: hashCommand, push: push, reidentifyAfterS: reidentifyAfterS),
            session: .init(keepaliveS: keepalive, loginPolicy: policy))
        return try! ResolvedConfig(cfg, environment: [:])
    }
}

/// Drives a `SessionMachine` the way a driver does: keeps the timers it schedules and fires
/// them in order when time advances. Time is a value; nothing sleeps.
struct Harness {
    var machine: SessionMachine
    var now: Int64 = SessionFixtures.t0
    var timers: [SessionTimer: Int64] = [:]
    var conn: ConnectionID?
    var all: [SessionAction] = []

    init(_ config: ResolvedConfig, timeZone: TimeZone = TimeZone(identifier: "UTC")!, seed: UInt64 = 42, maxPendingRequests: Int? = nil) {
        // The machine takes a UTCOffset (no Foundation in the daemon); Foundation's rules drive it here.
        let zone = UTCOffset { timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double($0))) }
        var env = SessionEnvironment(timeZone: zone, random: SessionRandom(SplitMix64(seed: seed)))
        env.identifyReplyTimeoutMs = 60_000
        if let maxPendingRequests { env.maxPendingRequests = maxPendingRequests }
        machine = SessionMachine(config: config, environment: env)
    }

    /// Handed back to the machine for every input, as the driver does (`handle(_:now:into:)`):
    /// what the last input's actions left in it must not show up again.
    var reused: [SessionAction] = []

    @discardableResult
    mutating func feed(_ input: SessionInput) -> [SessionAction] {
        machine.handle(input, now: now, into: &reused)
        if case .outboxLoaded = input { unansweredLoads = max(0, unansweredLoads - 1) }
        let actions = reused
        for a in actions {
            switch a {
            case .loadOutbox: unansweredLoads += 1
            case .schedule(let t, let at): timers[t] = at
            case .cancel(let t): timers[t] = nil
            case .connect(let c, _): conn = c
            default: break
            }
        }
        all += actions
        return actions
    }

    /// Moves time forward by `ms`, firing every timer that falls due, in deadline order.
    @discardableResult
    mutating func advance(by ms: Int64) -> [SessionAction] {
        let target = now + ms
        var actions: [SessionAction] = []
        while let (t, at) = timers.filter({ $0.value <= target }).min(by: { $0.value < $1.value }) {
            now = max(now, at)
            timers[t] = nil
            actions += feed(.timerFired(t))
        }
        now = target
        return actions
    }

    @discardableResult
    mutating func start(_ snapshot: SessionSnapshot = SessionSnapshot(deviceID: "device-1", fingerprint: 1234)) -> [SessionAction] {
        feed(.start(snapshot))
    }

    @discardableResult
    mutating func connected() -> [SessionAction] { feed(.connected(conn!)) }

    @discardableResult
    mutating func server(_ json: JSONObject) -> [SessionAction] { feed(.received(conn!, json.serialized())) }

    @discardableResult
    mutating func serverBytes(_ text: String) -> [SessionAction] { feed(.received(conn!, Array(text.utf8))) }

    /// What the outbox holds when a connection sorts it after INIT (session rule 5): `initOK`
    /// answers the machine's load with it.
    var waitingAtInit: [OutboxEntry] = []
    /// `.loadOutbox` actions not answered yet (a driver answers each before the next input).
    var unansweredLoads = 0

    /// cid 4, and the answers to the outbox loads: earlier connections' ones (left unanswered by
    /// the test) with nothing, the sorting one with ``waitingAtInit``.
    @discardableResult
    mutating func initOK(settings: JSONObject? = nil) -> [SessionAction] {
        var a = server(InitSessionResponse(products: [.gamification], payload: ["country": "MT"], settings: settings).json)
        guard a.loads > 0 else { return a }
        for k in stride(from: unansweredLoads, to: 0, by: -1) { a += feed(.outboxLoaded(k == 1 ? waitingAtInit : [])) }
        return a
    }

    @discardableResult
    mutating func identifyOK(props: JSONObject = ["ach_points_balance": 10], avatar: String? = "av-1") -> [SessionAction] {
        server(IdentifyUserResponse(props: props, publicUsername: "Player One", avatarID: avatar,
                                    gamificationURL: "https://wrap.example/gf?label=1&user_ext_id=u1",
                                    popupURL: "https://wrap.example/popup?x=1").json)
    }

    /// start → connected → cid 4 (→ cid 6 when a user is configured and answers).
    @discardableResult
    mutating func bringUp(_ snapshot: SessionSnapshot = SessionSnapshot(deviceID: "device-1", fingerprint: 1234),
                          identify: Bool = true) -> [SessionAction] {
        var a = start(snapshot)
        a += connected()
        a += initOK()
        if identify, a.sent.contains(where: { $0.cid == 5 }) { a += identifyOK() }
        return a
    }

    /// Lets `ms` pass with a server PING every 10 s, so the connection stays alive.
    @discardableResult
    mutating func keepAlive(for ms: Int64) -> [SessionAction] {
        var a: [SessionAction] = []
        var left = ms
        while left > 0 {
            let step = min(left, 10_000)
            a += advance(by: step)
            a += server(["cid": 1])
            left -= step
        }
        return a
    }

    /// The server closes the connection and the backoff runs out: a new connection is open.
    @discardableResult
    mutating func reconnect() -> [SessionAction] {
        var a = feed(.closed(conn!, code: 1006, reason: "gone", clean: false))
        a += advance(by: timers[.backoff]! - now)
        a += connected()
        return a
    }
}

extension JSONObject {
    var cid: Int64? { self["cid"]?.int64Value }
}

extension Array where Element == SessionAction {
    /// The messages written to the WebSocket, parsed.
    var sent: [JSONObject] {
        compactMap {
            if case .send(_, let m) = $0, case .object(let o)? = try? JSONValue(parsing: m.bytes) { return o }
            return nil
        }
    }

    func sent(cid: Int64) -> [JSONObject] { sent.filter { $0.cid == cid } }

    /// Events published directly or through `journalOnce`.
    var events: [DaemonEvent] {
        compactMap {
            switch $0 {
            case .emit(let e): return e
            case .journalOnce(_, _, let e): return e
            default: return nil
            }
        }
    }

    func events(_ name: String) -> [DaemonEvent] { events.filter { $0.name == name } }

    var replies: [(SessionRequestID, Result<JSONValue, SocketAPIError>)] {
        compactMap { if case .reply(let id, let r) = $0 { return (id, r) } else { return nil } }
    }

    func reply(_ id: UInt64) -> Result<JSONValue, SocketAPIError>? {
        replies.first { $0.0 == SessionRequestID(id) }?.1
    }

    var connects: [String] { compactMap { if case .connect(_, let url) = $0 { return url } else { return nil } } }

    var closes: [Int] { compactMap { if case .close(_, let code, _) = $0 { return code } else { return nil } } }

    var aborts: Int { filter { if case .abort = $0 { true } else { false } }.count }

    var hashRuns: [(UInt64, [String], String)] {
        compactMap { if case .runHashCommand(let t, let argv, let u) = $0 { return (t, argv, u) } else { return nil } }
    }

    var stored: [OutboxEntry] {
        compactMap {
            switch $0 {
            case .storeOutbox(let e), .storeLatest(_, let e): return e
            default: return nil
            }
        }
    }

    var markedSent: [String] { flatMap { if case .markSent(let u) = $0 { return u } else { return [] } } }

    var loads: Int { filter { if case .loadOutbox = $0 { true } else { false } }.count }

    func contains(_ action: SessionAction) -> Bool { contains(where: { $0 == action }) }
}

extension Result where Success == JSONValue, Failure == SocketAPIError {
    var value: JSONValue? { if case .success(let v) = self { v } else { nil } }
    var error: SocketAPIError? { if case .failure(let e) = self { e } else { nil } }
}
