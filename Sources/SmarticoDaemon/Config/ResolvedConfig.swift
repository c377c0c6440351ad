import SmarticoProtocol
import Transport

/// A valid configuration with everything derived from it and from the process environment:
/// what the session engine, the HTTP reporter and the socket server actually use.
///
/// Derived here, once: the label key without its environment suffix and the environment
/// number; the WebSocket URL (``server``) and the public API URL when the file leaves them
/// out; the image domain; the proxy for each destination (`server.proxy`, else
/// `https_proxy`/`http_proxy`/`no_proxy`); the effective log level (`SMARTICOD_LOG_LEVEL`,
/// else `log.level`). `ua.fp` needs the machine id and is computed by ``fingerprint(machineID:)``.
public struct ResolvedConfig: Sendable, Equatable {
    /// The configuration as loaded.
    public let config: DaemonConfig
    /// The label key, split into the key sent in INIT and its environment number.
    public let labelKey: LabelKey
    /// The WebSocket server: `server.url`, or derived from the label key.
    public let server: WebSocketEndpoint
    /// Whether ``server`` was derived (true) or configured (false).
    public let serverURLIsDerived: Bool
    /// Smartico's public HTTP API: `http.public_url`, or derived from the label key.
    public let publicAPI: HTTPEndpoint
    /// Whether ``publicAPI`` was derived.
    public let publicAPIURLIsDerived: Bool
    /// `img[N].smr.vc`: the domain of avatar images, until the server's
    /// `DYNAMIC_IMAGE_DOMAIN` setting says otherwise.
    public let imageDomain: String
    /// The proxy for the WebSocket server, or nil to connect directly.
    public let serverProxy: HTTPProxy?
    /// Where ``serverProxy`` came from: `server.proxy`, `https_proxy`, `HTTP_PROXY`…; nil when direct.
    public let serverProxySource: String?
    /// The proxy for the public HTTP API, or nil to connect directly.
    public let publicAPIProxy: HTTPProxy?
    /// Where ``publicAPIProxy`` came from; nil when direct.
    public let publicAPIProxySource: String?
    /// The log level to use: `SMARTICOD_LOG_LEVEL` when set, else `log.level`.
    public let logLevel: DaemonConfig.LogLevel
    /// `SMARTICOD_LOG_LEVEL` or `log.level`.
    public let logLevelSource: String

    /// The environment variable that overrides `log.level`.
    public static let logLevelVariable = "SMARTICOD_LOG_LEVEL"
}

extension ResolvedConfig {
    /// Validates `config` and derives the runtime values. Every problem of the
    /// configuration (``DaemonConfig/validate()``) and of the environment is in the error.
    public init(_ config: DaemonConfig, environment: [String: String], source: String = "<memory>") throws(ConfigError) {
        let problems = config.validate() + ResolvedConfig.environmentProblems(config, environment: environment)
        // validate() and environmentProblems check everything the derivation below needs.
        guard problems.isEmpty, let labelKey = try? LabelKey(parsing: config.server.labelKey),
              case .success(let server) = ResolvedConfig.webSocketEndpoint(config),
              case .success(let publicAPI) = ResolvedConfig.httpEndpoint(config) else {
            throw ConfigError(source: source, problems: problems)
        }
        func proxy(_ secure: Bool, _ host: String, _ port: Int) -> (HTTPProxy, String)? {
            if let configured = config.server.proxy { return (configured, "server.proxy") }
            return try? HTTPProxy.Environment(environment).proxy(secure: secure, host: host, port: port).get()
        }
        let serverProxy = proxy(server.secure, server.host, server.port)
        let publicProxy = proxy(publicAPI.secure, publicAPI.host, publicAPI.port)
        let level = environment[ResolvedConfig.logLevelVariable].flatMap { DaemonConfig.LogLevel(rawValue: $0.lowercased()) }
        self.init(
            config: config, labelKey: labelKey,
            server: server, serverURLIsDerived: config.server.url == nil,
            publicAPI: publicAPI, publicAPIURLIsDerived: config.http.publicURL == nil,
            imageDomain: labelKey.hosts.imageHost,
            serverProxy: serverProxy?.0, serverProxySource: serverProxy?.1,
            publicAPIProxy: publicProxy?.0, publicAPIProxySource: publicProxy?.1,
            logLevel: level ?? config.log.level, logLevelSource: level == nil ? "log.level" : ResolvedConfig.logLevelVariable)
    }

