import SmarticoProtocol
import Transport

/// One key of the configuration file, bound to its property of ``DaemonConfig``: how it is read,
/// shown and checked. Objects (`server`, `server.tls`…) are the prefixes of the keys. The order of
/// the table is the file's: problems, ``DaemonConfig/allKeyPaths`` and the docs follow it.
struct ConfigKey {
    enum Presence { case required, optional, defaulted }

    /// The dotted JSON path, e.g. `socket.max_peer_memory_bytes`.
    let path: String
    /// The JSON type as docs/configuration.md gives it: `integer`, `string or null`…
    let type: String
    /// What a value must be, for messages: "an integer ≥ 1".
    let expect: String
    let presence: Presence
    let doc: String
    /// Reads the key's JSON value into the configuration; a message when it does not fit.
    let read: (inout DaemonConfig, JSONValue) -> String?
    /// The key's value in a configuration, as JSON (the default of the docs).
    var show: (DaemonConfig) -> String
    /// What ``DaemonConfig/validate()`` finds wrong with the key's value.
    let rule: (DaemonConfig, inout ConfigRule) -> Void

    func problems(in config: DaemonConfig) -> [ConfigProblem] {
        var found = ConfigRule(config: config, key: path)
        rule(config, &found)
        return found.problems
    }

    /// The first problem of the key in `config`, nil when it has none.
    var check: (DaemonConfig) -> String? { { problems(in: $0).first?.message } }

    /// A key with a default (`null` is refused); `rule` judges the decoded value.
    static func value<T: ConfigValue>(
        _ path: String, _ kp: WritableKeyPath<DaemonConfig, T>, _ expect: String, presence: Presence = .defaulted,
        secret: Bool = false, _ doc: String, rule: @escaping (T, inout ConfigRule) -> Void = { _, _ in }
    ) -> ConfigKey {
        ConfigKey(path: path, type: T.configType, expect: expect, presence: presence, doc: doc,
                  read: { c, json in
                      guard let v = T(configJSON: json) else { return "must be \(expect), got \(described(json, secret: secret))" }
                      c[keyPath: kp] = v
                      return nil
                  },
                  show: { presence == .required ? "required" : shown($0[keyPath: kp]) },
                  rule: { c, found in rule(c[keyPath: kp], &found) })
    }

    /// A key whose default is `null`; `rule` judges a value that is not.
    static func optional<T: ConfigValue>(
        _ path: String, _ kp: WritableKeyPath<DaemonConfig, T?>, _ expect: String, secret: Bool = false, _ doc: String,
        rule: @escaping (T, inout ConfigRule) -> Void = { _, _ in }
    ) -> ConfigKey {
        var key = value(path, kp, expect + " or null", presence: .optional, secret: secret, doc) { v, found in if let v { rule(v, &found) } }
        key.show = { $0[keyPath: kp].map(shown) ?? "null" }
        return key
    }

    /// An integer of at least `min`; `rule` judges one that is.
    static func int(_ path: String, _ kp: WritableKeyPath<DaemonConfig, Int>, atLeast min: Int, _ doc: String,
                    rule: @escaping (Int, inout ConfigRule) -> Void = { _, _ in }) -> ConfigKey {
        int(path, kp, min...Int.max, doc, rule: rule)
    }

    /// An integer in `range`; `note` follows the bound in the message of validation.
    static func int(_ path: String, _ kp: WritableKeyPath<DaemonConfig, Int>, _ range: ClosedRange<Int>, note: String = "",
                    _ doc: String, rule: @escaping (Int, inout ConfigRule) -> Void = { _, _ in }) -> ConfigKey {
        let (min, max) = (range.lowerBound, range.upperBound)
        let expect = max == .max ? "an integer ≥ \(min)" : "an integer \(min)…\(max)"
        return value(path, kp, expect, doc) { v, found in
            if range.contains(v) { rule(v, &found) } else { found("must be \(expect)\(note), got \(v)") }
        }
    }

