import Foundation
import Synchronization
import SmarticoTestSupport
@testable import Transport

/// Our own echo server on `WebSocketServer`: every text and binary message goes back unchanged.
func startWebSocketEchoServer(
    on loop: EventLoop, tls: TLSContext? = nil, deflate: Bool = true, fragmentSize: Int? = nil,
    host: String = "127.0.0.1"
) async throws -> WebSocketServer {
    var configuration = WebSocketServerConfiguration()
    configuration.handshake.deflate = deflate ? PerMessageDeflateOptions() : nil
    configuration.connection.outboundFragmentSize = fragmentSize
    configuration.connection.maxMessageSize = 32 << 20
    configuration.connection.maxFrameSize = 32 << 20
    return try await WebSocketServer.listen(
        host: host, port: 0, tls: tls, configuration: configuration, on: loop,
        accept: { request in
            if request.path == "/forbidden" {
                return .reject(status: 403, reason: "Forbidden", body: "no entry for this device: token rejected\n")
            }
            return .accept()
        },
        onConnection: { connection in
            connection.start { event in
                switch event {
                case .text(let t): try? connection.send(text: t)
                case .binary(let b): try? connection.send(binary: b)
                default: break
                }
            }
        })
}

/// A test CA with a server certificate for localhost / 127.0.0.1 / ::1 and a client context trusting it.
struct TLSFixture: Sendable {
    let ca: TestCertificateAuthority
    let server: TestCertificateAuthority.Issued
    let serverContext: TLSContext

    static func make() async throws -> TLSFixture {
        let ca = try await TestCertificateAuthority.make()
        let server = try await ca.issue(commonName: "localhost", dnsNames: ["localhost"], ipAddresses: ["127.0.0.1", "::1"])
        let context = try await TLSContext.load(server: TLSServerConfiguration(certificateChainFile: server.chainPath, privateKeyFile: server.keyPath))
        return TLSFixture(ca: ca, server: server, serverContext: context)
    }

    var clientConfiguration: TLSClientConfiguration { TLSClientConfiguration(trustRoots: .caFile(ca.certificatePath)) }

    func remove() { ca.remove() }
}

/// Collects a connection's events (from its AsyncStream, on a task) so a test can wait for them with
/// a bound.
final class EventInbox: Sendable {
    let events = Shared<[WebSocketConnectionEvent]>([])
    private let consumed = Shared(0)
    private let task: Task<Void, Never>

    init(_ connection: WebSocketConnection) {
        let events = self.events
        let stream = connection.events
        task = Task {
            for await e in stream { events.update { $0.append(e) } }
        }
    }

    deinit { task.cancel() }

    /// The next text, binary or closed event after those already returned; bounded (60 s, times
    /// the sanitizer time scale: the 16 MiB echoes over TLS and in 4,096 fragments ran out of 60 s
    /// under ThreadSanitizer).
    func nextMessage(timeout: Duration = SanitizerEnvironment.scaled(.seconds(60))) async throws -> WebSocketConnectionEvent {
        let found = Shared<WebSocketConnectionEvent?>(nil)
        try await waitUntil("a message", timeout: timeout) { [self] in
            let all = events.value
            return consumed.update { index in
                while index < all.count {
                    let e = all[index]
                    index += 1
                    switch e {
                    case .text, .binary, .closed:
                        found.update { $0 = e }
                        return true
                    default: continue
                    }
                }
                return false
            }
        }
        return found.value!
    }

    /// Waits (bounded) for `.closed` and returns its info.
    func closed(timeout: Duration = .seconds(30)) async throws -> WebSocketCloseInfo {
        try await waitUntil("the connection to close", timeout: timeout) { [self] in
            events.value.contains { if case .closed = $0 { return true } else { return false } }
        }
        for e in events.value { if case .closed(let info) = e { return info } }
        fatalError("unreachable")
    }
}

/// A deterministic text of `count` UTF-8 bytes mixing ASCII and 2-, 3- and 4-byte characters.
func patternText(bytes count: Int) -> String {
    let pieces: [String] = ["smartico ", "é", "€", "𝄞", "abc", "\n"]
    var out = ""
    out.reserveCapacity(count)
    var n = 0
    var i = 0
    while true {
        let p = pieces[i % pieces.count]
        i += 1
        if n + p.utf8.count > count { break }
        out += p
        n += p.utf8.count
    }
    out += String(repeating: "x", count: count - n)
    return out
}
