@_exported import SmarticoSocketAPI  // SmarticoVersion, SocketAPIDefaults: shared with smarticoctl
import Logging
import Transport

/// The daemon's configuration: one JSON file, the keys of docs/configuration.md.
///
/// The properties carry each key's Swift type and default. Everything else about a key (its
/// JSON path, bounds and checks, one line of doc) is its entry in ``DaemonConfig/keys``
/// (ConfigTable.swift); values derived from the keys and the environment are in ``ResolvedConfig``.
/// Secrets are ``Secret``s: printing, dumping or encoding a configuration shows them masked.
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
    /// Every default, with `labelKey` as `server.label_key`. (The structs keep Swift's memberwise
    /// initializers, every argument but the label key defaulted.)
    public init(labelKey: String) {
        self.init(server: Server(labelKey: Secret(labelKey)))
    }

    public struct Server: Sendable, Equatable, Encodable {
        public var url: String?
        public var labelKey: Secret
        public var brandKey: String?
        public var headers: [String: String] = [:]
        public var tls = TLS()
        public var proxy: HTTPProxy?
        public var compression = true

        public struct TLS: Sendable, Equatable, Encodable {
            public var caFile: String?
            public var pinnedSPKISHA256: [String] = []

            /// The pins as 32-byte digests (invalid ones, which ``DaemonConfig/validate()`` reports, left out).
            public var pinnedDigests: [[UInt8]] {
                pinnedSPKISHA256.compactMap { Base64.decode($0) }.filter { $0.count == 32 }
            }
        }
    }

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

    public struct User: Sendable, Equatable, Encodable {
        public var extUserID: String?
        public var hash: Secret?
        public var hashCommand: [String]?
        public var hashCommandEnv: [String] = []
        public var push = Push()
        public var reidentifyAfterS = User.defaultReidentifyAfterS

        public static let defaultReidentifyAfterS = 82_800

        public struct Push: Sendable, Equatable, Encodable {
            public var token: Secret?
            public var platform = 5
            public var status = 4
            public var appPackageID: String?
            public var registerVia = PushRegisterVia.socket
        }
    }

    public struct Session: Sendable, Equatable, Encodable {
        public var connectTimeoutS = 10
        public var responseTimeoutS = 15
        public var keepaliveS = 29
        public var deadAfterS = 15
        public var loginAfterInactivityMin = 30
        public var loginPolicy = LoginPolicy.logicalSession
        public var reconnect = Reconnect()

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

        /// `mode` as permission bits (`0o660`), or nil when it is not 3 or 4 octal digits up to `0777`.
        public var modeBits: UInt32? {
            guard (3...4).contains(mode.count), mode.allSatisfy({ ("0"..."7").contains($0) }),
                  let bits = UInt32(mode, radix: 8), bits <= 0o777 else { return nil }
            return bits
        }
    }

    public struct Journal: Sendable, Equatable, Encodable {
        public var retentionEvents = 10_000
        public var retentionHours = 168
        public var maxBytes = 64 << 20
    }

    public struct Outbox: Sendable, Equatable, Encodable {
        public var maxMessages = 10_000
    }

    public struct HTTP: Sendable, Equatable, Encodable {
        public var publicURL: String?
        public var connectTimeoutS = 10
        public var responseTimeoutS = 30
        public var retryInitialMs = 1000
        public var retryMaxMs = 300_000
        public var maxQueue = 10_000
    }

    public struct Log: Sendable, Equatable, Encodable {
        public var level = LogLevel.info
    }

    public struct Metrics: Sendable, Equatable, Encodable {
        public var textfile: String?
        public var intervalS = 15
    }

    /// `session.login_policy`: LOGIN (cid 7) after the first IDENTIFY of a logical session (after
    /// inactivity, another user or the `login` op), or after every IDENTIFY as Smartico's SDK does.
    public enum LoginPolicy: String, Sendable, Equatable, Encodable, CaseIterable, ConfigValue {
        case logicalSession = "logical_session", everyIdentify = "every_identify"
    }

    /// `user.push.register_via`: a push token goes over the WebSocket (cid 1003 and IDENTIFY), or
    /// through the public HTTP API's queue, for devices that report tokens without a live session.
    public enum PushRegisterVia: String, Sendable, Equatable, Encodable, CaseIterable, ConfigValue {
        case socket, http
    }

    /// `log.level`: swift-log's levels, which share their names.
    public enum LogLevel: String, Sendable, Equatable, Encodable, CaseIterable, ConfigValue {
        case trace, debug, info, notice, warning, error, critical

        public var loggerLevel: Logger.Level { Logger.Level(rawValue: rawValue)! }
        static let expectation = "one of " + LogLevel.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
    }
}
