import Foundation
import Testing
@testable import Transport

@Suite("Integration: WebSocketServer")
struct IntegrationServerTests {
    @Test("the accept callback sees path, query and headers, and chooses the subprotocol; IPv6 listener")
    func acceptCallback() async throws {
        let serverLoop = try EventLoop(name: "ws-server")
        defer { serverLoop.shutdownAndJoinDetached() }
        try await withLoop { loop in
            let seen = Shared<WebSocketUpgradeRequest?>(nil)
            var configuration = WebSocketServerConfiguration()
            configuration.handshake.subprotocols = ["smartico.v2", "smartico.v1"]
            let server = try await WebSocketServer.listen(
                host: "::1", port: 0, configuration: configuration, on: serverLoop,
                accept: { request in
                    seen.update { $0 = request }
                    return request.headers["Authorization"] == "Bearer good" ? .accept() : .reject(status: 401, reason: "Unauthorized", body: "bad token")
                },
                onConnection: { c in c.start { _ in } })
            var options = WebSocketConnectOptions()
            options.headers.add(name: "Authorization", value: "Bearer good")
            options.subprotocols = ["smartico.v1", "smartico.v2"]
            let connection = try await WebSocketClient.connect(url: "ws://[::1]:\(server.port)/device/7?lang=en", options: options, on: loop)
            #expect(connection.subprotocol == "smartico.v2")
            #expect(seen.value?.path == "/device/7")
            #expect(seen.value?.query == "lang=en")
            #expect(seen.value?.headers["Authorization"] == "Bearer good")
            let inbox = EventInbox(connection)
            try await connection.closeAsync()
            #expect(try await inbox.closed().code == .normalClosure)
            options.headers = HTTPHeaders()
            do throws(ConnectError) {
                _ = try await WebSocketClient.connect(url: "ws://[::1]:\(server.port)/", options: options, on: loop)
                Issue.record("connected without the token")
            } catch {
                #expect(error.step == .upgrade)
                #expect(error.description.contains("401 Unauthorized") && error.description.contains("bad token"), "\(error)")
            }
            await server.closeAsync()
        }
    }

    @Test("pauseReading holds the peer's messages back until resumeReading; none lost, order kept")
    func pausedReading() async throws {
        let serverLoop = try EventLoop(name: "ws-server")
        defer { serverLoop.shutdownAndJoinDetached() }
        try await withLoop { loop in
            let count = 2_000
            let padding = String(repeating: "p", count: 1_000)
            let server = try await WebSocketServer.listen(
                host: "127.0.0.1", port: 0, configuration: WebSocketServerConfiguration(), on: serverLoop,
                accept: { _ in .accept() },
                onConnection: { c in
                    c.start { _ in }
                    for i in 0..<count { try? c.send(text: "\(i) \(padding)") }  // a failure shows as a missing message
                })
            let connection = try await WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/", on: loop)
            try await loop.submit { connection.pauseReading() }
            #expect(try await loop.submit { connection.isReadingPaused })
            let inbox = EventInbox(connection)  // starts reading: only bytes read with the handshake are delivered
            try await Task.sleep(for: .milliseconds(200))
            let early = inbox.events.value.count
            try await Task.sleep(for: .milliseconds(300))
            #expect(inbox.events.value.count == early, "messages were delivered while reading was paused")
            #expect(early < count)
            try await loop.submit { connection.resumeReading() }
            #expect(try await !loop.submit { connection.isReadingPaused })
            for i in 0..<count {
                guard case .text(let text) = try await inbox.nextMessage(timeout: .seconds(30)) else {
                    Issue.record("message \(i) is not text")
                    break
                }
                if !text.hasPrefix("\(i) ") {
                    Issue.record("message \(i) out of order: \(text.prefix(12))")
                    break
                }
            }
            try await connection.closeAsync()
            await server.closeAsync()
        }
    }

    @Test("1000 connections on one server loop, each echoed")
    func manyConnections() async throws {
        let serverLoop = try EventLoop(name: "ws-server")
        defer { serverLoop.shutdownAndJoinDetached() }
        try await withLoop { loop in
            let server = try await startWebSocketEchoServer(on: serverLoop, deflate: false)
            let handshakeErrors = Shared<[String]>([])
            try await serverLoop.submit { server.onHandshakeError = { e in handshakeErrors.update { $0.append(e) } } }
            var options = WebSocketConnectOptions()
            options.deflate = nil
            options.connectTimeout = .seconds(30)
            let count = 1000
            let echoed = Shared(0)
            var connections: [WebSocketConnection] = []
            for i in 0..<count {
                do {
                    let c = try await WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/\(i)", options: options, on: loop)
                    connections.append(c)
                } catch {
                    Issue.record("connection \(i): \(error); server handshake errors: \(handshakeErrors.value)")
                    throw error
                }
            }
            let all = connections
            try await loop.submit {
                for (i, c) in all.enumerated() {
                    c.start { e in if e == .text("message \(i)") { echoed.update { $0 += 1 } } }
                    try c.send(text: "message \(i)")
                }
            }
            try await waitUntil("\(count) echoes", timeout: .seconds(60)) { echoed.value == count }
            try await loop.submit { for c in all { try c.close() } }
            await server.closeAsync()
        }
    }

    @Test("a peer that never reads is dropped at the write queue limit; another client is not held up")
    func slowReader() async throws {
        let serverLoop = try EventLoop(name: "ws-server")
        defer { serverLoop.shutdownAndJoinDetached() }
        try await withLoop { loop in
            let closes = Shared<[WebSocketCloseInfo]>([])
            var configuration = WebSocketServerConfiguration()
            configuration.writeQueueLimit = 1 << 20
            configuration.handshake.deflate = nil
            let server = try await WebSocketServer.listen(
                host: "127.0.0.1", port: 0, configuration: configuration, on: serverLoop,
                onConnection: { c in
                    c.start { e in
                        switch e {
                        case .text("flood me"):
                            // 64 KiB messages until the queue limit drops the connection.
                            let chunk = [UInt8](repeating: 7, count: 64 << 10)
                            for _ in 0..<1024 { if (try? c.send(binary: chunk)) == nil { break } }
                        case .text(let t): try? c.send(text: t)
                        case .closed(let info): closes.update { $0.append(info) }
                        default: break
                        }
                    }
                })
            var options = WebSocketConnectOptions()
            options.deflate = nil
            // The slow one: asks for a flood and never reads (reading is never started on its socket).
            let slow = try await WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/slow", options: options, on: loop)
            try await loop.submit { try slow.send(text: "flood me") }
            let fast = try await WebSocketClient.connect(url: "ws://127.0.0.1:\(server.port)/fast", options: options, on: loop)
            let inbox = EventInbox(fast)
            for i in 0..<20 {
                try await fast.sendAsync(text: "ping \(i)")
                #expect(try await inbox.nextMessage(timeout: .seconds(10)) == .text("ping \(i)"))
            }
            try await waitUntil("the slow reader to be dropped", timeout: .seconds(20)) { !closes.value.isEmpty }
            let info = closes.value[0]
            #expect(info.code == .abnormalClosure)
            #expect(info.error?.description.contains("reads too slowly") == true, "\(info)")
            try await fast.closeAsync()
            #expect(try await inbox.closed().code == .normalClosure)
            await slow.abortAsync()
            await server.closeAsync()
        }
    }
}
