import CBench
import Foundation
import SmarticoSim
import Synchronization
import Transport

/// How many 110 engagements per second smartico-sim pushes to 1 and to 100 clients.
///
/// The simulator runs in-process exactly as the executable does (`SimRunning` on its own event
/// loop, default `--template-bytes 2048`, no pings); the clients are Transport's `WebSocketClient`s
/// (no permessage-deflate) on a second loop, each INIT'ed and IDENTIFY'd as its own user, counting
/// whole text messages. Pushes are emitted in batches through `SimRuntime.emit` (what the control
/// socket's `emit` and `--emit-every` do, minus the control response), at most two batches in
/// flight, and the clock runs from the first emit to the last message received.
///
/// Reference, same run: a C writer pushing messages of the same wire size over the same number of
/// loopback TCP connections (one write(2) per message) to a reader thread draining them with epoll.
func simulatorBenchmarks(_ report: Report) async {
    guard report.wants("smartico-sim push rate") else { return }
    print("smartico-sim: push rate")
    for clients in [1, 100] {
        let perClient = clients == 1 ? (report.options.quick ? 10_000 : 40_000) : (report.options.quick ? 100 : 400)
        let rounds = report.options.quick ? 2 : 3
        do {
            let sim = try await SimPushBench.start(clients: clients)
            var best = Double.infinity
            var bestC = Double.infinity
            var wireSize = 0
            for _ in 0..<rounds {
                let (seconds, size) = try await sim.run(perClient: perClient)
                best = min(best, seconds)
                wireSize = size
                var elapsed: UInt64 = 0
                let rc = cbench_tcp_stream(Int32(clients), Int32(size), Int32(perClient), &elapsed)
                precondition(rc == 0, "C loopback stream failed: errno \(errno)")
                bestC = min(bestC, Double(elapsed) / 1e9)
            }
            await sim.stop()
            let total = Double(perClient * clients)
            let rate = total / best, rateC = total / bestC
            func show(_ r: Double) -> String {
                fmt(r / 1000, 1) + " k msg/s (" + fmt(r * Double(wireSize) / 1e6, 0) + " MB/s)"
            }
            report.addFigure("smartico-sim push rate, 110 of \(wireSize) B on the wire, to \(clients) client\(clients == 1 ? "" : "s") (\(perClient * clients) messages)",
                             figure: show(rate), reference: "C one-way loopback stream, same sizes and connections: " + show(rateC),
                             ratio: fmt(rate / rateC, 2) + "×")
        } catch {
            print("  smartico-sim push rate to \(clients) clients failed: \(error)")
        }
    }
}

/// Counts text messages across clients (incremented on the client loop) and wakes one waiter.
private final class MessageCounter: Sendable {
    private struct State {
        var count = 0
        var bytes = 0
        var target = Int.max
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    func received(bytes: Int) {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { s in
            s.count += 1
            s.bytes = bytes
            guard s.count >= s.target, let w = s.waiter else { return nil }
            s.waiter = nil
            s.target = .max
            return w
        }
        waiter?.resume()
    }

    var count: Int { state.withLock { $0.count } }
    /// The size of the last message counted.
    var lastBytes: Int { state.withLock { $0.bytes } }

    func wait(until n: Int) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { s -> Bool in
                if s.count >= n { return true }
                s.target = n
                s.waiter = c
                return false
            }
            if ready { c.resume() }
        }
    }
}

private struct SimPushBench {
    let simLoop: EventLoop
    let clientLoop: EventLoop
    let running: SimRunning
    let connections: [WebSocketConnection]
    let counter: MessageCounter
    let clients: Int

    static func start(clients: Int) async throws -> SimPushBench {
        let simLoop = try EventLoop(name: "bench-sim")
        let clientLoop = try EventLoop(name: "bench-sim-clients")
        let running = try await SimRunning.start(try SimCommand.parse(["--port", "0", "--ping-interval", "0"]), on: simLoop)
        let url = "ws://127.0.0.1:\(running.listener.port)/websocket/services?master&domain=bench&version=1.0.0"
        var options = WebSocketConnectOptions()
        options.deflate = nil
        let counter = MessageCounter()
        var connections: [WebSocketConnection] = []
        for i in 0..<clients {
            let conn = try await WebSocketClient.connect(url: url, options: options, on: clientLoop)
            _ = clientLoop.execute {
                conn.start { event in
                    if case .text(let s) = event { counter.received(bytes: s.utf8.count) }
                }
            }
            let before = counter.count
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            try await conn.sendAsync(text: """
                {"cid":3,"session_id":"\(UUID().uuidString.lowercased())","label_key":"6816ba80-2967-4efb-a60c-694c72b03197",\
                "brand_key":"c24a284e","device_id":"2632f21a-cb84-4ce0-95ca-bf71debfc9c9","page":"https://bench.local/",\
                "tracker_version":"1.1.277","ts":\(now),"uuid":"\(UUID().uuidString.lowercased())"}
                """)
            try await conn.sendAsync(text: """
                {"cid":5,"ext_user_id":"bench-\(clients)-\(i)","hash":null,"ts":\(now),"uuid":"\(UUID().uuidString.lowercased())"}
                """)
            await counter.wait(until: before + 2)  // the 4 and the 6
            connections.append(conn)
        }
        return SimPushBench(simLoop: simLoop, clientLoop: clientLoop, running: running, connections: connections,
                            counter: counter, clients: clients)
    }

    /// Pushes `perClient` 110s to every client; returns the seconds it took and the wire size of one.
    func run(perClient: Int) async throws -> (Double, Int) {
        let runtime = running.services.runtime
        let base = counter.count
        let batch = clients == 1 ? 500 : 10
        var sent = 0
        let t0 = monotonicNanos()
        while sent < perClient {
            let b = min(batch, perClient - sent)
            let n = try await runtime.emit(kind: .engagement, to: .identified, count: b)
            precondition(n == b * clients, "emit sent \(n) messages, expected \(b * clients)")
            sent += b
            await counter.wait(until: base + (sent - b) * clients)  // at most two batches in flight
        }
        await counter.wait(until: base + perClient * clients)
        let seconds = Double(monotonicNanos() - t0) / 1e9
        let payload = counter.lastBytes
        return (seconds, payload + (payload < 126 ? 2 : payload < 65536 ? 4 : 10))
    }

    func stop() async {
        for c in connections { await c.abortAsync() }
        await running.stop()
        await clientLoop.shutdown()
        await simLoop.shutdown()
    }
}
