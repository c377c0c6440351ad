import SmarticoTestSupport
import Testing
@testable import Transport

/// Two sans-I/O endpoints glued by an in-memory "pipe" that delivers bytes in random pieces,
/// performing the actions the way the I/O driver will.
@Suite struct WebSocketConversationTests {
    final class Pipe {
        var toServer: [UInt8] = []
        var toClient: [UInt8] = []
        var clientEvents: [WebSocketEvent] = []
        var serverEvents: [WebSocketEvent] = []
        var serverClosedTransport = false
        var clientTimerStarted = false
    }

    @Test(arguments: [false, true])
    func fullConversationWithRandomDelivery(deflate: Bool) throws {
        var rng = SplitMix64(seed: deflate ? 100 : 200)
        // Opening handshake.
        var clientHS = WebSocketClientHandshake(options: .init(host: "localhost", port: 8080, target: "/ws", deflate: deflate ? PerMessageDeflateOptions() : nil), random: SplitMix64(seed: 3))
        var serverHS = WebSocketServerHandshake(options: .init(deflate: deflate ? PerMessageDeflateOptions(serverNoContextTakeover: true) : nil))
        var request: WebSocketUpgradeRequest?
        for piece in randomSplits(clientHS.request, rng: &rng, maxPiece: 20) { request = try serverHS.receive(piece) ?? request }
        let acceptance = serverHS.accept(try #require(request))
        var result: WebSocketClientHandshakeResult?
        for piece in randomSplits(acceptance.response, rng: &rng, maxPiece: 20) { result = try clientHS.receive(piece) ?? result }
        let r = try #require(result)
        #expect(r.deflate == acceptance.deflate)
        #expect((r.deflate != nil) == deflate)

        let config = WebSocketConfiguration(outboundFragmentSize: 1000)
        let client = WebSocketProtocol(role: .client, configuration: config, deflate: r.deflate, random: SplitMix64(seed: 4))
        let server = WebSocketProtocol(role: .server, configuration: config, deflate: acceptance.deflate)
        let pipe = Pipe()

        func apply(_ out: WebSocketOutput, from role: WebSocketRole) {
            if role == .client {
                pipe.toServer += out.outbound
                pipe.clientEvents += out.events
                if out.actions.contains(where: { if case .startCloseTimer = $0 { return true } else { return false } }) { pipe.clientTimerStarted = true }
            } else {
                pipe.toClient += out.outbound
                pipe.serverEvents += out.events
                if out.actions.contains(.closeTransport) { pipe.serverClosedTransport = true }
            }
        }
        func pump() {
            for _ in 0 ..< 10_000 {
                if pipe.toServer.isEmpty && pipe.toClient.isEmpty { return }
                if !pipe.toServer.isEmpty {
                    let n = Int.random(in: 1 ... pipe.toServer.count, using: &rng)
                    let piece = Array(pipe.toServer.prefix(n)); pipe.toServer.removeFirst(n)
                    apply(server.receive(piece), from: .server)
                }
                if !pipe.toClient.isEmpty {
                    let n = Int.random(in: 1 ... pipe.toClient.count, using: &rng)
                    let piece = Array(pipe.toClient.prefix(n)); pipe.toClient.removeFirst(n)
                    apply(client.receive(piece), from: .client)
                }
            }
            Issue.record("pump did not settle")
        }

        var expectedAtServer: [WebSocketEvent] = []
        var expectedAtClient: [WebSocketEvent] = []
        for i in 0 ..< 30 {
            let text = String(repeating: "message \(i) ünïcödé ", count: Int.random(in: 0 ... 300, using: &rng))
            let bin = rng.bytes(Int.random(in: 0 ... 5000, using: &rng))
            apply(try client.send(text: text), from: .client)
            expectedAtServer.append(.text(text))
            apply(try server.send(binary: bin), from: .server)
            expectedAtClient.append(.binary(bin))
            if i % 7 == 0 {
                apply(try client.ping([UInt8(i)]), from: .client)
                expectedAtServer.append(.ping([UInt8(i)]))
                expectedAtClient.append(.pong([UInt8(i)]))
            }
            pump()
        }
        #expect(pipe.serverEvents == expectedAtServer)
        #expect(pipe.clientEvents == expectedAtClient)

        // The client closes; the server echoes and closes TCP; the client sees TCP close.
        pipe.serverEvents = []
        pipe.clientEvents = []
        apply(try client.close(code: .goingAway, reason: "bye"), from: .client)
        pump()
        #expect(pipe.serverEvents == [.closing(code: .goingAway, reason: "bye"), .closed(code: .goingAway, reason: "bye")])
        #expect(pipe.serverClosedTransport)
        #expect(pipe.clientTimerStarted)
        #expect(pipe.clientEvents == [.closing(code: .goingAway, reason: "")])
        #expect(client.transportClosed().events == [.closed(code: .goingAway, reason: "")])
        #expect(client.state == .closed && server.state == .closed)
    }
}
