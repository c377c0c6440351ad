import SmarticoProtocol

/// One engagement to show: what the daemon's `engagement` event carries, checked.
public struct PopupRequest: Sendable, Equatable {
    /// The event's journal seq (acknowledged once the popup is handled).
    public let seq: Int64
    public let engagementUID: String
    /// `activityType` of the engagement (30, a popup, when the server sent none).
    public let activityType: Int64
    /// The wrapper page to load (an allowed `http(s)` URL, `force_mobile=true` added).
    public let url: String
    /// `{bcid: 3, …payload}`: what SHOW_ENGAGEMENT hands the page.
    public let bridge: JSONObject

    public init(seq: Int64, engagementUID: String, activityType: Int64, url: String, bridge: JSONObject) {
        self.seq = seq
        self.engagementUID = engagementUID
        self.activityType = activityType
        self.url = url
        self.bridge = bridge
    }
}

/// How a popup ended.
public enum PopupOutcome: Sendable, Equatable {
    /// The page asked to close (CLOSE_ME).
    case closed
    /// The player followed a link (EXECUTE_DEEP_LINK): closed, and the link relayed to the daemon,
    /// which emits it as a `deeplink` event for routing.
    case deepLink(String)
    /// It could not be shown: reported to the server as `failed` (cid 106).
    case failed(String)
    /// It was on screen and its page went away (the web process ended) or the window was closed
    /// by the window manager.
    case dismissed(String)
}

/// What the glue does for a popup.
public enum PopupEffect: Sendable, Equatable {
    /// Load the page in the (hidden, transparent) popup view.
    case load(url: String)
    /// Run this script in the page's top frame (SHOW_ENGAGEMENT).
    case inject(script: String)
    /// Reveal the popup window.
    case show
    /// Hide the popup window and stop the page.
    case close
    /// Send the page's message to the daemon with the `bridge` op.
    case relay(JSONObject)
    /// Report the engagement as `failed` (cid 106) with the `report` op.
    case reportFailed(engagementUID: String, activityType: Int64, reason: String)
    /// The popup is handled: its event may be acknowledged.
    case finished(seq: Int64, outcome: PopupOutcome)
}

/// One popup's conversation with its wrapper page (wrapper-popup.html), sans I/O, as in Smartico's
/// SDKs:
///
///     page → 1 PAGE_READY          → inject {bcid:3, …payload} as a MessageEvent
///     page → 5 READY_TO_BE_SHOWN   → show
///     page → 2 CLOSE_ME            → close
///     page → 4 EXECUTE_DEEP_LINK   → close first, then the link is routed
///     page → 6 SEND_TO_SOCKET      → relayed (the page reports its own impression and click)
///
/// Every bridge message is relayed to the daemon (`bridge` op); the wrapper reports nothing of
/// its own but `failed`, when the page does not load or sends no READY_TO_BE_SHOWN in time.
public struct PopupSession: Sendable {
    public enum Phase: Sendable, Equatable {
        /// Asked for, no byte of the page yet (its web process may still be starting); fails at
        /// `deadline` (monotonic ms).
        case starting(deadline: Int64)
        /// The page is arriving (the load committed), not shown; fails at `deadline`.
        case loading(deadline: Int64)
        case shown
        case done
    }

    public let request: PopupRequest
    public private(set) var phase: Phase
    /// How long a page has, from its first byte (the load committed), to send READY_TO_BE_SHOWN.
    public let readyTimeoutMs: Int64
    /// How long the load has to commit: a web process starting on a cold, slow device is not the
    /// page's fault, and a popup failed is one the player never sees.
    public let loadTimeoutMs: Int64

    /// Starts the popup: the page is loaded.
    public static func begin(_ request: PopupRequest, readyTimeoutMs: Int64, loadTimeoutMs: Int64, now: Int64) -> (PopupSession, [PopupEffect]) {
        let session = PopupSession(request: request, phase: .starting(deadline: now + loadTimeoutMs),
                                   readyTimeoutMs: readyTimeoutMs, loadTimeoutMs: loadTimeoutMs)
        return (session, [.load(url: request.url)])
    }

    public var isDone: Bool { phase == .done }

    /// When ``tick(now:)`` must be called next (monotonic ms), or nil.
    public var deadline: Int64? {
        switch phase {
        case .starting(let d), .loading(let d): d
        case .shown, .done: nil
        }
    }

    /// The page's load committed (its first byte arrived): the time to READY_TO_BE_SHOWN starts.
    /// Only the first commit counts, so a page that keeps reloading still fails in time.
    public mutating func committed(now: Int64) {
        if case .starting = phase { phase = .loading(deadline: now + readyTimeoutMs) }
    }

    private var isPending: Bool {
        switch phase {
        case .starting, .loading: true
        case .shown, .done: false
        }
    }

