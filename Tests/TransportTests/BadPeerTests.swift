import Foundation
import Testing
@testable import Transport

/// The real client against a misbehaving server over real loopback sockets
/// (`peers/bad_server.py`, raw sockets). Each scenario must end in the right close code — the
/// one in the Close frame the client writes on the wire, which the peer parses and reports — or in
/// the right connect error; never a crash, a hang or an allocation the peer asked for.
@Suite(.timeLimit(.minutes(2)))
struct BadPeerTests {
    /// A scenario that must fail the connection: the client sends Close with `code` and reports it.
    @Test(arguments: [
        ("masked", 1002, "maskedFrameFromServer"),
        ("reserved-bits", 1002, "reservedBitsSet"),
        ("reserved-opcode", 1002, "reservedOpcode"),
        ("fragmented-control", 1002, "fragmentedControlFrame"),
        ("ping-126", 1002, "controlFrameTooLong"),
        ("utf8", 1007, "invalidUTF8InText"),
        ("utf8-split", 1007, "invalidUTF8InText"),
        ("utf8-fail-fast", 1007, "invalidUTF8InText"),
        ("close-1005", 1002, "invalidCloseCode"),
        ("close-999", 1002, "invalidCloseCode"),
        ("close-2000", 1002, "invalidCloseCode"),
        ("length-2-63", 1002, "lengthHighBitSet"),
        ("length-2-63-minus-1", 1009, "frameTooLarge"),
    ])
    func failsWithCloseCode(scenario: String, code: Int, errorCase: String) async throws {
        let peer = try await BadPeer.start()
        defer { peer.stop() }
        try await withLoop("bad-peer") { loop in
            let connection = try await WebSocketClient.connect(
                url: "ws://127.0.0.1:\(peer.port)/\(scenario)", options: BadPeer.options(), on: loop)
            let events = try await BadPeer.collect(connection, within: .seconds(10))
            let info = try #require(BadPeer.closeInfo(events), "no .closed event: \(events)")
            #expect(info.code.rawValue == UInt16(code), "\(scenario): \(info)")
            guard case .protocolViolation(let error) = info.error else {
                Issue.record("\(scenario): expected a protocol violation, got \(info)")
                return
            }
            #expect("\(error)".isEmpty == false)
            #expect(BadPeer.caseName(error) == errorCase, "\(scenario): \(error)")
            #expect(error.closeCode.rawValue == UInt16(code))
            // Nothing of the bad data reached the application.
            #expect(!events.contains { if case .text = $0 { true } else if case .binary = $0 { true } else { false } })
        }
        // What the client wrote on the wire: one Close frame with the code, then TCP closed.
        let report = try await peer.report(for: scenario)
        #expect(report.error == nil, "peer: \(report.error ?? "")")
        #expect(report.closeCode == code, "\(scenario): the client's Close frame on the wire: \(report)")
        #expect(report.frames.map(\.opcode) == [8], "\(scenario): frames sent by the client: \(report.frames)")
        #expect(report.frames.allSatisfy { $0.masked }, "client frames must be masked")
        #expect(report.eof, "\(scenario): the client did not close TCP within the peer's wait")
    }

    /// A well-behaved server: the message arrives and the close handshake completes with 1000. It
    /// shows the peer and the checks above can tell right from wrong.
    @Test func wellBehavedServerClosesNormally() async throws {
        let peer = try await BadPeer.start()
        defer { peer.stop() }
        try await withLoop("bad-peer") { loop in
            let connection = try await WebSocketClient.connect(
                url: "ws://127.0.0.1:\(peer.port)/good", options: BadPeer.options(), on: loop)
            let events = try await BadPeer.collect(connection, within: .seconds(10))
            #expect(events.contains(.text("hello")), "\(events)")
            let info = try #require(BadPeer.closeInfo(events))
            #expect(info.code == .normalClosure && info.error == nil, "\(info)")
        }
        let report = try await peer.report(for: "good")
        #expect(report.closeCode == 1000 && report.eof, "\(report)")
    }

