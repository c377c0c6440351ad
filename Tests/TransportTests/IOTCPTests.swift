import Foundation
import Testing
import COpenSSL  // TCP_KEEPIDLE & co. (netinet/tcp.h)
@testable import Transport

/// An echo server on the loop: every accepted connection sends back what it receives.
func startEchoServer(on loop: EventLoop, host: String = "127.0.0.1", tls: TLSContext? = nil) async throws -> StreamListener {
    try await loop.submit {
        let listener = try StreamListener.tcp(host: host, port: 0, tls: tls, on: loop)
        listener.onAccept = { connection in
            connection.onRead = { [unowned connection] bytes in connection.write(bytes) }
            connection.start()
        }
        return listener
    }
}

/// A TCP socket bound to 127.0.0.1:0 but not listening: connecting to its port is refused, and holding it
/// keeps another test from taking the port meanwhile.
func boundButNotListening() throws -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let rc = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
    #expect(rc == 0)
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

@Suite struct IOTCPTests {
    @Test func localhostResolvesAndConnectsOverIPv4AndIPv6() async throws {
        let addresses = try await Resolver.resolve(host: "localhost", port: 80)
        #expect(!addresses.isEmpty)
        #expect(addresses.allSatisfy { $0.port == 80 && ($0.family == AF_INET || $0.family == AF_INET6) })
        try await withLoop { loop in
            // Listen on every address "localhost" resolves to (this machine's /etc/hosts decides which),
            // and connect by name to each.
            for address in addresses {
                let listener = try await startEchoServer(on: loop, host: address.host)
                let client = try await StreamConnection.connect(
                    to: [SocketAddress(ip: address.host, port: listener.port!)!], host: "localhost",
                    port: listener.port!, on: loop)
                try await roundTrip(client, loop: loop, message: "hello \(address)")
                try await loop.submit { listener.close() }
            }
            // By name: the first resolved address family that has a listener on this port.
            let v4 = try await startEchoServer(on: loop, host: "127.0.0.1")
            let byName = try await StreamConnection.connect(host: "localhost", port: v4.port!, on: loop)
            #expect(try await loop.submit { byName.remoteAddress?.host } == "127.0.0.1")
            try await roundTrip(byName, loop: loop, message: "by name")
            // IPv6 loopback literal.
            let v6 = try await startEchoServer(on: loop, host: "::1")
            let client6 = try await StreamConnection.connect(host: "::1", port: v6.port!, on: loop)
            #expect(try await loop.submit { client6.remoteAddress?.description } == "[::1]:\(v6.port!)")
            try await roundTrip(client6, loop: loop, message: "over ipv6")
            try await loop.submit { v4.close(); v6.close() }
        }
    }

    @Test func triesAddressesInOrderUntilOneAccepts() async throws {
        try await withLoop { loop in
            let v6 = try await startEchoServer(on: loop, host: "::1")
            let port = v6.port!
            // Nothing listens on 127.0.0.1:port (a different socket family; almost surely free).
            let client = try await StreamConnection.connect(
                to: [SocketAddress(ip: "127.0.0.1", port: port)!, SocketAddress(ip: "::1", port: port)!],
                host: "localhost", port: port, on: loop)
            #expect(try await loop.submit { client.remoteAddress?.family } == AF_INET6)
            try await roundTrip(client, loop: loop, message: "second address")
            try await loop.submit { v6.close() }
        }
    }

