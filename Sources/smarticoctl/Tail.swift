import ArgumentParser
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SmarticoClient
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
        if case .client(let e) = error { e.daemonIsAway } else { false }
    }

    /// One connection: subscribes (after `progress.lastSeq` once one is known) and prints events
    /// until --count or --duration (returns) or the connection fails (throws).
    private func subscription(end: Deadline, progress: inout Progress) throws(CtlError) {
        let startDeadline = Deadline.after(seconds: options.timeout)
        let client = try options.connect(deadline: startDeadline)
        // A reconnect of a durable subscription resumes from its cursor, not from a seq.
        let from = durable != nil ? (progress.subscribed ? nil : since) : progress.lastSeq
        // A daemon whose store was replaced meanwhile (a damaged one moved aside) has another
        // journal: it replays the new one from its start rather than from our old position.
        let request = ClientRequest.subscribe(
            types: try? typeList(), since: from, durable: durable, journal: progress.subscribed ? progress.journal : nil)
        let answer: Answer
        do {
            answer = try client.answer(request.op, request.arguments, deadline: startDeadline)
        } catch {
            throw .client(error)
        }
        guard answer.ok else {
            if options.json { Output.lineBytes(answer.line) }
            throw .client(answer.refusal(op: "subscribe"))
        }
        let journal = answer.result["journal"]?.stringValue
        if progress.subscribed, let journal, let old = progress.journal, journal != old {
            progress.lastSeq = 0  // the seqs of the new journal begin again at 1
        }
        progress.journal = journal
        // The last seq this client has seen: where a resume starts.
        var lastSeq = progress.lastSeq ?? answer.result["last_seq"]?.int64Value ?? 0
        progress.lastSeq = lastSeq
        progress.subscribed = true
        if isatty(2) == 1 {
            Output.error("following \(client.path) (last seq \(answer.result["last_seq"].map { describe($0) } ?? "?")); Ctrl-C to stop")
        }

        var acked: Int64 = -1
        do throws(ClientError) {
            while true {
                let event: SmarticoEvent
                do throws(ClientError) {
                    guard let next = try client.nextEvent(deadline: end, waitingFor: "following events") else {
                        try finish(client, ack: lastSeq, acked: acked)  // --duration
                        return
                    }
                    event = next
                } catch .closed {
                    throw .closed(path: client.path, waitingFor: "following events (last seq \(lastSeq); continue with --since \(lastSeq))")
                }
                if options.json {
                    Output.lineBytes(event.line)
                } else {
                    Output.line(Format.event(event, previousProps: &progress.previousProps))
                }
                if let seq = event.seq, seq > lastSeq { lastSeq = seq }
                progress.lastSeq = lastSeq
                progress.printed += 1
                if let count, progress.printed >= count {
                    try finish(client, ack: lastSeq, acked: acked)
                    return
                }
                if durable != nil, !client.hasPendingInput, lastSeq > acked {
                    // Acknowledge what is printed, once per batch of lines that arrived together;
                    // a refusal is thrown by a later nextEvent.
                    try client.post("ack", ["seq": .number(lastSeq)])
                    acked = lastSeq
                }
            }
        } catch {
            throw .client(error)
        }
    }

    /// Before exiting 0 with a durable subscription: acknowledge the last seq and wait for the
    /// daemon to confirm, so the cursor is stored.
    private func finish(_ client: SmarticoClient, ack seq: Int64, acked: Int64) throws(ClientError) {
        guard durable != nil, seq > acked else { return }
        let answer = try client.answer("ack", ["seq": .number(seq)], deadline: .after(seconds: options.timeout))
        guard answer.ok else { throw answer.refusal(op: "ack") }
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
