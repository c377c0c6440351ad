import Foundation
import Testing
@testable import Transport

/// The WebSocket client against two servers: ours (`WebSocketServer`) and the Python `websockets`
/// package, over ws and wss, with and without permessage-deflate.
@Suite("Integration: WebSocket client and server")
struct IntegrationWebSocketTests {
    enum ServerKind: String, CaseIterable, Sendable { case own, python }

    struct Case: Sendable, CustomStringConvertible {
        var server: ServerKind
        var secure: Bool
        var deflate: Bool
        var fragmentSize: Int?
        var description: String {
            "\(server) \(secure ? "wss" : "ws") deflate=\(deflate) fragments=\(fragmentSize.map(String.init) ?? "none")"
        }
    }

    static let cases: [Case] = {
        var all: [Case] = []
        for server in ServerKind.allCases {
            for secure in [false, true] {
                for deflate in [false, true] {
                    all.append(Case(server: server, secure: secure, deflate: deflate, fragmentSize: secure == deflate ? 4096 : nil))
                }
            }
        }
        return all
    }()

    /// The sizes each case echoes. 16 MiB (far beyond anything Smartico sends: popups of a few KiB)
    /// only without permessage-deflate, where it takes both large-message paths on each server: one
    /// 16 MiB frame (64-bit length, over wss) and 4,096 fragments of one message (over ws). The
    /// deflate cases stop at 1 MiB, which already spans many reads, frames and inflate calls.
    static func sizes(for c: Case) -> [Int] {
        var all = [0, 0, 1, 125, 126, 65_535, 65_536, 1 << 20]
        if !c.deflate { all.append(16 << 20) }
        if let cap = ProcessInfo.processInfo.environment["SMARTICO_TEST_MAX_MESSAGE"].flatMap(Int.init) { return all.filter { $0 <= cap } }
        return all
    }

    // Serialized: eight concurrent 16 MiB echoes in a debug build starve each other (and the rest of
    // the suite) on a 2-core machine until a 60 s wait for a message runs out.
    @Test("echo of text and binary messages from 0 bytes to 1 or 16 MiB", .serialized, arguments: cases)
    func echo(_ c: Case) async throws {
        try await withLoop { loop in
            let fixture = c.secure ? try await TLSFixture.make() : nil
            defer { fixture?.remove() }
            var python: PythonPeer? = nil
            var own: WebSocketServer? = nil
            let port: Int
            switch c.server {
            case .own:
                own = try await startWebSocketEchoServer(on: loop, tls: fixture?.serverContext, deflate: c.deflate, fragmentSize: c.fragmentSize)
                port = own!.port
            case .python:
                var args: [String] = []
                if let fixture { args += ["--cert", fixture.server.chainPath, "--key", fixture.server.keyPath] }
                if !c.deflate { args.append("--no-deflate") }
                python = try await PythonPeer.start("echo_server.py", args)
                port = python!.port
            }
            defer { python?.stop() }
            var options = WebSocketConnectOptions()
            options.configuration.outboundFragmentSize = c.fragmentSize
            options.configuration.maxMessageSize = 32 << 20
            options.configuration.maxFrameSize = 32 << 20
            options.deflate = c.deflate ? PerMessageDeflateOptions() : nil
            if let fixture { options.tls = fixture.clientConfiguration }
            let url = "\(c.secure ? "wss" : "ws")://localhost:\(port)/echo"
            let connection = try await WebSocketClient.connect(url: url, options: options, on: loop)
            #expect((connection.deflate != nil) == c.deflate)
            #expect(connection.trace?.upgradeStatus?.contains("101") == true)
            #expect((connection.trace?.tls != nil) == c.secure)
            let inbox = EventInbox(connection)
            for size in Self.sizes(for: c) {
                let text = patternText(bytes: size)
                try await connection.sendAsync(text: text)
                let echoedText = try await inbox.nextMessage()
                #expect(echoedText == .text(text), "text of \(size) bytes")
                let bytes = patternBytes(count: size, seed: UInt8(size & 0xFF))
                try await connection.sendAsync(binary: bytes)
                let echoedBinary = try await inbox.nextMessage()
                guard case .binary(let got) = echoedBinary else {
                    Issue.record("expected binary of \(size) bytes, got \(echoedBinary)")
                    return
                }
                #expect(got.count == size)
                #expect(got == bytes, "binary of \(size) bytes")
            }
            try await connection.closeAsync(code: .normalClosure, reason: "done")
            let closed = try await inbox.closed()
            #expect(closed.code == .normalClosure)
            #expect(closed.error == nil)
            await own?.closeAsync()
        }
    }
}