    /// A wrong `Sec-WebSocket-Accept`: connect fails with the expected and received keys, and no
    /// frame is sent.
    @Test func wrongAcceptKeyFailsTheHandshake() async throws {
        let peer = try await BadPeer.start()
        defer { peer.stop() }
        try await withLoop("bad-peer") { loop in
            do {
                let connection = try await WebSocketClient.connect(
                    url: "ws://127.0.0.1:\(peer.port)/wrong-accept", options: BadPeer.options(), on: loop)
                let events = try await BadPeer.collect(connection, within: .seconds(5))
                Issue.record("connected despite a wrong accept key; events: \(events)")
            } catch let error as ConnectError {
                guard case .upgrade(.wrongAcceptKey(let expected, let received)) = error.reason else {
                    Issue.record("expected wrongAcceptKey, got \(error)")
                    return
                }
                #expect(expected != received && received != nil)
                #expect("\(error)".contains("Sec-WebSocket-Accept"), "\(error)")
            }
        }
        let report = try await peer.report(for: "wrong-accept")
        #expect(report.frames.isEmpty, "the client sent frames after a bad handshake: \(report.frames)")
        #expect(report.eof, "\(report)")
    }

    /// The server announces 100 bytes, sends 10 and closes TCP: the connection ends with 1006 at once.
    @Test func eofInsideAFrameEndsWith1006() async throws {
        let peer = try await BadPeer.start()
        defer { peer.stop() }
        try await withLoop("bad-peer") { loop in
            let connection = try await WebSocketClient.connect(
                url: "ws://127.0.0.1:\(peer.port)/mid-frame-eof", options: BadPeer.options(), on: loop)
            let events = try await BadPeer.collect(connection, within: .seconds(10))
            let info = try #require(BadPeer.closeInfo(events), "\(events)")
            #expect(info.code == .abnormalClosure, "\(info)")
            #expect(events.count == 1, "only .closed is expected: \(events)")
        }
        let report = try await peer.report(for: "mid-frame-eof")
        #expect(report.eof, "\(report)")
    }

    /// The server announces 100 bytes, sends 10 and goes silent with TCP open: closing from our side
    /// sends Close 1000 and, with no reply, ends after the close timeout with 1006 — no hang.
    @Test func silenceInsideAFrameIsBoundedByTheCloseTimeout() async throws {
        let peer = try await BadPeer.start()
        defer { peer.stop() }
        let clock = ContinuousClock()
        try await withLoop("bad-peer") { loop in
            let connection = try await WebSocketClient.connect(
                url: "ws://127.0.0.1:\(peer.port)/mid-frame-silent", options: BadPeer.options(closeTimeout: .seconds(1)), on: loop)
            let stream = connection.events
            try await Task.sleep(for: .milliseconds(300))
            let start = clock.now
            try await connection.closeAsync()
            let events = try await BadPeer.collect(stream, within: .seconds(10))
            let elapsed = clock.now - start
            let info = try #require(BadPeer.closeInfo(events), "\(events)")
            #expect(info.code == .abnormalClosure, "\(info)")
            guard case .closeTimeout = info.error else {
                Issue.record("expected a close timeout, got \(info)")
                return
            }
            #expect(elapsed < .seconds(5), "closing took \(elapsed)")
        }
        let report = try await peer.report(for: "mid-frame-silent")
        #expect(report.closeCode == 1000, "\(report)")
        #expect(report.eof, "\(report)")
    }

    /// 2^63 − 1 announced to a client whose limits allow any size: nothing is allocated up front
    /// (that would trap); the 16 bytes that arrive are buffered and EOF ends the connection with 1006.
    @Test func hugeAnnouncementWithoutLimitsAllocatesNothing() async throws {
        let peer = try await BadPeer.start()
        defer { peer.stop() }
        try await withLoop("bad-peer") { loop in
            let configuration = WebSocketConfiguration(maxFrameSize: .max, maxMessageSize: .max, closeTimeout: .seconds(2))
            let connection = try await WebSocketClient.connect(
                url: "ws://127.0.0.1:\(peer.port)/length-2-63-minus-1-eof",
                options: WebSocketConnectOptions(deflate: nil, connectTimeout: .seconds(5), configuration: configuration), on: loop)
            let events = try await BadPeer.collect(connection, within: .seconds(10))
            let info = try #require(BadPeer.closeInfo(events), "\(events)")
            #expect(info.code == .abnormalClosure, "\(info)")
        }
        let report = try await peer.report(for: "length-2-63-minus-1-eof")
        #expect(report.eof, "\(report)")
    }
}

