import Foundation
import Testing
@testable import Transport
import SmarticoTestSupport

/// `smartico-ws probe` as a subprocess against the Python server over wss.
@Suite("Integration: smartico-ws probe")
struct IntegrationProbeTests {
    /// The smartico-ws binary next to the test bundle (built by `swift build --build-tests`).
    static func toolPath() throws -> String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
        if dir.lastPathComponent.hasSuffix(".xctest") { dir = dir.deletingLastPathComponent() }
        let path = dir.appendingPathComponent("smartico-ws").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw PythonPeer.Missing(detail: "smartico-ws is not built at \(path); run `swift build --build-tests` first")
        }
        return path
    }

    /// Runs a program to completion on a dedicated thread (bounded), returning its status and output.
    static func run(_ path: String, _ arguments: [String], timeout: Duration = .seconds(60)) async throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.runSerialized()
        let output = Shared<[UInt8]?>(nil)
        let fd = pipe.fileHandleForReading.fileDescriptor
        Thread {
            // The pipe stays alive (its descriptor open) until EOF.
            let bytes = withExtendedLifetime(pipe) { readToEnd(fd: fd) }
            process.waitForExit()
            output.update { $0 = bytes }
        }.start()
        do {
            try await waitUntil("\(path) to exit", timeout: timeout) { output.value != nil }
        } catch {
            process.terminate()
            throw error
        }
        return (process.terminationStatus, String(decoding: output.value!, as: UTF8.self))
    }

    @Test("probe over wss: exit 0 and every step printed")
    func probeSucceeds() async throws {
        let tool = try Self.toolPath()
        let fixture = try await TLSFixture.make()
        defer { fixture.remove() }
        let server = try await PythonPeer.start("echo_server.py", ["--cert", fixture.server.chainPath, "--key", fixture.server.keyPath])
        defer { server.stop() }
        let (status, output) = try await Self.run(tool, [
            "probe", "wss://localhost:\(server.port)/probe", "--ca-file", fixture.ca.certificatePath, "--proxy", "none",
            "--header", "X-Device: test",
        ])
        #expect(status == 0, "\(output)")
        for expected in ["dns ", "localhost →", "tcp ", "connected to", "tls ", "TLSv1.3", "CN=localhost", "notAfter",
                         "upgrade ", "101 Switching Protocols", "permessage-deflate", "close ", "1000", "ok"] {
            #expect(output.contains(expected), "missing \"\(expected)\" in:\n\(output)")
        }
    }

    @Test("probe against a certificate for another name: exit 1 naming the TLS check")
    func probeWrongHost() async throws {
        let tool = try Self.toolPath()
        let ca = try await TestCertificateAuthority.make()
        defer { ca.remove() }
        let issued = try await ca.issue(commonName: "other.example", dnsNames: ["other.example"])
        let server = try await PythonPeer.start("echo_server.py", ["--cert", issued.chainPath, "--key", issued.keyPath])
        defer { server.stop() }
        let (status, output) = try await Self.run(tool, [
            "probe", "wss://localhost:\(server.port)/", "--ca-file", ca.certificatePath, "--proxy", "none", "--timeout", "10",
        ])
        #expect(status == 1, "\(output)")
        #expect(output.contains("FAILED at step tls"), "\(output)")
        #expect(output.contains("hostname mismatch"), "\(output)")
    }
}