    /// `ua.fp`: `client.fp` when configured, else the stable value of ``DeviceFingerprint``
    /// for this machine and label key. `machineID` comes from ``MachineID/read(paths:)`` or,
    /// when the machine has none, from the value the store keeps in `state_dir`.
    public func fingerprint(machineID: String) -> Int32 {
        config.client.fp ?? DeviceFingerprint.derive(machineID: machineID, labelKey: labelKey.full)
    }

    /// The problems of the process environment for this configuration: a proxy variable
    /// that would be used but is not a valid proxy URL, an unknown `SMARTICOD_LOG_LEVEL`.
    public static func environmentProblems(_ config: DaemonConfig, environment: [String: String]) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        if let value = environment[logLevelVariable], !value.isEmpty, DaemonConfig.LogLevel(rawValue: value.lowercased()) == nil {
            problems.append(ConfigProblem(key: logLevelVariable, message: "must be \(DaemonConfig.LogLevel.expectation), got \(ConfigJSON.quoted(value))"))
        }
        guard config.server.proxy == nil else { return problems }
        let proxies = HTTPProxy.Environment(environment)
        var seen = Set<String>()
        for (secure, host, port) in destinations(config) {
            if case .failure(let e) = proxies.proxy(secure: secure, host: host, port: port), seen.insert(e.variable).inserted {
                problems.append(ConfigProblem(key: e.variable, message: e.error.description))
            }
        }
        return problems
    }

    /// The WebSocket and HTTP destinations, when their URLs are valid.
    private static func destinations(_ config: DaemonConfig) -> [(Bool, String, Int)] {
        var out: [(Bool, String, Int)] = []
        if case .success(let ws) = webSocketEndpoint(config) { out.append((ws.secure, ws.host, ws.port)) }
        if case .success(let http) = httpEndpoint(config) { out.append((http.secure, http.host, http.port)) }
        return out
    }

    private static func hosts(_ config: DaemonConfig) -> SmarticoEnvironment {
        SmarticoEnvironment(environment: (try? LabelKey(parsing: config.server.labelKey))?.environment)
    }

    private static func webSocketEndpoint(_ config: DaemonConfig) -> Result<WebSocketEndpoint, URLProblem> {
        let url = config.server.url
            ?? hosts(config).webSocketURL(domain: config.client.domain ?? "", version: config.client.effectiveTrackerVersion)
        return WebSocketEndpoint.parse(url)
    }

    private static func httpEndpoint(_ config: DaemonConfig) -> Result<HTTPEndpoint, URLProblem> {
        HTTPEndpoint.parse(config.http.publicURL ?? hosts(config).publicAPIEndpoint)
    }

    /// Whether a reloaded configuration (SIGHUP) changes how the WebSocket session is
    /// opened — URL, proxy, `server.*`, or what INIT/`ua` carry (`client.*` but
    /// `client.language`) — so that the connection must be reopened. Changes elsewhere
    /// (language, user, timeouts, socket, store, log) apply without reconnecting.
    public func requiresReconnect(from previous: ResolvedConfig) -> Bool {
        var client = config.client, previousClient = previous.config.client
        client.language = nil
        previousClient.language = nil
        return server != previous.server || serverProxy != previous.serverProxy
            || config.server != previous.config.server || client != previousClient
    }

    /// A few lines describing what the daemon will use, secrets masked (for `--check-config`
    /// and the start-up log).
    public var summary: [String] {
        var lines: [String] = []
        lines.append("label key: \(labelKey)")
        lines.append("server: \(redactedURL(server.url))" + (serverURLIsDerived ? " (derived from the label key)" : " (server.url)"))
        lines.append("public API: \(redactedURL(publicAPI.url))" + (publicAPIURLIsDerived ? " (derived from the label key)" : " (http.public_url)"))
        lines.append("image domain: \(imageDomain)")
        lines.append("proxy: " + (serverProxy.map { "\($0) (\(serverProxySource ?? ""))" } ?? "none"))
        if publicAPIProxy != serverProxy {
            lines.append("public API proxy: " + (publicAPIProxy.map { "\($0) (\(publicAPIProxySource ?? ""))" } ?? "none"))
        }
        lines.append("log level: \(logLevel.rawValue) (\(logLevelSource))")
        if let textfile = config.metrics.textfile {
            lines.append("metrics textfile: \(textfile), rewritten every \(config.metrics.intervalS) s")
        }
        return lines
    }
}
