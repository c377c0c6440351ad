import SmarticoProtocol

/// Everything the simulator's behaviour depends on (the command line fills it).
///
/// Times are milliseconds. The same clock (`now`, milliseconds since the Unix epoch) stamps
/// `ts` and drives keepalive, delays and scheduled pushes.
///
/// Every setting has its default here; the command line and the tests set theirs with the
/// memberwise initializer.
public struct SimConfig: Sendable, Equatable {
    /// The label key (with its environment suffix) used in the wrapper URLs. When set, INIT must
    /// carry it (with or without the suffix) or is answered with errCode 100001. Nil: any key is
    /// accepted and the one from INIT is used in the URLs.
    public var labelKey: String?
    /// The brand key put in the wrapper URLs (nil: the one from INIT, if any).
    public var brandKey: String?
    /// When set, IDENTIFY hashes are checked the way Smartico does (see `SimHash`).
    public var hashSalt: String?
    /// Server PING period; 0 disables server pings.
    public var pingIntervalMs: Int64 = 30_000
    /// A client that has not answered a server PING within this long is dropped.
    public var pongTimeoutMs: Int64 = 10_000
    /// Scheduled pushes: one push per period to every identified client; nil disables them.
    public var emitEveryMs: Int64?
    /// The kinds of scheduled pushes, used in turn.
    public var emitKinds: [SimPushKind] = [.engagement]
    /// Size in bytes (UTF-8) of a generated 110's `template_html`.
    public var templateBytes: Int = 2048
    /// Base URL of the simulator's HTTP pages, without a trailing slash (`http://127.0.0.1:8081`).
    public var httpBaseURL: String = "http://127.0.0.1:8081"
    /// `FCM_SENDER_ID` in INIT_SESSION_RESPONSE's settings.
    public var fcmSenderID: String = "000000000000"
    /// `products` in INIT_SESSION_RESPONSE (002 §1.2's example: 100, 0, 5).
    public var products: [Int64] = [100, 0, 5]
    /// Which responses echo the request's `uuid` (the others get a fresh one, which exercises a
    /// client's "oldest pending request" matching).
    public var uuidEcho: SimUUIDEcho = .asServer
    /// Quirks mode (`--quirks`): answers and pushes in the shapes the real server may use
    /// (`SimQuirks`), fresh uuids, client PINGs left without a PONG.
    public var quirks: Bool = false
    /// Client PINGs are never answered (`--withhold-pong`).
    public var withholdPong: Bool = false
    /// How many received messages the `received` control op can return (oldest dropped first).
    public var maxReceived: Int = 100_000
    /// How many bytes of received messages the `received` log keeps (oldest dropped first).
    public var maxReceivedBytes: Int = 256 << 20
    /// How many engagements are kept pending per user (oldest dropped first).
    public var maxPendingPerUser: Int = 1000
    /// How many bytes of pending engagements are kept in total (oldest dropped first).
    public var maxPendingBytes: Int = 256 << 20
}

/// Which answers carry the request's `uuid`.
public enum SimUUIDEcho: String, Sendable, Equatable {
    /// As the SDK shows the real server: echoed, except the answers in
    /// `SimServerSession.freshUUIDResponses` (701 SAW_GET_SPINS_RESPONSE), which get a fresh one.
    case asServer = "as_server"
    /// Every answer echoes (`--echo-uuids`).
    case always
    /// No answer echoes (`--no-echo-uuid`).
    case never
}

/// What the I/O layer must do for one connection.
public enum SimOutput: Sendable, Equatable {
    /// Send one text frame with these bytes (usually a JSON message; malformed JSON on purpose
    /// for the `malformed_json` fault).
    case text([UInt8])
    /// Write `SimWire.malformedFrame` raw on the connection (the `malformed_frame` fault).
    case malformedFrame
    /// Send a close frame with this code and reason, then close the TCP connection.
    case close(code: UInt16, reason: String)
    /// Close the TCP connection at once, without a close frame (`close_abruptly`, an abort).
    case abort

    /// The text of a `.text` output (tests, logs).
    public var text: String? {
        if case .text(let b) = self { return String(decoding: b, as: UTF8.self) }
        return nil
    }
}

/// One output for one client, to be performed at `at` (milliseconds, same clock as `now`).
public struct SimAction: Sendable, Equatable {
    /// The client id (`c1`, `c2`, …).
    public var client: String
    public var output: SimOutput
    /// Not before this time; `at <= now` means at once. Delayed answers (the `delay` fault) have
    /// a later `at`. Actions of one client are performed in (`at`, emission order) order.
    public var at: Int64

    public init(client: String, output: SimOutput, at: Int64) {
        self.client = client
        self.output = output
        self.at = at
    }

    /// The JSON object of a `.text` output, if it parses.
    public var json: JSONObject? {
        guard case .text(let b) = output, case .object(let o)? = try? JSONValue(parsing: b) else { return nil }
        return o
    }
}

