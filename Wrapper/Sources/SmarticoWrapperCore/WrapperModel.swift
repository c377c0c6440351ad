import SmarticoProtocol

/// A log line the glue writes (stderr, so the journal under systemd).
public enum LogLevel: Int, Sendable, Comparable, CustomStringConvertible {
    case debug = 0, info, warning, error
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
    public var description: String { ["debug", "info", "warning", "error"][rawValue] }
}

/// What the glue does to one of the two web views.
public enum ViewCommand: Sendable, Equatable {
    case load(url: String)
    case inject(script: String)
    case show
    case close
}

/// Everything the model asks of the outside world.
public enum WrapperCommand: Sendable, Equatable {
    case popup(ViewCommand)
    case widget(ViewCommand)
    /// A request to the daemon (`bridge`, `report`, `minigame_ack`, `ack`), answered asynchronously.
    case daemon(op: String, arguments: JSONObject)
    /// Run a configured deep-link command (an argv, never through a shell).
    case run(argv: [String])
    /// Open a web link in the default browser.
    case openExternal(url: String)
    case log(LogLevel, String)
}

/// The wrapper's logic, sans I/O: the daemon's events in, in journal order; the pages' messages
/// in; commands out. One popup at a time, in journal order, each event acknowledged once handled
/// (acknowledgements are cumulative, so the ack point is just below the oldest unhandled event).
/// The gamification widget is independent of the popups: both can be on screen at once.
public struct WrapperModel: Sendable {
    public let config: WrapperConfig
    public private(set) var origins: OriginAllowList
    /// The latest wrapper URLs the daemon handed out (`identified`, `props`): fresher hashes than
    /// the ones stored with journaled events.
    public private(set) var popupURL: String?
    public private(set) var gamificationURL: String?

    public private(set) var popup: PopupSession?
    public private(set) var queue: [PopupRequest] = []
    public private(set) var widget = WidgetSession()

    /// The highest journaled seq taken in (events at or below it are replays after a reconnect).
    public private(set) var lastAccepted: Int64?
    /// Journaled seqs taken in and not yet handled (the popups queued or on screen).
    private var unhandled: Set<Int64> = []
    public private(set) var lastAckSent: Int64?

    public static let journaledEvents: Set<String> = ["engagement", "minigame", "deeplink", "message"]

    public init(config: WrapperConfig) {
        self.config = config
        self.origins = OriginAllowList(configured: config.allowedOrigins)
    }

    var readyTimeoutMs: Int64 { Int64(config.readyTimeoutSeconds) * 1000 }
    var loadTimeoutMs: Int64 { Int64(config.loadTimeoutSeconds) * 1000 }

    /// Engagements held in memory: queued or on screen. The glue stops reading from the daemon
    /// while this is at `max_queued_popups` (the daemon's journal holds the rest).
    public var popupsHeld: Int { queue.count + (popup == nil ? 0 : 1) }

    /// Something is on screen (or loading to be).
    public var isBusy: Bool { popup != nil || widget.isOpen }

    /// The next time ``tick(now:)`` must run (monotonic ms), or nil.
    public var deadline: Int64? { popup?.deadline }

    // MARK: - The daemon's events

    public mutating func receive(event name: String, seq: Int64?, data: JSONValue, now: Int64) -> [WrapperCommand] {
        guard WrapperModel.journaledEvents.contains(name) else { return live(name, data) }
        guard let seq else {
            return [.log(.warning, "a \(name) event without a seq from the daemon: ignored")]
        }
        if let last = lastAccepted, seq <= last { return [] }  // a replay of what is held or handled
        lastAccepted = seq
        var out: [WrapperCommand]
        switch name {
        case "engagement": out = engagement(seq: seq, data: data, now: now)
        case "minigame": out = minigame(seq: seq, data: data)
        case "deeplink": out = deepLink(seq: seq, data: data)
        default: out = []
        }
        out += ackIfAdvanced()
        return out
    }

    /// The connection to the daemon is back (after a start or a restart of either side): the
    /// subscription replays what was not acknowledged, and what is held is skipped by seq.
    public mutating func linkConnected() -> [WrapperCommand] {
        // An ack the daemon lost with the connection is sent again.
        lastAckSent = nil
        return ackIfAdvanced()
    }

