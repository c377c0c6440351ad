import SmarticoProtocol
import Transport

/// A valid configuration with what derives from it and from the process environment: what the
/// session engine, the HTTP reporter and the socket server use. `ua.fp` needs the machine id too:
/// ``fingerprint(machineID:)``.
public struct ResolvedConfig: Sendable, Equatable {
    public let config: DaemonConfig
    /// The label key, split into the key sent in INIT and its environment number.
    public let labelKey: LabelKey
    /// The WebSocket server: `server.url`, or derived from the label key (``serverURLIsDerived``).
    public let server: WebSocketEndpoint
    public let serverURLIsDerived: Bool
    /// Smartico's public HTTP API: `http.public_url`, or derived from the label key.
    public let publicAPI: HTTPEndpoint
    public let publicAPIURLIsDerived: Bool
    /// `img[N].smr.vc`: the domain of avatar images, until the server's `DYNAMIC_IMAGE_DOMAIN` says otherwise.
    public let imageDomain: String
    /// The proxy for each server (nil: direct) and where it came from: `server.proxy`, `https_proxy`, `HTTP_PROXY`…
    public let serverProxy: HTTPProxy?
    public let serverProxySource: String?
    public let publicAPIProxy: HTTPProxy?
    public let publicAPIProxySource: String?
    /// `SMARTICOD_LOG_LEVEL` when set, else `log.level`; ``logLevelSource`` says which.
    public let logLevel: DaemonConfig.LogLevel
    public let logLevelSource: String

    /// The environment variable that overrides `log.level`.
    public static let logLevelVariable = "SMARTICOD_LOG_LEVEL"
}

extension ResolvedConfig {
    /// Validates `config` and derives the runtime values. Every problem of the configuration
    /// (``DaemonConfig/validate()``) and of the environment is in the error.
    public init(_ config: DaemonConfig, environment: [String: String], source: String = "<memory>") throws(ConfigError) {
        let problems = config.validate() + ResolvedConfig.environmentProblems(config, environment: environment)
        let (server, publicAPI) = ResolvedConfig.endpoints(config)
        // validate() and environmentProblems check everything the derivation needs.
        guard problems.isEmpty, let labelKey = try? LabelKey(parsing: config.server.labelKey),
              case .success(let server) = server, case .success(let publicAPI) = publicAPI else {
            throw ConfigError(source: source, problems: problems)
        }
        func proxy<Kind>(_ endpoint: ServerEndpoint<Kind>) -> (HTTPProxy, String)? {
            if let configured = config.server.proxy { return (configured, "server.proxy") }
            return try? HTTPProxy.Environment(environment).proxy(secure: endpoint.secure, host: endpoint.host, port: endpoint.port).get()
        }
        let (serverProxy, publicProxy) = (proxy(server), proxy(publicAPI))
        let level = environment[ResolvedConfig.logLevelVariable].flatMap { DaemonConfig.LogLevel(rawValue: $0.lowercased()) }
        self.init(
            config: config, labelKey: labelKey,
            server: server, serverURLIsDerived: config.server.url == nil,
            publicAPI: publicAPI, publicAPIURLIsDerived: config.http.publicURL == nil,
            imageDomain: SmarticoEnvironment(environment: labelKey.environment).imageHost,
            serverProxy: serverProxy?.0, serverProxySource: serverProxy?.1,
            publicAPIProxy: publicProxy?.0, publicAPIProxySource: publicProxy?.1,
            logLevel: level ?? config.log.level, logLevelSource: level == nil ? "log.level" : ResolvedConfig.logLevelVariable)
    }

    /// `ua.fp`: `client.fp`, else the stable value of ``DeviceFingerprint`` for this machine and
    /// label key. `machineID` comes from ``MachineID/read(paths:)``, or from `state_dir` when the
    /// machine has none.
    public func fingerprint(machineID: String) -> Int32 {
        config.client.fp ?? DeviceFingerprint.derive(machineID: machineID, labelKey: labelKey.full)
    }

    /// The problems of the process environment for this configuration: a proxy variable that
    /// would be used but is not a valid proxy URL, an unknown `SMARTICOD_LOG_LEVEL`.
    public static func environmentProblems(_ config: DaemonConfig, environment: [String: String]) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        if let value = environment[logLevelVariable], !value.isEmpty, DaemonConfig.LogLevel(rawValue: value.lowercased()) == nil {
            problems.append(ConfigProblem(key: logLevelVariable, message: "must be \(DaemonConfig.LogLevel.expectation), got \(quoted(value))"))
        }
        guard config.server.proxy == nil else { return problems }
        let (server, publicAPI) = endpoints(config)
        let destinations = [server.map { ($0.secure, $0.host, $0.port) }, publicAPI.map { ($0.secure, $0.host, $0.port) }]
        for case .success(let (secure, host, port)) in destinations {
            if case .failure(let e) = HTTPProxy.Environment(environment).proxy(secure: secure, host: host, port: port),
               !problems.contains(where: { $0.key == e.variable }) {
                problems.append(ConfigProblem(key: e.variable, message: e.error.description))
            }
        }
        return problems
    }

    /// The WebSocket server's and the public API's URLs, configured or derived from the label key's environment.
    private static func endpoints(_ config: DaemonConfig) -> (Result<WebSocketEndpoint, URLProblem>, Result<HTTPEndpoint, URLProblem>) {
        let hosts = SmarticoEnvironment(environment: (try? LabelKey(parsing: config.server.labelKey))?.environment)
        let url = config.server.url ?? hosts.webSocketURL(domain: config.client.domain ?? "", version: config.client.effectiveTrackerVersion)
        return (WebSocketEndpoint.parse(url), HTTPEndpoint.parse(config.http.publicURL ?? hosts.publicAPIEndpoint))
    }

    /// Whether a reloaded configuration (SIGHUP) changes how the WebSocket session is opened (URL,
    /// proxy, `server.*`, `client.*` but `client.language`), so that the connection must be reopened.
    public func requiresReconnect(from previous: ResolvedConfig) -> Bool {
        var client = config.client, previousClient = previous.config.client
        (client.language, previousClient.language) = (nil, nil)
        return server != previous.server || serverProxy != previous.serverProxy
            || config.server != previous.config.server || client != previousClient
    }

    /// What the daemon will use, secrets masked (for `--check-config` and the start-up log).
    public var summary: [String] {
        var lines = [
            "label key: \(labelKey)",
            "server: \(redactedURL(server.url))" + (serverURLIsDerived ? " (derived from the label key)" : " (server.url)"),
            "public API: \(redactedURL(publicAPI.url))" + (publicAPIURLIsDerived ? " (derived from the label key)" : " (http.public_url)"),
            "image domain: \(imageDomain)",
            "proxy: " + (serverProxy.map { "\($0) (\(serverProxySource ?? ""))" } ?? "none"),
        ]
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
