@_exported import SmarticoSocketAPI  // SmarticoVersion, SocketAPIDefaults: shared with smarticoctl
import Logging
import SmarticoProtocol
import Transport

/// The daemon's configuration: one JSON file, exactly the keys of `docs/configuration.md`
/// (the table of `shared/spec/daemon.md`), every key but `server.label_key` with a default.
///
/// Decoding (``ConfigLoader``, from SmarticoProtocol's `JSONValue`) checks types and rejects
/// unknown keys at every level;
/// ``validate()`` checks everything else in one place. Derived values (URLs from the label
/// key's environment, the proxy, `ua.fp`, the log level) are in ``ResolvedConfig``.
///
/// Secrets (label key, user hash, push token, proxy password) are ``Secret``s: printing,
/// dumping or encoding a configuration shows them masked.
public struct DaemonConfig: Sendable, Equatable, Encodable, ConfigSection {
    public var server: Server
    public var client: Client
    public var user: User
    public var session: Session
    public var socket: Socket
    /// `state_dir`: device id, user, outbox, journal, seq counter. Default `/var/lib/smarticod`.
    public var stateDir: String
    public var journal: Journal
    public var outbox: Outbox
    public var http: HTTP
    public var log: Log
    public var metrics: Metrics

    public static let defaultStateDir = "/var/lib/smarticod"

    /// A configuration with every default and the given label key.
    public init(
        server: Server,
        client: Client = Client(),
        user: User = User(),
        session: Session = Session(),
        socket: Socket = Socket(),
        stateDir: String = DaemonConfig.defaultStateDir,
        journal: Journal = Journal(),
        outbox: Outbox = Outbox(),
        http: HTTP = HTTP(),
        log: Log = Log(),
        metrics: Metrics = Metrics()
    ) {
        self.server = server
        self.client = client
        self.user = user
        self.session = session
        self.socket = socket
        self.stateDir = stateDir
        self.journal = journal
        self.outbox = outbox
        self.http = http
        self.log = log
        self.metrics = metrics
    }

    /// Every default, with `labelKey` as `server.label_key`.
    public init(labelKey: String) {
        self.init(server: Server(labelKey: Secret(labelKey)))
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case server, client, user, session, socket
        case stateDir = "state_dir"
        case journal, outbox, http, log, metrics
    }

    init(config c: ConfigObject<CodingKeys>) {
        if c.contains(.server) {
            server = c.section(.server, default: Server(labelKey: Secret("")))
        } else {
            c.report("server.label_key", "required (\(Expect.labelKey))")
            server = Server(labelKey: Secret(""))
        }
        client = c.section(.client, default: Client())
        user = c.section(.user, default: User())
        session = c.section(.session, default: Session())
        socket = c.section(.socket, default: Socket())
        stateDir = c.field(.stateDir, default: DaemonConfig.defaultStateDir, expect: Expect.absolutePath)
        journal = c.section(.journal, default: Journal())
        outbox = c.section(.outbox, default: Outbox())
        http = c.section(.http, default: HTTP())
        log = c.section(.log, default: Log())
        metrics = c.section(.metrics, default: Metrics())
    }

    /// Every key of the file as a dotted path (for "did you mean" and for the docs test).
    public static let allKeyPaths: [String] = {
        var keys: [String] = []
        func add<K: CodingKey & CaseIterable>(_ prefix: String, _ type: K.Type) {
            for key in K.allCases { keys.append(prefix.isEmpty ? key.stringValue : prefix + "." + key.stringValue) }
        }
        add("", CodingKeys.self)
        add("server", Server.CodingKeys.self)
        add("server.tls", Server.TLS.CodingKeys.self)
        add("client", Client.CodingKeys.self)
        add("user", User.CodingKeys.self)
        add("user.push", User.Push.CodingKeys.self)
        add("session", Session.CodingKeys.self)
        add("session.reconnect", Session.Reconnect.CodingKeys.self)
        add("socket", Socket.CodingKeys.self)
        add("journal", Journal.CodingKeys.self)
        add("outbox", Outbox.CodingKeys.self)
        add("http", HTTP.CodingKeys.self)
        add("log", Log.CodingKeys.self)
        add("metrics", Metrics.CodingKeys.self)
        return keys
    }()
}

