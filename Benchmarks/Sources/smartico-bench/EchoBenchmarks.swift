import CBench
import Foundation
import Transport

/// Round-trip latency of a 64-byte binary message through Transport: our client on
/// one event loop, our echo server on another (two threads, like the C reference),
/// over loopback with TCP_NODELAY. The reference is a plain C ping-pong of the same
/// size over the same loopback, measured in the same run.
func echoBenchmarks(_ report: Report) async {
    guard report.wants("loopback echo") else { return }
    print("Transport: loopback echo")
    let size = 64
    let iterations = report.options.quick ? 5_000 : 20_000
    let warmup = 1_000

    // C reference.
    var cSamples = [UInt64](repeating: 0, count: iterations)
    let rc = cSamples.withUnsafeMutableBufferPointer { cbench_tcp_pingpong(Int32(iterations), Int32(warmup), Int32(size), $0.baseAddress) }
    precondition(rc == 0, "C ping-pong failed: errno \(errno)")

    // Transport.
    let ours = await runTransportEcho(size: size, iterations: iterations, warmup: warmup)

    func percentile(_ s: [UInt64], _ p: Double) -> Double {
        let sorted = s.sorted()
        return Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000
    }
    for (name, p) in [("p50", 0.50), ("p99", 0.99)] {
        let o = percentile(ours, p), c = percentile(cSamples, p)
        let ratio = o / c
        let goal = name == "p50" ? "≤ 2.00× C" : "—"
        let met = name == "p50" ? (ratio <= 2.0 ? "yes" : "NO") : ""
        report.addFigure("loopback echo 64 B round trip, \(name) (\(iterations) round trips)",
                         figure: fmt(o, 1) + " µs", reference: "C ping-pong: " + fmt(c, 1) + " µs",
                         ratio: fmt(ratio, 2) + "× C", goal: goal, met: met)
    }
}

private final class EchoState: @unchecked Sendable {
    // Touched only on the client loop's thread.
    var samples: [UInt64] = []
    var sentAt: UInt64 = 0
    var remaining = 0
    var warmup = 0
    var payload: [UInt8] = []
    var done: CheckedContinuation<[UInt64], Never>?
}

private func runTransportEcho(size: Int, iterations: Int, warmup: Int) async -> [UInt64] {
    let serverLoop = try! EventLoop(name: "bench-server")
    let clientLoop = try! EventLoop(name: "bench-client")
    let server = try! await WebSocketServer.listen(host: "127.0.0.1", port: 0, on: serverLoop, onConnection: { conn in
        conn.start { event in
            if case .binary(let bytes) = event { try? conn.send(binary: bytes) }
        }
    })
    var options = WebSocketConnectOptions()
    options.deflate = nil
    let url = try! WebSocketURL("ws://127.0.0.1:\(server.port)/echo")
    let client = try! await WebSocketClient.connect(url: url, options: options, on: clientLoop)
    let state = EchoState()
    state.payload = [UInt8](repeating: 0x2A, count: size)
    state.remaining = iterations + warmup
    state.warmup = warmup
    state.samples.reserveCapacity(iterations)
    // The whole ping-pong runs on the client loop's thread: each echo that arrives
    // sends the next message, as the C reference's loop does.
    let samples = await withCheckedContinuation { (c: CheckedContinuation<[UInt64], Never>) in
        _ = clientLoop.execute {
            state.done = c
            client.start { event in
                guard case .binary = event else { return }
                let now = monotonicNanos()
                if state.warmup > 0 { state.warmup -= 1 } else { state.samples.append(now - state.sentAt) }
                state.remaining -= 1
                if state.remaining == 0 {
                    state.done?.resume(returning: state.samples)
                    state.done = nil
                    return
                }
                state.sentAt = monotonicNanos()
                try? client.send(binary: state.payload)
            }
            state.sentAt = monotonicNanos()
            try? client.send(binary: state.payload)
        }
    }
    try? await client.closeAsync()
    await server.closeAsync()
    await clientLoop.shutdown()
    await serverLoop.shutdown()
    return samples
}
