import Foundation
import Testing
@testable import SmarticoDaemon

/// `DaemonConfig.hostProblems(socketDirectory:)`: what `--check-config` checks on this machine
/// without the network, against real files and directories.
@Suite("Config: host checks")
struct ConfigHostChecksTests {
    static func config(_ json: String) throws -> DaemonConfig {
        try ConfigLoader.decode(Array(json.utf8), source: "test.json")
    }

    @Test func aGoodConfigHasNoHostProblem() throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let ca = dir.appendingPathComponent("ca.pem")
        try Data("-----BEGIN CERTIFICATE-----\n".utf8).write(to: ca)
        let c = try Self.config("""
            {"server": {"label_key": "\(ConfigTestSupport.validKey)", "tls": {"ca_file": "\(ca.path)"}},
             "socket": {"path": "\(dir.path)/not/yet/there/d.sock"}}
            """)
        #expect(c.hostProblems(socketDirectory: true) == [])
        // Only checked: nothing is created.
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("not").path))
    }

    @Test func aMissingCAFileIsAnErrorNamingPathAndErrno() throws {
        let c = try Self.config("""
            {"server": {"label_key": "\(ConfigTestSupport.validKey)", "tls": {"ca_file": "/nonexistent/ca.pem"}}}
            """)
        let problems = c.hostProblems(socketDirectory: false)
        #expect(problems.map(\.key) == ["server.tls.ca_file"])
        #expect(problems.first?.severity == .error)
        #expect(problems.first?.message.contains("cannot read /nonexistent/ca.pem: No such file or directory") == true)
    }

    @Test func aCAFileThatIsADirectoryOrUnderAFileIsAnError() throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("f")
        try Data().write(to: file)
        for (path, reason) in [(dir.path, "is a directory"), (file.path + "/ca.pem", "Not a directory")] {
            let c = try Self.config("""
                {"server": {"label_key": "\(ConfigTestSupport.validKey)", "tls": {"ca_file": "\(path)"}}}
                """)
            let problems = c.hostProblems(socketDirectory: false)
            #expect(problems.map(\.key) == ["server.tls.ca_file"])
            #expect(problems.first?.message.contains("cannot read \(path): \(reason)") == true, "\(problems)")
        }
    }

    @Test func aSocketDirectoryUnderARegularFileIsAnError() throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("f")
        try Data().write(to: file)
        let c = try Self.config("""
            {"server": {"label_key": "\(ConfigTestSupport.validKey)"}, "socket": {"path": "\(file.path)/a/b/d.sock"}}
            """)
        let problems = c.hostProblems(socketDirectory: true)
        #expect(problems.map(\.key) == ["socket.path"])
        #expect(problems.first?.message == "the socket's directory \(file.path)/a/b cannot be created: \(file.path) is not a directory")
        // At start the daemon checks it itself (exit 73): not a configuration problem then.
        #expect(c.hostProblems(socketDirectory: false) == [])
    }

    @Test func thePlaceholderKeyIsAnErrorExceptAgainstLoopback() throws {
        let placeholder = "00000000-0000-0000-0000-000000000000-2"
        let remote = try Self.config(#"{"server": {"label_key": "\#(placeholder)"}}"#).hostProblems(socketDirectory: false)
        #expect(remote.map(\.key) == ["server.label_key"])
        #expect(remote.first?.severity == .error)
        #expect(remote.first?.message.contains("put the label's real key") == true)
        for url in ["ws://127.0.0.1:8765/websocket/services", "ws://localhost:1/x", "wss://[::1]:443/x"] {
            let local = try Self.config(#"{"server": {"label_key": "\#(placeholder)", "url": "\#(url)"}}"#).hostProblems(socketDirectory: false)
            #expect(local.map(\.severity) == [.warning], "\(url): \(local)")
        }
        // Without a suffix too.
        let bare = try Self.config(#"{"server": {"label_key": "00000000-0000-0000-0000-000000000000"}}"#).hostProblems(socketDirectory: false)
        #expect(bare.map(\.key) == ["server.label_key"])
    }

    @Test func plainWebSocketToARemoteHostIsAWarning() throws {
        let remote = try Self.config("""
            {"server": {"label_key": "\(ConfigTestSupport.validKey)", "url": "ws://10.0.0.5:8080/websocket/services"}}
            """).hostProblems(socketDirectory: false)
        #expect(remote.map(\.key) == ["server.url"])
        #expect(remote.first?.severity == .warning)
        #expect(remote.first?.message.contains("ws:// to 10.0.0.5") == true)
        for url in ["ws://127.0.0.1:1/x", "wss://smartico.example/x"] {
            let ok = try Self.config(#"{"server": {"label_key": "\#(ConfigTestSupport.validKey)", "url": "\#(url)"}}"#)
            #expect(ok.hostProblems(socketDirectory: false) == [], "\(url)")
        }
    }

    @Test func loopbackHosts() {
        for host in ["localhost", "127.0.0.1", "127.1.2.3", "::1", "a.localhost"] { #expect(DaemonConfig.isLoopback(host: host), "\(host)") }
        for host in ["128.0.0.1", "127.0.0", "localhost.example", "::2", "10.0.0.1"] { #expect(!DaemonConfig.isLoopback(host: host), "\(host)") }
    }
}
