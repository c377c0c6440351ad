import ArgumentParser
// FoundationEssentials (ProcessInfo), not Foundation: the whole of Foundation links ICU's data
// into the static binary (some 40 MB).
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Transport

/// Connection options shared by `probe` and `echo`.
struct ClientArguments: ParsableArguments {
    @Argument(help: "ws:// or wss:// URL")
    var url: String

    @Option(name: .customLong("ca-file"), help: "Trust only the CA certificates of this PEM file (default: the system store).")
    var caFile: String?

    @Option(name: .customLong("pin"), help: "SPKI pin (base64 SHA-256); repeat for several. One must match the chain.")
    var pins: [String] = []

    @Option(help: "HTTP proxy http://[user:pass@]host:port (default: https_proxy/http_proxy/no_proxy of the environment; \"none\" for none).")
    var proxy: String?

    @Option(name: .customLong("header"), help: "Extra request header \"Name: value\"; repeat for several.")
    var headers: [String] = []

    @Flag(name: .customLong("no-compression"), help: "Do not offer permessage-deflate.")
    var noCompression = false

    @Option(help: "Connect timeout in seconds (DNS + TCP + proxy + TLS + upgrade).")
    var timeout: Double = 15

    func connectOptions() throws -> (WebSocketURL, WebSocketConnectOptions) {
        let parsed: WebSocketURL
        do { parsed = try WebSocketURL(url) } catch { throw ValidationError(error.description) }
        var options = WebSocketConnectOptions()
        options.connectTimeout = .milliseconds(Int64(timeout * 1000))
        options.deflate = noCompression ? nil : PerMessageDeflateOptions()
        options.tls = TLSClientConfiguration(trustRoots: caFile.map { .caFile($0) } ?? .system, spkiPins: pins)
        var headerFields = HTTPHeaders()
        for h in headers {
            guard let colon = h.firstIndex(of: ":") else { throw ValidationError("--header \"\(h)\" is not \"Name: value\"") }
            headerFields.add(name: trimmed(h[..<colon]), value: trimmed(h[h.index(after: colon)...]))
        }
        if headerFields["User-Agent"] == nil { headerFields.add(name: "User-Agent", value: "smartico-ws") }
        options.headers = headerFields
        do {
            if let proxy {
                options.proxy = proxy == "none" ? nil : try HTTPProxy(url: proxy)
            } else {
                let environment = HTTPProxy.Environment(ProcessInfo.processInfo.environment)
                options.proxy = try environment.proxy(secure: parsed.secure, host: parsed.host, port: parsed.port).get()?.0
            }
        } catch {
            throw ValidationError("\(error)")
        }
        return (parsed, options)
    }
}

/// Prints one line per step: name, duration, details.
func printStep(_ step: String, _ duration: Duration, _ detail: String) {
    let name = padded(step, to: 8)
    let time = ConnectTrace.milliseconds(duration)
    print("  \(name) \(padded(time, to: 9)) \(detail)")
}

/// `text` without leading and trailing spaces and tabs.
func trimmed(_ text: Substring) -> String {
    String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
}

/// `text` padded with spaces to `width` characters (longer text is kept whole).
func padded(_ text: String, to width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

func printTrace(_ trace: ConnectTrace) {
    for entry in trace.entries { printStep(entry.step.rawValue, entry.duration, entry.detail) }
}

/// Connects with every step printed; on failure prints the failing step and exits 1.
func connectPrinting(_ arguments: ClientArguments, on loop: EventLoop) async throws -> WebSocketConnection {
    let (url, options) = try arguments.connectOptions()
    print("connecting to \(url)" + (options.proxy.map { " through proxy \($0)" } ?? ""))
    do {
        let connection = try await WebSocketClient.connect(url: url, options: options, on: loop)
        if let trace = connection.trace {
            printTrace(trace)
            print("connected in \(ConnectTrace.milliseconds(trace.entries.last?.elapsed ?? .zero))")
        }
        return connection
    } catch {
        printTrace(error.trace)
        print("FAILED at step \(error.step): \(error)")
        throw ExitCode(1)
    }
}

struct Probe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "probe",
        abstract: "Connect, print each step (DNS, TCP, proxy, TLS, upgrade) with its time, then close with 1000.",
        discussion: "Exit status 0 when every step and the close succeeded, 1 with the failing step named otherwise.")

    @OptionGroup var client: ClientArguments

    @Option(help: "Stay connected this many seconds before closing and report the event loop's wake-ups meanwhile.")
    var idle: Double = 0

    func run() async throws {
        let loop = try EventLoop(name: "smartico-ws")
        let connection = try await connectPrinting(client, on: loop)
        var events = connection.events.makeAsyncIterator()
        if idle > 0 {
            try await Task.sleep(for: .milliseconds(100))  // the wake-up that started reading passes
            let before = loop.wakeUpCount
            try await Task.sleep(for: .milliseconds(Int64(idle * 1000)))
            let after = loop.wakeUpCount
            print("  idle     \(idle)s: \(after - before) event loop wake-ups")
        }
        let start = ContinuousClock.now
        do {
            try await connection.closeAsync(code: .normalClosure, reason: "probe done")
        } catch {
            print("FAILED at step close: \(error)")
            throw ExitCode(1)
        }
        var info: WebSocketCloseInfo? = nil
        while let event = await events.next() {
            if case .closed(let i) = event { info = i }
        }
        let elapsed = ContinuousClock.now - start
        await loop.shutdown()
        guard let info, info.code == .normalClosure, info.error == nil else {
            printStep("close", elapsed, info?.description ?? "no close event")
            print("FAILED at step close: \(info?.description ?? "the connection ended without a close event")")
            throw ExitCode(1)
        }
        printStep("close", elapsed, info.description)
        print("ok")
    }
}
