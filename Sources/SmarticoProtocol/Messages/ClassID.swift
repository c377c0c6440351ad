/// A message class id (`cid`). Any integer is a valid class id; the known ones have names.
public struct ClassID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible, ExpressibleByIntegerLiteral {
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
    public init(integerLiteral value: Int64) { rawValue = value }

    public static let ping: ClassID = 1
    public static let pong: ClassID = 2
    public static let initSessionRequest: ClassID = 3
    public static let initSessionResponse: ClassID = 4
    public static let identifyUserRequest: ClassID = 5
    public static let identifyUserResponse: ClassID = 6
    public static let login: ClassID = 7
    public static let logout: ClassID = 8
    public static let event: ClassID = 9
    public static let eventResponse: ClassID = 10
    public static let loginResponse: ClassID = 11
    public static let logoutResponse: ClassID = 12
    public static let getTranslationsRequest: ClassID = 13
    public static let getTranslationsResponse: ClassID = 14
    public static let engagementImpression: ClassID = 103
    public static let engagementAction: ClassID = 104
    public static let executeDeepLinkEvent: ClassID = 105
    public static let engagementFailed: ClassID = 106
    public static let executeJSEvent: ClassID = 107
    public static let publicPropertiesChangedEvent: ClassID = 108
    public static let clientEngagementEvent: ClassID = 110
    public static let reloadAchievementsEvent: ClassID = 504
    public static let sawSpinsCountPush: ClassID = 706
    public static let sawShowSpinPush: ClassID = 707
    public static let sawPrizeDropWinPush: ClassID = 708
    public static let sawAcknowledgeSpinPush: ClassID = 711
    public static let jackpotWinPush: ClassID = 808
    public static let registerPushTokenRequest: ClassID = 1003
    public static let registerPushTokenResponse: ClassID = 2003
    public static let clientDebug: ClassID = 77777
    public static let unsupportedCommand: ClassID = 99999

    private static let names: [Int64: String] = [
        1: "PING", 2: "PONG", 3: "INIT_SESSION_REQUEST", 4: "INIT_SESSION_RESPONSE",
        5: "IDENTIFY_USER_REQUEST", 6: "IDENTIFY_USER_RESPONSE", 7: "LOGIN", 8: "LOGOUT",
        9: "EVENT", 10: "EVENT_RESPONSE", 11: "LOGIN_RESPONSE", 12: "LOGOUT_RESPONSE",
        13: "GET_TRANSLATIONS_REQUEST", 14: "GET_TRANSLATIONS_RESPONSE",
        103: "CLIENT_ENGAGEMENT_IMPRESSION_REQUEST", 104: "CLIENT_ENGAGEMENT_ACTION_REQUEST",
        105: "CLIENT_EXECUTE_DEEPLINK_EVENT", 106: "CLIENT_ENGAGEMENT_FAILED_REQUEST",
        107: "CLIENT_EXECUTE_JS_EVENT", 108: "CLIENT_PUBLIC_PROPERTIES_CHANGED_EVENT",
        110: "CLIENT_ENGAGEMENT_EVENT", 504: "RELOAD_ACHIEVEMENTS_EVENT", 706: "SAW_SPINS_COUNT_PUSH",
        707: "SAW_SHOW_SPIN_PUSH", 708: "SAW_PRIZE_DROP_WIN_PUSH", 711: "SAW_AKNOWLEDGE_SPIN_PUSH",
        808: "JP_WIN_PUSH", 1003: "REGISTER_PUSH_NOTIFICATIONS_TOKEN_REQUEST",
        2003: "REGISTER_PUSH_NOTIFICATIONS_TOKEN_RESPONSE", 77777: "CLIENT_DEBUG_REQUEST",
        99999: "UNSUPPORTED_COMMAND",
    ]

    private static let eventNames: [Int64: String] = [
        504: "reload_achievements", 706: "spins_count", 708: "prize_drop_win", 808: "jp_win", 107: "execute_js",
    ]

    /// The protocol's name (`CLIENT_ENGAGEMENT_EVENT`), or `nil` for a class id this module does not know.
    public var name: String? { Self.names[rawValue] }

    /// The short snake_case name the daemon uses when it passes a server push on unchanged
    /// (`reload_achievements`, `spins_count`, `prize_drop_win`, `jp_win`, `execute_js`); `nil` otherwise.
    public var eventName: String? { Self.eventNames[rawValue] }

    /// The class id of the server's answer to this request: 3 → 4, 5 → 6, 7 → 11 (LOGIN),
    /// 8 → 12 (LOGOUT), 9 → 10, 1003 → 2003, and `rawValue + 1` for the rest (the notes: "almost
    /// always response = request + 1"). `nil` for messages nobody answers: PING/PONG, the
    /// fire-and-forget reports 103/104/106 and 711, and server pushes.
    public var responseClassID: ClassID? {
        switch self {
        case .login: return .loginResponse
        case .logout: return .logoutResponse
        case .registerPushTokenRequest: return .registerPushTokenResponse
        case .ping, .pong, .engagementImpression, .engagementAction, .engagementFailed, .sawAcknowledgeSpinPush,
             .executeDeepLinkEvent, .executeJSEvent, .publicPropertiesChangedEvent, .clientEngagementEvent,
             .reloadAchievementsEvent, .sawSpinsCountPush, .sawShowSpinPush, .sawPrizeDropWinPush, .jackpotWinPush,
             .unsupportedCommand:
            return nil
        default:
            return rawValue == Int64.max ? nil : ClassID(rawValue + 1)
        }
    }

    /// All class ids with a name.
    public static var known: [ClassID] { names.keys.sorted().map(ClassID.init(rawValue:)) }

    public var description: String { name.map { "\(rawValue) \($0)" } ?? String(rawValue) }

    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(Int64.self) }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
}

/// Platform of a push token (002 §1.5).
public enum PushClientPlatform: Int64, Sendable, Codable, CaseIterable {
    case chromeDesktop = 0, firefoxDesktop = 1, edgeDesktop = 2, operaDesktop = 3, safariDesktop = 4
    case other = 5, nativeIOS = 6, nativeAndroid = 7, chromeMobile = 8, firefoxMobile = 9
    case safariMobile = 10, operaMobile = 11

    static let range: ClosedRange<Int64> = 0...11
}

/// Status of push notifications on the device (002 §1.5).
public enum PushNotificationUserStatus: Int64, Sendable, Codable, CaseIterable {
    case allowed = 0, ask = 1, blocked = 2, suspended = 3, notSupported = 4

    static let range: ClosedRange<Int64> = 0...4
}

/// A product enabled for the label (INIT_SESSION_RESPONSE `products`). Unknown values are kept.
public struct Product: RawRepresentable, Hashable, Sendable, Codable, ExpressibleByIntegerLiteral {
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    public init(integerLiteral value: Int64) { rawValue = value }
    /// The gamification widget may be opened.
    public static let gamification: Product = 100

    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(Int64.self) }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
}

/// `activityType` of an engagement (notes: 20 banner, 30 popup, 31 inbox, 40 push). Unknown values are kept.
public struct ActivityType: RawRepresentable, Hashable, Sendable, Codable, ExpressibleByIntegerLiteral {
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    public init(integerLiteral value: Int64) { rawValue = value }
    public static let banner: ActivityType = 20
    public static let popup: ActivityType = 30
    public static let inbox: ActivityType = 31
    public static let push: ActivityType = 40

    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(Int64.self) }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
}
