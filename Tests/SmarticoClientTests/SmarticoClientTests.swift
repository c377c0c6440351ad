// The blocking SmarticoClient against the real smarticod and smartico-sim.
import Foundation
import SmarticoClient
import SmarticoProtocol
import SmarticoSocketAPI
import SmarticoTestSupport
import Testing

@Suite("SmarticoClient against smarticod")
struct SmarticoClientTests {
    @Test func callReturnsTheResultAndARefusalIsTyped() async throws {
        try await withRig { rig in
            let path = rig.path

            let hello = await blocking { () throws(ClientError) in try SmarticoClient(path: path, timeout: 10).hello() }
            #expect(hello.success?.api == 1, "\(hello)")
            #expect(hello.success?.version == SmarticoVersion.string, "\(hello)")

            // One connection, several calls: results, and refusals with the daemon's code and message.
            let answers = await blocking { () throws(ClientError) -> [Result<JSONValue, ClientError>] in
                let client = try SmarticoClient(path: path, timeout: 10)
                func attempt(_ body: () throws(ClientError) -> JSONValue) -> Result<JSONValue, ClientError> {
                    do throws(ClientError) { return .success(try body()) } catch { return .failure(error) }
                }
                return [
                    attempt { () throws(ClientError) in try client.call("status", JSONObject(), timeout: 10) },
                    attempt { () throws(ClientError) in try client.call("no_such_op", JSONObject(), timeout: 10) },
                    attempt { () throws(ClientError) in try client.identify(extUserID: "") },
                    attempt { () throws(ClientError) in .number(try client.ack(3)) },
                    // The simulator answers an unknown cid with errCode 6: server_error with the server's words.
                    attempt { () throws(ClientError) in try client.request(["cid": 12_345], timeoutMs: 5_000) },
                    attempt { () throws(ClientError) in try client.call(.request(["cid": 500], timeoutMs: 5_000)) },
                ]
            }
            let results = try answers.get()
            #expect(results[0].success?["state"]?.stringValue != nil, "status: \(results[0])")
            #expect(results[0].success?["journal"]?["last_seq"]?.int64Value != nil, "status: \(results[0])")

            guard case .refused(let op, let code, let message, let errCode, let errMsg)? = results[1].failure else {
                Issue.record("no_such_op: \(results[1])")
                return
            }
            #expect(op == "no_such_op" && code == "unknown_op" && errCode == nil && errMsg == nil)
            #expect(message.contains("no_such_op"), "\(message)")
            #expect(results[1].failure?.code == "unknown_op")
            #expect(results[1].failure?.description.hasPrefix("no_such_op refused: unknown_op: ") == true, "\(results[1])")

            #expect(results[2].failure?.code == "bad_request", "identify \"\": \(results[2])")
            #expect(results[2].failure?.description.contains("ext_user_id") == true, "\(results[2])")
            #expect(results[3].failure?.code == "bad_request", "ack without a durable subscription: \(results[3])")

            guard case .refused("request", "server_error", _, let serverCode?, let serverMessage?)? = results[4].failure else {
                Issue.record("request 12345: \(results[4])")
                return
            }
            #expect(serverCode == 6, "\(results[4])")
            #expect(results[4].failure?.description.contains("(errCode 6, errMsg \(serverMessage))") == true, "\(results[4])")
            #expect(results[5].success?["message"]?["cid"]?.int64Value == 501, "request 500: \(results[5])")
        }
    }

