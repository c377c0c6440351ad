import ArgumentParser
import SmarticoSocketAPI
import Synchronization
import Transport
#if canImport(Glibc)
import Glibc
#endif

/// A duration on the command line: `500ms`, `30s`, `1.5s`, `2m`, or a bare number of seconds.
public struct SimDurationArgument: ExpressibleByArgument, Sendable, Equatable {
    public var milliseconds: Int64

    public init(milliseconds: Int64) { self.milliseconds = milliseconds }

    public init?(argument: String) {
        let s = argument.trimmed(" ")
        let (number, factor): (Substring, Double)
        if s.hasSuffix("ms") { (number, factor) = (s.dropLast(2), 1) }
        else if s.hasSuffix("s") { (number, factor) = (s.dropLast(1), 1000) }
        else if s.hasSuffix("m") { (number, factor) = (s.dropLast(1), 60_000) }
        else { (number, factor) = (Substring(s), 1000) }
        guard let v = Double(number), v.isFinite, v >= 0, v * factor <= 86_400_000 * 366 else { return nil }
        milliseconds = Int64((v * factor).rounded())
    }

    public var defaultValueDescription: String {
        milliseconds % 1000 == 0 ? "\(milliseconds / 1000)s" : "\(milliseconds)ms"
    }
}

extension String {
    func trimmed(_ set: Character) -> String {
        var s = Substring(self)
        while s.first == set { s = s.dropFirst() }
        while s.last == set { s = s.dropLast() }
        return String(s)
    }
}

/// `smartico-sim`'s command line. The executable calls `SimCommand.main()`.
public struct SimCommand: ParsableCommand, Sendable {
    public static let configuration = CommandConfiguration(
        commandName: "smartico-sim",
        abstract: "A local stand-in for Smartico's WebSocket server, for demos, tests and benchmarks.",
        discussion: """
            Speaks the server side of the Smartico protocol (INIT, IDENTIFY, LOGIN, LOGOUT, events, push \
            tokens, keepalive, pushes) on ws://HOST:PORT/websocket/services (wss:// with --tls-cert/--tls-key), \
            and serves the wrapper pages and avatars its answers point at on http://HOST:HTTP-PORT/.

            Standard output: line 1 is the WebSocket port (so scripts can start it without races), line 2 \
            the WebSocket URL, line 3 the HTTP base URL. Logs go to standard error.

            Examples:
              smartico-sim --port 8765
              smartico-sim --port 0 --control /tmp/sim.sock --record /tmp/sim.ndjson
              smartico-sim --hash-salt s3cret --label-key LABEL-KEY-2 --brand-key c24a284e
              smartico-sim --emit-every 2s --emit-kinds engagement,show_spin
              smartico-sim --emit-every 100ms --template-bytes 50000 --no-echo-uuid
              smartico-sim --ping-interval 5s --pong-timeout 2s
              smartico-sim --quirks
              echo '{"op":"clients"}' | socat - UNIX-CONNECT:/tmp/sim.sock

            See docs/simulator.md for the control protocol, fault modes and the record format.
            """,
        version: SmarticoVersion.string)

    @Option(help: "Address to listen on (an IP literal).")
    public var host = "127.0.0.1"

    @Option(help: "WebSocket port; 0 picks a free one. The port is printed as the first line of standard output.")
    public var port = 0

    @Option(help: ArgumentHelp("PEM certificate chain: serve wss:// (needs --tls-key).", valueName: "file"))
    public var tlsCert: String?

    @Option(help: ArgumentHelp("PEM private key for --tls-cert.", valueName: "file"))
    public var tlsKey: String?

    @Flag(name: .customLong("http-tls"), help: "Serve the HTTP port (pages, public API) over TLS too, with --tls-cert/--tls-key.")
    public var httpTLS = false

    @Option(help: ArgumentHelp("""
        Label key (with its -N environment suffix) used in native_app_gf_url/native_app_popup_url. When set, \
        INIT must carry it (with or without the suffix) or gets errCode 100001. Default: accept any key.
        """, valueName: "key"))
    public var labelKey: String?

    @Option(help: ArgumentHelp("Brand key used in the wrapper URLs (default: INIT's brand_key).", valueName: "key"))
    public var brandKey: String?

    @Option(help: ArgumentHelp("""
        Check IDENTIFY hashes like Smartico: md5(lower(ext_user_id:SALT:validity_ms)):validity_ms; \
        wrong, missing or expired (validity_ms < now) → errCode 100000. Default: accept any hash.
        """, valueName: "salt"))
    public var hashSalt: String?

    @Option(help: ArgumentHelp("Send a PING this often (500ms, 30s, 2m; 0 disables).", valueName: "duration"))
    public var pingInterval = SimDurationArgument(milliseconds: 30_000)

    @Option(help: ArgumentHelp("Drop (close 1001) a client that has not answered a PING within this.", valueName: "duration"))
    public var pongTimeout = SimDurationArgument(milliseconds: 10_000)