/// `peers/bad_server.py` as a subprocess, and helpers to observe both ends.
struct BadPeer {
    /// What the peer saw the client send on one connection.
    struct Report: CustomStringConvertible {
        struct Frame: CustomStringConvertible {
            var opcode: Int
            var length: Int
            var masked: Bool
            var description: String { "opcode \(opcode), \(length) bytes\(masked ? "" : ", unmasked")" }
        }
        var scenario: String
        var closeCode: Int?
        var frames: [Frame]
        var eof: Bool
        var elapsed: Double
        var error: String?
        var description: String {
            "peer saw: close code \(closeCode.map(String.init) ?? "none"), frames \(frames), eof \(eof), after \(elapsed) s"
                + (error.map { ", error \($0)" } ?? "")
        }
    }

    let peer: PythonPeer

    var port: Int { peer.port }

    static func start() async throws -> BadPeer {
        // The peer's own wait for the client's bytes (seconds); every scenario ends well before.
        BadPeer(peer: try await PythonPeer.start("bad_server.py", ["8"]))
    }

    func stop() { peer.stop() }

    /// Waits (bounded) for the peer's JSON line about `scenario`.
    func report(for scenario: String, timeout: Duration = .seconds(15)) async throws -> Report {
        let lines = peer.lines
        try await waitUntil("the bad peer's report on \(scenario)", timeout: timeout) {
            lines.value.contains { $0.contains("\"scenario\": \"\(scenario)\"") }
        }
        let line = try #require(lines.value.first { $0.contains("\"scenario\": \"\(scenario)\"") })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let frames = (object["frames"] as? [[Any]] ?? []).map {
            Report.Frame(opcode: $0[0] as? Int ?? -1, length: $0[1] as? Int ?? -1, masked: $0[2] as? Bool ?? false)
        }
        return Report(
            scenario: scenario, closeCode: object["close_code"] as? Int, frames: frames, eof: object["eof"] as? Bool ?? false,
            elapsed: object["elapsed"] as? Double ?? -1, error: object["error"] as? String)
    }

    /// Short timeouts so a failure shows quickly; no deflate (the peer does not negotiate it).
    static func options(closeTimeout: Duration = .seconds(2)) -> WebSocketConnectOptions {
        WebSocketConnectOptions(deflate: nil, connectTimeout: .seconds(5), configuration: WebSocketConfiguration(closeTimeout: closeTimeout))
    }

    static func collect(_ connection: WebSocketConnection, within limit: Duration) async throws -> [WebSocketConnectionEvent] {
        try await collect(connection.events, within: limit)
    }

    /// Every event until `.closed`, or throws `TimedOut` after `limit`.
    static func collect(_ stream: AsyncStream<WebSocketConnectionEvent>, within limit: Duration) async throws -> [WebSocketConnectionEvent] {
        try await withThrowingTaskGroup(of: [WebSocketConnectionEvent]?.self) { group in
            group.addTask {
                var all: [WebSocketConnectionEvent] = []
                for await event in stream { all.append(event) }
                return all
            }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let events = first else {
                throw TimedOut(what: "the connection to end (\(limit))")
            }
            return events
        }
    }

    static func closeInfo(_ events: [WebSocketConnectionEvent]) -> WebSocketCloseInfo? {
        for case .closed(let info) in events { return info }
        return nil
    }

    /// The case name of a `WebSocketError` (e.g. "invalidUTF8InText"), to check which rule fired.
    static func caseName(_ error: WebSocketError) -> String {
        let text = String(describing: Mirror(reflecting: error).children.first?.label ?? "\(error)")
        return text
    }
}
