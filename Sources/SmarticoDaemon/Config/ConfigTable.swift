import SmarticoProtocol
import Transport

/// One key of the configuration file, bound to its property of ``DaemonConfig``.
///
/// Objects (`server`, `server.tls`, `session.reconnect`…) are not listed: they are the
/// prefixes of the keys. The order of the table is the order of the file's schema: problems,
/// ``DaemonConfig/allKeyPaths`` and docs/configuration.md follow it.
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
    let show: (DaemonConfig) -> String
    /// The bound of ``DaemonConfig/validate()``: a message when the value is outside it.
    var check: (DaemonConfig) -> String? = { _ in nil }

    /// A key with a default: `null` is refused.
    static func value<T: ConfigValue>(
        _ path: String, _ kp: WritableKeyPath<DaemonConfig, T>, _ expect: String, required: Bool = false,
        secret: Bool = false, _ doc: String  // a secret's wrong value is described by its kind only
    ) -> ConfigKey {
        ConfigKey(path: path, type: T.configType, expect: expect, presence: required ? .required : .defaulted, doc: doc,
                  read: { c, json in
                      guard let v = T(configJSON: json) else { return "must be \(expect), got \(described(json, secret: secret))" }
                      c[keyPath: kp] = v
                      return nil
                  },
                  show: { required ? "required" : shown($0[keyPath: kp]) })
    }

    /// A key whose default is `null`.
    static func optional<T: ConfigValue>(
        _ path: String, _ kp: WritableKeyPath<DaemonConfig, T?>, _ expect: String, secret: Bool = false, _ doc: String
    ) -> ConfigKey {
        ConfigKey(path: path, type: T.configType + " or null", expect: expect, presence: .optional, doc: doc,
                  read: { c, json in
                      if json.isNull { c[keyPath: kp] = nil; return nil }
                      guard let v = T(configJSON: json) else { return "must be \(expect) or null, got \(described(json, secret: secret))" }
                      c[keyPath: kp] = v
                      return nil
                  },
                  show: { $0[keyPath: kp].map(shown) ?? "null" })
    }

    /// An integer of at least `min`.
    static func int(_ path: String, _ kp: WritableKeyPath<DaemonConfig, Int>, atLeast min: Int, _ doc: String) -> ConfigKey {
        let expect = Expect.integer(atLeast: min)
        var key = value(path, kp, expect, doc)
        key.check = { c in c[keyPath: kp] < min ? "must be \(expect), got \(c[keyPath: kp])" : nil }
        return key
    }

    /// An integer in `range`; `note` follows the bound in the message of validation.
    static func int(_ path: String, _ kp: WritableKeyPath<DaemonConfig, Int>, _ range: ClosedRange<Int>, note: String = "", _ doc: String) -> ConfigKey {
        let expect = Expect.integer(range)
        var key = value(path, kp, expect, doc)
        key.check = { c in range.contains(c[keyPath: kp]) ? nil : "must be \(expect)\(note), got \(c[keyPath: kp])" }
        return key
    }

    /// A default value as the docs show it: `"DESKTOP"`, `10`, `[]`, `{}`.
    static func shown(_ value: Any) -> String {
        switch value {
        case let s as String: ConfigJSON.quoted(s)
        case let r as any RawRepresentable: shown(r.rawValue)
        case let a as [Any] where a.isEmpty: "[]"
        case let d as [String: Any] where d.isEmpty: "{}"
        default: "\(value)"
        }
    }
}

/// The wording of "must be …" for each kind of value, shared by decoding and ``DaemonConfig/validate()``.
enum Expect {
    static let labelKey = "a 36-character label key, optionally followed by an environment suffix such as \"-2\""
    static let absolutePath = "an absolute path"
    static let nonEmptyString = "a non-empty string"
    static func integer(atLeast min: Int) -> String { "an integer ≥ \(min)" }
    static func integer(_ range: ClosedRange<Int>) -> String { "an integer \(range.lowerBound)…\(range.upperBound)" }
}

