import SmarticoProtocol

/// `smartico-wrapper`'s configuration: a JSON file (`--config FILE`), every key optional, unknown
/// keys refused. docs/wrapper.md lists the keys.
public struct WrapperConfig: Sendable, Equatable {
    /// The daemon's socket (`--socket` overrides).
    public var socket: String?
    /// The durable subscription name: the daemon keeps this wrapper's place in its journal. Nil:
    /// `smartico-wrapper-<uid>` (``durableName(uid:)``), since the daemon gives a durable name to
    /// the uid that first uses it, and every user of a shared daemon runs a wrapper of their own.
    public var durable: String?

    /// The durable name this user's wrapper subscribes with.
    public func durableName(uid: UInt32) -> String { durable ?? "smartico-wrapper-\(uid)" }
    /// Origins loaded besides those of the URLs the daemon hands out (`https://host[:port]`).
    public var allowedOrigins: Set<WebOrigin> = []
    /// Custom deep-link actions (`cashier` for `dp:cashier`) → the argv run for them. `{dp}` in an
    /// argument is replaced by the whole link. Actions not listed are left to other apps.
    public var deepLinkCommands: [String: [String]] = [:]
    /// `http(s)` links and navigations away from the allowed origins: opened in the default
    /// browser (`true`), or refused (`false`; the default in kiosk mode).
    public var openExternalLinks: Bool?
    /// Full screen, no decorations; external links refused unless `open_external_links` says otherwise.
    public var kiosk = false
    /// Seconds a popup page has, from its first byte, to send READY_TO_BE_SHOWN.
    public var readyTimeoutSeconds = 15
    /// Seconds a popup page's load has to commit (its web process started, its first byte here).
    public var loadTimeoutSeconds = 60
    /// Seconds after which a web view with nothing on screen is released (its web process ends).
    public var releaseAfterSeconds = 60
    /// The widget window's size when not in kiosk mode.
    public var widgetWidth = 480
    public var widgetHeight = 800
    /// Popups held in memory at once; beyond it the wrapper reads the rest from the journal later.
    public var maxQueuedPopups = 64
    /// WebKit's inspector and context menu (for page authors; never in production).
    public var developerExtras = false

    public init() {}

    public var externalLinksAllowed: Bool { openExternalLinks ?? !kiosk }

