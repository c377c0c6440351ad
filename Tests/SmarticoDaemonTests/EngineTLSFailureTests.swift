import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The built `smarticod` against the built `smartico-sim` serving wss:// with a certificate the
/// daemon does not trust: the failure is a `warning`, `status.last_error` names it (also in
/// `smarticoctl status`), and it is kept after a reload with the right CA brings the session up.
@Suite("Engine: TLS failure")
struct EngineTLSFailureTests {
    @Test func untrustedCertificateIsAWarningAndLastErrorKeptAfterRecovery() async throws {
        let setup = try DaemonSetup()
        defer { setup.remove() }
        // Two self-signed certificates for 127.0.0.1: the simulator serves `served`; the daemon
        // trusts `other` first (a wrong CA file), then `served`.
        let served = try await Self.selfSigned(dir: setup.dir, name: "served")
        let other = try await Self.selfSigned(dir: setup.dir, name: "other")
        let sim = try await SimProcess.start(dir: setup.dir, extra: ["--tls-cert", served.cert, "--tls-key", served.key])
        #expect(sim.serverURL.hasPrefix("wss://"), "\(sim.serverURL)")

        try setup.writeConfig(url: sim.serverURL, logLevel: "warning")
        try Self.setCAFile(setup.configPath, other.cert)
        let client = try await setup.start()
        defer { client.close() }

        var status: JSONValue = .null
        let failed = try await eventually {
            status = try await client.ok("status")
            return status["last_error"]?["code"] == .string("tls_error")
        }
        #expect(failed, "status \(status); log:\n\(setup.log)")
        #expect(status["state"] != .string("ready"))
        let message = status["last_error"]?["message"]?.stringValue ?? ""
        #expect(message.lowercased().contains("certificate"), "last_error.message: \(message)")
        #expect((status["last_error"]?["at_ms"]?.int64Value ?? 0) > 0)
        // Logged at warning (the configured level writes nothing below it), naming the failure.
        // A line is "<timestamp> <level> <label>: …".
        let levels = setup.log.split(separator: "\n").filter { $0.contains("tls_error") }
            .map { String($0.split(separator: " ").dropFirst().first ?? "") }
        #expect(!levels.isEmpty && levels.allSatisfy { $0 == "warning" || $0 == "error" }, "levels \(levels); log:\n\(setup.log)")
        // smarticoctl status shows it to the operator.
        let shown = try await runCtl(["status", "--socket", setup.socketPath])
        #expect(shown.status == 0 && shown.stdout.contains("last error") && shown.stdout.contains("tls_error"), "\(shown)")

        // Fixed: the right CA and a reload; the session comes up and the error stays on record.
        try Self.setCAFile(setup.configPath, served.cert)
        setup.daemon?.signal(SIGHUP)
        let ready = try await eventually(timeout: .seconds(20)) { try await client.ok("status")["state"] == .string("ready") }
        #expect(ready, "log:\n\(setup.log)")
        let after = try await client.ok("status")
        #expect(after["last_error"]?["code"] == .string("tls_error"), "\(after)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }

    /// Sets `server.tls.ca_file` in the configuration file at `path`.
    static func setCAFile(_ path: String, _ ca: String) throws {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        guard var config = try JSONValue(parsing: text).objectValue, var server = config["server"]?.objectValue else {
            throw EngineTestError("configuration \(path) is not an object with `server`")
        }
        server["tls"] = .object(["ca_file": .string(ca)])
        config["server"] = .object(server)
        try Data(config.serialized()).write(to: URL(fileURLWithPath: path))
    }

    /// A self-signed EC certificate for 127.0.0.1 made by the `openssl` command.
    static func selfSigned(dir: String, name: String) async throws -> (cert: String, key: String) {
        let cert = "\(dir)/\(name).pem", key = "\(dir)/\(name).key"
        let run = try await BuiltExecutable.run(
            URL(fileURLWithPath: "/usr/bin/openssl"),
            ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1", "-addext", "basicConstraints=critical,CA:TRUE"],
            timeout: .seconds(30))
        guard run.status == 0 else { throw EngineTestError("openssl req failed: \(run)") }
        return (cert, key)
    }
}
