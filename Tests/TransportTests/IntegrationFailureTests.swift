import Foundation
import Testing
@testable import Transport

/// Connect failures through the WebSocket client, each with its step and reason.
@Suite("Integration: WebSocket connect failures")
struct IntegrationFailureTests {
    /// A wss echo server (ours) with the given certificate; returns its port.
    func tlsServer(loop: EventLoop, issued: TestCertificateAuthority.Issued) async throws -> WebSocketServer {
        let context = try await TLSContext.load(server: TLSServerConfiguration(certificateChainFile: issued.chainPath, privateKeyFile: issued.keyPath))
        return try await startWebSocketEchoServer(on: loop, tls: context)
    }

    func expectFailure(
        _ url: String, options: WebSocketConnectOptions, loop: EventLoop, step: ConnectStep,
        _ check: (ConnectError) -> Bool, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        do throws(ConnectError) {
            let c = try await WebSocketClient.connect(url: url, options: options, on: loop)
            Issue.record("connected to \(url) although it should fail at \(step): \(c)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.step == step, "\(error)", sourceLocation: sourceLocation)
            #expect(error.description.hasPrefix("\(step): "), "\(error)", sourceLocation: sourceLocation)
            #expect(check(error), "\(error)", sourceLocation: sourceLocation)
        }
    }

    @Test("unknown CA: verification fails and says so")
    func unknownCA() async throws {
        try await withLoop { loop in
            let fixture = try await TLSFixture.make()
            let other = try await TestCertificateAuthority.make(commonName: "Another CA")
            defer { fixture.remove(); other.remove() }
            let server = try await startWebSocketEchoServer(on: loop, tls: fixture.serverContext)
            var options = WebSocketConnectOptions()
            options.tls = TLSClientConfiguration(trustRoots: .caFile(other.certificatePath))
            await expectFailure("wss://localhost:\(server.port)/", options: options, loop: loop, step: .tls) { e in
                guard case .tls(.certificateVerifyFailed) = e.reason else { return false }
                return e.description.contains("unknown CA")
            }
            await server.closeAsync()
        }
    }

    @Test("wrong host name: hostname mismatch")
    func wrongHostname() async throws {
        try await withLoop { loop in
            let ca = try await TestCertificateAuthority.make()
            defer { ca.remove() }
            let issued = try await ca.issue(commonName: "other.example", dnsNames: ["other.example"])
            let server = try await tlsServer(loop: loop, issued: issued)
            var options = WebSocketConnectOptions()
            options.tls = TLSClientConfiguration(trustRoots: .caFile(ca.certificatePath))
            await expectFailure("wss://localhost:\(server.port)/", options: options, loop: loop, step: .tls) { e in
                guard case .tls(.hostnameMismatch(let name, _)) = e.reason else { return false }
                return name == "localhost" && e.description.contains("hostname mismatch")
            }
            await server.closeAsync()
        }
    }

    @Test("expired certificate")
    func expired() async throws {
        try await withLoop { loop in
            let ca = try await TestCertificateAuthority.make()
            defer { ca.remove() }
            let issued = try await ca.issue(
                commonName: "localhost", dnsNames: ["localhost"], validity: ("20190101000000Z", "20200101000000Z"))
            let server = try await tlsServer(loop: loop, issued: issued)
            var options = WebSocketConnectOptions()
            options.tls = TLSClientConfiguration(trustRoots: .caFile(ca.certificatePath))
            await expectFailure("wss://localhost:\(server.port)/", options: options, loop: loop, step: .tls) { e in
                guard case .tls(.certificateExpired) = e.reason else { return false }
                return e.description.contains("expired")
            }
            await server.closeAsync()
        }
    }

    @Test("SPKI pin mismatch; the right pin connects")
    func pins() async throws {
        try await withLoop { loop in
            let fixture = try await TLSFixture.make()
            defer { fixture.remove() }
            let server = try await startWebSocketEchoServer(on: loop, tls: fixture.serverContext)
            var options = WebSocketConnectOptions()
            options.tls = TLSClientConfiguration(
                trustRoots: .caFile(fixture.ca.certificatePath), spkiPins: ["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="])
            await expectFailure("wss://localhost:\(server.port)/", options: options, loop: loop, step: .tls) { e in
                guard case .tls(.pinMismatch) = e.reason else { return false }
                return e.description.contains("pin mismatch")
            }
            let pin = try await TestCertificateAuthority.spkiPin(ofCertificate: fixture.server.certificatePath)
            options.tls.spkiPins = [pin]
            let connection = try await WebSocketClient.connect(url: "wss://localhost:\(server.port)/", options: options, on: loop)
            #expect(connection.trace?.tls?.chainSPKIPins.contains(pin) == true)
            try await connection.closeAsync()
            let inbox = EventInbox(connection)
            #expect(try await inbox.closed().code == .normalClosure)
            await server.closeAsync()
        }
    }

    @Test("upgrade refused with 403 and a body: the error carries the status line and the body", arguments: [false, true])
    func forbidden(python: Bool) async throws {
        try await withLoop { loop in
            var peer: PythonPeer? = nil
            var own: WebSocketServer? = nil
            let port: Int
            if python {
                peer = try await PythonPeer.start("echo_server.py")
                port = peer!.port
            } else {
                own = try await startWebSocketEchoServer(on: loop)
                port = own!.port
            }
            defer { peer?.stop() }
            await expectFailure("ws://127.0.0.1:\(port)/forbidden", options: WebSocketConnectOptions(), loop: loop, step: .upgrade) { e in
                guard case .upgrade(.unexpectedStatus(let line, _, let body)) = e.reason else { return false }
                return line.contains("403") && String(decoding: body, as: UTF8.self).hasPrefix("no entry for this device")
                    && e.description.contains("403 Forbidden") && e.description.contains("no entry for this device")
            }
            await own?.closeAsync()
        }
    }

    @Test("refused TCP connect names the tcp step and the address")
    func refused() async throws {
        try await withLoop { loop in
            let (fd, port) = try boundButNotListening()
            defer { close(fd) }
            await expectFailure("ws://127.0.0.1:\(port)/", options: WebSocketConnectOptions(), loop: loop, step: .tcp) { e in
                e.description.contains("127.0.0.1:\(port)")
            }
        }
    }

    @Test("a server that never answers the upgrade: timeout at the upgrade step")
    func upgradeTimeout() async throws {
        try await withLoop { loop in
            let listener = try await loop.submit { try StreamListener.tcp(host: "127.0.0.1", port: 0, on: loop) }
            let held = Shared<[StreamConnection]>([])
            try await loop.submit { listener.onAccept = { c in held.update { $0.append(c) } } }
            var options = WebSocketConnectOptions()
            options.connectTimeout = .milliseconds(300)
            await expectFailure("ws://127.0.0.1:\(listener.port!)/", options: options, loop: loop, step: .upgrade) { e in
                guard case .timeout = e.reason else { return false }
                return e.trace.entries.map(\.step) == [.dns, .tcp]
            }
            try await loop.submit { listener.close(); for c in held.value { c.close() } }
        }
    }

    /// Cancelling the task that awaits the upgrade closes the connection and fails the upgrade step
    /// with reason `cancelled`, as an HTTP exchange does (one mapping from error to reason).
    @Test("cancelling a connect waiting for the upgrade: cancelled at the upgrade step")
    func upgradeCancelled() async throws {
        try await withLoop { loop in
            let listener = try await loop.submit { try StreamListener.tcp(host: "127.0.0.1", port: 0, on: loop) }
            let held = Shared<[StreamConnection]>([])
            try await loop.submit { listener.onAccept = { c in held.update { $0.append(c) } } }
            var options = WebSocketConnectOptions()
            options.connectTimeout = .seconds(30)
            let url = "ws://127.0.0.1:\(listener.port!)/"
            let connect = Task { () -> ConnectError? in
                do throws(ConnectError) {
                    _ = try await WebSocketClient.connect(url: url, options: options, on: loop)
                    return nil
                } catch {
                    return error
                }
            }
            try await Task.sleep(for: .milliseconds(300))  // connected, the upgrade request written, no answer
            let cancelled = ContinuousClock.now
            connect.cancel()
            let error = try #require(await connect.value, "the upgrade succeeded against a server that never answers")
            #expect(ContinuousClock.now - cancelled < .seconds(5), "cancelling did not end the upgrade")
            #expect(error.step == .upgrade, "\(error)")
            #expect(error.description == "upgrade: 127.0.0.1:\(listener.port!): cancelled", "\(error)")
            guard case .cancelled = error.reason else {
                Issue.record("unexpected \(error)")
                return
            }
            try await loop.submit { listener.close(); for c in held.value { c.close() } }
        }
    }

    @Test("a bad URL fails the configuration step")
    func badURL() async throws {
        try await withLoop { loop in
            await expectFailure("http://example.com/", options: WebSocketConnectOptions(), loop: loop, step: .configuration) { e in
                e.description.contains("ws://")
            }
        }
    }
}
