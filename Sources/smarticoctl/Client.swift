import ArgumentParser
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
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
    var socketPath: String {
        if let socket { return socket }
        if let env = getenv("SMARTICOD_SOCKET").map({ String(cString: $0) }), !env.isEmpty { return env }
        return SocketAPIDefaults.socketPath
    }

    func connect(deadline: Deadline) throws(CtlError) -> DaemonConnection {
        try DaemonConnection(path: socketPath, maxLineBytes: maxLineBytes, deadline: deadline)
    }
}

/// The answer to one request.
struct Answer {
    /// The line as received.
    let line: [UInt8]
    let value: JSONValue
    var ok: Bool { value["ok"]?.boolValue == true }
}

/// The request line `{"id":ID,"op":OP,…arguments}` (id and op first, the arguments in order).
func requestLine(id: Int, op: String, _ arguments: JSONObject) -> [UInt8] {
    var object = JSONObject()
    object.append(key: "id", value: .number(id))
    object.append(key: "op", value: .string(op))
    for (key, value) in arguments { object.append(key: key, value: value) }
    var bytes = JSONValue.object(object).serialized()
    bytes.append(0x0A)
    return bytes
}

/// Reads lines until the answer to `id` (or an `"id": null` error about our line); other lines
/// (events) are skipped.
func readAnswer(_ connection: DaemonConnection, id: Int, op: String, deadline: Deadline) throws(CtlError) -> Answer {
    let waiting = "waiting for the answer to \(op)"
    while true {
        guard let line = try connection.readLine(deadline: deadline, waitingFor: waiting) else {
            throw .closed(path: connection.path, waitingFor: waiting)
        }
        if line.isEmpty { continue }
        let value: JSONValue
        do {
            value = try JSONValue(parsing: line)
        } catch {
            throw .badAnswer(path: connection.path, detail: "a line that is not JSON (\(error)): \(oneLine(String(decoding: line.prefix(200), as: UTF8.self)))")
        }
        guard value["ok"] != nil else { continue }  // an event
        let answerID = value["id"]
        if answerID?.intValue == id || answerID == nil || answerID?.isNull == true {
            return Answer(line: line, value: value)
        }
    }
}

/// Connects, sends one op, waits for its answer, prints it (human or `--json`), and throws
/// `.refused` for `ok: false` (exit 1).
func runOp(_ op: String, _ arguments: JSONObject = JSONObject(), options: GlobalOptions, waitSeconds: Double? = nil) throws(CtlError) {
    let deadline = Deadline.after(seconds: max(options.timeout, waitSeconds ?? 0))
    let connection = try options.connect(deadline: deadline)
    try connection.write(requestLine(id: 1, op: op, arguments), deadline: deadline, what: op)
    let answer = try readAnswer(connection, id: 1, op: op, deadline: deadline)
    if options.json { Output.lineBytes(answer.line) }
    guard answer.ok else {
        let (code, message) = Format.error(answer.value["error"])
        throw .refused(op: op, code: code, message: message)
    }
    if !options.json {
        let result = answer.value["result"] ?? .object(JSONObject())
        if op == "metrics" {
            // The exposition text as the daemon made it, for a scraper or a person.
            guard let text = result["text"]?.stringValue else {
                throw .badAnswer(path: connection.path, detail: "the metrics answer has no \"text\": \(oneLine(String(decoding: answer.line.prefix(200), as: UTF8.self)))")
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
                throw .usage("\(name): cannot read stdin: \(errnoText(errno))")
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
