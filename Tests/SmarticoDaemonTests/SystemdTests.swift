// sd_notify over a real datagram socket, and socket activation with a listening socket the test made.
import Foundation
import Testing
import SmarticoProtocol
import Transport
@testable import SmarticoDaemon

@Suite("Systemd")
struct SystemdTests {
    /// A bound datagram socket (path, or abstract when `path` starts with "@"), non-blocking.
    private func datagramSocket(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw SocketTestFailure("socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard rc == 0 else { throw SocketTestFailure("bind \(path): errno \(errno)") }
        return fd
    }

    /// The datagrams waiting on `fd` (waits up to 5 s for `count`).
    private func receive(_ fd: Int32, count: Int) async throws -> [String] {
        var messages: [String] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        try await waitUntil("\(count) datagrams", timeout: .seconds(5)) {
            while true {
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                guard n > 0 else { break }
                messages.append(String(decoding: buffer[0..<n], as: UTF8.self))
            }
            return messages.count >= count
        }
        return messages
    }

    @Test func notificationsArriveAtAPathSocket() async throws {
        let dir = try makeSocketTempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/notify"
        let fd = try datagramSocket(path)
        defer { close(fd) }
        // The environment is passed as a closure: setenv while parallel tests spawn processes is a race.
        let notifier = SystemdNotifier(environment: { $0 == "NOTIFY_SOCKET" ? path : nil })
        #expect(notifier.isEnabled)
        try notifier.ready(status: "listening on /run/smarticod/smarticod.sock")
        try notifier.status("session: ready\n(user u1)")
        try notifier.watchdog()
        try notifier.stopping()
        let messages = try await receive(fd, count: 4)
        #expect(messages == [
            "READY=1\nSTATUS=listening on /run/smarticod/smarticod.sock",
            "STATUS=session: ready (user u1)",
            "WATCHDOG=1",
            "STOPPING=1",
        ])
    }

    @Test func notificationsArriveAtAnAbstractSocket() async throws {
        let name = "@smarticod-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = try datagramSocket(name)
        defer { close(fd) }
        let notifier = SystemdNotifier(environment: { $0 == "NOTIFY_SOCKET" ? name : nil })
        try notifier.ready()
        try notifier.status("backoff: retry in 500 ms")
        #expect(try await receive(fd, count: 2) == ["READY=1", "STATUS=backoff: retry in 500 ms"])
    }

    @Test func withoutNotifySocketNothingIsSentAndBadAddressesAreNamed() throws {
        let none = SystemdNotifier(environment: { _ in nil })
        #expect(!none.isEnabled)
        try none.ready()  // no-op
        let relative = SystemdNotifier(environment: { $0 == "NOTIFY_SOCKET" ? "relative/path" : nil })
        #expect(throws: SystemdNotifyError.invalidSocketAddress("relative/path")) { try relative.ready() }
        let missing = SystemdNotifier(environment: { $0 == "NOTIFY_SOCKET" ? "/nonexistent/notify" : nil })
        #expect(throws: SystemdNotifyError.self) { try missing.ready() }
    }

    @Test func watchdogIntervalFollowsWatchdogPID() {
        let env: [String: String] = ["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "42"]
        #expect(SystemdNotifier(environment: { env[$0] }, pid: 42).watchdogInterval == .seconds(30))
        #expect(SystemdNotifier(environment: { env[$0] }, pid: 43).watchdogInterval == nil)
        #expect(SystemdNotifier(environment: { $0 == "WATCHDOG_USEC" ? "1500000" : nil }).watchdogInterval == .milliseconds(1500))
        #expect(SystemdNotifier(environment: { $0 == "WATCHDOG_USEC" ? "0" : nil }).watchdogInterval == nil)
    }

    @Test func listenFDsAreParsedWithNames() {
        let env: [String: String] = ["LISTEN_PID": "77", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "smarticod.socket:other"]
        let passed = SystemdActivation.passedSockets(unsetEnvironment: false, environment: { env[$0] }, pid: 77)
        #expect(passed == [.init(fd: 3, name: "smarticod.socket"), .init(fd: 4, name: "other")])
        #expect(SystemdActivation.passedSockets(unsetEnvironment: false, environment: { env[$0] }, pid: 78).isEmpty)
        #expect(SystemdActivation.passedSockets(unsetEnvironment: false, environment: { _ in nil }).isEmpty)
    }

    /// In-process: the test makes a listening Unix socket (as systemd would), the server adopts the
    /// descriptor and serves on it; a datagram socket among the passed ones is skipped.
    @Test func theServerAdoptsAPassedListeningSocket() async throws {
        let dir = try makeSocketTempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/activated.sock"
        let listenFD = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listenFD, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0)
        #expect(listen(listenFD, 16) == 0)
        let datagram = try datagramSocket(dir + "/dgram")
        defer { close(datagram) }
        let chosen = SystemdActivation.listeningSocket(in: [.init(fd: datagram, name: nil), .init(fd: listenFD, name: "smarticod.socket")])
        #expect(chosen == listenFD)

        let loop = try EventLoop(name: "sapi-activation")
        let server = SocketAPIServer(loop: loop, configuration: .init(), store: nil)
        let address2 = try await server.start(.adopted(fd: try #require(chosen)), handler: FakeSocketHandler())
        #expect(address2.description.contains("activated.sock"))
        let client = try await SocketTestClient.connect(path, loop: loop)
        let hello = try await client.call(#"{"id":"a","op":"hello"}"#, id: "a")
        #expect(hello["result"]?["api"] == 1)
        await client.close()
        await server.close()
        await loop.shutdown()
    }
}
