@_exported import SmarticoSocketAPI  // SmarticoVersion, SocketAPIDefaults: shared with smarticoctl
import Logging
import Transport

/// The daemon's configuration: one JSON file, exactly the keys of `docs/configuration.md`
/// (the table of `shared/spec/daemon.md`), every key but `server.label_key` with a default.
///
/// The properties below carry each key's Swift type and default value; everything else about
/// a key (its JSON path, bounds, allowed values, one line of doc) is its entry in
/// ``DaemonConfig/keys`` (ConfigTable.swift), from which decoding (``ConfigLoader``: types,
/// unknown keys at every level), the bounds of ``validate()``, ``allKeyPaths`` and the tests of
/// the docs and the man page come. Derived values (URLs from the label key's environment, the
/// proxy, `ua.fp`, the log level) are in ``ResolvedConfig``.
///
/// Secrets (label key, user hash, push token, proxy password) are ``Secret``s: printing,
/// dumping or encoding a configuration shows them masked.
///
/// The structs keep Swift's memberwise initializers (internal, every argument but the label key
/// defaulted); code outside the module starts from ``init(labelKey:)`` and sets what it needs.
public struct DaemonConfig: Sendable, Equatable, Encodable {
    public var server: Server
    public var client = Client()
    public var user = User()
    public var session = Session()
    public var socket = Socket()
    public var stateDir = DaemonConfig.defaultStateDir
    public var journal = Journal()
    public var outbox = Outbox()
    public var http = HTTP()
    public var log = Log()
    public var metrics = Metrics()

    public static let defaultStateDir = "/var/lib/smarticod"
}

extension DaemonConfig {
    /// Every default, with `labelKey` as `server.label_key`.
    public init(labelKey: String) {
        self.init(server: Server(labelKey: Secret(labelKey)))
    }

    /// `server.*`: where and how to connect.
    public struct Server: Sendable, Equatable, Encodable {
        public var url: String?
        public var labelKey: Secret
        public var brandKey: String?
        public var headers: [String: String] = [:]
        public var tls = TLS()
        public var proxy: HTTPProxy?
        public var compression = true

        /// `server.tls.*`
        public struct TLS: Sendable, Equatable, Encodable {
            public var caFile: String?
            public var pinnedSPKISHA256: [String] = []

            /// The pins as 32-byte digests (invalid entries, which ``DaemonConfig/validate()``
            /// reports, are left out).
            public var pinnedDigests: [[UInt8]] {
                pinnedSPKISHA256.compactMap { Base64.decode($0) }.filter { $0.count == 32 }
            }
        }
    }

    /// `client.*`: how the device presents itself (INIT, IDENTIFY, `ua`).
    public struct Client: Sendable, Equatable, Encodable {
        public var trackerVersion: String?
        public var domain: String?
        public var deviceID: String?
        public var deviceType = "DESKTOP"
        public var os = "Linux"
        public var agent: String?
        public var host: String?
        public var page: String?
        public var fp: Int32?
        public var language: String?

        /// `tracker_version`, or the daemon's version when it is null.
        public var effectiveTrackerVersion: String { trackerVersion ?? SmarticoVersion.string }
    }

    /// `user.*`: a user to identify at start, and push data.
    public struct User: Sendable, Equatable, Encodable {
        public var extUserID: String?
        public var hash: Secret?
        public var hashCommand: [String]?
        public var hashCommandEnv: [String] = []
        public var push = Push()
        public var reidentifyAfterS = User.defaultReidentifyAfterS

        public static let defaultReidentifyAfterS = 82_800

        /// `user.push.*`: push data for IDENTIFY and cid 1003.
        public struct Push: Sendable, Equatable, Encodable {
            public var token: Secret?
            public var platform = 5
            public var status = 4
            public var appPackageID: String?
            public var registerVia = PushRegisterVia.socket
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
    public struct Session: Sendable, Equatable, Encodable {
        public var connectTimeoutS = 10
        public var responseTimeoutS = 15
        public var keepaliveS = 29
        public var deadAfterS = 15
        public var loginAfterInactivityMin = 30
        public var loginPolicy = LoginPolicy.logicalSession
        public var reconnect = Reconnect()