/// Raw bytes the I/O layer writes for `SimOutput.malformedFrame`.
public enum SimWire {
    /// A final frame with the reserved opcode 0x3 and an empty payload (RFC 6455 §5.2: a client
    /// must fail the connection, with close code 1002).
    public static let malformedFrame: [UInt8] = [0x83, 0x00]
    /// The text sent by the `malformed_json` fault: a 110 cut off in the middle.
    public static let malformedJSON: [UInt8] = Array(#"{"cid":110,"engagement_uid":"truncated-by-smartico-sim","template_html":"<div"#.utf8)
}

/// The `errCode`s the simulator answers with (002: 0 is success; the notes: from 100000 up fatal).
public enum SimErrorCode {
    /// A known cid with a missing or wrongly typed field (`errMsg` names it).
    public static let invalidMessage: Int64 = 1
    /// A request before INIT_SESSION succeeded.
    public static let notInitialized: Int64 = 2
    /// INIT or IDENTIFY a second time on one connection.
    public static let alreadyDone: Int64 = 3
    /// INIT with an empty or missing `session_id` (the connection is closed with 1008 after it).
    public static let emptySessionID: Int64 = 4
    /// A user request (gamification) before IDENTIFY succeeded.
    public static let notIdentified: Int64 = 5
    /// A cid the simulator does not serve (in a cid 99999 UNSUPPORTED_COMMAND answer).
    public static let unsupportedCommand: Int64 = 6
    /// IDENTIFY's hash is missing, malformed, wrong or expired (notes: "not a valid hash").
    public static let invalidHash: Int64 = 100_000
    /// INIT's `label_key` is not the simulator's `--label-key` (notes: "wrong customer id").
    public static let wrongCustomer: Int64 = 100_001
}

/// The server pushes the simulator generates.
public enum SimPushKind: String, Sendable, Equatable, CaseIterable {
    /// 110 CLIENT_ENGAGEMENT_EVENT (a popup); stays pending for the user until reported.
    case engagement
    /// 105 CLIENT_EXECUTE_DEEPLINK_EVENT.
    case deepLink = "deeplink"
    /// 108 CLIENT_PUBLIC_PROPERTIES_CHANGED_EVENT.
    case props
    /// 504 RELOAD_ACHIEVEMENTS_EVENT.
    case reloadAchievements = "reload_achievements"
    /// 706 SAW_SPINS_COUNT_PUSH.
    case spinsCount = "spins_count"
    /// 707 SAW_SHOW_SPIN_PUSH (a mini-game).
    case showSpin = "show_spin"
    /// 708 SAW_PRIZE_DROP_WIN_PUSH.
    case prizeDropWin = "prize_drop_win"
    /// 808 JP_WIN_PUSH.
    case jackpotWin = "jp_win"

    public var classID: ClassID {
        switch self {
        case .engagement: .clientEngagementEvent
        case .deepLink: .executeDeepLinkEvent
        case .props: .publicPropertiesChangedEvent
        case .reloadAchievements: .reloadAchievementsEvent
        case .spinsCount: .sawSpinsCountPush
        case .showSpin: .sawShowSpinPush
        case .prizeDropWin: .sawPrizeDropWinPush
        case .jackpotWin: .jackpotWinPush
        }
    }

    /// Parses a name (`engagement`, `show_spin`, …) or a cid (`110`, `707`, …).
    public init?(name: String) {
        let n = name.lowercased()
        if let k = SimPushKind(rawValue: n) { self = k; return }
        if let cid = Int64(n), let k = SimPushKind.allCases.first(where: { $0.classID.rawValue == cid }) { self = k; return }
        switch n {
        case "popup": self = .engagement
        case "deep_link": self = .deepLink
        case "mini_game", "minigame", "spin": self = .showSpin
        case "jackpot": self = .jackpotWin
        default: return nil
        }
    }

    /// The accepted names, for help texts and errors.
    public static var namesList: String {
        allCases.map { "\($0.rawValue) (\($0.classID.rawValue))" }.joined(separator: ", ")
    }
}

/// A small deterministic generator (SplitMix64): seeded in tests, from the system's generator otherwise.
public struct SimRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public init() {
        var g = SystemRandomNumberGenerator()
        state = g.next()
    }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// A fresh lowercase v4 uuid.
    public mutating func uuid() -> String { UUIDv4.random(using: &self).string }
}

extension String {
    /// At most `maxBytes` of UTF-8, cut at a character boundary (close reasons: ≤ 123 bytes).
    func truncatedUTF8(_ maxBytes: Int) -> String {
        if utf8.count <= maxBytes { return self }
        var out = ""
        var n = 0
        for ch in self {
            let c = String(ch).utf8.count
            if n + c > maxBytes { break }
            out.append(ch)
            n += c
        }
        return out
    }
}
