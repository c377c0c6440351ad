import Synchronization
import Transport

/// Everything of a running simulator except the WebSocket listener: the HTTP pages, the
/// runtime (core, timers, `--record`) and the control socket, started in that order on one loop
/// (the HTTP port makes the base URL the answers point at).
///
/// The WebSocket listener (`SimWebSocketListener`) is started after this and hands each upgraded
/// connection to `runtime`; `SimRunning` does both (see docs/simulator.md, "Server wiring").
public struct SimServices: Sendable {
    public let loop: EventLoop
    public let http: SimHTTPServer
    public let runtime: SimRuntime
    public let control: SimControlServer?
    /// `http://HOST:PORT` (IPv6 hosts in brackets), no trailing slash.
    public let httpBaseURL: String

    /// Starts HTTP, the runtime and the control socket for `command`'s options.
    public static func start(_ command: SimCommand, on loop: EventLoop, httpTLS: TLSContext? = nil,
                             clock: @escaping @Sendable () -> Int64 = SimRuntime.wallClockMilliseconds) async throws -> SimServices {
        // The runtime exists only once the HTTP port is known; public API calls that arrive in
        // between (none can: nobody knows the port yet) would be dropped.
        let runtimeBox = RuntimeBox()
        let http = try await SimHTTPServer.start(host: command.host, port: command.httpPort, tls: httpTLS, on: loop) { record in
            runtimeBox.runtime?.assumeIsolated { $0.recordHTTP(record) }
        }
        let hostPart = command.host.contains(":") ? "[\(command.host)]" : command.host
        let base = "\(httpTLS == nil ? "http" : "https")://\(hostPart):\(http.port)"
        do {
            let config = try command.makeConfig(httpBaseURL: base)
            let runtime = try SimRuntime(config: config, loop: loop, recordPath: command.record, clock: clock)
            await runtime.start()
            await runtime.attachHTTP(http)
            runtimeBox.set(runtime)
            var control: SimControlServer?
            if let path = command.control {
                do {
                    control = try await SimControlServer.start(path: path, on: loop) { [weak runtime] line in
                        guard let runtime else { return Array(#"{"ok":false,"error":"shutting down"}"#.utf8) + [0x0A] }
                        return runtime.assumeIsolated { $0.control(line: line) }
                    }
                } catch {
                    await runtime.stop()
                    throw error
                }
            }
            return SimServices(loop: loop, http: http, runtime: runtime, control: control, httpBaseURL: base)
        } catch {
            await http.close()
            throw error
        }
    }

    /// Stops listening, stops the runtime's timers and closes the record file.
    public func stop() async {
        await control?.close()
        await http.close()
        await runtime.stop()
    }
}

/// The runtime, set once after the HTTP server started (read on the loop thread). Held weakly:
/// the runtime holds the HTTP server (`attachHTTP`), whose record callback holds this box, and a
/// strong reference here closed that cycle, so a stopped simulator's runtime, HTTP server and
/// everything they held (queued engagements, the loop) were never freed (LeakSanitizer,
/// docs/reliability.md "Sanitizers").
final class RuntimeBox: Sendable {
    private struct Weak { weak var runtime: SimRuntime? }
    private let storage = Mutex(Weak())
    var runtime: SimRuntime? { storage.withLock { $0.runtime } }
    func set(_ r: SimRuntime) { storage.withLock { $0.runtime = r } }
}
