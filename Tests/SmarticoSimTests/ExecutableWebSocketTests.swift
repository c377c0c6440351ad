import Foundation
import SmarticoProtocol
import Testing
import SmarticoTestSupport
import Transport
@testable import SmarticoSim

/// `smartico-sim` running as a subprocess: its first three stdout lines, read with a bounded wait.
final class SimSubprocess: @unchecked Sendable {  // Process is used from the test task and Process's own threads, as Foundation allows
    let process: Process
    let port: Int
    let lines: [String]

    private init(process: Process, port: Int, lines: [String]) {
        self.process = process
        self.port = port
        self.lines = lines
    }

    /// A test that throws before `stop()` leaves no simulator behind.
    deinit { if process.isRunning { process.terminate() } }

    /// Starts the binary and reads its three port lines (killed if they are not out within 30 s).
    static func start(_ arguments: [String]) async throws -> SimSubprocess {
        let p = Process()
        p.executableURL = try ExecutableTests.binary()
        p.arguments = arguments
        p.environment = SanitizerEnvironment.adding(to: [:])
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        p.standardInput = FileHandle.nullDevice
        try p.runSerialized()
        let killer = DispatchWorkItem { if p.isRunning { p.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 30, execute: killer)
        // A blocking read on a plain thread (never the cooperative pool), bounded by the kill above.
        let lines: [String] = await withCheckedContinuation { cont in
            Thread.detachNewThread {
                var lines: [String] = []
                var line: [UInt8] = []
                while lines.count < 3 {
                    let chunk = out.fileHandleForReading.readData(ofLength: 1)
                    if chunk.isEmpty { break }
                    if chunk.first == 0x0A { lines.append(String(decoding: line, as: UTF8.self)); line = [] } else { line += chunk }
                }
                cont.resume(returning: lines)
            }
        }
        killer.cancel()
        guard let first = lines.first, let port = Int(first), port > 0 else {
            if p.isRunning { p.terminate() }
            throw CocoaError(.fileReadCorruptFile, userInfo: [NSLocalizedDescriptionKey: "smartico-sim \(arguments): first stdout lines \(lines) do not start with a port"])
        }
        return SimSubprocess(process: p, port: port, lines: lines)
    }

    /// SIGTERM, then the exit status (SIGKILL after 20 s).
    func stop() async -> Int32 {
        let p = process
        if p.isRunning { p.terminate() }
        return await withCheckedContinuation { cont in
            Thread.detachNewThread {
                p.waitForExit(timeout: .seconds(20))  // SIGKILL past 20 s
                cont.resume(returning: p.terminationReason == .exit ? p.terminationStatus : -p.terminationStatus)
            }
        }
    }
}

/// The next text message with `cid`, skipping others (bounded by `timeout`).
func nextMessage(_ iterator: inout AsyncStream<WebSocketConnectionEvent>.Iterator, cid: Int64,
                 timeout: Duration = .seconds(30)) async -> JSONObject? {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        guard let event = await iterator.next() else { return nil }
        switch event {
        case .text(let s):
            if let o = (try? JSONValue(parsing: s))?.objectValue, o.int("cid") == cid { return o }
        case .closed: return nil
        default: continue
        }
    }
    return nil
}

@Suite struct ExecutableWebSocketTests {
    @Test func printsThePortLinesServesWebSocketAndStopsOnSIGTERM() async throws {
        let sim = try await SimSubprocess.start(["--port", "0", "--ping-interval", "0"])
        #expect(sim.lines.count == 3)
        #expect(sim.lines[1] == "ws://127.0.0.1:\(sim.port)/websocket/services")
        #expect(sim.lines[2].hasPrefix("http://127.0.0.1:"))
        try await withLoop { loop in
            let conn = try await WebSocketClient.connect(url: sim.lines[1] + "?master&domain=sim.test&version=1.0.0", on: loop)
            var events = conn.events.makeAsyncIterator()
            try await conn.sendAsync(text: String(decoding: Msg.initSession().serialized(), as: UTF8.self))
            let four = try #require(await nextMessage(&events, cid: 4))
            #expect(four.int("errCode") == 0)
            #expect(four.str("uuid") == "c7067eb9-38e7-4b74-8d5e-e17d52c99465")
            let settings = four["settings"]?.objectValue
            #expect(settings?.str("DYNAMIC_IMAGE_DOMAIN") == sim.lines[2] + "/")
            try await conn.closeAsync()
            // Another path is refused with 404 and the reason.
            do {
                _ = try await WebSocketClient.connect(url: "ws://127.0.0.1:\(sim.port)/elsewhere", on: loop)
                Issue.record("an upgrade on /elsewhere was accepted")
            } catch {
                #expect("\(error)".contains("404"), "\(error)")
            }
        }
        let simStatus = await sim.stop()
        #expect(simStatus == 0)
    }