    private mutating func live(_ name: String, _ data: JSONValue) -> [WrapperCommand] {
        switch name {
        case "identified":
            if let u = data["popup_url"]?.stringValue, origins.learn(fromDaemonURL: u) { popupURL = u }
            if let u = data["gf_url"]?.stringValue, origins.learn(fromDaemonURL: u) { gamificationURL = u }
            let who = data["ext_user_id"]?.stringValue ?? "?"
            return [.log(.info, "identified as \(Text.quoted(who)); popup page \(popupURL.map { Text.quoted($0) } ?? "unknown"), widget \(gamificationURL.map { Text.quoted($0) } ?? "unknown")")]
        case "props":
            if let u = data["native_app_gf_url"]?.stringValue, origins.learn(fromDaemonURL: u) { gamificationURL = u }
            return []
        case "gap":
            let missed = data["missed"]?.int64Value.map(String.init) ?? "some"
            return [.log(.warning, "the daemon's journal no longer holds \(missed) events this wrapper had not handled (it was away longer than journal.retention_*): they cannot be shown")]
        default:
            return []
        }
    }

    // MARK: engagement → popup

    private mutating func engagement(seq: Int64, data: JSONValue, now: Int64) -> [WrapperCommand] {
        let message = data["message"]?.objectValue ?? JSONObject()
        let uid = message["engagement_uid"]?.stringValue ?? ""
        let activityType = message["activityType"]?.int64Value ?? 30
        let eventURL = data["popup_url"]?.stringValue
        if let eventURL { origins.learn(fromDaemonURL: eventURL) }
        var bridge: JSONObject
        if let b = data["bridge"]?.objectValue, b["bcid"]?.int64Value == 3 {
            bridge = b
        } else {
            bridge = JSONObject()
            bridge.append(key: "bcid", value: .number(3))
            for (k, v) in message where k != "bcid" { bridge.append(key: k, value: v) }
        }
        guard !uid.isEmpty else {
            // Nothing to report against: handled, logged.
            return [.log(.error, "engagement event seq \(seq) has no engagement_uid: not shown")]
        }
        guard let base = popupURL ?? eventURL else {
            return [
                .log(.error, "engagement \(uid) (seq \(seq)) cannot be shown: no popup page URL (native_app_popup_url) is known; is a user identified?"),
                reportFailed(uid, activityType, "no native_app_popup_url"),
            ]
        }
        guard origins.allows(url: base) else {
            return [
                .log(.error, "engagement \(uid) (seq \(seq)): popup URL \(Text.quoted(base)) is not an http(s) URL of an allowed origin: not loaded"),
                reportFailed(uid, activityType, "popup URL refused"),
            ]
        }
        let request = PopupRequest(seq: seq, engagementUID: uid, activityType: activityType,
                                   url: WrapperPageURL.forcingMobile(base), bridge: bridge)
        unhandled.insert(seq)
        queue.append(request)
        return popup == nil ? startNextPopup(now: now) : [.log(.debug, "engagement \(uid) (seq \(seq)) queued behind \(queue.count - 1) others")]
    }

    private func reportFailed(_ uid: String, _ activityType: Int64, _ reason: String) -> WrapperCommand {
        .daemon(op: "report", arguments: [
            "kind": "failed", "engagement_uid": .string(uid), "activity_type": .number(activityType),
        ])
    }

    private mutating func startNextPopup(now: Int64) -> [WrapperCommand] {
        var out: [WrapperCommand] = []
        while popup == nil, !queue.isEmpty {
            let next = queue.removeFirst()
            let (session, effects) = PopupSession.begin(next, readyTimeoutMs: readyTimeoutMs, loadTimeoutMs: loadTimeoutMs, now: now)
            popup = session
            out.append(.log(.info, "showing engagement \(next.engagementUID) (seq \(next.seq))"))
            out += apply(effects, now: now)
        }
        return out
    }

    private mutating func apply(_ effects: [PopupEffect], now: Int64) -> [WrapperCommand] {
        var out: [WrapperCommand] = []
        for effect in effects {
            switch effect {
            case .load(let url): out.append(.popup(.load(url: url)))
            case .inject(let script): out.append(.popup(.inject(script: script)))
            case .show: out.append(.popup(.show))
            case .close: out.append(.popup(.close))
            case .relay(let json): out.append(.daemon(op: "bridge", arguments: ["message": .object(json)]))
            case .reportFailed(let uid, let type, let reason):
                out.append(.log(.warning, "engagement \(uid) failed: \(reason); reported to the server (cid 106)"))
                out.append(reportFailed(uid, type, reason))
            case .finished(let seq, let outcome):
                popup = nil
                unhandled.remove(seq)
                switch outcome {
                case .closed: out.append(.log(.info, "popup seq \(seq) closed by its page"))
                case .deepLink(let dp): out.append(.log(.info, "popup seq \(seq) closed for the deep link \(Text.quoted(dp))"))
                case .failed: break
                case .dismissed(let why): out.append(.log(.warning, "popup seq \(seq) dismissed: \(why)"))
                }
                out += ackIfAdvanced()
                out += startNextPopup(now: now)
            }
        }
        return out
    }

