// Helpers of the smarticoctl tests: the built executable run as a subprocess against a real
// SocketAPIServer on a Unix socket in a temp dir, with a closure handler answering canned results.
import Foundation
import Synchronization
import Testing
import SmarticoProtocol
import SmarticoTestSupport
import Transport
@testable import SmarticoDaemon

/// A fixed status object (times in 2023-11-14 UTC).
let ctlCannedStatus: JSONValue = [
    "state": "ready",
    "since_ms": 1_700_000_000_000,
    "server": ["url": "wss://api.example.test/websocket/services?master&domain=demo&version=0.1.0", "connected_at_ms": 1_700_000_001_000],
    "session": ["session_id": "s-1234", "products": [100, 101], "settings": [:], "payload": [:]],
    "user": ["ext_user_id": "user-42", "public_username": "Player One", "props": ["level": 3], "identified": true,
             "rejected": ["ext_user_id": "mallory", "errCode": 100_000, "errMsg": "bad hash"]],
    "counters": ["reconnects": 2, "messages_in": 120, "messages_out": 98, "pings": 4, "pongs": 5],
    "last_ping_ms": 1_700_000_100_000,
    "outbox": ["depth": 3, "oldest_ms": 1_700_000_050_000],
    "journal": ["last_seq": 57, "first_seq": 1],
    "subscribers": 2,
    "last_error": ["code": "init_rejected", "message": "the server rejected INIT_SESSION_REQUEST: errCode 100001", "at_ms": 1_700_000_090_000],
]

/// A fixed metrics text (two families), as the `metrics` op carries it.
let ctlCannedMetrics = "# HELP smarticod_reconnects_total Connection attempts to the server after the first.\n# TYPE smarticod_reconnects_total counter\nsmarticod_reconnects_total 2\n# HELP smarticod_session_state The session's state.\n# TYPE smarticod_session_state gauge\nsmarticod_session_state{state=\"ready\"} 1\n"

/// Answers like a daemon would, from canned data, and records every call.
final class CtlCannedDaemon: Sendable {
    let calls = Mutex<[SocketAPICall]>([])
    let status: JSONValue

    init(status: JSONValue = ctlCannedStatus) {
        self.status = status
    }

    var recorded: [SocketAPICall] { calls.withLock { $0 } }

    func answer(_ call: SocketAPICall) -> Result<JSONValue, SocketAPIError> {
        calls.withLock { $0.append(call) }
        let uuid: JSONValue = "00000000-0000-4000-8000-00000000abcd"
        switch call {
        case .hello:
            return .success(SocketAPIServer.helloResult(version: "9.9.9", state: .ready))
        case .status:
            return .success(status)
        case .pushReport:
            return .failure(SocketAPIError(.notImplemented, "push_report needs the HTTP API, not built yet"))
        case .logLevel(let level):
            return .success(["level": .string(level.rawValue), "previous": "info"])
        case .metrics:
            return .success(["content_type": .string(DaemonMetrics.contentType), "text": .string(ctlCannedMetrics)])
        case .api(let r) where r.raw:
            // A list, for the table output.
            return .success([["id": 1, "name": "Play 3 rounds", "is_completed": false, "tasks": []],
                             ["id": 2, "name": "Deposit", "is_completed": true, "tasks": []]])
        case .api(let r):
            // The call and its arguments as the daemon parsed them, for the conversion tests.
            return .success(["call": .string(r.call), "args": .object(r.args.object)])
        case .session(let request):
            switch request {
            case .identify(let user, _) where user == "bad-hash":
                return .failure(SocketAPIError(.serverError, "the server refused IDENTIFY", errCode: 100000, errMsg: "hash is not valid"))
            case .identify(let user, _):
                return .success([
                    "ext_user_id": .string(user), "public_username": "Player One", "avatar_id": "a-7",
                    "avatar_url": "https://img.example.test/a-7.png", "gf_url": "https://gf.example.test/w", "popup_url": nil,
                    "props": ["level": 3],
                ])
            case .logout:
                return .success([:])
            case .login:
                return .success(["sent": true])
            case .pushToken:
                return .success(["queued": false, "with_identify": true])
            case .event(let type, _) where type == "needs_session":
                return .failure(SocketAPIError(.notReady, "no session within 10 s (state: backoff)"))
            case .event:
                return .success(["uuid": uuid, "queued": true])
            case .request(let message, _, _) where message["cid"]?.intValue == 999:
                return .failure(SocketAPIError(.timeout, "no answer with cid 1000 to 999 within the timeout"))
            case .request:
                return .success(["message": ["cid": 501, "levels": [["id": 1, "name": "Bronze"]]]])
            case .bridge:
                return .success([:])
            default:
                return .success(["uuid": uuid, "queued": false])
            }
        }
    }
}

/// A running socket server plus the canned daemon, for one test.
struct CtlRig {
    let dir: String
    let path: String
    let loop: EventLoop
    let server: SocketAPIServer
    let daemon: CtlCannedDaemon

    static func start(store: SmarticoStore? = nil, dir: String? = nil, status: JSONValue = ctlCannedStatus) async throws -> CtlRig {
        let dir = try dir ?? makeSocketTempDir()
        let path = dir + "/d.sock"
        let loop = try EventLoop(name: "ctl-test-server")
        let server = SocketAPIServer(loop: loop, configuration: SocketAPIServer.Configuration(), store: store)
        let daemon = CtlCannedDaemon(status: status)
        try await server.start(.path(path, mode: 0o600), handler: SocketAPIClosureHandler { call, _ in daemon.answer(call) })
        return CtlRig(dir: dir, path: path, loop: loop, server: server, daemon: daemon)
    }

    /// Runs `smarticoctl ARGS --socket <this socket>` (TZ=UTC, so times print in UTC).
    func ctl(_ arguments: [String], stdin: String? = nil, timeout: Duration = .seconds(30)) async throws -> BuiltExecutable.Run {
        try await runCtl(arguments + ["--socket", path], stdin: stdin, timeout: timeout)
    }

    func waitForSubscribers(_ n: Int) async throws {
        try await waitUntil("\(n) subscribers") { server.subscriberCount >= n }
    }

    func stop() async {
        await server.close()
        await loop.shutdown()
        try? FileManager.default.removeItem(atPath: dir)
    }
}

/// Runs the built smarticoctl with exactly `environment` (TZ=UTC by default).
func runCtl(
    _ arguments: [String], environment: [String: String] = ["TZ": "UTC"], stdin: String? = nil,
    timeout: Duration = .seconds(30)
) async throws -> BuiltExecutable.Run {
    try await BuiltExecutable.run(
        try BuiltExecutable.find("smarticoctl"), arguments, environment: environment,
        stdin: stdin.map { Array($0.utf8) }, timeout: timeout)
}

extension BuiltExecutable.Run {
    var stdoutLines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init) }
}
