import Foundation
import Testing
import Transport
@testable import SmarticoProtocol  // the push registration and report builders (memberwise)
@testable import SmarticoSim

@Suite struct ServicesTests {
    @Test func httpRuntimeAndControlSocketWorkTogetherOverRealSockets() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let command = try SimCommand.parse([
            "--control", dir.path + "/sim.sock", "--record", dir.path + "/rec.ndjson", "--ping-interval", "0",
            "--label-key", "d78934f3-1d8b-461b-9e8f-287aae43c860-2",
        ])
        try await withLoop { loop in
            let services = try await SimServices.start(command, on: loop)
            #expect(services.httpBaseURL == "http://127.0.0.1:\(services.http.port)")
            let sock = dir.path + "/sim.sock"
            #expect(await unixExchange(path: sock, #"{"op":"clients"}"# + "\n") == #"{"ok":true,"clients":[]}"# + "\n")

            // A connection as the WebSocket glue will hand it over.
            let conn = FakeConnection()
            let id = await services.runtime.accepted(conn)
            await services.runtime.received(client: id, text: Msg.initSession(label: "d78934f3-1d8b-461b-9e8f-287aae43c860").serialized())
            await services.runtime.received(client: id, text: Msg.identify("alice").serialized())
            let six = try #require(conn.all.last.flatMap { try? JSONValue(parsing: $0) }?.objectValue)
            let gf = try #require(six.str("native_app_gf_url"))
            #expect(gf.hasPrefix(services.httpBaseURL + "/wrapper-gf.html?label_key=d78934f3-1d8b-461b-9e8f-287aae43c860-2"))

            // The URL the answer points at is served.
            let target = String(gf.dropFirst(services.httpBaseURL.count))
            let page = await tcpExchange(port: services.http.port, "GET \(target) HTTP/1.1\r\n\r\n")
            #expect(page.hasPrefix("HTTP/1.1 200 OK") && page.contains("<code>alice</code>"))

            // Control over the real socket reaches the connection.
            let clients = await unixExchange(path: sock, #"{"op":"clients"}"# + "\n")
            #expect(clients.contains(#""user":"alice""#))
            let emitted = await unixExchange(path: sock, #"{"op":"emit","kind":"engagement","to":"alice"}"# + "\n")
            #expect(emitted.hasPrefix(#"{"ok":true,"sent":1"#))
            #expect(conn.all.last?.contains(#""cid":110"#) == true)
            let received = await unixExchange(path: sock, #"{"op":"received","cid":5}"# + "\n")
            #expect(received.contains(#""ext_user_id":"alice""#))
            // A push report to the public API endpoint is recorded with client "http".
            let report = PushEngagementReport(kind: .delivered, userExtID: "alice", engagementUID: "e-9", messageID: 3)
            let api = await tcpExchange(port: services.http.port,
                                        "GET /services/public?\(report.query(apiKey: "k", brandKey: "b", uuid: "u", ts: 1)) HTTP/1.1\r\n\r\n")
            #expect(api.hasPrefix("HTTP/1.1 200 OK"))
            let http = await unixExchange(path: sock, #"{"op":"received","client":"http"}"# + "\n")
            #expect(http.contains(#""event_type":"engagement_delivered""#) && http.contains(#""user":"alice""#))
            await services.stop()
            #expect(access(sock, F_OK) != 0)
        }
        let record = try String(contentsOfFile: dir.path + "/rec.ndjson", encoding: .utf8)
        #expect(record.split(separator: "\n").count == 3)
    }

    /// A stopped simulator is freed. The runtime held the HTTP server, whose record callback held
    /// the runtime: nothing was ever released, in the process or in the tests that start the
    /// simulator in-process (LeakSanitizer, `scripts/sanitize.sh address`).
    @Test func aStoppedSimulatorsRuntimeAndHTTPServerAreFreed() async throws {
        let command = try SimCommand.parse(["--ping-interval", "0"])
        try await withLoop { loop in
            weak var runtime: SimRuntime?
            weak var http: SimHTTPServer?
            do {
                let services = try await SimServices.start(command, on: loop)
                runtime = services.runtime
                http = services.http
                await services.stop()
            }
            // Bounded: work the loop still holds (a closing listener) lets go within moments.
            let clock = ContinuousClock()
            let end = clock.now + .seconds(10)
            while (runtime != nil || http != nil) && clock.now < end { try await Task.sleep(for: .milliseconds(10)) }
            #expect(runtime == nil, "the stopped simulator's runtime is still alive")
            #expect(http == nil, "the stopped simulator's HTTP server is still alive")
        }
    }

    @Test func httpFaultsThroughTheControlSocket() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let command = try SimCommand.parse(["--control", dir.path + "/sim.sock", "--ping-interval", "0"])
        try await withLoop { loop in
            let services = try await SimServices.start(command, on: loop)
            let sock = dir.path + "/sim.sock"
            let port = services.http.port
            let get = "GET /health HTTP/1.1\r\n\r\n"
            func fault(_ line: String) async -> String { await unixExchange(path: sock, line + "\n") }
            #expect(await fault(#"{"op":"http_fault","answer":"status","status":503,"count":1}"#) == #"{"ok":true,"answer":"status"}"# + "\n")
            #expect(await tcpExchange(port: port, get).hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))
            #expect(await tcpExchange(port: port, get).hasPrefix("HTTP/1.1 200 OK\r\n"), "count 1: the fault cleared itself")
            _ = await fault(#"{"op":"http_fault","answer":"garbage_status","count":1}"#)
            #expect(await tcpExchange(port: port, get).hasPrefix("HTTP/1.1 banana OK\r\n"))
            _ = await fault(#"{"op":"http_fault","answer":"long_body","count":1}"#)
            let long = await tcpExchange(port: port, get)
            #expect(long.contains("Content-Length: 5\r\n") && long.hasSuffix("{\"a\":1}EXTRA BYTES BEYOND THE ANNOUNCED LENGTH"), "\(long)")
            // Refused by the kernel while the listener is closed; the same port listens again after clear.
            _ = await fault(#"{"op":"http_fault","answer":"refuse"}"#)
            #expect(await tcpExchange(port: port, get) == "")
            _ = await fault(#"{"op":"http_fault","answer":"clear"}"#)
            #expect(await tcpExchange(port: port, get).hasPrefix("HTTP/1.1 200 OK\r\n"))
            let bad = await fault(#"{"op":"http_fault","answer":"teapot"}"#)
            #expect(bad.contains(#""ok":false"#) && bad.contains("garbage_status, long_body"), "\(bad)")
            let negative = await fault(#"{"op":"http_fault","answer":"status","count":-1}"#)
            #expect(negative.contains(#""ok":false"#) && negative.contains("non-negative"), "\(negative)")
            await services.stop()
        }
    }

    @Test func anUnusableControlPathFailsWithItsName() async throws {
        let command = try SimCommand.parse(["--control", "/nonexistent-dir/sim.sock"])
        try await withLoop { loop in
            do {
                _ = try await SimServices.start(command, on: loop)
                Issue.record("started with an impossible control path")
            } catch {
                #expect("\(error)".contains("/nonexistent-dir/sim.sock"))
            }
        }
    }
}