/// The wording of "must be …" for each kind of value, shared by decoding and ``DaemonConfig/validate()``.
enum Expect {
    static let labelKey = "a 36-character label key, optionally followed by an environment suffix such as \"-2\""
    static let absolutePath = "an absolute path"
    static let string = "a string"
    static let nonEmptyString = "a non-empty string"
    static let bool = "true or false"
    static func integer(atLeast min: Int) -> String { "an integer ≥ \(min)" }
    static func integer(_ range: ClosedRange<Int>) -> String { "an integer \(range.lowerBound)…\(range.upperBound)" }
    static let int32 = "an integer \(Int32.min)…\(Int32.max)"
    static let numericIDs = "an array of integers 0…\(UInt32.max)"
    static let stringArray = "an array of strings"
    static let headers = "an object of header names to string values"
}

extension DaemonConfig {
    /// `server.*`: where and how to connect.
    public struct Server: Sendable, Equatable, Encodable, ConfigSection {
        /// `server.url`: `ws://` or `wss://` URL with its query; null → derived from the label key.
        public var url: String?
        /// `server.label_key` (required): the label key, optionally with its environment suffix (`-2`).
        public var labelKey: Secret
        /// `server.brand_key`: sent in INIT_SESSION; default null.
        public var brandKey: String?
        /// `server.headers`: extra handshake headers; default `{}`.
        public var headers: [String: String]
        /// `server.tls.*`
        public var tls: TLS
        /// `server.proxy`: `http://[user:pass@]host:port`; null → the environment's proxy variables.
        public var proxy: HTTPProxy?
        /// `server.compression`: offer permessage-deflate; default true.
        public var compression: Bool

        public init(
            url: String? = nil, labelKey: Secret, brandKey: String? = nil, headers: [String: String] = [:],
            tls: TLS = TLS(), proxy: HTTPProxy? = nil, compression: Bool = true
        ) {
            self.url = url
            self.labelKey = labelKey
            self.brandKey = brandKey
            self.headers = headers
            self.tls = tls
            self.proxy = proxy
            self.compression = compression
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case url
            case labelKey = "label_key"
            case brandKey = "brand_key"
            case headers, tls, proxy, compression
        }

        init(config c: ConfigObject<CodingKeys>) {
            url = c.optional(.url, expect: "a ws:// or wss:// URL")
            labelKey = c.required(.labelKey, placeholder: Secret(""), expect: Expect.labelKey, secret: true)
            brandKey = c.optional(.brandKey, expect: Expect.string)
            headers = c.field(.headers, default: [:], expect: Expect.headers)
            tls = c.section(.tls, default: TLS())
            proxy = nil
            if let text: String = c.optional(.proxy, expect: "an http://[user:pass@]host:port URL", secret: true) {
                // Parsed here, so that the problem says exactly what is wrong with the URL (it never
                // contains the password).
                do throws(HTTPProxyError) {
                    proxy = try HTTPProxy(url: text)
                } catch {
                    if case .invalidURL(_, let problem) = error {
                        c.report(c.key(.proxy), "must be an http://[user:pass@]host:port URL: \(problem)")
                    } else {
                        c.report(c.key(.proxy), "\(error)")
                    }
                }
            }
            compression = c.field(.compression, default: true, expect: Expect.bool)
        }

        /// `server.tls.*`
        public struct TLS: Sendable, Equatable, Encodable, ConfigSection {
            /// `server.tls.ca_file`: PEM bundle to trust instead of the system store; default null.
            public var caFile: String?
            /// `server.tls.pinned_spki_sha256`: base64 SHA-256 digests of SubjectPublicKeyInfo;
            /// when non-empty the chain must contain one of them. Default `[]`.
            public var pinnedSPKISHA256: [String]

            public init(caFile: String? = nil, pinnedSPKISHA256: [String] = []) {
                self.caFile = caFile
                self.pinnedSPKISHA256 = pinnedSPKISHA256
            }

            enum CodingKeys: String, CodingKey, CaseIterable {
                case caFile = "ca_file"
                case pinnedSPKISHA256 = "pinned_spki_sha256"
            }

