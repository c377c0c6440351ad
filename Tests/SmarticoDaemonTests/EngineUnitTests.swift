import Foundation
import SmarticoProtocol
import Testing
import Transport
@testable import SmarticoDaemon

/// The driver's small pure pieces: connect options from the configuration, the log summary of
/// events.
@Suite("Engine: driver helpers")
struct EngineUnitTests {
    static func resolved(_ json: String, environment: [String: String] = [:]) throws -> ResolvedConfig {
        try ConfigLoader.resolve(Array(json.utf8), source: "test.json", environment: environment)
    }

    /// Every timer has a slot of its own: setting, reading and removing one leaves the others be.
    @Test func sessionTimerSlotsKeepOneValuePerTimer() {
        var slots = SessionTimerSlots<Int64>()
        for (i, timer) in SessionTimer.allCases.enumerated() { slots[timer] = Int64(i) * 10 }
        for (i, timer) in SessionTimer.allCases.enumerated() { #expect(slots[timer] == Int64(i) * 10, "\(timer)") }
        #expect(slots.removeValue(forKey: .keepalive) == 20)
        #expect(slots[.keepalive] == nil && slots.removeValue(forKey: .keepalive) == nil)
        #expect(slots[.dead] == 30 && slots[.response] == 10)
        // Every timer's value but keepalive's (the third), in the order of SessionTimer.allCases.
        #expect(slots.values == SessionTimer.allCases.indices.filter { $0 != 2 }.map { Int64($0) * 10 })
        slots.removeAll()
        #expect(slots.values.isEmpty && SessionTimer.allCases.allSatisfy { slots[$0] == nil })
    }

    @Test func connectOptionsFollowTheServerSection() throws {
        let config = try Self.resolved("""
            {"server": {"label_key": "\(ConfigTestSupport.validKey)", "url": "wss://example.test/websocket/services",
              "headers": {"Origin": "https://app.test", "User-Agent": "ua/1"}, "compression": false,
              "tls": {"ca_file": "/etc/ca.pem", "pinned_spki_sha256": ["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]},
              "proxy": "http://u:p@proxy.test:3128"},
             "session": {"connect_timeout_s": 7}}
            """)
        let options = config.webSocketConnectOptions
        #expect(options.headers["Origin"] == "https://app.test")
        #expect(options.headers["User-Agent"] == "ua/1")
        #expect(options.deflate == nil)
        #expect(options.connectTimeout == .seconds(7))
        #expect(options.tls.spkiPins == ["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="])
        if case .caFile(let path) = options.tls.trustRoots { #expect(path == "/etc/ca.pem") } else { Issue.record("trust roots: \(options.tls.trustRoots)") }
        #expect(options.proxy?.host == "proxy.test")
        #expect(options.proxy?.port == 3128)
        #expect(options.proxy?.username == "u")
        #expect(options.proxy?.password == "p")
    }

    @Test func connectOptionsDefaults() throws {
        let config = try Self.resolved("""
            {"server": {"label_key": "\(ConfigTestSupport.validKey)", "url": "ws://127.0.0.1:9/websocket/services"}}
            """)
        let options = config.webSocketConnectOptions
        #expect(options.deflate != nil, "server.compression defaults to true")
        #expect(options.proxy == nil)
        #expect(options.connectTimeout == .seconds(10))
        if case .system = options.tls.trustRoots {} else { Issue.record("trust roots: \(options.tls.trustRoots)") }
    }

    @Test func eventSummaryForLogsNamesStateReasonAndCode() {
        let data: JSONValue = ["state": "backoff", "reason": "heartbeat_timeout", "attempt": 2, "retry_in_ms": 812, "other": "x"]
        #expect(SessionDriver.summary(data) == "state=backoff reason=heartbeat_timeout attempt=2 retry_in_ms=812")
        #expect(SessionDriver.summary(["code": "init_rejected", "errCode": 7]) == "code=init_rejected errCode=7")
    }

    /// The inbox hands the consumer every input in yield order, in batches, across threads, and
    /// stops accepting after `finish()` (returning what was still queued).
    @Test func driverInboxKeepsOrderAcrossThreadsAndFinishes() async throws {
        let inbox = DriverInbox()
        let loop = try EventLoop(name: "inbox-test")
        defer { loop.shutdownAndJoin() }
        let total = 20_000
        // A producer on another thread, started while the consumer may be parked.
        loop.execute {
            for i in 0..<total { inbox.yield(.timer(.keepalive, atMs: Int64(i))) }
        }
        var seen: [Int64] = []
        var batches = 0
        while seen.count < total, let batch = await inbox.next() {
            batches += 1
            for case .timer(_, let at) in batch { seen.append(at) }
        }
        #expect(seen == (0..<Int64(total)).map { $0 })
        #expect(batches >= 1 && batches <= total)
        #expect(inbox.yield(.peerClosed(0)))
        let left = inbox.finish()
        #expect(left.count == 1)
        #expect(!inbox.yield(.peerClosed(0)), "accepted after finish")
        #expect(await inbox.next() == nil)
    }
}