    /// The `malformed_frame` fault puts the raw bytes 83 00 on the stream (Transport's test-only raw
    /// write): our own client fails the connection itself, naming the reserved opcode and where it was.
    @Test func malformedFrameFaultMakesTheClientFailWithProtocolError() async throws {
        try await withLoop { loop in
            let running = try await SimRunning.start(try SimCommand.parse(["--port", "0", "--ping-interval", "0"]), on: loop)
            let url = "ws://127.0.0.1:\(running.listener.port)/websocket/services?master&domain=sim.test&version=1.0.0"
            let conn = try await WebSocketClient.connect(url: url, on: loop)  // close timeout 5 s bounds the wait below
            var events = conn.events.makeAsyncIterator()
            try await conn.sendAsync(text: String(decoding: Msg.initSession().serialized(), as: UTF8.self))
            _ = try #require(await nextMessage(&events, cid: 4))
            let id = try #require(await running.services.runtime.clientIDs.first)
            let response = await running.services.runtime.control(
                line: Array(#"{"op":"fault","kind":"malformed_frame","client":"\#(id)"}"#.utf8))
            #expect(String(decoding: response, as: UTF8.self).hasPrefix(#"{"ok":true"#))
            var info: WebSocketCloseInfo?
            while let event = await events.next() {
                if case .closed(let i) = event { info = i; break }
            }
            let closed = try #require(info)
            #expect(closed.code == .protocolError, "\(closed)")
            // The bytes came right after the 4 (frame 1): frame 2, opcode 3.
            guard case .protocolViolation(.reservedOpcode(3, let at))? = closed.error else {
                Issue.record("expected a reserved-opcode protocol violation, got \(closed)")
                await running.stop()
                return
            }
            #expect(at.frame == 2)
            await running.stop()
        }
    }

    @Test func aPortInUseExits1NamingTheOption() async throws {
        let first = try await SimSubprocess.start(["--port", "0", "--ping-interval", "0"])
        let second = try await ExecutableTests.run(["--port", String(first.port)])
        #expect(second.status == 1)
        #expect(second.stdout.isEmpty)
        #expect(second.stderr.contains("cannot listen for WebSocket clients on --host 127.0.0.1 --port \(first.port)"), "\(second.stderr)")
        let firstStatus = await first.stop()
        #expect(firstStatus == 0)
    }

    @Test func servesWSSWithTheGivenCertificate() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ca = dir.path + "/ca.pem", cert = dir.path + "/cert.pem", key = dir.path + "/key.pem"
        try openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir.path + "/ca.key", "-out", ca, "-days", "2",
                     "-subj", "/CN=sim test CA"])
        try openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", dir.path + "/req.csr", "-subj", "/CN=localhost"])
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(toFile: dir.path + "/ext.cnf", atomically: true, encoding: .utf8)
        try openssl(["x509", "-req", "-in", dir.path + "/req.csr", "-CA", ca, "-CAkey", dir.path + "/ca.key", "-CAcreateserial",
                     "-out", cert, "-days", "2", "-extfile", dir.path + "/ext.cnf"])
        let sim = try await SimSubprocess.start(["--port", "0", "--ping-interval", "0", "--tls-cert", cert, "--tls-key", key])
        #expect(sim.lines[1] == "wss://127.0.0.1:\(sim.port)/websocket/services")
        try await withLoop { loop in
            var options = WebSocketConnectOptions()
            options.tls = TLSClientConfiguration(trustRoots: .caFile(ca))
            let conn = try await WebSocketClient.connect(url: sim.lines[1], options: options, on: loop)
            var events = conn.events.makeAsyncIterator()
            try await conn.sendAsync(text: String(decoding: Msg.initSession().serialized(), as: UTF8.self))
            #expect(await nextMessage(&events, cid: 4)?.int("errCode") == 0)
            try await conn.closeAsync()
        }
        let simStatus = await sim.stop()
        #expect(simStatus == 0)
    }

    /// 1,000 concurrent clients on two loops each INIT and get their answer, while one client that
    /// never reads has megabytes of pushes stuck in its queue.
    @Test func aThousandClientsAndOneThatNeverReads() async throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let sock = dir.path + "/sim.sock"
        let sim = try await SimSubprocess.start(["--port", "0", "--ping-interval", "0", "--control", sock, "--template-bytes", "1000000"])
        let url = sim.lines[1] + "?master&domain=sim.test&version=1.0.0"
        let loops = [try EventLoop(name: "clients-a"), try EventLoop(name: "clients-b")]
        do {
            // The non-reader: never starts reading; 20 MB of pushes go its way.
            let stuck = try await WebSocketClient.connect(url: url, options: WebSocketConnectOptions(deflate: nil), on: loops[0])
            try await stuck.sendAsync(text: String(decoding: Msg.initSession().serialized(), as: UTF8.self))
            var stuckID = ""
            for _ in 0..<100 where stuckID.isEmpty {
                let clients = await unixExchange(path: sock, #"{"op":"clients"}"# + "\n")
                if clients.contains(#""state":"ready""#) { stuckID = "c1" } else { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(stuckID == "c1")
            // In five control calls of 4 MB each (one call of 20 MB can outlast the control reply's 10 s
            // wait on a loaded machine with a debug build).
            for _ in 0..<5 {
                let emitted = await unixExchange(path: sock, #"{"op":"emit","kind":"engagement","client":"c1","count":4,"bodies":false}"# + "\n")
                #expect(emitted.hasPrefix(#"{"ok":true,"sent":4"#), "\(emitted.prefix(300))")
            }

            // 1,000 connections, all open at once; at most 100 handshakes in flight so a loaded
            // machine does not hit the server's 10 s handshake timeout.
            let connections = try await withThrowingTaskGroup(of: WebSocketConnection.self) { group in
                var all: [WebSocketConnection] = []
                for i in 0..<1000 {
                    if i >= 100, let c = try await group.next() { all.append(c) }
                    group.addTask {
                        try await WebSocketClient.connect(url: url, options: WebSocketConnectOptions(connectTimeout: .seconds(60)),
                                                          on: loops[i % 2])
                    }
                }
                for try await c in group { all.append(c) }
                return all
            }
            #expect(connections.count == 1000)
            // Every one INITs at once and gets its own answer.
            let answered = await withTaskGroup(of: Bool.self) { group in
                for (i, conn) in connections.enumerated() {
                    group.addTask {
                        var events = conn.events.makeAsyncIterator()
                        let uuid = String(format: "00000000-0000-4000-8000-%012d", i)
                        guard (try? await conn.sendAsync(text: String(decoding: Msg.initSession(uuid: uuid).serialized(), as: UTF8.self))) != nil
                        else { return false }
                        let four = await nextMessage(&events, cid: 4, timeout: .seconds(60))
                        return four?.int("errCode") == 0 && four?.str("uuid") == uuid
                    }
                }
                var n = 0
                for await ok in group where ok { n += 1 }
                return n
            }
            #expect(answered == 1000)
            // The non-reader is still there, its bytes still queued (nobody waited for it).
            let clients = await unixExchange(path: sock, #"{"op":"clients"}"# + "\n")
            #expect(clients.contains(#""id":"c1""#))
            await stuck.abortAsync()
            for conn in connections { await conn.abortAsync() }
        } catch {
            Issue.record(error)  // then stop the loops and the simulator all the same
        }
        for loop in loops { await loop.shutdown() }
        let simStatus = await sim.stop()
        #expect(simStatus == 0)
    }
}

func openssl(_ arguments: [String]) throws {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    p.arguments = arguments
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    try p.runSerialized()
    p.waitForExit(timeout: .seconds(60))
    guard p.terminationStatus == 0 else {
        throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "openssl \(arguments.joined(separator: " ")) failed"])
    }
}