    // MARK: minigame and deeplink → widget, commands

    private mutating func minigame(seq: Int64, data: JSONValue) -> [WrapperCommand] {
        let message = data["message"]?.objectValue ?? JSONObject()
        let template = data["saw_template_id"]?.int64Value ?? message["saw_template_id"]?.int64Value
        var url: String?
        if let template, let gf = gamificationURL {
            url = WrapperURL.withDeepLink(gf, deepLink: "dp:gf_saw&id=\(template)&standalone=true")
        } else {
            url = data["url"]?.stringValue
        }
        guard let url else {
            return [.log(.error, "mini-game event seq \(seq) cannot be opened: \(template == nil ? "no saw_template_id" : "no gamification URL (native_app_gf_url) is known")")]
        }
        var out = openWidget(url: url, why: "mini-game \(template.map(String.init) ?? "?") (seq \(seq))")
        if let template {
            // pending_message_id is optional: sent when the 707 had one (docs/socket-api.md).
            var ack: JSONObject = ["saw_template_id": .number(template)]
            if let pending = message["pending_message_id"], pending.numberValue != nil {
                ack.append(key: "pending_message_id", value: pending)
            }
            out.append(.daemon(op: "minigame_ack", arguments: ack))
        }
        return out
    }

    private mutating func deepLink(seq: Int64, data: JSONValue) -> [WrapperCommand] {
        guard let dp = data["dp"]?.stringValue else { return [] }
        let link = DeepLink(dp)
        switch link.kind {
        case .dummy:
            if link.action == "gf_close", widget.isOpen { return widgetEffects(widget.close()) }
            return []
        case .gamification:
            let url = gamificationURL.map { WrapperURL.withDeepLink($0, deepLink: link.raw) } ?? data["url"]?.stringValue
            guard let url else {
                return [.log(.error, "deep link \(Text.quoted(dp)) (seq \(seq)) cannot be opened: no gamification URL (native_app_gf_url) is known")]
            }
            return openWidget(url: url, why: "deep link \(Text.quoted(link.raw)) (seq \(seq))")
        case .custom:
            if link.isWebURL {
                guard config.externalLinksAllowed else {
                    return [.log(.info, "deep link \(Text.quoted(dp)) (seq \(seq)) is a web link; external links are off (open_external_links): not opened")]
                }
                return [.openExternal(url: link.raw), .log(.info, "opening \(Text.quoted(link.raw)) in the default browser")]
            }
            if let argv = config.deepLinkCommands[link.action] {
                return [.run(argv: argv.map { $0.replacing("{dp}", with: link.raw) }),
                        .log(.info, "deep link \(Text.quoted(link.raw)) (seq \(seq)): running \(Text.quoted(argv[0]))")]
            }
            return [.log(.debug, "deep link \(Text.quoted(link.raw)) (seq \(seq)) is left to other apps (no deep_link_commands entry for \(Text.quoted(link.action)))")]
        }
    }

    /// `--open [DP]`: the widget at that section (its home without one).
    public mutating func open(deepLink dp: String?) -> [WrapperCommand] {
        guard let gf = gamificationURL else {
            return [.log(.error, "cannot open the gamification widget: no native_app_gf_url is known yet (no user identified since the wrapper started?)")]
        }
        var url = gf
        if let dp, !dp.isEmpty {
            let link = DeepLink(dp)
            guard link.kind == .gamification else {
                return [.log(.error, "--open \(Text.quoted(dp)): not a gamification deep link (dp:gf…)")]
            }
            url = WrapperURL.withDeepLink(gf, deepLink: link.raw)
        }
        return openWidget(url: url, why: "--open \(dp ?? "")")
    }

    private mutating func openWidget(url: String, why: String) -> [WrapperCommand] {
        origins.learn(fromDaemonURL: url)
        guard origins.allows(url: url) else {
            return [.log(.error, "\(why): widget URL \(Text.quoted(url)) is not an http(s) URL of an allowed origin: not loaded")]
        }
        return [.log(.info, "opening the widget for \(why)")] + widgetEffects(widget.open(url: WrapperPageURL.forcingMobile(url)))
    }

