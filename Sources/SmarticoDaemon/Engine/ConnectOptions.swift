import Transport

extension ResolvedConfig {
    /// How the driver opens the WebSocket: `server.headers`, `server.tls`, the resolved proxy,
    /// `server.compression`, `session.connect_timeout_s`.
    var webSocketConnectOptions: WebSocketConnectOptions {
        let server = config.server
        var headers = HTTPHeaders()
        for (name, value) in server.headers.sorted(by: { $0.key < $1.key }) {
            headers.add(name: name, value: value)
        }
        let tls = TLSClientConfiguration(
            trustRoots: server.tls.caFile.map { .caFile($0) } ?? .system,
            spkiPins: server.tls.pinnedSPKISHA256)
        let proxy = serverProxy.map {
            HTTPProxy(host: $0.host, port: $0.port, username: $0.username, password: $0.password?.exposedValue)
        }
        return WebSocketConnectOptions(
            headers: headers, deflate: server.compression ? PerMessageDeflateOptions() : nil, tls: tls, proxy: proxy,
            connectTimeout: .seconds(config.session.connectTimeoutS),
            // The machine decodes bytes: text messages come as their validated bytes, not as a
            // String made (and checked again) only to be turned back into bytes.
            configuration: WebSocketConfiguration(textAsBytes: true),
            // A server that stops reading must not make us buffer without bound.
            writeQueueLimit: 64 << 20)
    }
}

extension ConnectError {
    /// The snake_case word of the `session` event's `reason` for this failure.
    var sessionReason: String {
        switch reason {
        case .timeout: return "connect_timeout"
        case .tls: return "tls_error"
        case .proxy: return "proxy_error"
        case .upgrade: return "upgrade_failed"
        case .http: return "upgrade_failed"
        case .configuration: return "configuration_error"
        case .cancelled: return "cancelled"
        case .socket(let error):
            switch error {
            case .dns: return "dns_error"
            case .connectFailed: return "connect_refused"
            case .connectTimeout: return "connect_timeout"
            case .tls: return "tls_error"
            default: return step == .dns ? "dns_error" : "connect_failed"
            }
        }
    }
}