extension DaemonConfig {
    /// Every key of the file, in the order of its schema.
    static var keys: [ConfigKey] {
        let ids = "(integers 0…\(UInt32.max))", rates = 1...1_000_000
        return [
            .optional("server.url", \.server.url, "a ws:// or wss:// URL", "WebSocket URL with its query; null: derived from the label key"),
            .value("server.label_key", \.server.labelKey, Expect.labelKey, required: true, secret: true, "the label key with its environment suffix (-2)"),
            .optional("server.brand_key", \.server.brandKey, "a string", "sent in INIT_SESSION"),
            .value("server.headers", \.server.headers, "an object of header names to string values", "extra handshake headers"),
            .optional("server.tls.ca_file", \.server.tls.caFile, Expect.absolutePath, "PEM bundle to trust instead of the system store"),
            .value("server.tls.pinned_spki_sha256", \.server.tls.pinnedSPKISHA256, "an array of base64 SHA-256 digests",
                   "base64 SHA-256 of SubjectPublicKeyInfo; when not empty the chain must contain one"),
            proxy,
            .value("server.compression", \.server.compression, "true or false", "offer permessage-deflate"),
            .optional("client.tracker_version", \.client.trackerVersion, "a version X.Y.Z", "X.Y.Z; null: the daemon's version"),
            .optional("client.domain", \.client.domain, Expect.nonEmptyString, "the application id: the URL's domain, and page"),
            .optional("client.device_id", \.client.deviceID, Expect.nonEmptyString, "null: generated once and kept in state_dir"),
            .value("client.device_type", \.client.deviceType, Expect.nonEmptyString, "ua.device_type"),
            .value("client.os", \.client.os, Expect.nonEmptyString, "ua.os"),
            .optional("client.agent", \.client.agent, "a string", "ua.agent"),
            .optional("client.host", \.client.host, "a string", "ua.host"),
            .optional("client.page", \.client.page, "a string", "page of INIT and IDENTIFY"),
            .optional("client.fp", \.client.fp, "an integer \(Int32.min)…\(Int32.max)", "ua.fp; null: derived from the machine id"),
            .optional("client.language", \.client.language, "a language code such as \"en\" or \"pt-br\"",
                      "sent with CORE_LANGUAGE_CHANGE once the session is ready"),
            .optional("user.ext_user_id", \.user.extUserID, Expect.nonEmptyString, "a user to identify at start"),
            .optional("user.hash", \.user.hash, Expect.nonEmptyString, secret: true, "its hash; requires user.ext_user_id"),
            .optional("user.hash_command", \.user.hashCommand, "a non-empty array of strings (program and arguments)",
                      "argv run before every IDENTIFY; its first stdout line is the hash"),
            .value("user.hash_command_env", \.user.hashCommandEnv, "an array of environment variable names",
                   "the daemon's environment variables hash_command also gets"),
            .optional("user.push.token", \.user.push.token, Expect.nonEmptyString, secret: true, "the push token"),
            .int("user.push.platform", \.user.push.platform, 0...11, note: " (PushClientPlatform)", "PushClientPlatform"),
            .int("user.push.status", \.user.push.status, 0...4, note: " (PushNotificationUserStatus)", "PushNotificationUserStatus"),
            .optional("user.push.app_package_id", \.user.push.appPackageID, Expect.nonEmptyString, "app_package_id of IDENTIFY and 1003"),
            .value("user.push.register_via", \.user.push.registerVia, "\"socket\" or \"http\"", "how a push token reaches Smartico"),
            .int("user.reidentify_after_s", \.user.reidentifyAfterS, atLeast: 60, "seconds before identifying again, so wrapper URLs stay fresh"),
            .int("session.connect_timeout_s", \.session.connectTimeoutS, atLeast: 1, "TCP + TLS + upgrade"),
            .int("session.response_timeout_s", \.session.responseTimeoutS, atLeast: 1, "wait for cid 4 / cid 6"),
            .int("session.keepalive_s", \.session.keepaliveS, atLeast: 1, "own PING after this much silence"),
            .int("session.dead_after_s", \.session.deadAfterS, atLeast: 1, "reconnect when the silence lasts this much longer"),
            .int("session.login_after_inactivity_min", \.session.loginAfterInactivityMin, atLeast: 1, "a new logical session after this"),
            .value("session.login_policy", \.session.loginPolicy, "\"logical_session\" or \"every_identify\"", "when LOGIN (cid 7) is sent"),
            .int("session.reconnect.initial_ms", \.session.reconnect.initialMs, atLeast: 1, "first backoff"),
            .int("session.reconnect.max_ms", \.session.reconnect.maxMs, atLeast: 1, "largest backoff, ≥ initial_ms"),
            .value("session.reconnect.multiplier", \.session.reconnect.multiplier, "a number ≥ 1", "growth per attempt"),
            .value("socket.path", \.socket.path, Expect.absolutePath, "where the daemon listens"),
            .value("socket.mode", \.socket.mode, "an octal permission string such as \"0660\"", "permissions of the socket file"),
            .optional("socket.group", \.socket.group, "a group name", "group of the socket file"),
            .optional("socket.control_uids", \.socket.controlUIDs, "an array of user ids \(ids)", "uids with the control role"),
            .optional("socket.control_gids", \.socket.controlGIDs, "an array of group ids \(ids)", "groups with the control role"),
            .int("socket.max_line_bytes", \.socket.maxLineBytes, 1024...(64 << 20), "longest request line"),
            .int("socket.max_queue_bytes", \.socket.maxQueueBytes, atLeast: 4096, "unsent output of one peer before it is dropped"),
            .value("socket.max_total_queue_bytes", \.socket.maxTotalQueueBytes, "an integer ≥ socket.max_queue_bytes", "unsent output of all peers"),
            .int("socket.max_peers_per_uid", \.socket.maxPeersPerUID, atLeast: 1, "connections of one uid (root not limited)"),
            .int("socket.max_durable_per_uid", \.socket.maxDurablePerUID, atLeast: 1, "durable subscriptions of one uid (root not limited)"),
            .int("socket.read_requests_per_s", \.socket.readRequestsPerS, rates, "requests to the server a read uid makes a second"),
            .int("socket.read_requests_burst", \.socket.readRequestsBurst, rates, "how many of them at once"),
            .value("socket.max_peer_memory_bytes", \.socket.maxPeerMemoryBytes,
                   "an integer ≥ \(Socket.minPeerMemoryBytes) and ≥ 4 × socket.max_line_bytes", "what all local peers may hold; one uid a quarter"),
            .int("socket.partial_line_timeout_s", \.socket.partialLineTimeoutS, 1...3600, "an unfinished request line closes its connection"),
            .value("state_dir", \.stateDir, Expect.absolutePath, "device id, user, outbox, journal"),
            .int("journal.retention_events", \.journal.retentionEvents, atLeast: 1, "events kept"),
            .int("journal.retention_hours", \.journal.retentionHours, atLeast: 1, "hours kept"),
            .int("journal.max_bytes", \.journal.maxBytes, atLeast: 1 << 20, "the journal's size on disk"),
            .int("outbox.max_messages", \.outbox.maxMessages, atLeast: 1, "beyond it send answers queue_full"),
            .optional("http.public_url", \.http.publicURL, "an https:// or http:// URL", "the public API; null: derived from the label key"),
            .int("http.connect_timeout_s", \.http.connectTimeoutS, atLeast: 1, "DNS + TCP + proxy + TLS"),
            .int("http.response_timeout_s", \.http.responseTimeoutS, atLeast: 1, "from the request written to the whole response"),
            .int("http.retry_initial_ms", \.http.retryInitialMs, atLeast: 1, "the wait after the first failure, doubling"),
            .int("http.retry_max_ms", \.http.retryMaxMs, atLeast: 1, "the longest wait, ≥ retry_initial_ms"),
            .int("http.max_queue", \.http.maxQueue, atLeast: 1, "calls waiting at most"),
            .value("log.level", \.log.level, LogLevel.expectation, "trace…critical"),
            .optional("metrics.textfile", \.metrics.textfile, Expect.absolutePath, "the Prometheus text file; null: none"),
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
            show: { $0.server.proxy.map { "\($0)" } ?? "null" })
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
            } else if let json {
                guard case .object(let inner) = json else {
                    problems.append(ConfigProblem(key: prefix + name, message: "must be an object, got \(described(json, secret: false))"))
                    continue
                }
                decode(inner, at: prefix + name, keys: keys, into: &config, problems: &problems)
            } else {
                decode(JSONObject(), at: prefix + name, keys: keys, into: &config, problems: &problems)
            }
        }
    }
}
