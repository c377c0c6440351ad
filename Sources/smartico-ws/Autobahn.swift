import ArgumentParser
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
import Transport

/// `smartico-ws autobahn`: the client side of Autobahn|Testsuite's fuzzing server.
///
/// The protocol the server expects from a client under test: read the case count from
/// `/getCaseCount` (one text message), then for each case connect to `/runCase?case=N&agent=A`
/// and echo every text and binary message until the server closes, then connect to
/// `/updateReports?agent=A` so it writes the report. The verdict is the server's (its report);
/// this command prints how each connection ended from the client's side.
struct Autobahn: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "autobahn",
        abstract: "Run Autobahn|Testsuite's client conformance cases against its fuzzing server.",
        discussion: """
            Start the fuzzing server first (scripts/autobahn.sh does it all, see docs/conformance.md). \
            The results are in the server's report directory (index.json, index.html). Exits non-zero \
            only when a case could not run (connection refused, timeout), not for the verdicts.
            """
    )

    @Argument(help: "The fuzzing server's URL, e.g. ws://127.0.0.1:9001")
    var baseURL: String

    @Option(help: "The agent name the results are filed under.")
    var agent = "smartico-ws"

    @Option(help: "Cases to run, as the server numbers them (1-based): N or A-B. All when omitted.")
    var cases: String?

    @Option(help: "Seconds one case may take before the connection is aborted.")
    var caseTimeout: Double = 60

    @Flag(help: "Do not offer permessage-deflate (the 12.x/13.x cases then fail).")
    var noDeflate = false

    func validate() throws {
        guard baseURL.hasPrefix("ws://") || baseURL.hasPrefix("wss://") else {
            throw ValidationError("the base URL must start with ws:// or wss://, got \"\(baseURL)\"")
        }
        if let cases { _ = try Self.parseRange(cases) }
        guard caseTimeout > 0 else { throw ValidationError("--case-timeout must be positive") }
    }

    static func parseRange(_ text: String) throws -> ClosedRange<Int> {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard (1 ... 2).contains(parts.count), let low = Int(parts[0]), let high = Int(parts[parts.count - 1]),
            low >= 1, low <= high
        else {
            throw ValidationError("--cases must be N or A-B with 1 <= A <= B, got \"\(text)\"")
        }
        return low ... high
    }

    func run() async throws {
        let loop = try EventLoop(name: "autobahn")
        let failures: Int
        do {
            failures = try await runAll(on: loop)
        } catch {
            await loop.shutdown()
            throw error
        }
        await loop.shutdown()
        if failures > 0 { throw ExitCode(1) }
    }

    private var base: String { baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL }
    private var agentQuery: String { Self.percentEncode(agent) }

    private func runAll(on loop: EventLoop) async throws -> Int {
        let countSession = await session(base + "/getCaseCount", echo: false, on: loop)
        guard let text = countSession.firstText, let count = Int(text), count >= 0 else {
            throw Failure(description: "could not read the case count from \(base)/getCaseCount: \(countSession)")
        }
        var range = 1 ... max(count, 1)
        if let cases { range = try Self.parseRange(cases) }
        if count == 0 || range.upperBound > count {
            throw Failure(description: "the server has \(count) cases; cannot run \(range.lowerBound)-\(range.upperBound)")
        }
        print("fuzzing server at \(base): \(count) cases; running \(range.lowerBound)-\(range.upperBound) as agent \"\(agent)\"")
        var tally: [String: Int] = [:]
        var problems: [String] = []
        let clock = ContinuousClock()
        let started = clock.now
        for n in range {
            let caseStart = clock.now
            let outcome = await session(base + "/runCase?case=\(n)&agent=\(agentQuery)", echo: true, on: loop)
            let took = (clock.now - caseStart).components
            let millis = took.seconds * 1000 + took.attoseconds / 1_000_000_000_000_000
            print("case \(n)/\(count): \(outcome) [\(millis) ms]")
            fflush(nil)  // one line per case as it ends, also into a file or a pipe (scripts, tests)
            tally[outcome.kind, default: 0] += 1
            if outcome.isProblem { problems.append("case \(n): \(outcome)") }
        }
        let report = await session(base + "/updateReports?agent=\(agentQuery)", echo: false, on: loop)
        if report.isProblem { problems.append("updateReports: \(report)") }
        let elapsed = clock.now - started
        print("""
            ran \(range.count) cases in \(elapsed.components.seconds) s: \
            \(tally.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", "))
            """)
        print("the verdicts are in the fuzzing server's report (index.json / index.html in its outdir)")
        for p in problems { print("problem: \(p)") }
        return problems.count
    }

    /// A run that cannot go on (exit status 1, unlike usage errors).
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// How one connection ended, from the client's side.
    struct Outcome: CustomStringConvertible {
        var connectError: String?
        var close: WebSocketCloseInfo?
        var timedOut = false
        var messages = 0
        var firstText: String?
        var deflate: String?

        var kind: String {
            if connectError != nil { return "connect failed" }
            if timedOut { return "timed out" }
            guard let close else { return "no close" }
            switch close.error {
            case .protocolViolation: return "failed by us with \(close.code.rawValue)"
            case .closeTimeout: return "close timeout"
            // The fuzzing server resets TCP after the close handshake; the code tells how it ended.
            case .transport, nil: return "closed with \(close.code.rawValue)"
            }
        }

        /// A case that could not run properly (the verdict on protocol behaviour is the server's).
        var isProblem: Bool { connectError != nil || timedOut || close == nil }

        var description: String {
            if let connectError { return "connect failed: \(connectError)" }
            var s = kind
            switch close?.error {
            case .protocolViolation(let e): s += " (\(e))"
            case .closeTimeout(let d): s += " (no Close reply within \(d))"
            // A reset after a Close with a real code is how the fuzzing server ends; 1006 is worth a reason.
            case .transport(let t) where close?.code == .abnormalClosure: s += " (\(t))"
            default: break
            }
            s += ", \(messages) message\(messages == 1 ? "" : "s") echoed"
            if let deflate { s += ", \(deflate)" }
            if timedOut { s += ", TIMED OUT (aborted)" }
            return s
        }
    }

    /// One WebSocket session: connect, echo (or just record) messages until closed; bounded by `caseTimeout`.
    private func session(_ url: String, echo: Bool, on loop: EventLoop) async -> Outcome {
        var options = WebSocketConnectOptions(
            deflate: noDeflate ? nil : PerMessageDeflateOptions(),
            connectTimeout: .seconds(10),
            // The 9.x cases send messages of up to 16 MiB; leave room above that.
            configuration: WebSocketConfiguration(maxFrameSize: 64 << 20, maxMessageSize: 64 << 20, closeTimeout: .seconds(5)))
        options.headers.add(name: "User-Agent", value: "smartico-ws autobahn")
        let connection: WebSocketConnection
        do {
            connection = try await WebSocketClient.connect(url: url, options: options, on: loop)
        } catch {
            return Outcome(connectError: "\(error)")
        }
        let result = CaseResult()
        result.update { $0.deflate = connection.deflate.map { $0.responseHeaderValue } }
        let finished: Void? = try? await loop.submit {
            connection.start { event in
                switch event {
                case .text(let s):
                    result.update {
                        $0.messages += 1
                        if $0.firstText == nil { $0.firstText = s }
                    }
                    if echo { try? connection.send(text: s) }
                case .binary(let b):
                    result.update { $0.messages += 1 }
                    if echo { try? connection.send(binary: b) }
                case .closed(let info):
                    result.finish(info)
                case .ping, .pong, .closing:
                    break
                case .textBytes:
                    break  // only with `textAsBytes`, which this connection does not set
                }
            }
        }
        if finished == nil { return Outcome(connectError: "event loop is shut down") }
        let timeout = Duration.milliseconds(Int(caseTimeout * 1000))
        if await result.wait(timeout: timeout) { return result.outcome }
        // Too long: abort (the server reports what it saw), and give `.closed` a moment to arrive.
        await connection.abortAsync()
        _ = await result.wait(timeout: .seconds(5))
        var outcome = result.outcome
        outcome.timedOut = true
        return outcome
    }

    /// The outcome of one session, filled on the loop thread and awaited by the command.
    final class CaseResult: Sendable {
        private struct State {
            var outcome = Outcome()
            var done = false
            var waiter: CheckedContinuation<Bool, Never>?
            /// Which wait is current, and whether its timer fired (possibly before the waiter was registered).
            var generation = 0
            var expired = false
        }
        private let state = Mutex(State())

        func update(_ body: (inout Outcome) -> Void) { state.withLock { body(&$0.outcome) } }
        var outcome: Outcome { state.withLock { $0.outcome } }

        func finish(_ info: WebSocketCloseInfo) {
            let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
                s.outcome.close = info
                s.done = true
                defer { s.waiter = nil }
                return s.waiter
            }
            waiter?.resume(returning: true)
        }

        /// Waits until the session ended, at most `timeout`. Returns whether it ended.
        func wait(timeout: Duration) async -> Bool {
            let generation = state.withLock { s -> Int in
                s.generation += 1
                s.expired = false
                return s.generation
            }
            let timer = Task { [self] in
                try? await Task.sleep(for: timeout)
                let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
                    guard s.generation == generation else { return nil }
                    s.expired = true
                    defer { s.waiter = nil }
                    return s.waiter
                }
                waiter?.resume(returning: false)
            }
            defer { timer.cancel() }
            return await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                let ready = state.withLock { s -> Bool? in
                    if s.done || s.expired { return s.done }
                    s.waiter = c
                    return nil
                }
                if let ready { c.resume(returning: ready) }
            }
        }
    }

    /// Percent-encodes everything but unreserved characters (RFC 3986 §2.3) for the query.
    static func percentEncode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A") ... UInt8(ascii: "Z"), UInt8(ascii: "a") ... UInt8(ascii: "z"),
                UInt8(ascii: "0") ... UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(UnicodeScalar(b))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [hex[Int(b >> 4)], hex[Int(b & 15)]], as: UTF8.self)
            }
        }
        return out
    }
}

extension Autobahn.Outcome: Sendable {}