    /// Where the configuration is read from without `--config`, in order; the first that exists
    /// is read (an invalid one is an error, as with `--config`), none at all means every default.
    /// So the menu entry's `smartico-wrapper --open`, the user unit and a start by hand all read
    /// the same file: the user's (`$XDG_CONFIG_HOME`, else `~/.config`), then the machine's.
    public static func defaultPaths(environment: [String: String]) -> [String] {
        var paths: [String] = []
        if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") {
            paths.append(xdg + "/smartico-wrapper/config.json")
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            paths.append((home == "/" ? "" : home) + "/.config/smartico-wrapper/config.json")
        }
        paths.append("/etc/smartico-wrapper/config.json")
        return paths
    }

    /// Every problem of a configuration, each naming its key.
    public struct Problems: Error, CustomStringConvertible, Equatable {
        public let file: String
        public let lines: [String]
        public var description: String { lines.map { "\(file): \($0)" }.joined(separator: "\n") }
    }

    static let keys: Set<String> = [
        "socket", "durable", "allowed_origins", "deep_link_commands", "open_external_links", "kiosk",
        "ready_timeout_s", "load_timeout_s", "release_after_s", "widget_width", "widget_height", "max_queued_popups",
        "developer_extras",
    ]

    /// Parses the file's text; all problems at once.
    public static func parse(_ text: [UInt8], file: String) throws(Problems) -> WrapperConfig {
        let value: JSONValue
        do {
            value = try JSONValue(parsing: text)
        } catch {
            throw Problems(file: file, lines: ["not JSON: \(error)"])
        }
        guard let object = value.objectValue else {
            throw Problems(file: file, lines: ["the configuration must be a JSON object, not a \(value.type)"])
        }
        var config = WrapperConfig()
        var problems: [String] = []
        for key in object.keys where !keys.contains(key) {
            problems.append("unknown key \"\(key)\" (known: \(keys.sorted().joined(separator: ", ")))")
        }
        func string(_ key: String) -> String? {
            guard let v = object[key], !v.isNull else { return nil }
            guard let s = v.stringValue, !s.isEmpty else {
                problems.append("\"\(key)\" must be a non-empty string, got \(v.type)")
                return nil
            }
            return s
        }
        func bool(_ key: String) -> Bool? {
            guard let v = object[key], !v.isNull else { return nil }
            guard let b = v.boolValue else {
                problems.append("\"\(key)\" must be true or false, got \(v.type)")
                return nil
            }
            return b
        }
        func int(_ key: String, _ range: ClosedRange<Int>) -> Int? {
            guard let v = object[key], !v.isNull else { return nil }
            guard let i = v.intValue, range.contains(i) else {
                problems.append("\"\(key)\" must be an integer from \(range.lowerBound) to \(range.upperBound), got \(v.numberValue?.literal ?? v.type.rawValue)")
                return nil
            }
            return i
        }
        if let s = string("socket") { config.socket = s }
        if let s = string("durable") {
            if s.utf8.count > 128 { problems.append("\"durable\" is \(s.utf8.count) bytes long; at most 128") } else { config.durable = s }
        }
        if let v = object["allowed_origins"], !v.isNull {
            if let items = v.arrayValue {
                for (i, item) in items.enumerated() {
                    guard let s = item.stringValue else {
                        problems.append("\"allowed_origins\"[\(i)] must be a string like \"https://libs.smartico.ai\", got \(item.type)")
                        continue
                    }
                    do {
                        let origin = try WebOrigin(url: s)
                        config.allowedOrigins.insert(origin)
                    } catch {
                        problems.append("\"allowed_origins\"[\(i)] \"\(s)\" is \(error)")
                    }
                }
            } else {
                problems.append("\"allowed_origins\" must be an array of origins, got \(v.type)")
            }
        }
        if let v = object["deep_link_commands"], !v.isNull {
            if let map = v.objectValue {
                for (action, argv) in map {
                    let name = action.lowercased()
                    guard !name.isEmpty, !name.hasPrefix("dp:") else {
                        problems.append("\"deep_link_commands\" key \"\(action)\" must be an action name without dp: (\"cashier\" for dp:cashier)")
                        continue
                    }
                    guard let items = argv.arrayValue, !items.isEmpty,
                          case let args = items.compactMap(\.stringValue), args.count == items.count,
                          args[0].hasPrefix("/"), !args.contains(where: { $0.utf8.contains(0) })
                    else {
                        problems.append("\"deep_link_commands\".\"\(action)\" must be an argv array of strings starting with an absolute path (never a shell string), e.g. [\"/usr/bin/my-cashier\", \"{dp}\"]")
                        continue
                    }
                    config.deepLinkCommands[name] = args
                }
            } else {
                problems.append("\"deep_link_commands\" must be an object of action → argv, got \(v.type)")
            }
        }
        config.openExternalLinks = bool("open_external_links")
        if let b = bool("kiosk") { config.kiosk = b }
        if let b = bool("developer_extras") { config.developerExtras = b }
        if let i = int("ready_timeout_s", 1...600) { config.readyTimeoutSeconds = i }
        if let i = int("load_timeout_s", 1...600) { config.loadTimeoutSeconds = i }
        if let i = int("release_after_s", 0...86400) { config.releaseAfterSeconds = i }
        if let i = int("widget_width", 200...10000) { config.widgetWidth = i }
        if let i = int("widget_height", 200...10000) { config.widgetHeight = i }
        if let i = int("max_queued_popups", 1...10000) { config.maxQueuedPopups = i }
        if !problems.isEmpty { throw Problems(file: file, lines: problems) }
        return config
    }
}