    private func widgetEffects(_ effects: [WidgetEffect]) -> [WrapperCommand] {
        effects.map {
            switch $0 {
            case .load(let url): .widget(.load(url: url))
            case .show: .widget(.show)
            case .close: .widget(.close)
            case .relay(let json): .daemon(op: "bridge", arguments: ["message": .object(json)])
            }
        }
    }

    // MARK: - The pages

    /// A message posted by the popup page's top frame, whose URL is `frameURL` at that moment.
    public mutating func popupMessage(_ text: String, frameURL: String?, now: Int64) -> [WrapperCommand] {
        guard var session = popup else { return [.log(.debug, "a bridge message with no popup open: ignored")] }
        guard let frameURL, origins.allows(url: frameURL) else {
            return [.log(.warning, "a bridge message from \(Text.quoted(frameURL ?? "an unknown page")), not an allowed origin: ignored")]
        }
        let message: PageMessage
        do { message = try PageMessage(posted: text) } catch {
            return [.log(.warning, "popup seq \(session.request.seq): ignored \(error)")]
        }
        let effects = session.receive(message, now: now)
        popup = session
        return apply(effects, now: now)
    }

    /// The popup page's load committed: its first byte arrived.
    public mutating func popupCommitted(now: Int64) {
        popup?.committed(now: now)
    }

    public mutating func popupLoadFailed(_ reason: String, now: Int64) -> [WrapperCommand] {
        guard var session = popup else { return [] }
        let effects = session.loadFailed(reason)
        popup = session
        return apply(effects, now: now)
    }

    public mutating func popupDismissed(_ reason: String, now: Int64) -> [WrapperCommand] {
        guard var session = popup else { return [] }
        let effects = session.dismissed(reason)
        popup = session
        return apply(effects, now: now)
    }

    public mutating func tick(now: Int64) -> [WrapperCommand] {
        guard var session = popup else { return [] }
        let effects = session.tick(now: now)
        popup = session
        return apply(effects, now: now)
    }

    public mutating func widgetMessage(_ text: String, frameURL: String?) -> [WrapperCommand] {
        guard widget.isOpen else { return [] }
        guard let frameURL, origins.allows(url: frameURL) else {
            return [.log(.warning, "a bridge message from \(Text.quoted(frameURL ?? "an unknown page")), not an allowed origin: ignored")]
        }
        let message: PageMessage
        do { message = try PageMessage(posted: text) } catch {
            return [.log(.warning, "widget: ignored \(error)")]
        }
        return widgetEffects(widget.receive(message))
    }

    public mutating func widgetLoaded() -> [WrapperCommand] { widgetEffects(widget.loaded()) }

    /// The player closed the widget's window, or its page could not load.
    public mutating func widgetClosed(_ reason: String?) -> [WrapperCommand] {
        let effects = widgetEffects(widget.close())
        guard let reason else { return effects }
        return [.log(.warning, "widget closed: \(reason)")] + effects
    }

    /// Whether a top-level navigation may happen in a view (false: refused, or opened outside).
    public func allowsNavigation(to url: String) -> Bool { origins.allows(url: url) }

    // MARK: - Acknowledgement

    private mutating func ackIfAdvanced() -> [WrapperCommand] {
        guard let last = lastAccepted else { return [] }
        let point = unhandled.min().map { $0 - 1 } ?? last
        guard point > 0, point > (lastAckSent ?? 0) else { return [] }
        lastAckSent = point
        return [.daemon(op: "ack", arguments: ["seq": .number(point)])]
    }
}

/// Text for log lines: quoted and escaped, so no page or server text can forge a line.
public enum Text {
    public static func quoted(_ s: String, limit: Int = 300) -> String {
        var out = "\""
        for (i, scalar) in s.unicodeScalars.enumerated() {
            if i >= limit { out += "…"; break }
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F { out += "\\u{\(String(scalar.value, radix: 16))}" } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out + "\""
    }
}

extension WrapperModel {
    /// The daemon's `status` answer, asked for on every connection: the gamification URL of an
    /// identified user (from its props), so `--open` works before any new `identified` event.
    public mutating func statusReceived(_ status: JSONValue) -> [WrapperCommand] {
        guard status["user"]?["identified"]?.boolValue == true,
              let url = status["user"]?["props"]?["native_app_gf_url"]?.stringValue,
              origins.learn(fromDaemonURL: url)
        else { return [] }
        gamificationURL = url
        return []
    }

    /// Whether a widget URL is known (`--open` can be served).
    public var canOpenWidget: Bool { gamificationURL != nil }
}
