import ArgumentParser
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SmarticoProtocol

struct Tail: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Follow the daemon's events, one line per event.",
        discussion: """
            Subscribes and prints every event as it arrives: local time, type, the essentials \
            (engagement uid and activity type, the mini-game URL, the deep link, what changed in \
            the props, the session state and reason, …) and the event's seq. With --json each \
            event line is printed exactly as received.

            Runs until interrupted, --count events, or --duration seconds (exit 0). Exits 69 when \
            the daemon closes the connection (restart): run again with --since <last seq> to \
            continue without a gap, or use --durable NAME. With --follow it does that itself: \
            while the daemon is away (socket gone, connection refused or closed) it retries every \
            0.5 s until interrupted, and resumes after the last seq it printed, so no event is \
            missed or printed twice (with --durable it resumes from NAME's cursor instead: at \
            least once). A client that reads slowly is never \
            dropped: it catches up from the journal; only one that fell behind the journal's \
            retention gets a gap line saying how many events it missed.

            --durable NAME resumes after the last event NAME acknowledged; events are \
            acknowledged once printed (at least once delivery: after a crash, some may print twice).

            Event types: \(Format.eventNames.joined(separator: ", ")).

            Examples:
              smarticoctl tail
              smarticoctl tail --types engagement,minigame,deeplink
              smarticoctl tail --follow
              smarticoctl tail --since 1200 --json | jq -c 'select(.event == "engagement")'
              smarticoctl tail --durable kiosk --json
              smarticoctl tail --count 1 --types identified --duration 30
            """)

    @Option(name: .long, help: ArgumentHelp("Only these event types, comma separated.", valueName: "a,b"))
    var types: String?

    @Option(name: .long, help: ArgumentHelp("Replay the journaled events after this seq first, then follow.", valueName: "seq"))
    var since: Int64?

    @Option(name: .long, help: ArgumentHelp("A durable subscription: resume after what NAME acknowledged, acknowledge what is printed.", valueName: "name"))
    var durable: String?

    @Option(name: .long, help: ArgumentHelp("Exit 0 after this many events.", valueName: "n"))
    var count: Int?

    @Option(name: .long, help: ArgumentHelp("Exit 0 after this many seconds.", valueName: "seconds"))
    var duration: Double?

    @Flag(name: .long, help: "Keep following across daemon restarts: reconnect every 0.5 s, resume after the last seq printed.")
    var follow = false

    @OptionGroup var options: GlobalOptions

    func typeList() throws -> [String]? {
        guard let types else { return nil }
        let list = types.split(separator: ",", omittingEmptySubsequences: false).map { String($0).trimmingSpaces }
        for name in list where !Format.eventNames.contains(name) {
            throw ValidationError("--types: \"\(name)\" is not an event type; known: \(Format.eventNames.joined(separator: ", "))")
        }
        return list
    }

    func validate() throws {
        _ = try typeList()
        if let since, since < 0 { throw ValidationError("--since must be a seq ≥ 0, got \(since)") }
        if let durable, durable.utf8.isEmpty || durable.utf8.count > 128 {
            throw ValidationError("--durable must be a name of 1 to 128 bytes, got \(durable.utf8.count)")
        }
        if let count, count < 1 { throw ValidationError("--count must be at least 1, got \(count)") }
        if let duration, !(duration.isFinite && duration > 0) { throw ValidationError("--duration must be seconds > 0, got \(duration)") }
    }

    func run() throws {
        let end = duration.map { Deadline.after(seconds: $0) } ?? .never
        var progress = Progress(lastSeq: since)
        var waiting = false
        while true {
            do throws(CtlError) {
                try subscription(end: end, progress: &progress)
                return
            } catch {
                guard follow, Self.daemonIsAway(error) else { throw error }
                if !waiting && isatty(2) == 1 {
                    Output.error("smarticod is away (\(error)); retrying every 0.5 s, resuming after seq \(progress.lastSeq.map(String.init) ?? "?")")
                }
                waiting = true
                if end.hasPassed { return }
                usleep(500_000)
            }
        }
    }

    /// What survives a reconnect (--follow): the last seq printed, how many events were printed
    /// (--count), the props last seen (the "what changed" column).
    struct Progress {
        var lastSeq: Int64?
        /// The daemon's journal `lastSeq` is a position in (the subscribe answer's `journal`).
        var journal: String?
        var printed = 0
        var previousProps: JSONObject? = nil
        /// A subscribe succeeded before.
        var subscribed = false
    }

    /// The errors of a daemon that stopped, restarts or has not created its socket yet.
    static func daemonIsAway(_ error: CtlError) -> Bool {
        switch error {
        case .connectFailed(_, let e): e == ENOENT || e == ECONNREFUSED || e == ECONNRESET || e == EAGAIN
        case .ioFailed, .closed: true
        default: false
        }
    }

    /// One connection: subscribes (after `progress.lastSeq` once one is known) and prints events
    /// until --count or --duration (returns) or the connection fails (throws).
    private func subscription(end: Deadline, progress: inout Progress) throws(CtlError) {
        let startDeadline = Deadline.after(seconds: options.timeout)
        let connection = try options.connect(deadline: startDeadline)
        var arguments = JSONObject()
        if let list = try? typeList() { arguments.append(key: "types", value: .array(list.map(JSONValue.string))) }
        // A reconnect of a durable subscription resumes from its cursor, not from a seq.
        let from = durable != nil ? (progress.subscribed ? nil : since) : progress.lastSeq
        if let from { arguments.append(key: "since", value: .number(from)) }
        if let durable { arguments.append(key: "durable", value: .string(durable)) }
        // A daemon whose store was replaced meanwhile (a damaged one moved aside) has another
        // journal: it replays the new one from its start rather than from our old position.
        if progress.subscribed, let journal = progress.journal { arguments.append(key: "journal", value: .string(journal)) }
        try connection.write(requestLine(id: 1, op: "subscribe", arguments), deadline: startDeadline, what: "subscribe")
        let answer = try readAnswer(connection, id: 1, op: "subscribe", deadline: startDeadline)
        guard answer.ok else {
            if options.json { Output.lineBytes(answer.line) }
            let (code, message) = Format.error(answer.value["error"])
            throw .refused(op: "subscribe", code: code, message: message)
        }
        let journal = answer.value["result"]?["journal"]?.stringValue
        if progress.subscribed, let journal, let old = progress.journal, journal != old {
            progress.lastSeq = 0  // the seqs of the new journal begin again at 1
        }
        progress.journal = journal
        // The last seq this client has seen: where a resume starts.
        var lastSeq = progress.lastSeq ?? answer.value["result"]?["last_seq"]?.int64Value ?? 0
        progress.lastSeq = lastSeq
        progress.subscribed = true
        if isatty(2) == 1 {
            Output.error("following \(connection.path) (last seq \(answer.value["result"]?["last_seq"].map { describe($0) } ?? "?")); Ctrl-C to stop")
        }

        var acked: Int64 = -1
        var nextID = 2
        while true {
            let line: [UInt8]?
            do {
                line = try connection.readLine(deadline: end, waitingFor: "following events")
            } catch .timedOut where end.ns != nil {
                try finish(connection, ack: lastSeq, acked: acked, id: nextID)
                return
            }
            guard let line else {
                throw .closed(path: connection.path, waitingFor: "following events (last seq \(lastSeq); continue with --since \(lastSeq))")
            }
            if line.isEmpty { continue }
            let value: JSONValue
            do {
                value = try JSONValue(parsing: line)
            } catch {
                throw .badAnswer(path: connection.path, detail: "a line that is not JSON (\(error)): \(oneLine(String(decoding: line.prefix(200), as: UTF8.self)))")
            }
            if value["event"] != nil {
                if options.json {
                    Output.lineBytes(line)
                } else {
                    Output.line(Format.event(value, previousProps: &progress.previousProps))
                }
                if let seq = value["seq"]?.int64Value, seq > lastSeq { lastSeq = seq }
                progress.lastSeq = lastSeq
                progress.printed += 1
                if let count, progress.printed >= count {
                    try finish(connection, ack: lastSeq, acked: acked, id: nextID)
                    return
                }
                if durable != nil, !connection.hasBufferedLine, lastSeq > acked {
                    // Acknowledge what is printed, once per batch of lines that arrived together.
                    try connection.write(requestLine(id: nextID, op: "ack", ["seq": .number(lastSeq)]), deadline: .after(seconds: options.timeout), what: "ack")
                    acked = lastSeq
                    nextID += 1
                }
            } else if value["ok"] != nil, value["ok"]?.boolValue != true {
                // The answer to one of our acks.
                let (code, message) = Format.error(value["error"])
                throw .refused(op: "ack", code: code, message: message)
            }
        }
    }

    /// Before exiting 0 with a durable subscription: acknowledge the last seq and wait for the
    /// daemon to confirm, so the cursor is stored.
    private func finish(_ connection: DaemonConnection, ack seq: Int64, acked: Int64, id: Int) throws(CtlError) {
        guard durable != nil, seq > acked else { return }
        let deadline = Deadline.after(seconds: options.timeout)
        try connection.write(requestLine(id: id, op: "ack", ["seq": .number(seq)]), deadline: deadline, what: "ack")
        while true {
            let answer = try readAnswer(connection, id: id, op: "ack", deadline: deadline)
            guard answer.ok else {
                let (code, message) = Format.error(answer.value["error"])
                throw .refused(op: "ack", code: code, message: message)
            }
            if answer.value["id"]?.intValue == id { return }
        }
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " { s.removeFirst() }
        while s.last == " " { s.removeLast() }
        return String(s)
    }
}