            init(config c: ConfigObject<CodingKeys>) {
                caFile = c.optional(.caFile, expect: Expect.absolutePath)
                pinnedSPKISHA256 = c.field(.pinnedSPKISHA256, default: [], expect: "an array of base64 SHA-256 digests")
            }

            /// The pins as 32-byte digests (invalid entries, which ``DaemonConfig/validate()``
            /// reports, are left out).
            public var pinnedDigests: [[UInt8]] {
                pinnedSPKISHA256.compactMap { Base64.decode($0) }.filter { $0.count == 32 }
            }
        }
    }

    /// `client.*`: how the device presents itself (INIT, IDENTIFY, `ua`).
    public struct Client: Sendable, Equatable, Encodable, ConfigSection {
        /// `client.tracker_version`: X.Y.Z; null → the daemon's version (``effectiveTrackerVersion``).
        public var trackerVersion: String?
        /// `client.domain`: the application id, sent as the URL's `domain` and in `page`.
        public var domain: String?
        /// `client.device_id`: null → generated once and kept in `state_dir`.
        public var deviceID: String?
        /// `client.device_type` → `ua.device_type`; default `"DESKTOP"`.
        public var deviceType: String
        /// `client.os` → `ua.os`; default `"Linux"`.
        public var os: String
        /// `client.agent` → `ua.agent`.
        public var agent: String?
        /// `client.host` → `ua.host`.
        public var host: String?
        /// `client.page` → `page`.
        public var page: String?
        /// `client.fp` → `ua.fp`; null → derived (``ResolvedConfig/fingerprint(machineID:)``).
        public var fp: Int32?
        /// `client.language`: sent with CORE_LANGUAGE_CHANGE once the session is ready.
        public var language: String?

        public static let defaultDeviceType = "DESKTOP"
        public static let defaultOS = "Linux"

        public init(
            trackerVersion: String? = nil, domain: String? = nil, deviceID: String? = nil,
            deviceType: String = Client.defaultDeviceType, os: String = Client.defaultOS,
            agent: String? = nil, host: String? = nil, page: String? = nil, fp: Int32? = nil,
            language: String? = nil
        ) {
            self.trackerVersion = trackerVersion
            self.domain = domain
            self.deviceID = deviceID
            self.deviceType = deviceType
            self.os = os
            self.agent = agent
            self.host = host
            self.page = page
            self.fp = fp
            self.language = language
        }

        /// `tracker_version`, or the daemon's version when it is null.
        public var effectiveTrackerVersion: String { trackerVersion ?? SmarticoVersion.string }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case trackerVersion = "tracker_version"
            case domain
            case deviceID = "device_id"
            case deviceType = "device_type"
            case os, agent, host, page, fp, language
        }