    /// Bridge ids the daemon's `bridge` op takes (3, SHOW_ENGAGEMENT, goes the other way).
    static let relayed: Set<Int64> = [1, 2, 4, 5, 6, 7, 8]

    public mutating func receive(_ message: PageMessage, now: Int64) -> [PopupEffect] {
        guard phase != .done else { return [] }
        // A page that speaks has committed, whichever signal came first.
        committed(now: now)
        var effects: [PopupEffect] = []
        if PopupSession.relayed.contains(message.bcid) { effects.append(.relay(message.json)) }
        switch message.known {
        case .pageReady:
            // Every PAGE_READY (a page that reloads asks again).
            effects.append(.inject(script: BridgeScript.showEngagement(request.bridge)))
        case .readyToBeShown:
            if isPending {
                phase = .shown
                effects.append(.show)
            }
        case .closeMe:
            effects += finish(.closed)
        case .executeDeepLink:
            // Closed before the link is routed: a link that opens the widget must not land under
            // a popup still on screen.
            effects += finish(message.deepLink.map(PopupOutcome.deepLink) ?? .closed)
        default:
            break
        }
        return effects
    }

    /// The page could not be loaded (network error, HTTP error page, refused navigation).
    public mutating func loadFailed(_ reason: String) -> [PopupEffect] {
        guard phase != .done else { return [] }
        if phase == .shown { return finish(.dismissed(reason)) }
        return fail(reason)
    }

    /// The window went away (closed by the window manager) or the web process ended.
    public mutating func dismissed(_ reason: String) -> [PopupEffect] {
        guard phase != .done else { return [] }
        if phase == .shown { return finish(.dismissed(reason)) }
        return fail(reason)
    }

    public mutating func tick(now: Int64) -> [PopupEffect] {
        guard let d = deadline, now >= d else { return [] }
        if case .starting = phase {
            return fail("\(request.url) did not start loading within \(loadTimeoutMs / 1000) s")
        }
        return fail("no READY_TO_BE_SHOWN (bcid 5) within \(readyTimeoutMs / 1000) s of loading \(request.url)")
    }

    private mutating func fail(_ reason: String) -> [PopupEffect] {
        phase = .done
        return [
            .close,
            .reportFailed(engagementUID: request.engagementUID, activityType: request.activityType, reason: reason),
            .finished(seq: request.seq, outcome: .failed(reason)),
        ]
    }

    private mutating func finish(_ outcome: PopupOutcome) -> [PopupEffect] {
        phase = .done
        return [.close, .finished(seq: request.seq, outcome: outcome)]
    }
}

/// What the glue does for the gamification widget.
public enum WidgetEffect: Sendable, Equatable {
    /// Load this URL in the widget's view (a new view, or the same one: a widget-family link
    /// inside the widget reloads the same view) and present the window.
    case load(url: String)
    case show
    case close
    case relay(JSONObject)
}

/// The gamification widget's conversation with wrapper-gf.html, sans I/O, as in Smartico's SDKs:
/// no injection (identity and the section come in the URL); READY_TO_BE_SHOWN shows it,
/// CLOSE_ME and `dp:gf_close` close it, any other link that is not of the widget's family closes
/// it and is routed (a no-op link such as `dp:ok` closes it too, as in the SDK). Every message is relayed to the daemon: the links come back as `deeplink`
/// events, and a widget-family one reloads this same view at that section.
public struct WidgetSession: Sendable {
    public private(set) var isOpen = false
    public private(set) var isShown = false
    public private(set) var url: String?

    public init() {}

    public mutating func open(url: String) -> [WidgetEffect] {
        isOpen = true
        self.url = url
        return [.load(url: url)]
    }

    /// The page finished loading: shown even if it never sends READY_TO_BE_SHOWN (the player
    /// asked for it).
    public mutating func loaded() -> [WidgetEffect] {
        guard isOpen, !isShown else { return [] }
        isShown = true
        return [.show]
    }

    public mutating func receive(_ message: PageMessage) -> [WidgetEffect] {
        guard isOpen else { return [] }
        var effects: [WidgetEffect] = []
        if PopupSession.relayed.contains(message.bcid) { effects.append(.relay(message.json)) }
        switch message.known {
        case .readyToBeShown:
            if !isShown {
                isShown = true
                effects.append(.show)
            }
        case .closeMe:
            effects += close()
        case .executeDeepLink:
            if let dp = message.deepLink {
                let link = DeepLink(dp)
                if link.kind != .gamification {  // dp:gf_close is a no-op link: it closes too
                    effects += close()
                }
                // gamification: the `deeplink` event the relay makes reloads this view there.
            }
        default:
            break
        }
        return effects
    }

    public mutating func close() -> [WidgetEffect] {
        guard isOpen else { return [] }
        isOpen = false
        isShown = false
        url = nil
        return [.close]
    }
}
