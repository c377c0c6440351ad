import Foundation
import Testing
import SmarticoTestSupport
@testable import Transport

/// A TLS echo server on 127.0.0.1:0; records how server-side connections ended.
final class TLSEchoServer: Sendable {
    let listener: StreamListener
    let serverCloseReasons = Shared<[String]>([])
    let clientSubjects = Shared<[String]>([])
    /// SNI names seen by the server ("-" when none was sent).
    let serverNames = Shared<[String]>([])

    private init(listener: StreamListener) { self.listener = listener }

    /// `sendChain: false` serves the leaf alone (the client must find the issuer itself).
    static func start(
        on loop: EventLoop, certificate: TestCertificateAuthority.Issued, clientCAFile: String? = nil,
        sendChain: Bool = true
    ) async throws -> TLSEchoServer {
        let context = try await TLSContext.load(server: TLSServerConfiguration(
            certificateChainFile: sendChain ? certificate.chainPath : certificate.certificatePath, privateKeyFile: certificate.keyPath, clientCAFile: clientCAFile))
        return try await loop.submit {
            let server = TLSEchoServer(listener: try StreamListener.tcp(host: "127.0.0.1", port: 0, tls: context, on: loop))
            server.listener.onAccept = { connection in
                connection.onRead = { [unowned connection] bytes in
                    if let subject = connection.tlsInfo?.peerSubject { server.clientSubjects.update { $0.append(subject) } }
                    server.serverNames.update { $0.append(connection.tlsInfo?.serverName ?? "-") }
                    connection.write(bytes)
                }
                connection.onClose = { reason in server.serverCloseReasons.update { $0.append("\(reason)") } }
                connection.start()
                connection.write(Array("hello from server\n".utf8))  // queued until the handshake completes
            }
            return server
        }
    }

    var port: Int { listener.port! }
}

/// Trusting only `caFile`, with optional pins and client identity.
func clientContext(
    caFile: String, pins: [String] = [], identity: TestCertificateAuthority.Issued? = nil
) async throws -> TLSContext {
    try await TLSContext.load(client: TLSClientConfiguration(
        trustRoots: .caFile(caFile), spkiPins: pins, certificateChainFile: identity?.chainPath,
        privateKeyFile: identity?.keyPath))
}

/// Connects and expects a TLS failure; returns it.
func expectTLSFailure(
    host: String, port: Int, context: TLSContext, loop: EventLoop, sourceLocation: SourceLocation = #_sourceLocation
) async -> TLSError? {
    do {
        let connection = try await StreamConnection.connect(
            to: [SocketAddress(ip: "127.0.0.1", port: port)!], host: host, port: port, tls: context, on: loop)
        Issue.record("handshake unexpectedly succeeded", sourceLocation: sourceLocation)
        _ = try? await loop.submit { connection.close() }
        return nil
    } catch {
        guard case .tls(let tlsError) = error else {
            Issue.record("expected a TLS error, got \(error)", sourceLocation: sourceLocation)
            return nil
        }
        return tlsError
    }
}

/// Sends "ping" to a ``TLSEchoServer`` and expects its greeting followed by the echo.
func expectGreetingAndEcho(_ client: StreamConnection, loop: EventLoop) async throws {
    let recorder = StreamRecorder()
    try await loop.submit {
        recorder.attach(client)
        client.write(Array("ping".utf8))
    }
    let expected = "hello from server\nping"
    try await waitUntil("greeting and echo") { recorder.received.value.count >= expected.utf8.count }
    #expect(String(decoding: recorder.received.value, as: UTF8.self) == expected)
}