    @Test func refusedConnectionNamesHostAndPort() async throws {
        let (fd, port) = try boundButNotListening()
        defer { close(fd) }
        try await withLoop { loop in
            let error = await #expect(throws: SocketError.self) {
                _ = try await StreamConnection.connect(host: "127.0.0.1", port: port, on: loop)
            }
            guard case .connectFailed(let host, let failedPort, let attempts)? = error else {
                Issue.record("expected connectFailed, got \(String(describing: error))")
                return
            }
            #expect(host == "127.0.0.1" && failedPort == port)
            #expect(attempts.first?.errno == ECONNREFUSED)
            let text = "\(error!)"
            #expect(text.contains("connect to 127.0.0.1:\(port) failed"))
            #expect(text.contains("Connection refused"))
        }
    }

    @Test func unknownHostIsADNSError() async throws {
        try await withLoop { loop in
            let error = await #expect(throws: SocketError.self) {
                _ = try await StreamConnection.connect(
                    host: "no-such-host.invalid", port: 443, options: TCPOptions(connectTimeout: .seconds(5)), on: loop)
            }
            guard case .dns(let host, let port, _)? = error else {
                Issue.record("expected dns error, got \(String(describing: error))")
                return
            }
            #expect(host == "no-such-host.invalid" && port == 443)
            #expect("\(error!)".hasPrefix("dns: cannot resolve \"no-such-host.invalid\" (port 443)"))
        }
    }

    /// A listener with backlog 0 that never accepts: once its queue holds a connection, the kernel drops
    /// further SYNs, so a new connect neither succeeds nor is refused (loopback has no unroutable address,
    /// so this is how a timeout is made without leaving the machine).
    @Test func connectTimesOutAgainstAFullBacklog() async throws {
        let listenFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listenFD) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listenFD, $0, length) } }
        #expect(listen(listenFD, 0) == 0)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listenFD, $0, &length) } }
        let port = Int(UInt16(bigEndian: address.sin_port))
        var fillers: [Int32] = []
        defer { fillers.forEach { close($0) } }
        for _ in 0..<3 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue), 0)
            _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) } }
            fillers.append(fd)
        }
        try await Task.sleep(for: .milliseconds(100))
        try await withLoop { loop in
            let start = ContinuousClock.now
            let error = await #expect(throws: SocketError.self) {
                _ = try await StreamConnection.connect(
                    host: "127.0.0.1", port: port, options: TCPOptions(connectTimeout: .milliseconds(300)), on: loop)
            }
            let elapsed = ContinuousClock.now - start
            guard case .connectTimeout(let host, let failedPort, let timeout, .tcp, let attempts)? = error else {
                Issue.record("expected connectTimeout, got \(String(describing: error))")
                return
            }
            #expect(host == "127.0.0.1" && failedPort == port && timeout == .milliseconds(300))
            #expect(attempts.count == 1 && attempts[0].errno == nil)
            #expect(elapsed < .seconds(5))
            #expect("\(error!)" == "connect to 127.0.0.1:\(port) timed out after 300ms while connecting (127.0.0.1:\(port): timed out)")
        }
    }

    @Test func sixteenMebibytesBothWaysWithWriteQueuing() async throws {
        let size = 16 * 1024 * 1024
        let clientData = patternBytes(count: size, seed: 1)
        let serverData = patternBytes(count: size, seed: 2)
        try await withLoop { loop in
            let serverRecorder = StreamRecorder()
            let serverQueued = Shared(0)
            let listener = try await loop.submit {
                let listener = try StreamListener.tcp(host: "127.0.0.1", port: 0, on: loop)
                listener.onAccept = { connection in
                    serverRecorder.attach(connection)
                    connection.write(serverData)
                    serverQueued.update { $0 = connection.queuedByteCount }
                }
                return listener
            }
            let client = try await StreamConnection.connect(host: "127.0.0.1", port: listener.port!, on: loop)
            let clientRecorder = StreamRecorder()
            let drained = Shared(false)
            let clientQueued = try await loop.submit {
                clientRecorder.attach(client)
                client.onWritable = { drained.update { $0 = true } }
                client.write(clientData)
                return client.queuedByteCount
            }
            // 16 MiB does not fit in socket buffers: most of it waits in the queue.
            #expect(clientQueued > 0)
            try await waitUntil("both directions", timeout: .seconds(60)) {
                serverRecorder.receivedCount.value == size && clientRecorder.receivedCount.value == size
            }
            #expect(serverQueued.value > 0)
            #expect(serverRecorder.received.value == clientData)
            #expect(clientRecorder.received.value == serverData)
            try await waitUntil("client queue drained") { drained.value }
            #expect(try await loop.submit { client.queuedByteCount } == 0)
            try await loop.submit { client.close(); listener.close() }
            try await waitUntil("server saw close") { serverRecorder.isClosed }
            guard case .peerClosed? = serverRecorder.closeReason.value else {
                Issue.record("server close reason: \(String(describing: serverRecorder.closeReason.value))")
                return
            }
            #expect(clientRecorder.closeCalls.value == 1)
            if case .closedLocally? = clientRecorder.closeReason.value {} else { Issue.record("client reason") }
        }
    }

    @Test func peerClosingMidTransferEndsTheConnectionOnceWithoutSIGPIPE() async throws {
        try await withLoop { loop in
            let serverGot = Shared(0)
            let listener = try await loop.submit {
                let listener = try StreamListener.tcp(host: "127.0.0.1", port: 0, on: loop)
                listener.onAccept = { connection in
                    connection.onRead = { [unowned connection] bytes in
                        if serverGot.update({ $0 += bytes.count; return $0 }) >= 1 << 20 { connection.close() }
                    }
                    connection.start()
                }
                return listener
            }
            let client = try await StreamConnection.connect(host: "127.0.0.1", port: listener.port!, on: loop)
            let recorder = StreamRecorder(keepBytes: false)
            try await loop.submit {
                recorder.attach(client)
                client.write(patternBytes(count: 16 << 20))
            }
            try await waitUntil("client closed") { recorder.isClosed }
            try await Task.sleep(for: .milliseconds(100))
            #expect(recorder.closeCalls.value == 1)
            switch recorder.closeReason.value {
            case .failed(let error)?:
                #expect([ECONNRESET, EPIPE].contains(error.errno ?? 0), "\(error)")
                #expect("\(error)".contains("127.0.0.1:\(listener.port!)"))
            case .peerClosed?:
                break  // EOF seen before the reset: also a clean end for the client
            default:
                Issue.record("unexpected close reason \(String(describing: recorder.closeReason.value))")
            }
            // Writes after the end are ignored, not fatal.
            try await loop.submit { client.write([1, 2, 3]); #expect(!client.isActive) }
            try await loop.submit { listener.close() }
        }
    }

    @Test func thousandConcurrentConnectionsOnOneLoop() async throws {
        let count = 1_000
        try await withLoop { loop in
            let accepted = Shared(0)
            let serverClosed = Shared(0)
            let listener = try await loop.submit {
                let listener = try StreamListener.tcp(host: "127.0.0.1", port: 0, backlog: 2048, on: loop)
                listener.onAccept = { connection in
                    accepted.update { $0 += 1 }
                    connection.onRead = { [unowned connection] bytes in connection.write(bytes) }
                    connection.onClose = { _ in serverClosed.update { $0 += 1 } }
                    connection.start()
                }
                return listener
            }
            let port = listener.port!
            let echoed = Shared(0)
            let clients = try await withThrowingTaskGroup(of: StreamConnection.self) { group in
                for _ in 0..<count {
                    group.addTask { try await StreamConnection.connect(host: "127.0.0.1", port: port, on: loop) }
                }
                var all: [StreamConnection] = []
                for try await client in group { all.append(client) }
                return all
            }
            #expect(clients.count == count)
            try await loop.submit {
                for (index, client) in clients.enumerated() {
                    let message = Array("message \(index)".utf8)
                    var got: [UInt8] = []
                    client.onRead = { bytes in
                        got.append(contentsOf: bytes)
                        if got == message { echoed.update { $0 += 1 } }
                    }
                    client.start()
                    client.write(message)
                }
            }
            try await waitUntil("all echoes", timeout: .seconds(60)) { echoed.value == count }
            #expect(accepted.value == count)
            try await loop.submit {
                for client in clients { client.close() }
                listener.close()
            }
            try await waitUntil("server side closed", timeout: .seconds(30)) { serverClosed.value == count }
        }
    }

    @Test func slowPeerOverflowingTheWriteQueueLimitIsDropped() async throws {
        try await withLoop { loop in
            let listener = try await loop.submit {
                let listener = try StreamListener.tcp(host: "127.0.0.1", port: 0, on: loop)
                listener.onAccept = { connection in
                    connection.onClose = { _ in }
                    connection.start()
                    connection.pauseReading()  // a peer that never reads
                }
                return listener
            }
            let client = try await StreamConnection.connect(host: "127.0.0.1", port: listener.port!, on: loop)
            let recorder = StreamRecorder(keepBytes: false)
            let chunk = [UInt8](repeating: 0x55, count: 256 * 1024)
            let peer = "127.0.0.1:\(listener.port!)"
            try await loop.submit {
                recorder.attach(client)
                client.writeQueueLimit = 4 << 20
                // Keep writing while the peer does not read; the limit must end it.
                for _ in 0..<256 where client.isActive { client.write(chunk) }
            }
            try await waitUntil("dropped") { recorder.isClosed }
            guard case .failed(.writeQueueOverflow(let name, let queued, let limit))? = recorder.closeReason.value else {
                Issue.record("expected writeQueueOverflow, got \(String(describing: recorder.closeReason.value))")
                return
            }
            #expect(name == peer && limit == 4 << 20 && queued > limit)
            try await loop.submit { listener.close() }
        }
    }

    @Test func socketOptionsAreApplied() async throws {
        try await withLoop { loop in
            let listener = try await startEchoServer(on: loop)
            let options = TCPOptions(
                noDelay: true, keepAlive: .init(idle: .seconds(42), interval: .seconds(7), count: 3))
            let client = try await StreamConnection.connect(host: "127.0.0.1", port: listener.port!, options: options, on: loop)
            let values = try await loop.submit { () -> [Int32] in
                let fd = client.fileDescriptor
                func option(_ level: Int32, _ name: Int32) -> Int32 {
                    var value: Int32 = -1
                    var length = socklen_t(4)
                    _ = getsockopt(fd, level, name, &value, &length)
                    return value
                }
                let tcp = Int32(IPPROTO_TCP)
                return [
                    option(tcp, TCP_NODELAY) != 0 ? 1 : 0, option(SOL_SOCKET, SO_KEEPALIVE) != 0 ? 1 : 0,
                    option(tcp, TCP_KEEPIDLE), option(tcp, TCP_KEEPINTVL), option(tcp, TCP_KEEPCNT),
                    fcntl(fd, F_GETFD) & FD_CLOEXEC, fcntl(fd, F_GETFL) & O_NONBLOCK != 0 ? 1 : 0,
                ]
            }
            #expect(values == [1, 1, 42, 7, 3, FD_CLOEXEC, 1])
            try await loop.submit { client.close(); #expect(client.fileDescriptor == -1); listener.close() }
        }
    }

    @Test func systemdListenFDsFollowsSdListenFdsRules() {
        let env = ["LISTEN_PID": "4242", "LISTEN_FDS": "2"]
        #expect(StreamListener.systemdListenFDs(environment: { env[$0] }, pid: 4242) == [3, 4])
        #expect(StreamListener.systemdListenFDs(environment: { env[$0] }, pid: 1) == [], "fds meant for another process")
        #expect(StreamListener.systemdListenFDs(environment: { _ in nil }, pid: 4242) == [])
    }

    @Test func pauseAndResumeReading() async throws {
        try await withLoop { loop in
            let listener = try await startEchoServer(on: loop)
            let client = try await StreamConnection.connect(host: "127.0.0.1", port: listener.port!, on: loop)
            let recorder = StreamRecorder()
            try await loop.submit {
                recorder.attach(client)
                client.pauseReading()
                client.write(Array("while paused".utf8))
            }
            try await Task.sleep(for: .milliseconds(200))
            #expect(recorder.receivedCount.value == 0)
            try await loop.submit { client.resumeReading() }
            try await waitUntil("echo after resume") { recorder.received.value == Array("while paused".utf8) }
            try await loop.submit { client.close(); listener.close() }
        }
    }

    @Test func halfCloseLetsThePeerFinishItsReply() async throws {
        try await withLoop { loop in
            // Server: collects until EOF, then replies with the byte count and closes.
            let listener = try await loop.submit {
                let listener = try StreamListener.tcp(host: "127.0.0.1", port: 0, on: loop)
                listener.onAccept = { connection in
                    var total = 0
                    connection.onRead = { total += $0.count }
                    connection.onInputEnded = { [unowned connection] in
                        connection.write(Array("got \(total)".utf8))
                        connection.closeAfterFlush()
                    }
                    connection.start()
                }
                return listener
            }
            let client = try await StreamConnection.connect(host: "127.0.0.1", port: listener.port!, on: loop)
            let recorder = StreamRecorder()
            try await loop.submit {
                recorder.attach(client)
                client.write(patternBytes(count: 100_000))
                client.shutdownOutput()
            }
            try await waitUntil("reply and close") { recorder.isClosed }
            #expect(String(decoding: recorder.received.value, as: UTF8.self) == "got 100000")
            if case .peerClosed? = recorder.closeReason.value {} else {
                Issue.record("expected peerClosed, got \(String(describing: recorder.closeReason.value))")
            }
            try await loop.submit { listener.close() }
        }
    }
}

/// Writes `message`, expects it echoed back, leaves the connection open (handlers replaced).
func roundTrip(_ connection: StreamConnection, loop: EventLoop, message: String) async throws {
    let recorder = StreamRecorder()
    try await loop.submit {
        recorder.attach(connection)
        connection.write(Array(message.utf8))
    }
    try await waitUntil("echo of \(message)") { recorder.received.value.count >= message.utf8.count }
    #expect(String(decoding: recorder.received.value, as: UTF8.self) == message)
}