    @Option(help: ArgumentHelp("Push to every identified client this often (default: never).", valueName: "duration"))
    public var emitEvery: SimDurationArgument?

    @Option(help: ArgumentHelp("Comma-separated push kinds for --emit-every, used in turn: \(SimPushKind.namesList).",
                               valueName: "kinds"))
    public var emitKinds = "engagement"

    @Option(help: ArgumentHelp("Size of a generated engagement's template_html, in bytes.", valueName: "n"))
    public var templateBytes = 2048

    @Option(help: ArgumentHelp("Control socket (NDJSON over a Unix socket): emit, fault, received, clients, pending.",
                               valueName: "path"))
    public var control: String?

    @Option(help: ArgumentHelp("Append every received message to this file as NDJSON ({seq,at,client,user,message|raw,error}).",
                               valueName: "file"))
    public var record: String?

    @Option(help: "HTTP port for the wrapper pages and avatars; 0 picks a free one.")
    public var httpPort = 0

    @Option(help: ArgumentHelp("FCM_SENDER_ID in INIT's settings.", valueName: "id"))
    public var fcmSenderID = "000000000000"

    @Option(help: ArgumentHelp("INIT's products: integers, comma-separated (100 = gamification, 002 §1.2); \"\" for none.",
                               valueName: "list"))
    public var products = "100,0,5"

    /// The parsed `--products`.
    public func parsedProducts() throws -> [Int64] {
        try products.split(separator: ",").map { item in
            let t = String(item).trimmed(" ")
            guard let n = Int64(t) else { throw ValidationError("--products: \"\(t)\" is not an integer; give e.g. 100,0,5") }
            return n
        }
    }

    @Flag(help: "Give every response a fresh uuid instead of the request's (exercises oldest-pending matching).")
    public var noEchoUUID = false

    @Flag(name: .customLong("echo-uuids"), help: "Echo the request's uuid in every response, also in those the real server answers with a fresh one (701).")
    public var echoUUIDs = false

    @Flag(help: "Send what the real server may send: mistyped, missing and unknown fields, a 707 without saw_template_id, a 110 with activity_type, fresh uuids, no PONG to client PINGs.")
    public var quirks = false

    @Flag(help: "Never answer a client's PING with a PONG (server PINGs still go out).")
    public var withholdPong = false

    public init() {}

    /// The parsed push kinds.
    public func parsedKinds() throws -> [SimPushKind] {
        var kinds: [SimPushKind] = []
        for name in emitKinds.split(separator: ",") {
            let n = String(name).trimmed(" ")
            guard let k = SimPushKind(name: n) else {
                throw ValidationError("--emit-kinds: unknown kind \"\(n)\"; kinds: \(SimPushKind.namesList)")
            }
            kinds.append(k)
        }
        if kinds.isEmpty { throw ValidationError("--emit-kinds: give at least one kind: \(SimPushKind.namesList)") }
        return kinds
    }

