// Helpers of the SmarticoClient tests: the real smarticod and smartico-sim (SmarticoTestSupport's
// DaemonSetup and SimProcess), the library's blocking calls run on threads of their own.
import Foundation
import SmarticoClient
import SmarticoProtocol
import SmarticoTestSupport
import Synchronization
import Testing

/// A simulator and a daemon identified as alice (hash not checked), in a temp dir.
struct ClientRig {
    let setup: DaemonSetup
    let sim: SimProcess
    /// SmarticoTestSupport's own client of the daemon, for checks independent of the library.
    var raw: DaemonClient

    var path: String { setup.socketPath }

    static func start() async throws -> ClientRig {
        let setup = try DaemonSetup()
        let sim = try await SimProcess.start(dir: setup.dir)
        try setup.writeConfig(url: sim.serverURL, logLevel: "info")
        let raw = try await setup.start()
        return ClientRig(setup: setup, sim: sim, raw: raw)
    }

    /// Emits `n` engagements to alice and waits until the daemon has journaled them; their uids.
    func emitJournaled(_ n: Int) async throws -> [String] {
        let before = try await raw.ok("status")["journal"]?["last_seq"]?.int64Value ?? 0
        var uids: [String] = []
        for _ in 0..<n { uids.append(try await sim.emitEngagement(to: "alice")) }
        let journaled = try await eventually(timeout: .seconds(10)) {
            (try await raw.ok("status")["journal"]?["last_seq"]?.int64Value ?? 0) >= before + Int64(n)
        }
        #expect(journaled, "the daemon did not journal \(n) engagements; log:\n\(setup.log.suffix(3000))")
        return uids
    }

    /// Stops the daemon (SIGTERM) and the simulator, removes the temp dir.
    func stop() async {
        raw.close()
        _ = await setup.stop()
        _ = await sim.stop()
        setup.remove()
    }
}

/// Runs `body` with a started rig, and stops it afterwards (also when `body` throws).
func withRig(_ body: (ClientRig) async throws -> Void) async throws {
    let rig = try await ClientRig.start()
    do {
        try await body(rig)
    } catch {
        await rig.stop()
        throw error
    }
    await rig.stop()
}

/// Runs blocking library code on a thread of its own (never on the cooperative pool).
func blocking<T: Sendable>(_ body: @escaping @Sendable () throws(ClientError) -> T) async -> Result<T, ClientError> {
    await TestExecutables.onThread { () -> Result<T, ClientError> in
        do throws(ClientError) {
            return .success(try body())
        } catch {
            return .failure(error)
        }
    }
}

/// A SmarticoClient handed from one blocking step of a test to the next.
final class ClientBox: @unchecked Sendable {
    // @unchecked: the test uses the client from one thread at a time, each step awaited before
    // the next starts (the thread hand-off orders the accesses).
    let client: SmarticoClient
    init(_ client: SmarticoClient) { self.client = client }
}

/// Everything a DaemonLink delivered, in order.
final class LinkRecorder: Sendable {
    private let events = Mutex<[SmarticoEvent]>([])
    private let states = Mutex<[DaemonLink.State]>([])

    func event(_ e: SmarticoEvent) { events.withLock { $0.append(e) } }
    func state(_ s: DaemonLink.State) { states.withLock { $0.append(s) } }

    var received: [SmarticoEvent] { events.withLock { $0 } }
    var stateChanges: [DaemonLink.State] { states.withLock { $0 } }
    var connections: Int { stateChanges.filter { if case .connected = $0 { true } else { false } }.count }
    var disconnections: Int { stateChanges.filter { if case .disconnected = $0 { true } else { false } }.count }

    /// The engagement uids received, in order.
    var uids: [String] { received.compactMap { $0.data["message"]?["engagement_uid"]?.stringValue } }
}

/// The completions of requests sent through a DaemonLink.
final class Completions: Sendable {
    private let results = Mutex<[String: Result<JSONValue, ClientError>]>([:])
    private let threads = Mutex<[String: Bool]>([:])

    /// A completion that records its result under `name`, and whether it ran on the caller's thread.
    func record(_ name: String, callerThread: pthread_t = pthread_self()) -> @Sendable (Result<JSONValue, ClientError>) -> Void {
        { [self] result in
            let onCaller = pthread_equal(pthread_self(), callerThread) != 0
            results.withLock { $0[name] = result }
            threads.withLock { $0[name] = onCaller }
        }
    }

    subscript(name: String) -> Result<JSONValue, ClientError>? { results.withLock { $0[name] } }
    func ranOnCallerThread(_ name: String) -> Bool? { threads.withLock { $0[name] } }
    var count: Int { results.withLock { $0.count } }
}

extension Result {
    var failure: Failure? { if case .failure(let e) = self { e } else { nil } }
    var success: Success? { if case .success(let v) = self { v } else { nil } }
}