    /// A default value as the docs show it: `"DESKTOP"`, `10`, `[]`, `{}`.
    static func shown(_ value: Any) -> String {
        switch value {
        case let s as String: quoted(s)
        case let r as any RawRepresentable: shown(r.rawValue)
        case let a as [Any] where a.isEmpty: "[]"
        case let d as [String: Any] where d.isEmpty: "{}"
        default: "\(value)"
        }
    }
}

/// What the rules of the keys found: problems of the key judged, or of a part of it (`[2]`, `.Name`).
struct ConfigRule {
    /// The whole configuration, for keys bounded by other keys.
    let config: DaemonConfig
    let key: String
    var problems: [ConfigProblem] = []

    mutating func callAsFunction(_ message: String?, at part: String = "") {
        if let message { problems.append(ConfigProblem(key: key + part, message: message)) }
    }

    /// "must be `what`, got `value`" unless `ok`.
    mutating func must(_ ok: Bool, be what: String, got value: String, at part: String = "") {
        if !ok { self("must be \(what), got \(quoted(value))", at: part) }
    }

    static func nonEmpty(_ text: String, orNull: Bool = false) -> String? {
        text.isEmpty ? "must be a non-empty string" + (orNull ? " or null" : "") : nil
    }

    static func absolutePath(_ path: String) -> String? {
        if !path.hasPrefix("/") { return "must be an absolute path (starting with \"/\"), got \(quoted(path))" }
        return path.contains("\0") ? "must not contain NUL" : nil
    }

    /// A bound that another key sets.
    static func atLeast(_ other: String, _ min: Int, _ value: Int) -> String? {
        value < min ? "must be ≥ \(other) (\(min)), got \(value)" : nil
    }
}