    @Test func unreachableOrSilentDaemonsAreTypedErrors() async throws {
        try await withRig { rig in
            let path = rig.path
            let missing = rig.setup.dir + "/missing.sock"

            let noSocket = await blocking { () throws(ClientError) in _ = try SmarticoClient(path: missing, timeout: 2) }
            #expect(noSocket.failure == .connectFailed(path: missing, errno: ENOENT), "\(noSocket)")
            #expect(noSocket.failure?.daemonIsAway == true)
            #expect(noSocket.failure?.description.contains("cannot connect to \(missing): No such file or directory (ENOENT); is smarticod running?") == true,
                    "\(noSocket)")

            let long = "/tmp/" + String(repeating: "s", count: 120)
            let tooLong = await blocking { () throws(ClientError) in _ = try SmarticoClient(path: long, timeout: 2) }
            #expect(tooLong.failure == .socketPathTooLong(path: long, bytes: 125, limit: 107), "\(tooLong)")
            #expect(tooLong.failure?.description.hasSuffix("(use a shorter socket path)") == true, "\(tooLong)")

            // The server answers late: the call's own timeout bounds the wait.
            _ = try await rig.sim.control(["op": "fault", "kind": "delay", "ms": 1_500])
            let started = ContinuousClock.now
            let late = await blocking { () throws(ClientError) in
                try SmarticoClient(path: path, timeout: 10).call("request", ["message": ["cid": 500], "timeout_ms": 5_000], timeout: 0.3)
            }
            #expect(late.failure == .timedOut(path: path, seconds: 0.3, waitingFor: "waiting for the answer to request"), "\(late)")
            #expect(late.failure?.description.contains("within 0.3 s while waiting for the answer to request (raise the timeout;") == true, "\(late)")
            #expect(ContinuousClock.now - started < .seconds(3))
            _ = try await rig.sim.control(["op": "fault", "kind": "clear"])
        }
    }

    @Test func subscribeWithSinceReplaysThenEventsAndAnswersInterleave() async throws {
        try await withRig { rig in
            let path = rig.path
            let uids = try await rig.emitJournaled(3)

            // Replay from 0: the three, in order; a call made meanwhile gets its answer, the events
            // that came before it are kept for nextEvent.
            let replay = await blocking { () throws(ClientError) -> (SubscribeAnswer, JSONValue, [SmarticoEvent]) in
                let client = try SmarticoClient(path: path, timeout: 10)
                let answer = try client.subscribe(types: ["engagement"], since: 0)
                let status = try client.status()
                var events: [SmarticoEvent] = []
                while events.count < 3, let event = try client.nextEvent(deadline: .after(seconds: 10)) { events.append(event) }
                return (answer, status, events)
            }
            let (answer, status, events) = try replay.get()
            #expect(answer.lastSeq >= 3 && answer.journal != nil, "\(answer)")
            #expect(status["subscribers"]?.int64Value ?? 0 >= 1, "\(status)")
            #expect(events.map(\.name) == ["engagement", "engagement", "engagement"])
            #expect(events.compactMap { $0.data["message"]?["engagement_uid"]?.stringValue } == uids)
            let seqs = events.compactMap(\.seq)
            #expect(seqs.count == 3 && seqs == seqs.sorted() && Set(seqs).count == 3, "\(seqs)")
            #expect(events.allSatisfy { $0.isJournaled && ($0.ts ?? 0) > 1_600_000_000_000 })
            for event in events {
                let line = try JSONValue(parsing: event.line)
                #expect(line["event"] == "engagement" && line["seq"]?.int64Value == event.seq && line["data"] == event.data)
            }

            // `since` the first: the two after it, then nothing more.
            let first = try #require(seqs.first)
            let later = await blocking { () throws(ClientError) -> ([SmarticoEvent], SmarticoEvent?) in
                let client = try SmarticoClient(path: path, timeout: 10)
                try client.subscribe(types: ["engagement"], since: first)
                var events: [SmarticoEvent] = []
                while events.count < 2, let event = try client.nextEvent(deadline: .after(seconds: 10)) { events.append(event) }
                return (events, try client.nextEvent(deadline: .after(seconds: 0.3)))
            }
            let (afterFirst, extra) = try later.get()
            #expect(afterFirst.compactMap(\.seq) == Array(seqs.dropFirst()), "\(afterFirst.map(\.seq))")
            #expect(extra == nil)

            // Live: an event arriving while nextEvent waits; the refusal of a request posted without
            // waiting comes out of the next nextEvent.
            let box = try await blocking { () throws(ClientError) -> ClientBox in
                let client = try SmarticoClient(path: path, timeout: 10)
                try client.subscribe(types: ["engagement"])
                return ClientBox(client)
            }.get()
            async let live = blocking { () throws(ClientError) in try box.client.nextEvent(deadline: .after(seconds: 10)) }
            try await Task.sleep(for: .milliseconds(100))
            let uid = try await rig.sim.emitEngagement(to: "alice")
            let liveEvent = try await live.get()
            #expect(liveEvent?.data["message"]?["engagement_uid"]?.stringValue == uid, "\(String(describing: liveEvent))")
            let posted = await blocking { () throws(ClientError) in
                try box.client.post("ack", ["seq": .number(liveEvent?.seq ?? 1)])
                return try box.client.nextEvent(deadline: .after(seconds: 5))
            }
            #expect(posted.failure?.code == "bad_request", "an ack without a durable subscription: \(posted)")
        }
    }
}
