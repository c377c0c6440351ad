/// `smartico-wrapper`'s command line. Parsed by the first instance, and again by the running
/// instance for every later invocation (which GApplication forwards to it).
public struct WrapperArguments: Sendable, Equatable {
    public var socket: String?
    public var config: String?
    public var kiosk = false
    /// `--open` was given; `openDeepLink` is its optional value.
    public var open = false
    public var openDeepLink: String?
    public var logLevel: LogLevel = .info
    public var help = false
    public var version = false

    public init() {}

    public static let usage = """
        usage: smartico-wrapper [--socket PATH] [--config FILE] [--kiosk] [--open [DP]] [--log-level LEVEL]

        Shows the engagements (popups), mini-games and gamification widget that smarticod
        receives from Smartico, in GTK 4 / WebKitGTK 6.0 windows. One instance runs per graphical
        session; a second invocation hands its --open to the running one and exits.

          --socket PATH      smarticod's socket (default: the configuration's "socket",
                             $SMARTICOD_SOCKET, else /run/smarticod/smarticod.sock)
          --config FILE      the wrapper's JSON configuration (man smartico-wrapper; default:
                             ~/.config/smartico-wrapper/config.json if it exists, else
                             /etc/smartico-wrapper/config.json if it exists, else none)
          --kiosk            full screen, no decorations, external links refused
          --open [DP]        open the gamification widget, at the deep link DP (e.g. dp:gf_missions)
          --log-level LEVEL  debug, info, warning or error (default info)
          --version, --help
        """

    public struct Problem: Error, Equatable, CustomStringConvertible {
        public let text: String
        public var description: String { text }
    }

    public static func parse(_ args: [String]) throws(Problem) -> WrapperArguments {
        var result = WrapperArguments()
        var i = 0
        func value(_ name: String) throws(Problem) -> String {
            guard i + 1 < args.count, !args[i + 1].hasPrefix("--") else { throw Problem(text: "\(name) needs a value") }
            i += 1
            return args[i]
        }
        while i < args.count {
            let arg = args[i]
            let (name, inline): (String, String?) = {
                if arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") {
                    return (String(arg[..<eq]), String(arg[arg.index(after: eq)...]))
                }
                return (arg, nil)
            }()
            if inline != nil, ["--kiosk", "--help", "--version"].contains(name) {
                // `--kiosk=false` must not turn kiosk mode on.
                throw Problem(text: "\(name) takes no value, got \(Text.quoted(arg))")
            }
            switch name {
            case "--socket": result.socket = try (inline != nil ? inline! : value(name))
            case "--config": result.config = try (inline != nil ? inline! : value(name))
            case "--kiosk": result.kiosk = true
            case "--open":
                result.open = true
                if let inline {
                    result.openDeepLink = inline
                } else if i + 1 < args.count, !args[i + 1].hasPrefix("--") {
                    i += 1
                    result.openDeepLink = args[i]
                }
            case "--log-level":
                let text = try (inline != nil ? inline! : value(name))
                guard let level = ["debug": LogLevel.debug, "info": .info, "warning": .warning, "error": .error][text] else {
                    throw Problem(text: "--log-level must be debug, info, warning or error, got \(Text.quoted(text))")
                }
                result.logLevel = level
            case "--help", "-h": result.help = true
            case "--version": result.version = true
            default: throw Problem(text: "unknown argument \(Text.quoted(arg)) (see --help)")
            }
            if let empty = [result.socket, result.config].first(where: { $0?.isEmpty == true }), empty != nil {
                throw Problem(text: "\(name) needs a non-empty value")
            }
            i += 1
        }
        if let dp = result.openDeepLink, !dp.lowercased().hasPrefix("dp:gf") {
            throw Problem(text: "--open takes a gamification deep link (dp:gf…, e.g. dp:gf_missions), got \(Text.quoted(dp))")
        }
        return result
    }
}