@Suite struct TLSTests {
    @Test func handshakeReportsParametersAndCarriesDataBothWays() async throws {
        let ca = try await TestCertificateAuthority.make()
        defer { ca.remove() }
        let certificate = try await ca.issue(commonName: "localhost", dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"])
        try await withLoop { loop in
            let server = try await TLSEchoServer.start(on: loop, certificate: certificate)
            let context = try await clientContext(caFile: ca.certificatePath)
            let client = try await StreamConnection.connect(host: "localhost", port: server.port, tls: context, on: loop)
            let info = try #require(try await loop.submit { client.tlsInfo })
            #expect(info.version == "TLSv1.3")
            #expect(!info.cipher.isEmpty && info.cipher != "unknown")
            #expect(info.peerSubject == "/CN=localhost")
            #expect(info.peerIssuer == "/CN=Smartico Test CA")
            #expect(info.peerNotAfter?.hasSuffix("Z") == true)
            #expect(info.chainSPKIPins.count == 2)
            let recorder = StreamRecorder()
            let big = patternBytes(count: 1 << 20)
            try await loop.submit {
                recorder.attach(client)
                client.write(big)
            }
            let greeting = Array("hello from server\n".utf8)
            try await waitUntil("greeting and echo", timeout: .seconds(30)) {
                recorder.receivedCount.value == greeting.count + big.count
            }
            #expect(recorder.received.value == greeting + big)
            #expect(server.serverNames.value.first == "localhost", "SNI sent for a host name")
            // close_notify both ways: the server sees a clean close, not a truncation.
            try await loop.submit { client.closeAfterFlush() }
            try await waitUntil("server saw close") { !server.serverCloseReasons.value.isEmpty }
            #expect(server.serverCloseReasons.value == ["closed by peer"])
            try await loop.submit { server.listener.close() }
        }
    }

    @Test func unknownCAIsRefusedWithItsReason() async throws {
        let ca = try await TestCertificateAuthority.make()
        let otherCA = try await TestCertificateAuthority.make(commonName: "Someone Else CA")
        defer { ca.remove(); otherCA.remove() }
        let certificate = try await ca.issue(commonName: "localhost", dnsNames: ["localhost"])
        try await withLoop { loop in
            let server = try await TLSEchoServer.start(on: loop, certificate: certificate, sendChain: false)
            let error = await expectTLSFailure(
                host: "localhost", port: server.port, context: try await clientContext(caFile: otherCA.certificatePath), loop: loop)
            guard case .certificateVerifyFailed(let name, _, let code, _)? = error else {
                Issue.record("expected certificateVerifyFailed, got \(String(describing: error))")
                return
            }
            #expect(name == "localhost")
            #expect(TLSError.unknownCACodes.contains(code))
            #expect("\(error!)".hasPrefix(
                "certificate verify failed for \"localhost\": unable to get local issuer certificate (unknown CA)"))
            // The client's alert tells the server why.
            try await waitUntil("server saw the alert") { !server.serverCloseReasons.value.isEmpty }
            #expect(server.serverCloseReasons.value[0].contains("unknown ca"), "\(server.serverCloseReasons.value)")
            // With the whole chain sent, the untrusted root itself is named.
            let chained = try await TLSEchoServer.start(on: loop, certificate: certificate)
            let error2 = await expectTLSFailure(
                host: "localhost", port: chained.port, context: try await clientContext(caFile: otherCA.certificatePath), loop: loop)
            #expect("\(error2!)" == "certificate verify failed for \"localhost\": self-signed certificate in certificate chain (unknown CA) [certificate /CN=Smartico Test CA]")
            try await loop.submit { server.listener.close(); chained.listener.close() }
        }
    }

    @Test func wrongHostnameIsRefused() async throws {
        let ca = try await TestCertificateAuthority.make()
        defer { ca.remove() }
        let certificate = try await ca.issue(commonName: "localhost", dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"])
        try await withLoop { loop in
            let server = try await TLSEchoServer.start(on: loop, certificate: certificate)
            let error = await expectTLSFailure(
                host: "example.test", port: server.port, context: try await clientContext(caFile: ca.certificatePath), loop: loop)
            #expect(error == .hostnameMismatch(name: "example.test", subject: "/CN=localhost"))
            #expect("\(error!)".hasPrefix("hostname mismatch: certificate is not valid for \"example.test\""))
            try await loop.submit { server.listener.close() }
        }
    }

    @Test func ipLiteralNotInTheCertificateIsRefused() async throws {
        let ca = try await TestCertificateAuthority.make()
        defer { ca.remove() }
        let certificate = try await ca.issue(commonName: "localhost", dnsNames: ["localhost"])  // no IP SAN
        try await withLoop { loop in
            let server = try await TLSEchoServer.start(on: loop, certificate: certificate)
            let error = await expectTLSFailure(
                host: "127.0.0.1", port: server.port, context: try await clientContext(caFile: ca.certificatePath), loop: loop)
            #expect(error == .ipAddressMismatch(address: "127.0.0.1", subject: "/CN=localhost"))
            #expect("\(error!)".hasPrefix("IP address mismatch: certificate is not valid for 127.0.0.1"))
            // With the IP in the certificate, the same literal passes (and gets no SNI).
            let withIP = try await ca.issue(commonName: "localhost", ipAddresses: ["127.0.0.1"])
            let server2 = try await TLSEchoServer.start(on: loop, certificate: withIP)
            let client = try await StreamConnection.connect(
                host: "127.0.0.1", port: server2.port, tls: try await clientContext(caFile: ca.certificatePath), on: loop)
            try await expectGreetingAndEcho(client, loop: loop)
            #expect(server2.serverNames.value.first == "-", "no SNI for an IP literal")
            try await loop.submit { client.close(); server.listener.close(); server2.listener.close() }
        }
    }

    @Test func expiredCertificateIsRefusedWithItsDate() async throws {
        let ca = try await TestCertificateAuthority.make()
        defer { ca.remove() }
        let certificate = try await ca.issue(
            commonName: "localhost", dnsNames: ["localhost"], validity: ("20190101000000Z", "20200101000000Z"))
        try await withLoop { loop in
            let server = try await TLSEchoServer.start(on: loop, certificate: certificate)
            let error = await expectTLSFailure(
                host: "localhost", port: server.port, context: try await clientContext(caFile: ca.certificatePath), loop: loop)
            #expect(error == .certificateExpired(name: "localhost", notAfter: "2020-01-01T00:00:00Z", subject: "/CN=localhost"))
            #expect("\(error!)".hasPrefix("certificate expired (notAfter 2020-01-01T00:00:00Z) for \"localhost\""))
            try await loop.submit { server.listener.close() }
        }
    }

    @Test func spkiPinsMustMatchTheVerifiedChain() async throws {
        let ca = try await TestCertificateAuthority.make()
        defer { ca.remove() }
        let certificate = try await ca.issue(commonName: "localhost", dnsNames: ["localhost"])
        let leafPin = try await TestCertificateAuthority.spkiPin(ofCertificate: certificate.certificatePath)
        let caPin = try await TestCertificateAuthority.spkiPin(ofCertificate: ca.certificatePath)
        let wrongPin = Data(repeating: 7, count: 32).base64EncodedString()
        try await withLoop { loop in
            let server = try await TLSEchoServer.start(on: loop, certificate: certificate)
            let error = await expectTLSFailure(
                host: "localhost", port: server.port,
                context: try await clientContext(caFile: ca.certificatePath, pins: [wrongPin]), loop: loop)
            #expect(error == .pinMismatch(name: "localhost", chain: [leafPin, caPin], expected: [wrongPin]))
            #expect("\(error!)" == "SPKI pin mismatch for \"localhost\": chain has [\(leafPin), \(caPin)], expected one of [\(wrongPin)]")
            // A matching pin (leaf, or the CA's for rotation-friendly pinning) passes.
            for pins in [[wrongPin, leafPin], [caPin]] {
                let client = try await StreamConnection.connect(
                    host: "localhost", port: server.port, tls: try await clientContext(caFile: ca.certificatePath, pins: pins), on: loop)
                try await expectGreetingAndEcho(client, loop: loop)
                try await loop.submit { client.close() }
            }
            try await loop.submit { server.listener.close() }
        }
    }

    @Test func clientCertificateRequiredByServer() async throws {
        let ca = try await TestCertificateAuthority.make()
        defer { ca.remove() }
        let serverCertificate = try await ca.issue(commonName: "localhost", dnsNames: ["localhost"])
        let clientCertificate = try await ca.issue(commonName: "device-42")
        try await withLoop { loop in
            let server = try await TLSEchoServer.start(on: loop, certificate: serverCertificate, clientCAFile: ca.certificatePath)
            let client = try await StreamConnection.connect(
                host: "localhost", port: server.port,
                tls: try await clientContext(caFile: ca.certificatePath, identity: clientCertificate), on: loop)
            try await expectGreetingAndEcho(client, loop: loop)
            #expect(server.clientSubjects.value.first == "/CN=device-42")
            try await loop.submit { client.close() }
            // Without a certificate: the server refuses (in TLS 1.3 the client learns it after its Finished).
            let anonymous = try? await StreamConnection.connect(
                host: "localhost", port: server.port, tls: try await clientContext(caFile: ca.certificatePath), on: loop)
            if let anonymous {
                let recorder = StreamRecorder()
                try await loop.submit { recorder.attach(anonymous) }
                try await waitUntil("refused") { recorder.isClosed }
                #expect("\(recorder.closeReason.value!)".contains("certificate required"), "\(recorder.closeReason.value!)")
            }
            try await waitUntil("server-side failure") { server.serverCloseReasons.value.count >= 2 }
            #expect(server.serverCloseReasons.value.contains { $0.contains("peer did not return a certificate") },
                    "\(server.serverCloseReasons.value)")
            try await loop.submit { server.listener.close() }
        }
    }

    /// The peer drops TCP without close_notify: reported as truncation, not as a clean close. The server
    /// here is a plain TCP listener driving a `TLSEngine` by hand (the sans-I/O engine on its own).
    @Test func truncationWithoutCloseNotifyIsReported() async throws {
        let ca = try await TestCertificateAuthority.make()
        defer { ca.remove() }
        let certificate = try await ca.issue(commonName: "localhost", dnsNames: ["localhost"])
        let serverContext = try await TLSContext.load(server: TLSServerConfiguration(
            certificateChainFile: certificate.chainPath, privateKeyFile: certificate.keyPath))
        try await withLoop { loop in
            let listener = try await loop.submit {
                let listener = try StreamListener.tcp(host: "127.0.0.1", port: 0, on: loop)
                listener.onAccept = { connection in
                    let engine = try! TLSEngine(serverContext: serverContext, peerName: "client")
                    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16384, alignment: 1)
                    connection.onRead = { [unowned connection] bytes in
                        engine.feed(bytes)
                        if engine.handshake() == .complete {
                            while case .bytes(let n) = engine.read(into: buffer) {
                                if String(decoding: buffer[0..<n], as: UTF8.self).contains("bye") {
                                    _ = Array("partial".utf8).withUnsafeBytes { engine.write($0) }
                                    connection.write(engine.takePendingOutput())
                                    connection.close()  // TCP close, no close_notify
                                    return
                                }
                            }
                        }
                        connection.write(engine.takePendingOutput())
                    }
                    connection.onClose = { _ in buffer.deallocate() }
                    connection.start()
                }
                return listener
            }
            let client = try await StreamConnection.connect(
                host: "localhost", port: listener.port!, tls: try await clientContext(caFile: ca.certificatePath), on: loop)
            let recorder = StreamRecorder()
            try await loop.submit {
                recorder.attach(client)
                client.write(Array("bye".utf8))
            }
            try await waitUntil("client closed") { recorder.isClosed }
            #expect(String(decoding: recorder.received.value, as: UTF8.self) == "partial")
            guard case .failed(.tls(.truncated(let name)))? = recorder.closeReason.value else {
                Issue.record("expected truncation, got \(String(describing: recorder.closeReason.value))")
                return
            }
            #expect(name == "localhost:\(listener.port!)")
            try await loop.submit { listener.close() }
        }
    }

    @Test func connectTimeoutCoversASilentTLSServer() async throws {
        let ca = try await TestCertificateAuthority.make()
        defer { ca.remove() }
        try await withLoop { loop in
            // Accepts TCP, never answers the ClientHello.
            let accepted = Shared(0)
            let serverClosed = Shared(0)
            let listener = try await loop.submit {
                let listener = try StreamListener.tcp(host: "127.0.0.1", port: 0, on: loop)
                listener.onAccept = { connection in
                    accepted.update { $0 += 1 }
                    connection.onRead = { _ in }
                    connection.onClose = { _ in serverClosed.update { $0 += 1 } }
                    connection.start()
                }
                return listener
            }
            let port = listener.port!
            let context = try await clientContext(caFile: ca.certificatePath)
            let error = await #expect(throws: SocketError.self) {
                // Addresses given: the deadline covers TCP and TLS only (no DNS on a busy shared pool).
                _ = try await StreamConnection.connect(
                    to: [SocketAddress(ip: "127.0.0.1", port: port)!], host: "localhost", port: port,
                    options: TCPOptions(connectTimeout: .milliseconds(300)), tls: context, on: loop)
            }
            guard case .connectTimeout(let host, let failedPort, _, .tlsHandshake, let attempts)? = error else {
                Issue.record("expected connectTimeout, got \(String(describing: error))")
                return
            }
            #expect(host == "localhost" && failedPort == port && attempts.isEmpty)
            #expect(accepted.value == 1)
            #expect("\(error!)" == "connect to localhost:\(port) timed out after 300ms in the TLS handshake")
            // The client side was closed, so the server sees the end.
            try await waitUntil("server saw the close") { serverClosed.value == 1 }
            try await loop.submit { listener.close() }
        }
    }

    @Test func serverDropsClientsThatNeverHandshake() async throws {
        let ca = try await TestCertificateAuthority.make()
        defer { ca.remove() }
        let certificate = try await ca.issue(commonName: "localhost", dnsNames: ["localhost"])
        try await withLoop { loop in
            let server = try await TLSEchoServer.start(on: loop, certificate: certificate)
            try await loop.submit { server.listener.tlsHandshakeTimeout = .milliseconds(200) }
            // A plain TCP client that never sends a ClientHello.
            let silent = try await StreamConnection.connect(host: "127.0.0.1", port: server.port, on: loop)
            let recorder = StreamRecorder()
            let localPort = try await loop.submit { recorder.attach(silent); return silent.localAddress!.port! }
            try await waitUntil("server gave up") { !server.serverCloseReasons.value.isEmpty }
            #expect(server.serverCloseReasons.value == ["TLS handshake with \"127.0.0.1:\(localPort)\" failed: no TLS handshake within 200ms"])
            try await waitUntil("client saw the close") { recorder.isClosed }
            #expect(try await loop.submit { loop.scheduledTimerCount } == 0)
            try await loop.submit { server.listener.close() }
        }
    }

    /// Interoperability with another implementation: `openssl s_server` limited to TLS 1.2.
    @Test func talksTLS12ToOpenSSLServer() async throws {
        let ca = try await TestCertificateAuthority.make()
        defer { ca.remove() }
        let certificate = try await ca.issue(commonName: "localhost", dnsNames: ["localhost"])
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = [
            "s_server", "-accept", "127.0.0.1:0", "-cert", certificate.chainPath, "-key", certificate.keyPath,
            "-tls1_2", "-naccept", "1",
        ]
        let output = Pipe()
        let input = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = input
        try process.runSerialized()
        defer { if process.isRunning { process.terminate() } }
        let watchdog = Task {  // bounds every read below: a stuck s_server is killed, closing its output
            try await Task.sleep(for: .seconds(20))
            process.terminate()
        }
        defer { watchdog.cancel() }
        // "ACCEPT 127.0.0.1:PORT" tells the port.
        let reader = output.fileHandleForReading.fileDescriptor
        let port: Int? = try await BlockingPool.shared.run { () throws -> Int? in
            var text = ""
            while !text.contains("\n") || !text.contains("ACCEPT") {
                let data = readSome(fd: reader)
                if data.isEmpty { return nil }
                text += String(decoding: data, as: UTF8.self)
            }
            let line = text.split(separator: "\n").first { $0.hasPrefix("ACCEPT") }
            return line.flatMap { $0.split(separator: ":").last }.flatMap { Int($0) }
        }
        let serverPort = try #require(port)
        try await withLoop { loop in
            let client = try await StreamConnection.connect(
                host: "localhost", port: serverPort, tls: try await clientContext(caFile: ca.certificatePath), on: loop)
            let info = try #require(try await loop.submit { client.tlsInfo })
            #expect(info.version == "TLSv1.2")
            #expect(info.peerSubject == "/CN=localhost")
            try await loop.submit {
                client.write(Array("hello from smartico\n".utf8))
                client.closeAfterFlush()
            }
        }
        // s_server prints what it received and exits after its one connection.
        let rest = try await BlockingPool.shared.run { () throws -> String in
            String(decoding: readToEnd(fd: reader), as: UTF8.self)
        }
        #expect(rest.contains("hello from smartico"), "\(rest)")
    }

    @Test func configurationErrorsNameTheFile() async throws {
        let missing = "/nonexistent/ca.pem"
        await #expect(throws: TLSError.self) { try await clientContext(caFile: missing) }
        do {
            _ = try await clientContext(caFile: missing)
        } catch {
            #expect("\(error)".hasPrefix("TLS configuration: cannot load CA file \"/nonexistent/ca.pem\""))
        }
    }
}