        init(config c: ConfigObject<CodingKeys>) {
            trackerVersion = c.optional(.trackerVersion, expect: "a version X.Y.Z")
            domain = c.optional(.domain, expect: Expect.nonEmptyString)
            deviceID = c.optional(.deviceID, expect: Expect.nonEmptyString)
            deviceType = c.field(.deviceType, default: Client.defaultDeviceType, expect: Expect.nonEmptyString)
            os = c.field(.os, default: Client.defaultOS, expect: Expect.nonEmptyString)
            agent = c.optional(.agent, expect: Expect.string)
            host = c.optional(.host, expect: Expect.string)
            page = c.optional(.page, expect: Expect.string)
            fp = c.optional(.fp, expect: Expect.int32)
            language = c.optional(.language, expect: "a language code such as \"en\" or \"pt-br\"")
        }
    }

    /// `user.*`: a user to identify at start, and push data.
    public struct User: Sendable, Equatable, Encodable, ConfigSection {
        /// `user.ext_user_id`
        public var extUserID: String?
        /// `user.hash`: requires `ext_user_id`.
        public var hash: Secret?
        /// `user.hash_command`: argv run before every IDENTIFY; its first stdout line is the hash.
        public var hashCommand: [String]?
        /// `user.hash_command_env`: names of the daemon's environment variables `hash_command`
        /// also gets (besides `PATH`, `LANG` and `SMARTICO_EXT_USER_ID`); default none.
        public var hashCommandEnv: [String]
        /// `user.push.*`
        public var push: Push
        /// `user.reidentify_after_s`: seconds after an IDENTIFY answer before the daemon identifies
        /// again on a new connection, so the wrapper URLs (whose hash is valid 24 h, 002 §1.6)
        /// stay fresh; default 82800 (23 h), at least 60.
        public var reidentifyAfterS: Int

        public static let defaultReidentifyAfterS = 82_800
        public static let minReidentifyAfterS = 60

        public init(extUserID: String? = nil, hash: Secret? = nil, hashCommand: [String]? = nil, hashCommandEnv: [String] = [],
                    push: Push = Push(), reidentifyAfterS: Int = User.defaultReidentifyAfterS) {
            self.extUserID = extUserID
            self.hash = hash
            self.hashCommand = hashCommand
            self.hashCommandEnv = hashCommandEnv
            self.push = push
            self.reidentifyAfterS = reidentifyAfterS
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case extUserID = "ext_user_id"
            case hash
            case hashCommand = "hash_command"
            case hashCommandEnv = "hash_command_env"
            case push
            case reidentifyAfterS = "reidentify_after_s"
        }

        init(config c: ConfigObject<CodingKeys>) {
            extUserID = c.optional(.extUserID, expect: Expect.nonEmptyString)
            hash = c.optional(.hash, expect: Expect.nonEmptyString, secret: true)
            hashCommand = c.optional(.hashCommand, expect: "a non-empty array of strings (program and arguments)")
            hashCommandEnv = c.field(.hashCommandEnv, default: [], expect: "an array of environment variable names")
            push = c.section(.push, default: Push())
            reidentifyAfterS = c.field(.reidentifyAfterS, default: User.defaultReidentifyAfterS,
                                       expect: Expect.integer(atLeast: User.minReidentifyAfterS))
        }

        /// `user.push.*`: push data for IDENTIFY and cid 1003.
        public struct Push: Sendable, Equatable, Encodable, ConfigSection {
            /// `user.push.token`
            public var token: Secret?
            /// `user.push.platform`: PushClientPlatform 0…11; default 5 (OTHER).
            public var platform: Int
            /// `user.push.status`: PushNotificationUserStatus 0…4; default 4 (NOT_SUPPORTED).
            public var status: Int
            /// `user.push.app_package_id`
            public var appPackageID: String?

            public static let defaultPlatform = 5
            public static let defaultStatus = 4
            public static let platformRange = 0...11
            public static let statusRange = 0...4

            public init(token: Secret? = nil, platform: Int = Push.defaultPlatform, status: Int = Push.defaultStatus, appPackageID: String? = nil) {
                self.token = token
                self.platform = platform
                self.status = status
                self.appPackageID = appPackageID
            }

            /// `user.push.register_via`: `socket` (default) or `http`.
            public var registerVia: PushRegisterVia = .socket

            enum CodingKeys: String, CodingKey, CaseIterable {
                case token, platform, status
                case appPackageID = "app_package_id"
                case registerVia = "register_via"
            }

            init(config c: ConfigObject<CodingKeys>) {
                token = c.optional(.token, expect: Expect.nonEmptyString, secret: true)
                platform = c.field(.platform, default: Push.defaultPlatform, expect: Expect.integer(Push.platformRange))
                status = c.field(.status, default: Push.defaultStatus, expect: Expect.integer(Push.statusRange))
                appPackageID = c.optional(.appPackageID, expect: Expect.nonEmptyString)
                registerVia = c.field(.registerVia, default: .socket, expect: "\"socket\" or \"http\"")
            }
        }
    }

    /// When LOGIN (cid 7) is sent.
    public enum LoginPolicy: String, Sendable, Equatable, Encodable, CaseIterable, ConfigValue {
        /// After the first IDENTIFY following inactivity, a different user, or the `login` op.
        case logicalSession = "logical_session"
        /// After every IDENTIFY, as Smartico's own SDK does.
        case everyIdentify = "every_identify"
    }

    /// `session.*`: timeouts, keepalive, login, reconnect.
    public struct Session: Sendable, Equatable, Encodable, ConfigSection {
        /// `session.connect_timeout_s`: TCP + TLS + upgrade; default 10.
        public var connectTimeoutS: Int
        /// `session.response_timeout_s`: wait for cid 4 / cid 6; default 15.
        public var responseTimeoutS: Int
        /// `session.keepalive_s`: own PING after this much silence; default 29.
        public var keepaliveS: Int
        /// `session.dead_after_s`: reconnect when the silence lasts this much longer; default 15.
        public var deadAfterS: Int
        /// `session.login_after_inactivity_min`; default 30.
        public var loginAfterInactivityMin: Int
        /// `session.login_policy`; default `logical_session`.
        public var loginPolicy: LoginPolicy
        /// `session.reconnect.*`
        public var reconnect: Reconnect

        public init(
            connectTimeoutS: Int = 10, responseTimeoutS: Int = 15, keepaliveS: Int = 29, deadAfterS: Int = 15,
            loginAfterInactivityMin: Int = 30, loginPolicy: LoginPolicy = .logicalSession, reconnect: Reconnect = Reconnect()
        ) {
            self.connectTimeoutS = connectTimeoutS
            self.responseTimeoutS = responseTimeoutS
            self.keepaliveS = keepaliveS
            self.deadAfterS = deadAfterS
            self.loginAfterInactivityMin = loginAfterInactivityMin
            self.loginPolicy = loginPolicy
            self.reconnect = reconnect
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case connectTimeoutS = "connect_timeout_s"
            case responseTimeoutS = "response_timeout_s"
            case keepaliveS = "keepalive_s"
            case deadAfterS = "dead_after_s"
            case loginAfterInactivityMin = "login_after_inactivity_min"
            case loginPolicy = "login_policy"
            case reconnect
        }

        init(config c: ConfigObject<CodingKeys>) {
            let d = Session()
            let positive = Expect.integer(atLeast: 1)
            connectTimeoutS = c.field(.connectTimeoutS, default: d.connectTimeoutS, expect: positive)
            responseTimeoutS = c.field(.responseTimeoutS, default: d.responseTimeoutS, expect: positive)
            keepaliveS = c.field(.keepaliveS, default: d.keepaliveS, expect: positive)
            deadAfterS = c.field(.deadAfterS, default: d.deadAfterS, expect: positive)
            loginAfterInactivityMin = c.field(.loginAfterInactivityMin, default: d.loginAfterInactivityMin, expect: positive)
            loginPolicy = c.field(.loginPolicy, default: d.loginPolicy, expect: "\"logical_session\" or \"every_identify\"")
            reconnect = c.section(.reconnect, default: Reconnect())
        }

        /// `session.reconnect.*`: exponential backoff with full jitter.
        public struct Reconnect: Sendable, Equatable, Encodable, ConfigSection {
            /// `session.reconnect.initial_ms`; default 500.
            public var initialMs: Int
            /// `session.reconnect.max_ms`; default 60000.
            public var maxMs: Int
            /// `session.reconnect.multiplier`; default 2.0.
            public var multiplier: Double

            public init(initialMs: Int = 500, maxMs: Int = 60_000, multiplier: Double = 2.0) {
                self.initialMs = initialMs
                self.maxMs = maxMs
                self.multiplier = multiplier
            }

            enum CodingKeys: String, CodingKey, CaseIterable {
                case initialMs = "initial_ms"
                case maxMs = "max_ms"
                case multiplier
            }

            init(config c: ConfigObject<CodingKeys>) {
                let d = Reconnect()
                initialMs = c.field(.initialMs, default: d.initialMs, expect: Expect.integer(atLeast: 1))
                maxMs = c.field(.maxMs, default: d.maxMs, expect: Expect.integer(atLeast: 1))
                multiplier = c.field(.multiplier, default: d.multiplier, expect: "a number ≥ 1")
            }
        }
    }

    /// `socket.*`: the local Unix socket (see socket-api.md).
    public struct Socket: Sendable, Equatable, Encodable, ConfigSection {
        /// `socket.path`; default `/run/smarticod/smarticod.sock`.
        public var path: String
        /// `socket.mode`: octal permission string; default `"0660"`.
        public var mode: String
        /// `socket.group`: group name (or numeric id as a string) given to the socket file.
        public var group: String?
        /// `socket.control_uids`: uids with the control role besides root and the daemon's uid; every
        /// other peer may only read (control is denied by default).
        public var controlUIDs: [UInt32]?
        /// `socket.control_gids`: groups with the control role (primary or supplementary).
        public var controlGIDs: [UInt32]?
        /// `socket.max_line_bytes`; default 1048576.
        public var maxLineBytes: Int
        /// `socket.max_queue_bytes`: unsent bytes of one peer before it is dropped; default 262144.
        public var maxQueueBytes: Int
        /// `socket.max_total_queue_bytes`: unsent bytes of all peers together; default 16777216.
        public var maxTotalQueueBytes: Int
        /// `socket.max_peers_per_uid`: connections of one uid at a time (root not limited); default 64.
        public var maxPeersPerUID: Int
        /// `socket.max_durable_per_uid`: durable subscription names one uid owns (root not limited); default 16.
        public var maxDurablePerUID: Int
        /// `socket.read_requests_per_s`: requests to the server one uid of the read role makes a
        /// second on average (`api` reads); default 16.
        public var readRequestsPerS: Int
        /// `socket.read_requests_burst`: how many of them at once; default 64.
        public var readRequestsBurst: Int
        /// `socket.max_peer_memory_bytes`: unfinished lines and unsent output of all local peers
        /// together; one uid (not root) a quarter of it; default 50331648 (48 MiB).
        public var maxPeerMemoryBytes: Int
        /// `socket.partial_line_timeout_s`: a request line left unfinished this long closes its
        /// connection; default 30.
        public var partialLineTimeoutS: Int

        public static let defaultPath = SocketAPIDefaults.socketPath
        public static let lineBytesRange = 1024...(64 << 20)
        public static let minQueueBytes = 4096
        public static let defaultMaxPeerMemoryBytes = 48 << 20
        /// The smallest `socket.max_peer_memory_bytes` (4 MiB: a uid's quarter holds a 1 MiB line).
        public static let minPeerMemoryBytes = 4 << 20

        public init(
            path: String = Socket.defaultPath, mode: String = "0660", group: String? = nil,
            controlUIDs: [UInt32]? = nil, controlGIDs: [UInt32]? = nil,
            maxLineBytes: Int = 1_048_576, maxQueueBytes: Int = 262_144, maxTotalQueueBytes: Int = 16_777_216,
            maxPeersPerUID: Int = 64, maxDurablePerUID: Int = 16, readRequestsPerS: Int = 16, readRequestsBurst: Int = 64,
            maxPeerMemoryBytes: Int = Socket.defaultMaxPeerMemoryBytes, partialLineTimeoutS: Int = 30
        ) {
            self.path = path
            self.mode = mode
            self.group = group
            self.controlUIDs = controlUIDs
            self.controlGIDs = controlGIDs
            self.maxLineBytes = maxLineBytes
            self.maxQueueBytes = maxQueueBytes
            self.maxTotalQueueBytes = maxTotalQueueBytes
            self.maxPeersPerUID = maxPeersPerUID
            self.maxDurablePerUID = maxDurablePerUID
            self.readRequestsPerS = readRequestsPerS
            self.readRequestsBurst = readRequestsBurst
            self.maxPeerMemoryBytes = maxPeerMemoryBytes
            self.partialLineTimeoutS = partialLineTimeoutS
        }

        /// `mode` as permission bits (`0o660`), or nil when it is not a valid octal string.
        public var modeBits: UInt32? {
            guard (3...4).contains(mode.count), mode.allSatisfy({ ("0"..."7").contains($0) }),
                  let bits = UInt32(mode, radix: 8), bits <= 0o777 else { return nil }
            return bits
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case path, mode, group
            case controlUIDs = "control_uids"
            case controlGIDs = "control_gids"
            case maxLineBytes = "max_line_bytes"
            case maxQueueBytes = "max_queue_bytes"
            case maxTotalQueueBytes = "max_total_queue_bytes"
            case maxPeersPerUID = "max_peers_per_uid"
            case maxDurablePerUID = "max_durable_per_uid"
            case readRequestsPerS = "read_requests_per_s"
            case readRequestsBurst = "read_requests_burst"
            case maxPeerMemoryBytes = "max_peer_memory_bytes"
            case partialLineTimeoutS = "partial_line_timeout_s"
        }

        init(config c: ConfigObject<CodingKeys>) {
            let d = Socket()
            path = c.field(.path, default: d.path, expect: Expect.absolutePath)
            mode = c.field(.mode, default: d.mode, expect: "an octal permission string such as \"0660\"")
            group = c.optional(.group, expect: "a group name")
            controlUIDs = c.optional(.controlUIDs, expect: "an array of user ids (integers 0…\(UInt32.max))")
            controlGIDs = c.optional(.controlGIDs, expect: "an array of group ids (integers 0…\(UInt32.max))")
            maxLineBytes = c.field(.maxLineBytes, default: d.maxLineBytes, expect: Expect.integer(Socket.lineBytesRange))
            maxQueueBytes = c.field(.maxQueueBytes, default: d.maxQueueBytes, expect: Expect.integer(atLeast: Socket.minQueueBytes))
            maxTotalQueueBytes = c.field(.maxTotalQueueBytes, default: d.maxTotalQueueBytes, expect: "an integer ≥ socket.max_queue_bytes")
            maxPeersPerUID = c.field(.maxPeersPerUID, default: d.maxPeersPerUID, expect: Expect.integer(atLeast: 1))
            maxDurablePerUID = c.field(.maxDurablePerUID, default: d.maxDurablePerUID, expect: Expect.integer(atLeast: 1))
            readRequestsPerS = c.field(.readRequestsPerS, default: d.readRequestsPerS, expect: Expect.integer(1...1_000_000))
            readRequestsBurst = c.field(.readRequestsBurst, default: d.readRequestsBurst, expect: Expect.integer(1...1_000_000))
            maxPeerMemoryBytes = c.field(.maxPeerMemoryBytes, default: d.maxPeerMemoryBytes, expect: "an integer ≥ \(Socket.minPeerMemoryBytes) and ≥ 4 × socket.max_line_bytes")
            partialLineTimeoutS = c.field(.partialLineTimeoutS, default: d.partialLineTimeoutS, expect: Expect.integer(1...3600))
        }
    }

    /// `journal.*`: how long journaled events stay replayable, and how much disk they may take.
    public struct Journal: Sendable, Equatable, Encodable, ConfigSection {
        /// `journal.retention_events`; default 10000.
        public var retentionEvents: Int
        /// `journal.retention_hours`; default 168.
        public var retentionHours: Int
        /// `journal.max_bytes`: the journal's size on disk; default 67108864 (64 MiB).
        public var maxBytes: Int

        /// The smallest `journal.max_bytes` accepted (1 MiB).
        public static let minBytes = 1 << 20

        public init(retentionEvents: Int = 10_000, retentionHours: Int = 168, maxBytes: Int = 64 << 20) {
            self.retentionEvents = retentionEvents
            self.retentionHours = retentionHours
            self.maxBytes = maxBytes
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case retentionEvents = "retention_events"
            case retentionHours = "retention_hours"
            case maxBytes = "max_bytes"
        }

        init(config c: ConfigObject<CodingKeys>) {
            let d = Journal()
            retentionEvents = c.field(.retentionEvents, default: d.retentionEvents, expect: Expect.integer(atLeast: 1))
            retentionHours = c.field(.retentionHours, default: d.retentionHours, expect: Expect.integer(atLeast: 1))
            maxBytes = c.field(.maxBytes, default: d.maxBytes, expect: Expect.integer(atLeast: Journal.minBytes))
        }
    }

    /// `outbox.*`
    public struct Outbox: Sendable, Equatable, Encodable, ConfigSection {
        /// `outbox.max_messages`: beyond it `send` answers `queue_full`; default 10000.
        public var maxMessages: Int

        public init(maxMessages: Int = 10_000) { self.maxMessages = maxMessages }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case maxMessages = "max_messages"
        }

        init(config c: ConfigObject<CodingKeys>) {
            maxMessages = c.field(.maxMessages, default: 10_000, expect: Expect.integer(atLeast: 1))
        }
    }

    /// `http.*`: Smartico's public HTTP API (the `push_report` queue, push tokens over HTTP).
    public struct HTTP: Sendable, Equatable, Encodable, ConfigSection {
        /// `http.public_url`; null → derived from the label key.
        public var publicURL: String?
        /// `http.connect_timeout_s`: DNS + TCP + proxy + TLS; default 10.
        public var connectTimeoutS: Int
        /// `http.response_timeout_s`: from the request written to the whole response; default 30.
        public var responseTimeoutS: Int
        /// `http.retry_initial_ms`, `http.retry_max_ms`: backoff between attempts (doubling, full jitter).
        public var retryInitialMs: Int
        public var retryMaxMs: Int
        /// `http.max_queue`: reports waiting at most; beyond, `push_report` answers `queue_full`.
        public var maxQueue: Int

        public init(publicURL: String? = nil, connectTimeoutS: Int = 10, responseTimeoutS: Int = 30,
                    retryInitialMs: Int = 1000, retryMaxMs: Int = 300_000, maxQueue: Int = 10_000) {
            self.publicURL = publicURL
            self.connectTimeoutS = connectTimeoutS
            self.responseTimeoutS = responseTimeoutS
            self.retryInitialMs = retryInitialMs
            self.retryMaxMs = retryMaxMs
            self.maxQueue = maxQueue
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case publicURL = "public_url"
            case connectTimeoutS = "connect_timeout_s"
            case responseTimeoutS = "response_timeout_s"
            case retryInitialMs = "retry_initial_ms"
            case retryMaxMs = "retry_max_ms"
            case maxQueue = "max_queue"
        }

        init(config c: ConfigObject<CodingKeys>) {
            let d = HTTP()
            let positive = Expect.integer(atLeast: 1)
            publicURL = c.optional(.publicURL, expect: "an https:// or http:// URL")
            connectTimeoutS = c.field(.connectTimeoutS, default: d.connectTimeoutS, expect: positive)
            responseTimeoutS = c.field(.responseTimeoutS, default: d.responseTimeoutS, expect: positive)
            retryInitialMs = c.field(.retryInitialMs, default: d.retryInitialMs, expect: positive)
            retryMaxMs = c.field(.retryMaxMs, default: d.retryMaxMs, expect: positive)
            maxQueue = c.field(.maxQueue, default: d.maxQueue, expect: positive)
        }
    }

    /// `user.push.register_via`: how a push token reaches Smartico.
    public enum PushRegisterVia: String, Sendable, Equatable, Encodable, CaseIterable, ConfigValue {
        /// cid 1003 and IDENTIFY over the WebSocket (the default).
        case socket
        /// The public HTTP API's POST (002 §4), queued with the push reports: for devices that
        /// report tokens without a live session.
        case http
    }

    /// `log.level` values, `trace`…`critical` (swift-log's levels).
    public enum LogLevel: String, Sendable, Equatable, Encodable, CaseIterable, ConfigValue {
        case trace, debug, info, notice, warning, error, critical

        /// The swift-log level.
        public var loggerLevel: Logger.Level {
            switch self {
            case .trace: return .trace
            case .debug: return .debug
            case .info: return .info
            case .notice: return .notice
            case .warning: return .warning
            case .error: return .error
            case .critical: return .critical
            }
        }

        static let expectation = "one of " + LogLevel.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
    }

    /// `log.*`
    public struct Log: Sendable, Equatable, Encodable, ConfigSection {
        /// `log.level`; default `info`.
        public var level: LogLevel

        public init(level: LogLevel = .info) { self.level = level }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case level
        }

        init(config c: ConfigObject<CodingKeys>) {
            level = c.field(.level, default: .info, expect: LogLevel.expectation)
        }
    }

    /// `metrics.*`: the Prometheus text file for node_exporter's textfile collector (the `metrics`
    /// op answers whatever these say).
    public struct Metrics: Sendable, Equatable, Encodable, ConfigSection {
        /// `metrics.textfile`: the file rewritten every `interval_s`; null (the default): none.
        public var textfile: String?
        /// `metrics.interval_s`: seconds between rewrites; default 15.
        public var intervalS: Int

        public static let intervalRange = 1...3600

        public init(textfile: String? = nil, intervalS: Int = 15) {
            self.textfile = textfile
            self.intervalS = intervalS
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case textfile
            case intervalS = "interval_s"
        }

        init(config c: ConfigObject<CodingKeys>) {
            textfile = c.optional(.textfile, expect: Expect.absolutePath)
            intervalS = c.field(.intervalS, default: 15, expect: Expect.integer(Metrics.intervalRange))
        }
    }
}