    public func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0…65535, got \(port)") }
        guard (0...65535).contains(httpPort) else { throw ValidationError("--http-port must be 0…65535, got \(httpPort)") }
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together") }
        if httpTLS && tlsCert == nil { throw ValidationError("--http-tls needs --tls-cert and --tls-key") }
        guard (0...(64 << 20)).contains(templateBytes) else {
            throw ValidationError("--template-bytes must be 0…\(64 << 20), got \(templateBytes)")
        }
        if noEchoUUID, echoUUIDs { throw ValidationError("--no-echo-uuid and --echo-uuids exclude each other") }
        if let e = emitEvery, e.milliseconds <= 0 { throw ValidationError("--emit-every must be more than 0") }
        if pingInterval.milliseconds > 0, pongTimeout.milliseconds <= 0 {
            throw ValidationError("--pong-timeout must be more than 0 when pings are on")
        }
        _ = try parsedKinds()
        _ = try parsedProducts()
    }

    /// The configuration for a given HTTP base URL (known once the HTTP port is bound).
    public func makeConfig(httpBaseURL: String) throws -> SimConfig {
        SimConfig(labelKey: labelKey, brandKey: brandKey, hashSalt: hashSalt,
                  pingIntervalMs: pingInterval.milliseconds, pongTimeoutMs: pongTimeout.milliseconds,
                  emitEveryMs: emitEvery?.milliseconds, emitKinds: try parsedKinds(), templateBytes: templateBytes,
                  httpBaseURL: httpBaseURL, fcmSenderID: fcmSenderID, products: try parsedProducts(),
                  uuidEcho: noEchoUUID ? .never : echoUUIDs ? .always : .asServer, quirks: quirks, withholdPong: withholdPong)
    }

    /// Runs the simulator until SIGINT or SIGTERM (then exits 0). Standard output: the WebSocket
    /// port, the WebSocket URL, the HTTP base URL, one per line, written and flushed once listening.
    public func run() throws {
        _ = try makeConfig(httpBaseURL: "http://\(host):\(httpPort)")
        var stderr = StandardError()
        // Block the stop signals before any thread exists (threads inherit the mask), then take them
        // with sigwait on this (main, non-pool) thread.
        var stopSignals = sigset_t()
        sigemptyset(&stopSignals)
        sigaddset(&stopSignals, SIGINT)
        sigaddset(&stopSignals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &stopSignals, nil)

        let loop: EventLoop
        do { loop = try EventLoop(name: "smartico-sim") } catch {
            print("smartico-sim: cannot start the event loop: \(error)", to: &stderr)
            throw ExitCode(1)
        }
        let command = self
        let started = SimBlockingResult<SimRunning>()
        Task {
            do {
                started.set(.success(try await SimRunning.start(command, on: loop)))
            } catch {
                started.set(.failure(error))
            }
        }
        let running: SimRunning
        switch started.wait() {
        case .success(let r): running = r
        case .failure(let error):
            print("smartico-sim: \(error)", to: &stderr)
            throw ExitCode(1)
        }
        let hostPart = host.contains(":") ? "[\(host)]" : host
        let scheme = tlsCert == nil ? "ws" : "wss"
        let lines = "\(running.listener.port)\n\(scheme)://\(hostPart):\(running.listener.port)\(SimUpgrade.path)\n"
            + "\(running.services.httpBaseURL)\n"
        SimCommand.writeAll(1, Array(lines.utf8))  // unbuffered: the lines are out when this returns
        print("smartico-sim: listening on \(scheme)://\(hostPart):\(running.listener.port)\(SimUpgrade.path), "
              + "pages on \(running.services.httpBaseURL)"
              + (control.map { ", control socket \($0)" } ?? "") + "; SIGINT/SIGTERM stop", to: &stderr)

        var signal: Int32 = 0
        while sigwait(&stopSignals, &signal) != 0 {}
        print("smartico-sim: signal \(signal), stopping", to: &stderr)
        let stopped = SimBlockingResult<Void>()
        Task {
            await running.stop()
            stopped.set(.success(()))
        }
        _ = stopped.wait()
        loop.shutdownAndJoin()
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { b in
            var off = 0
            while off < b.count {
                let n = Glibc.write(fd, b.baseAddress! + off, b.count - off)
                if n < 0 { if errno == EINTR { continue }; return }
                off += n
            }
        }
    }
}

/// The whole simulator once started: `SimServices` then the WebSocket listener.
public struct SimRunning: Sendable {
    public let services: SimServices
    public let listener: SimWebSocketListener

    /// Starts HTTP, the runtime, the control socket, then the WebSocket listener (TLS with
    /// `--tls-cert/--tls-key`), as `command` says.
    public static func start(_ command: SimCommand, on loop: EventLoop) async throws -> SimRunning {
        var tls: TLSContext?
        if let cert = command.tlsCert, let key = command.tlsKey {
            do {
                tls = try await TLSContext.load(server: TLSServerConfiguration(certificateChainFile: cert, privateKeyFile: key),
                                                pool: loop.blockingPool)
            } catch {
                throw SimStartError.tls(cert: cert, key: key, reason: "\(error)")
            }
        }
        let services = try await SimServices.start(command, on: loop, httpTLS: command.httpTLS ? tls : nil)
        do {
            let listener = try await SimWebSocketListener.start(host: command.host, port: command.port, tls: tls,
                                                                runtime: services.runtime)
            return SimRunning(services: services, listener: listener)
        } catch {
            await services.stop()
            throw SimStartError.webSocketListener(host: command.host, port: command.port, reason: "\(error)")
        }
    }

    /// Stops listening (WebSocket, HTTP, control) and the runtime.
    public func stop() async {
        await listener.close()
        await services.stop()
    }
}

/// Why the simulator could not start (the HTTP and control errors name their own address or path).
public enum SimStartError: Error, Sendable, CustomStringConvertible {
    case tls(cert: String, key: String, reason: String)
    case webSocketListener(host: String, port: Int, reason: String)

    public var description: String {
        switch self {
        case .tls(let cert, let key, let reason):
            "--tls-cert \(cert) / --tls-key \(key) unusable: \(reason)"
        case .webSocketListener(let host, let port, let reason):
            "cannot listen for WebSocket clients on --host \(host) --port \(port): \(reason)"
                + (port != 0 ? " (another --port, or 0 to pick a free one)" : "")
        }
    }
}

/// A result handed from a task to a plain (non-pool) thread that waits for it.
final class SimBlockingResult<T: Sendable>: Sendable {
    private let state = Mutex<Result<T, any Error>?>(nil)
    private let latch = ThreadLatch()

    func set(_ r: Result<T, any Error>) {
        state.withLock { $0 = r }
        latch.open()
    }

    /// Blocks the calling thread (never a cooperative pool thread) until `set`.
    func wait() -> Result<T, any Error> {
        latch.wait()
        return state.withLock { $0! }
    }
}

struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        var s = string
        s.withUTF8 { b in _ = Glibc.write(2, b.baseAddress, b.count) }
    }
}
