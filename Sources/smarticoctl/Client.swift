import ArgumentParser
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SmarticoClient
import SmarticoSocketAPI
import SmarticoProtocol

/// Options every subcommand takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "The daemon's socket (default: $SMARTICOD_SOCKET, else \(SocketAPIDefaults.socketPath)).",
        valueName: "path"))
    var socket: String?

    @Flag(name: .long, help: "Print the daemon's JSON lines as received, one per line (for scripts).")
    var json = false

    @Option(name: .long, help: ArgumentHelp(
        "Seconds to wait for the connection and the answer (`request` waits at least its timeout_ms + 5 s).",
        valueName: "seconds"))
    var timeout: Double = 30

    @Option(name: .customLong("max-line-bytes"), help: ArgumentHelp(
        "The longest line accepted from the daemon.", valueName: "bytes"))
    var maxLineBytes: Int = 16 << 20

    func validate() throws {
        guard timeout.isFinite, timeout > 0 else { throw ValidationError("--timeout must be a number of seconds > 0, got \(timeout)") }
        guard maxLineBytes >= 1024 else { throw ValidationError("--max-line-bytes must be at least 1024, got \(maxLineBytes)") }
    }

    /// `--socket`, else `SMARTICOD_SOCKET` (when set and not empty), else the default path.
    var socketPath: String { socket ?? SmarticoClient.defaultSocketPath }

    /// Connects to the socket (waiting at most until `deadline`); calls then wait `--timeout`.
    func connect(deadline: Deadline) throws(CtlError) -> SmarticoClient {
        let path = socketPath
        guard !path.utf8.isEmpty, !path.utf8.contains(0) else {
            throw .usage("--socket: an empty path or a path with a NUL byte is not a socket path")
        }
        do {
            return SmarticoClient(connection: try DaemonConnection(path: path, maxLineBytes: maxLineBytes, deadline: deadline), timeout: timeout)
        } catch {
            throw .client(error)
        }
    }
}

/// Connects, sends one request (built as the client library builds it), waits for its answer
/// (`--timeout`, or the request's own minimum wait when longer), prints it (human or `--json`),
/// and throws `.refused` for `ok: false` (exit 1).
func runOp(_ request: ClientRequest, options: GlobalOptions) throws(CtlError) {
    let op = request.op
    let deadline = Deadline.after(seconds: request.wait(timeout: options.timeout))
    let client = try options.connect(deadline: deadline)
    let answer: Answer
    do {
        answer = try client.answer(op, request.arguments, deadline: deadline)
    } catch {
        throw .client(error)
    }
    if options.json { Output.lineBytes(answer.line) }
    guard answer.ok else { throw .client(answer.refusal(op: op)) }
    if !options.json {
        let result = answer.result
        if op == "metrics" {
            // The exposition text as the daemon made it, for a scraper or a person.
            guard let text = result["text"]?.stringValue else {
                throw .client(.badAnswer(path: client.path, detail: "the metrics answer has no \"text\": \(oneLine(String(decoding: answer.line.prefix(200), as: UTF8.self)))"))
            }
            Output.text(text)
            return
        }
        let lines = op == "status" ? Format.status(result, now: nowMs()) : op == "api" ? Format.apiResult(result) : Format.result(op: op, result)
        for line in lines { Output.line(line) }
    }
}

/// A JSON object given on the command line, or read from stdin for `-` (at most `limit` bytes).
func jsonObjectArgument(_ text: String, name: String, limit: Int) throws(CtlError) -> JSONObject {
    var bytes: [UInt8]
    if text == "-" {
        bytes = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress!, $0.count) }
            if n > 0 {
                bytes.append(contentsOf: chunk[0..<n])
                if bytes.count > limit { throw .usage("\(name) from stdin is longer than \(limit) bytes") }
            } else if n == 0 {
                break
            } else if errno != EINTR {
                throw .usage("\(name): cannot read stdin: \(ClientError.errnoText(errno))")
            }
        }
    } else {
        bytes = Array(text.utf8)
    }
    let value: JSONValue
    do {
        value = try JSONValue(parsing: bytes)
    } catch {
        throw .usage("\(name) is not JSON: \(error)")
    }
    guard let object = value.objectValue else {
        throw .usage("\(name) must be a JSON object, got \(value.type)")
    }
    return object
}
