import Foundation
import COpenSSL  // SOCK_STREAM as IOTCPTests uses it (sys/socket.h through the shim)
import Testing
@testable import Transport

@Suite struct IOUnixTests {
    @Test func listenConnectExchangeAndPeerCredentials() async throws {
        let dir = try TestDirectory.make()
        defer { dir.remove() }
        let path = dir.path + "/api.sock"
        try await withLoop { loop in
            let serverCredentials = Shared<PeerCredentials?>(nil)
            let serverPeerName = Shared("")
            let listener = try await loop.submit {
                let listener = try StreamListener.unix(path: path, mode: 0o600, on: loop)
                listener.onAccept = { connection in
                    serverCredentials.update { $0 = connection.peerCredentials() }
                    serverPeerName.update { $0 = connection.peerName }
                    connection.onRead = { [unowned connection] bytes in connection.write(bytes) }
                    connection.start()
                }
                return listener
            }
            var info = stat()
            #expect(stat(path, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o600)
            let client = try await StreamConnection.connect(unixPath: path, on: loop)
            try await roundTrip(client, loop: loop, message: "{\"op\":\"ping\"}\n")
            let expected = PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())
            #expect(serverCredentials.value == expected)
            #expect(serverPeerName.value == "unix:\(path) peer pid \(getpid()) uid \(getuid())")
            #expect(try await loop.submit { client.peerCredentials() } == expected)
            try await loop.submit {
                client.close()
                listener.close()
            }
            #expect(access(path, F_OK) != 0, "close() removes the socket file")
        }
    }

    @Test func staleSocketFileIsReplacedButALiveOneIsNot() async throws {
        let dir = try TestDirectory.make()
        defer { dir.remove() }
        let path = dir.path + "/stale.sock"
        // A socket file left behind by a dead process: bound, then closed without unlink.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(rc == 0)
        close(fd)
        #expect(access(path, F_OK) == 0)
        try await withLoop { loop in
            let listener = try await loop.submit {
                let listener = try StreamListener.unix(path: path, on: loop)
                listener.onAccept = { connection in
                    connection.onRead = { [unowned connection] bytes in connection.write(bytes) }
                    connection.start()
                }
                return listener
            }
            let client = try await StreamConnection.connect(unixPath: path, on: loop)
            try await roundTrip(client, loop: loop, message: "fresh listener")
            // A second daemon must not steal the socket of a live one.
            let error = await #expect(throws: SocketError.self) {
                try await loop.submit { _ = try StreamListener.unix(path: path, on: loop) }
            }
            #expect(error?.errno == EADDRINUSE, "\(String(describing: error))")
            #expect("\(error!)".contains(path))
            try await loop.submit { client.close(); listener.close() }
            // Not a socket: refused, never deleted.
            let plain = dir.path + "/plain-file"
            _ = FileManager.default.createFile(atPath: plain, contents: Data("keep me".utf8))
            await #expect(throws: SocketError.self) {
                try await loop.submit { _ = try StreamListener.unix(path: plain, on: loop) }
            }
            #expect(FileManager.default.contents(atPath: plain) == Data("keep me".utf8))
        }
    }

    @Test func adoptsAnAlreadyListeningDescriptor() async throws {
        let dir = try TestDirectory.make()
        defer { dir.remove() }
        let path = dir.path + "/activated.sock"
        // What systemd does for a .socket unit: create, bind, listen, pass the fd.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(listen(fd, 16) == 0)
        try await withLoop { loop in
            let listener = try await loop.submit {
                let listener = try StreamListener.adopt(fd: fd, on: loop)
                listener.onAccept = { connection in
                    connection.onRead = { [unowned connection] bytes in connection.write(bytes) }
                    connection.start()
                }
                return listener
            }
            #expect(listener.localAddress == .unix(path: path))
            let flags = fcntl(fd, F_GETFL)
            #expect(flags & O_NONBLOCK != 0)
            #expect(fcntl(fd, F_GETFD) & FD_CLOEXEC != 0)
            let client = try await StreamConnection.connect(unixPath: path, on: loop)
            try await roundTrip(client, loop: loop, message: "via adopted fd")
            try await loop.submit { client.close(); listener.close() }
            // A socket that is not listening is refused (the listener owned and closed it; not checked
            // here: parallel tests may reuse the number at once).
            let notListening = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            let error = await #expect(throws: SocketError.self) {
                try await loop.submit { _ = try StreamListener.adopt(fd: notListening, on: loop) }
            }
            #expect("\(error!)".contains("is not a listening stream socket"))
        }
    }

    @Test func connectingToAMissingSocketNamesThePath() async throws {
        let dir = try TestDirectory.make()
        defer { dir.remove() }
        let path = dir.path + "/nobody.sock"
        try await withLoop { loop in
            let error = await #expect(throws: SocketError.self) {
                _ = try await StreamConnection.connect(unixPath: path, on: loop)
            }
            #expect(error?.errno == ENOENT)
            #expect("\(error!)" == "connect to \(path): No such file or directory (errno 2)")
        }
    }
}