extension DaemonConfig {
    /// Every key of the file, in the order of its schema.
    static var keys: [ConfigKey] {
        let ids = "(integers 0…\(UInt32.max))", rates = 1...1_000_000
        let absolutePath = "an absolute path", nonEmpty = "a non-empty string"
        let handshakeHeaders: Set = ["host", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version",
                                     "sec-websocket-extensions", "sec-websocket-accept", "sec-websocket-protocol",
                                     "content-length", "transfer-encoding"]
        func isToken(_ s: Unicode.Scalar) -> Bool {  // RFC 9110's tchar
            s.isASCII && (s.properties.isAlphabetic || ("0"..."9").contains(s) || "!#$%&'*+-.^_`|~".unicodeScalars.contains(s))
        }
        func isDigit(_ c: Character) -> Bool { c.isASCII && c.isNumber }
        func isAlphanumeric(_ c: Character) -> Bool { c.isASCII && (c.isLetter || c.isNumber) }
        return [
            .optional("server.url", \.server.url, "a ws:// or wss:// URL", "WebSocket URL with its query; null: derived from the label key") {
                $1(WebSocketEndpoint.parse($0).problem)
            },
            .value("server.label_key", \.server.labelKey,
                   "a 36-character label key, optionally followed by an environment suffix such as \"-2\"",
                   presence: .required, secret: true, "the label key with its environment suffix (-2)"),
            .optional("server.brand_key", \.server.brandKey, "a string", "sent in INIT_SESSION") {
                $1(ConfigRule.nonEmpty($0, orNull: true))
            },
            .value("server.headers", \.server.headers, "an object of header names to string values",
                   "extra handshake headers") { headers, found in
                for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
                    let part = "." + keyComponent(name)
                    if name.isEmpty || !name.unicodeScalars.allSatisfy(isToken) {
                        found("is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only)", at: part)
                    } else if handshakeHeaders.contains(name.lowercased()) {
                        found("is set by the WebSocket handshake itself and cannot be overridden", at: part)
                    }
                    if value.unicodeScalars.contains(where: { "\r\n\0".unicodeScalars.contains($0) }) {
                        found("the value must not contain CR, LF or NUL", at: part)
                    }
                }
            },
            .optional("server.tls.ca_file", \.server.tls.caFile, absolutePath, "PEM bundle to trust instead of the system store") {
                $1(ConfigRule.absolutePath($0))
            },
            .value("server.tls.pinned_spki_sha256", \.server.tls.pinnedSPKISHA256, "an array of base64 SHA-256 digests",
                   "base64 SHA-256 of SubjectPublicKeyInfo; when not empty the chain must contain one") { pins, found in
                for (i, pin) in pins.enumerated() {
                    let bytes = Base64.decode(pin)
                    found.must(bytes != nil, be: "the base64 of a SHA-256 digest (44 characters ending in \"=\")", got: pin, at: "[\(i)]")
                    if let n = bytes?.count, n != 32 { found("must decode to 32 bytes (a SHA-256 digest), got \(n) bytes", at: "[\(i)]") }
                }
            },
            proxy,
            .value("server.compression", \.server.compression, "true or false", "offer permessage-deflate"),
            .optional("client.tracker_version", \.client.trackerVersion, "a version X.Y.Z", "X.Y.Z; null: the daemon's version") {
                let parts = $0.split(separator: ".", omittingEmptySubsequences: false)
                $1.must(parts.count == 3 && parts.allSatisfy { (1...9).contains($0.count) && $0.allSatisfy(isDigit) },
                        be: "a version X.Y.Z (three numbers separated by dots)", got: $0)
            },
            .optional("client.domain", \.client.domain, nonEmpty, "the application id: the URL's domain, and page") {
                $1.must(!$0.isEmpty && !$0.contains { $0.isWhitespace || "/?#&".contains($0) },
                        be: "a non-empty application id without spaces, '/', '?', '#' or '&'", got: $0)
            },
            .optional("client.device_id", \.client.deviceID, nonEmpty, "null: generated once and kept in state_dir") {
                $1(ConfigRule.nonEmpty($0))
            },
            .value("client.device_type", \.client.deviceType, nonEmpty, "ua.device_type") { $1(ConfigRule.nonEmpty($0)) },
            .value("client.os", \.client.os, nonEmpty, "ua.os") { $1(ConfigRule.nonEmpty($0)) },
            .optional("client.agent", \.client.agent, "a string", "ua.agent"),
            .optional("client.host", \.client.host, "a string", "ua.host"),
            .optional("client.page", \.client.page, "a string", "page of INIT and IDENTIFY") {
                $1.must($0.isEmpty || AbsoluteURL.parse($0) != nil, be: "an absolute URL such as \"https://example.com/\"", got: $0)
            },
            .optional("client.fp", \.client.fp, "an integer \(Int32.min)…\(Int32.max)", "ua.fp; null: derived from the machine id"),
            .optional("client.language", \.client.language, "a language code such as \"en\" or \"pt-br\"",
                      "sent with CORE_LANGUAGE_CHANGE once the session is ready") {
                // `en`, `pt-br`, `zh_Hans`: 2–3 letters, then `-`/`_` subtags of 1–8 letters or digits.
                let parts = $0.split(omittingEmptySubsequences: false) { $0 == "-" || $0 == "_" }
                let ok = (2...3).contains(parts[0].count) && parts[0].allSatisfy { $0.isASCII && $0.isLetter }
                    && parts.dropFirst().allSatisfy { (1...8).contains($0.count) && $0.allSatisfy(isAlphanumeric) }
                $1.must(ok, be: "an ISO 639-1 code such as \"en\" or a custom code such as \"pt-br\"", got: $0)
            },
            .optional("user.ext_user_id", \.user.extUserID, nonEmpty, "a user to identify at start") { $1(ExtUserID.problem($0)) },
            .optional("user.hash", \.user.hash, nonEmpty, secret: true, "its hash; requires user.ext_user_id") { hash, found in
                found(ConfigRule.nonEmpty(hash.exposedValue, orNull: true))
                if found.config.user.extUserID == nil { found("is set but user.ext_user_id is not; a hash only makes sense for a user") }
            },
            .optional("user.hash_command", \.user.hashCommand, "a non-empty array of strings (program and arguments)",
                      "argv run before every IDENTIFY; its first stdout line is the hash") { command, found in
                if command.isEmpty { found("must be a non-empty array of strings (program and arguments), got []") }
                if command.first == "" { found("the program must be a non-empty string", at: "[0]") }
                for (i, arg) in command.enumerated() where arg.contains("\0") { found("must not contain NUL", at: "[\(i)]") }
            },
            .value("user.hash_command_env", \.user.hashCommandEnv, "an array of environment variable names",
                   "the daemon's environment variables hash_command also gets") { names, found in
                for (i, name) in names.enumerated() {  // `[A-Za-z_][A-Za-z0-9_]*`
                    let ok = name.first.map { !isDigit($0) } == true && name.allSatisfy { $0 == "_" || isAlphanumeric($0) }
                    found.must(ok, be: "an environment variable name (a letter or _, then letters, digits or _)", got: name, at: "[\(i)]")
                }
            },
            .optional("user.push.token", \.user.push.token, nonEmpty, secret: true, "the push token") {
                $1(ConfigRule.nonEmpty($0.exposedValue, orNull: true))
            },
            .int("user.push.platform", \.user.push.platform, 0...11, note: " (PushClientPlatform)", "PushClientPlatform"),
            .int("user.push.status", \.user.push.status, 0...4, note: " (PushNotificationUserStatus)", "PushNotificationUserStatus"),
            .optional("user.push.app_package_id", \.user.push.appPackageID, nonEmpty, "app_package_id of IDENTIFY and 1003") {
                $1(ConfigRule.nonEmpty($0))
            },
            .value("user.push.register_via", \.user.push.registerVia, "\"socket\" or \"http\"", "how a push token reaches Smartico"),
            .int("user.reidentify_after_s", \.user.reidentifyAfterS, atLeast: 60, "seconds before identifying again, so wrapper URLs stay fresh"),
            .int("session.connect_timeout_s", \.session.connectTimeoutS, atLeast: 1, "TCP + TLS + upgrade"),
            .int("session.response_timeout_s", \.session.responseTimeoutS, atLeast: 1, "wait for cid 4 / cid 6"),
            .int("session.keepalive_s", \.session.keepaliveS, atLeast: 1, "own PING after this much silence"),
            .int("session.dead_after_s", \.session.deadAfterS, atLeast: 1, "reconnect when the silence lasts this much longer"),
            .int("session.login_after_inactivity_min", \.session.loginAfterInactivityMin, atLeast: 1, "a new logical session after this"),
            .value("session.login_policy", \.session.loginPolicy, "\"logical_session\" or \"every_identify\"", "when LOGIN (cid 7) is sent"),
            .int("session.reconnect.initial_ms", \.session.reconnect.initialMs, atLeast: 1, "first backoff"),
            .int("session.reconnect.max_ms", \.session.reconnect.maxMs, atLeast: 1, "largest backoff, ≥ initial_ms") {
                let initial = $1.config.session.reconnect.initialMs  // below 1, initial_ms has its own problem
                if initial >= 1 { $1(ConfigRule.atLeast("session.reconnect.initial_ms", initial, $0)) }
            },
            .value("session.reconnect.multiplier", \.session.reconnect.multiplier, "a number ≥ 1", "growth per attempt") {
                $1($0.isFinite && $0 >= 1 ? nil : "must be a number ≥ 1, got \($0)")  // NaN is refused too
            },
            .value("socket.path", \.socket.path, absolutePath, "where the daemon listens") { path, found in
                let maxBytes = 107  // `sizeof(sockaddr_un.sun_path) - 1` on Linux
                found(ConfigRule.absolutePath(path) ?? (path.utf8.count > maxBytes
                    ? "is \(path.utf8.count) bytes long; a Unix socket path may have at most \(maxBytes)" : nil))
            },
            .value("socket.mode", \.socket.mode, "an octal permission string such as \"0660\"", "permissions of the socket file") {
                let form = "an octal permission string such as \"0660\" (3 or 4 digits 0-7, at most 0777)"
                $1.must($1.config.socket.modeBits != nil, be: form, got: $0)
            },
            .optional("socket.group", \.socket.group, "a group name", "group of the socket file") {
                $1.must(!$0.isEmpty && !$0.contains { $0.isWhitespace || $0 == ":" }, be: "a group name or numeric id", got: $0)
            },
            .optional("socket.control_uids", \.socket.controlUIDs, "an array of user ids \(ids)", "uids with the control role"),
            .optional("socket.control_gids", \.socket.controlGIDs, "an array of group ids \(ids)", "groups with the control role"),
            .int("socket.max_line_bytes", \.socket.maxLineBytes, 1024...(64 << 20), "longest request line"),
            .int("socket.max_queue_bytes", \.socket.maxQueueBytes, atLeast: 4096, "unsent output of one peer before it is dropped"),
            .value("socket.max_total_queue_bytes", \.socket.maxTotalQueueBytes, "an integer ≥ socket.max_queue_bytes",
                   "unsent output of all peers") { $1(ConfigRule.atLeast("socket.max_queue_bytes", $1.config.socket.maxQueueBytes, $0)) },
            .int("socket.max_peers_per_uid", \.socket.maxPeersPerUID, atLeast: 1, "connections of one uid (root not limited)"),
            .int("socket.max_durable_per_uid", \.socket.maxDurablePerUID, atLeast: 1, "durable subscriptions of one uid (root not limited)"),
            .int("socket.read_requests_per_s", \.socket.readRequestsPerS, rates, "requests to the server a read uid makes a second"),
            .int("socket.read_requests_burst", \.socket.readRequestsBurst, rates, "how many of them at once"),
            .value("socket.max_peer_memory_bytes", \.socket.maxPeerMemoryBytes,
                   "an integer ≥ \(Socket.minPeerMemoryBytes) and ≥ 4 × socket.max_line_bytes",
                   "what all local peers may hold; one uid a quarter") { bytes, found in
                let line = found.config.socket.maxLineBytes
                if bytes < max(Socket.minPeerMemoryBytes, 4 * line) {
                    found("must be ≥ \(Socket.minPeerMemoryBytes) and ≥ 4 × socket.max_line_bytes (\(4 * line)): "
                        + "one uid's quarter must hold a whole line; got \(bytes)")
                }
            },
            .int("socket.partial_line_timeout_s", \.socket.partialLineTimeoutS, 1...3600, "an unfinished request line closes its connection"),
            .value("state_dir", \.stateDir, absolutePath, "device id, user, outbox, journal") { $1(ConfigRule.absolutePath($0)) },
            .int("journal.retention_events", \.journal.retentionEvents, atLeast: 1, "events kept"),
            .int("journal.retention_hours", \.journal.retentionHours, atLeast: 1, "hours kept"),
            .int("journal.max_bytes", \.journal.maxBytes, atLeast: 1 << 20, "the journal's size on disk"),
            .int("outbox.max_messages", \.outbox.maxMessages, atLeast: 1, "beyond it send answers queue_full"),
            .optional("http.public_url", \.http.publicURL, "an https:// or http:// URL", "the public API; null: derived from the label key") {
                $1(HTTPEndpoint.parse($0).problem)
            },
            .int("http.connect_timeout_s", \.http.connectTimeoutS, atLeast: 1, "DNS + TCP + proxy + TLS"),
            .int("http.response_timeout_s", \.http.responseTimeoutS, atLeast: 1, "from the request written to the whole response"),
            .int("http.retry_initial_ms", \.http.retryInitialMs, atLeast: 1, "the wait after the first failure, doubling"),
            .int("http.retry_max_ms", \.http.retryMaxMs, atLeast: 1, "the longest wait, ≥ retry_initial_ms") {
                let initial = $1.config.http.retryInitialMs
                if initial >= 1 { $1(ConfigRule.atLeast("http.retry_initial_ms", initial, $0)) }
            },
            .int("http.max_queue", \.http.maxQueue, atLeast: 1, "calls waiting at most"),
            .value("log.level", \.log.level, LogLevel.expectation, "trace…critical"),
            .optional("metrics.textfile", \.metrics.textfile, absolutePath, "the Prometheus text file; null: none") { textfile, found in
                let example = "\"/var/lib/node_exporter/textfile_collector/smarticod.prom\""
                found(ConfigRule.absolutePath(textfile)
                    ?? (textfile.hasSuffix("/") ? "must name a file, not a directory, got \(quoted(textfile)); e.g. \(example)" : nil))
            },
            .int("metrics.interval_s", \.metrics.intervalS, 1...3600, note: " (seconds between rewrites of metrics.textfile)",
                 "seconds between rewrites"),
        ]
    }

    /// `server.proxy`, parsed while decoding so that the problem says exactly what is wrong with
    /// the URL (it never contains the password).
    private static var proxy: ConfigKey {
        let expect = "an http://[user:pass@]host:port URL"
        return ConfigKey(
            path: "server.proxy", type: "string or null", expect: expect, presence: .optional,
            doc: "http://[user:pass@]host:port; null: the environment's proxy variables",
            read: { c, json in
                if json.isNull { c.server.proxy = nil; return nil }
                guard let text = String(configJSON: json) else { return "must be \(expect) or null, got \(described(json, secret: true))" }
                do throws(HTTPProxyError) {
                    c.server.proxy = try HTTPProxy(url: text)
                    return nil
                } catch {
                    if case .invalidURL(_, let problem) = error { return "must be \(expect): \(problem)" }
                    return "\(error)"
                }
            },
            show: { $0.server.proxy.map { "\($0)" } ?? "null" }, rule: { _, _ in })
    }

    /// Every key of the file as a dotted path, objects before their keys (for "did you mean"
    /// and the order of problems).
    public static let allKeyPaths: [String] = {
        var paths: [String] = []
        for key in keys {
            var prefix = ""
            for part in key.path.split(separator: ".") {
                prefix += (prefix.isEmpty ? "" : ".") + part
                if !paths.contains(prefix) { paths.append(prefix) }
            }
        }
        return paths
    }()

    /// Decodes the object at `path` (empty: the whole file) into `config`: unknown keys first,
    /// then every key of the table under `path`. A missing object is read as an empty one, so
    /// that its required keys are reported.
    static func decode(_ object: JSONObject, at path: String, keys: [ConfigKey], into config: inout DaemonConfig, problems: inout [ConfigProblem]) {
        let prefix = path.isEmpty ? "" : path + "."
        var names: [String] = []
        for key in keys where key.path.hasPrefix(prefix) {
            let name = String(key.path.dropFirst(prefix.count).prefix { $0 != "." })
            if !names.contains(name) { names.append(name) }
        }
        var seen: Set<String> = []
        for name in object.keys where !names.contains(name) && seen.insert(name).inserted {
            let message = ConfigKeySuggestion.unknownKeyMessage(name, siblings: names, path: path)
            problems.append(ConfigProblem(key: prefix + keyComponent(name), message: message))
        }
        for name in names {
            let json = object[name]
            if let key = keys.first(where: { $0.path == prefix + name }) {
                if key.presence == .required, json == nil || json!.isNull {
                    problems.append(ConfigProblem(key: key.path, message: "required (\(key.expect))"))
                } else if let json, let message = key.read(&config, json) {
                    problems.append(ConfigProblem(key: key.path, message: message))
                }
            } else if case .object(let inner) = json ?? .object([:]) {
                decode(inner, at: prefix + name, keys: keys, into: &config, problems: &problems)
            } else if let json {
                problems.append(ConfigProblem(key: prefix + name, message: "must be an object, got \(described(json, secret: false))"))
            }
        }
    }

    /// Every semantic problem of this configuration, in key order; empty when it is valid. The
    /// rules of the table, and the label key's format (the one key without a default).
    /// It does not touch the file system or the network.
    public func validate() -> [ConfigProblem] {
        var problems = DaemonConfig.keys.flatMap { $0.problems(in: self) }
        do { _ = try LabelKey(parsing: server.labelKey) } catch {
            problems.append(ConfigProblem(key: "server.label_key", message: error.description))
        }
        return ConfigLoader.inSchemaOrder(problems)
    }

    /// This configuration if ``validate()`` finds nothing, else a ``ConfigError`` with every problem.
    public func validated(source: String = "<memory>") throws(ConfigError) -> DaemonConfig {
        let problems = validate()
        if !problems.isEmpty { throw ConfigError(source: source, problems: problems) }
        return self
    }
}
