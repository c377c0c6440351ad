import Foundation
import Testing
import SmarticoProtocol
import SmarticoTestSupport
#if canImport(Glibc)
import Glibc
#endif

// Support for the Engine* integration tests. The daemon and simulator processes, their sockets
// and `eventually` are in SmarticoTestSupport (DaemonProcesses.swift), shared with
// SmarticoClientTests; what only these tests use is here. Every wait is bounded.

/// A hash command for a simulator started with `--hash-salt salt`: prints
/// `md5(lower(user:salt:validity)):validity`, validity one hour from now in ms (fresh each run).
/// `failWhenMarked`: it fails (exit 3, a line on stderr) for a user while `<dir>/fail-<user>` exists.
func writeHashScript(dir: String, salt: String, failWhenMarked: Bool = false) throws -> String {
    let path = dir + "/hash.sh"
    let failure = failWhenMarked
        ? #"if [ -e "\#(dir)/fail-$SMARTICO_EXT_USER_ID" ]; then echo "no hash for $SMARTICO_EXT_USER_ID here (test)" >&2; exit 3; fi"#
        : ""
    let script = """
        #!/bin/sh
        \(failure)
        v=$(( $(date +%s%N) / 1000000 + 3600000 ))
        h=$(printf '%s' "$SMARTICO_EXT_USER_ID:\(salt):$v" | tr 'A-Z' 'a-z' | md5sum | cut -d' ' -f1)
        echo "$h:$v"

        """
    try Data(script.utf8).write(to: URL(fileURLWithPath: path))
    chmod(path, 0o755)
    return path
}

extension JSONObject {
    var text: String { String(decoding: serialized(), as: UTF8.self) }
}

/// A bound Unix datagram socket standing in for systemd's `NOTIFY_SOCKET`.
final class NotifySocket: @unchecked Sendable {  // `fd` is immutable; reads come from one test task at a time
    let path: String
    private let fd: Int32

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw EngineTestError("socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { throw EngineTestError("bind \(path): errno \(errno)") }
    }

    deinit { Glibc.close(fd) }

    /// Datagrams received within `ms`, until `stop` says enough.
    func datagrams(forMs ms: Int, until stop: @escaping @Sendable ([String]) -> Bool) async -> [String] {
        let fd = self.fd
        return await TestExecutables.onThread {
            var out: [String] = []
            let deadline = Date().addingTimeInterval(Double(ms) / 1000)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while Date() < deadline, !stop(out) {
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&pfd, 1, 100) > 0 else { continue }
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n > 0 { out.append(String(decoding: buffer[..<n], as: UTF8.self)) }
            }
            return out
        }
    }
}

/// `#expect(await setup.stop() == 0)` would not show the status when it fails (the macro
/// does not expand an expression that awaits); this does: "status → 66 == 0", with the comment.
func expectExitedZero<Status: BinaryInteger>(
    _ status: Status?, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(status == 0, comment, sourceLocation: sourceLocation)
}

extension DaemonClient {
    /// The daemon's `status` answer.
    func status() async throws -> JSONValue { try await ok("status") }

    /// The session is `ready` and, unless `identified` is nil, its user is (or is not) identified.
    func isReady(identified: Bool? = true) async throws -> Bool {
        let s = try await status()
        guard s["state"]?.stringValue == "ready" else { return false }
        guard let identified else { return true }
        return s["user"]?["identified"]?.boolValue == identified
    }
}

/// The engine tests' one set-up: a fresh ``DaemonSetup``, a simulator of its own started with
/// `simArguments`, the configuration `configure` writes (by default nothing but the simulator's
/// URL beside ``DaemonSetup/writeConfig``'s defaults), the daemon started with `environment`, and
/// a client. With `ready`, it also waits until the session is ready with the user identified (an
/// expectation naming the daemon's log fails otherwise). On a failure before the client exists it
/// removes what it made; afterwards the caller does: `defer { client.close(); setup.remove() }`.
/// `inProcess`: both run in the test process (InProcessEngine.swift), for the tests that need no
/// process boundary; the environment is then the daemon's default one.
func startAgainstSim(
    sim simArguments: [String] = [], environment: [String: String] = [:], ready: Bool = false, inProcess: Bool = false,
    sourceLocation: SourceLocation = #_sourceLocation,
    configure: (DaemonSetup, SimProcess) async throws -> Void = { try $0.writeConfig(url: $1.serverURL) }
) async throws -> (DaemonSetup, SimProcess, DaemonClient) {
    precondition(!inProcess || environment.isEmpty, "an in-process daemon has the test process's environment")
    let setup = try DaemonSetup()
    do {
        let sim = inProcess ? try await SimProcess.startInProcess(dir: setup.dir, extra: simArguments)
            : try await SimProcess.start(dir: setup.dir, extra: simArguments)
        try await configure(setup, sim)
        let client = inProcess ? try await InProcessDaemon.start(setup) : try await setup.start(environment: environment)
        if ready {
            #expect(try await eventually { try await client.isReady() }, "never ready; log:\n\(setup.log)", sourceLocation: sourceLocation)
        }
        return (setup, sim, client)
    } catch {
        setup.remove()
        throw error
    }
}

/// ``startAgainstSim(sim:environment:ready:sourceLocation:configure:)`` with every default, once ready.
func startReadyAgainstSim(sourceLocation: SourceLocation = #_sourceLocation) async throws -> (DaemonSetup, SimProcess, DaemonClient) {
    try await startAgainstSim(ready: true, sourceLocation: sourceLocation)
}