        /// `session.reconnect.*`: exponential backoff with full jitter.
        public struct Reconnect: Sendable, Equatable, Encodable {
            public var initialMs = 500
            public var maxMs = 60_000
            public var multiplier = 2.0
        }

        public var connectTimeout: Duration { .seconds(connectTimeoutS) }
        public var responseTimeout: Duration { .seconds(responseTimeoutS) }
        public var keepalive: Duration { .seconds(keepaliveS) }
        public var deadAfter: Duration { .seconds(deadAfterS) }
        public var loginAfterInactivity: Duration { .seconds(loginAfterInactivityMin * 60) }
    }

    /// `socket.*`: the local Unix socket (see socket-api.md).
    public struct Socket: Sendable, Equatable, Encodable {
        public var path = Socket.defaultPath
        public var mode = "0660"
        public var group: String?
        public var controlUIDs: [UInt32]?
        public var controlGIDs: [UInt32]?
        public var maxLineBytes = 1_048_576
        public var maxQueueBytes = 262_144
        public var maxTotalQueueBytes = 16_777_216
        public var maxPeersPerUID = 64
        public var maxDurablePerUID = 16
        public var readRequestsPerS = 16
        public var readRequestsBurst = 64
        public var maxPeerMemoryBytes = Socket.defaultMaxPeerMemoryBytes
        public var partialLineTimeoutS = 30

        public static let defaultPath = SocketAPIDefaults.socketPath
        public static let defaultMaxPeerMemoryBytes = 48 << 20
        /// The smallest `socket.max_peer_memory_bytes` (4 MiB: a uid's quarter holds a 1 MiB line).
        public static let minPeerMemoryBytes = 4 << 20

        /// `mode` as permission bits (`0o660`), or nil when it is not a valid octal string.
        public var modeBits: UInt32? {
            guard (3...4).contains(mode.count), mode.allSatisfy({ ("0"..."7").contains($0) }),
                  let bits = UInt32(mode, radix: 8), bits <= 0o777 else { return nil }
            return bits
        }
    }

    /// `journal.*`: how long journaled events stay replayable, and how much disk they may take.
    public struct Journal: Sendable, Equatable, Encodable {
        public var retentionEvents = 10_000
        public var retentionHours = 168
        public var maxBytes = 64 << 20
    }

    /// `outbox.*`
    public struct Outbox: Sendable, Equatable, Encodable {
        public var maxMessages = 10_000
    }

    /// `http.*`: Smartico's public HTTP API (the `push_report` queue, push tokens over HTTP).
    public struct HTTP: Sendable, Equatable, Encodable {
        public var publicURL: String?
        public var connectTimeoutS = 10
        public var responseTimeoutS = 30
        public var retryInitialMs = 1000
        public var retryMaxMs = 300_000
        public var maxQueue = 10_000
    }

    /// `user.push.register_via`: how a push token reaches Smartico.
    public enum PushRegisterVia: String, Sendable, Equatable, Encodable, CaseIterable, ConfigValue {
        /// cid 1003 and IDENTIFY over the WebSocket (the default).
        case socket
        /// The public HTTP API's POST (002 §4), queued with the push reports: for devices that
        /// report tokens without a live session.
        case http
    }

    /// `log.level` values, `trace`…`critical` (swift-log's levels, which share their names).
    public enum LogLevel: String, Sendable, Equatable, Encodable, CaseIterable, ConfigValue {
        case trace, debug, info, notice, warning, error, critical

        /// The swift-log level.
        public var loggerLevel: Logger.Level { Logger.Level(rawValue: rawValue)! }

        static let expectation = "one of " + LogLevel.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
    }

    /// `log.*`
    public struct Log: Sendable, Equatable, Encodable {
        public var level = LogLevel.info
    }

    /// `metrics.*`: the Prometheus text file for node_exporter's textfile collector (the `metrics`
    /// op answers whatever these say).
    public struct Metrics: Sendable, Equatable, Encodable {
        public var textfile: String?
        public var intervalS = 15
    }
}
