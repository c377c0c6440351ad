// The systemd units of systemd/: what daemon.md requires of them, checked always; and
// `systemd-analyze verify` / `security --offline=true` run for real when the tool is installed.
import Foundation
import Testing
import SmarticoTestSupport
@testable import SmarticoDaemon

/// `systemd-analyze`, when installed.
let systemdAnalyzePath: String? = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze", "/usr/local/bin/systemd-analyze"]
    .first { FileManager.default.isExecutableFile(atPath: $0) }

/// `systemd-sysusers`, when installed.
let systemdSysusersPath: String? = ["/usr/bin/systemd-sysusers", "/bin/systemd-sysusers"]
    .first { FileManager.default.isExecutableFile(atPath: $0) }

@Suite("smarticoctl: systemd units")
struct CtlSystemdUnitTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let unitDir = packageRoot.appendingPathComponent("systemd")

    /// `key=value` settings of a unit file, in order (comments and sections dropped).
    static func settings(_ name: String) throws -> [(String, String)] {
        let text = try String(contentsOf: unitDir.appendingPathComponent(name), encoding: .utf8)
        return text.split(separator: "\n").compactMap { line in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard !trimmed.hasPrefix("#"), !trimmed.hasPrefix("["), let eq = trimmed.firstIndex(of: "=") else { return nil }
            return (String(trimmed[..<eq]), String(trimmed[trimmed.index(after: eq)...]))
        }
    }

    @Test func theUnitsSayWhatDaemonMdRequires() throws {
        let service = try Self.settings("smarticod.service")
        func values(_ key: String) -> [String] { service.filter { $0.0 == key }.map(\.1) }
        #expect(values("Type") == ["notify"])
        #expect(values("NotifyAccess") == ["main"])
        #expect(!values("WatchdogSec").isEmpty)
        #expect(values("Restart") == ["on-failure"])
        #expect(values("RestartPreventExitStatus") == ["78 73"])
        #expect(values("User") == ["smarticod"])
        #expect(values("RuntimeDirectory") == ["smarticod"])
        #expect(values("StateDirectory") == ["smarticod"])
        #expect(values("ConfigurationDirectory") == ["smarticod"])
        // The daemon reads the configuration from the default path and keeps its state where the
        // configuration's default says.
        #expect(values("ExecStart").first?.hasSuffix("--config \(ConfigLoader.defaultPath)") == true)
        #expect(DaemonConfig.defaultStateDir == "/var/lib/smarticod")
        for key in ["NoNewPrivileges", "ProtectHome", "PrivateTmp", "PrivateDevices", "MemoryDenyWriteExecute",
                    "LockPersonality", "RestrictNamespaces", "ProtectKernelTunables", "ProtectKernelModules",
                    "ProtectKernelLogs", "ProtectClock", "ProtectHostname", "ProtectControlGroups", "RestrictSUIDSGID"] {
            #expect(values(key) == ["yes"], "\(key)")
        }
        #expect(values("ProtectSystem") == ["strict"])
        #expect(values("CapabilityBoundingSet") == [""])
        #expect(values("RestrictAddressFamilies") == ["AF_UNIX AF_INET AF_INET6"])
        #expect(values("SystemCallFilter").first == "@system-service")
        // Bounded memory (docs/operations.md, "Memory limits"): a soft limit below the hard one.
        let high = values("MemoryHigh").first.flatMap(Self.megabytes)
        let max = values("MemoryMax").first.flatMap(Self.megabytes)
        #expect(high != nil && max != nil && high! < max!, "MemoryHigh=\(values("MemoryHigh")) MemoryMax=\(values("MemoryMax"))")

        let socket = try Self.settings("smarticod.socket")
        func socketValues(_ key: String) -> [String] { socket.filter { $0.0 == key }.map(\.1) }
        #expect(socketValues("ListenStream") == [DaemonConfig.Socket.defaultPath])
        #expect(socketValues("SocketMode") == ["0660"])
        #expect(socketValues("SocketGroup") == ["smarticod"])
        #expect(socketValues("Service") == ["smarticod.service"])

        let sysusers = try String(contentsOf: Self.unitDir.appendingPathComponent("smarticod.sysusers"), encoding: .utf8)
        #expect(sysusers.split(separator: "\n").contains { $0.hasPrefix("u smarticod ") })
    }

    /// `96M` → 96; nil for anything else (the unit uses whole megabytes).
    static func megabytes(_ value: String) -> Int? {
        guard value.hasSuffix("M") else { return nil }
        return Int(value.dropLast())
    }

    /// The units with ExecStart pointing at the smarticod built with the tests (verify checks
    /// that the binary exists), in a fresh directory.
    static func unitsWithBuiltBinary() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("units-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let binary = try BuiltExecutable.find("smarticod").path
        let service = try String(contentsOf: unitDir.appendingPathComponent("smarticod.service"), encoding: .utf8)
        #expect(service.contains("ExecStart=/usr/sbin/smarticod "))
        try service.replacingOccurrences(of: "ExecStart=/usr/sbin/smarticod ", with: "ExecStart=\(binary) ")
            .write(to: dir.appendingPathComponent("smarticod.service"), atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(at: unitDir.appendingPathComponent("smarticod.socket"), to: dir.appendingPathComponent("smarticod.socket"))
        return dir
    }

    @Test(.enabled(if: systemdAnalyzePath != nil, "systemd-analyze is not installed here: the units were NOT verified"))
    func systemdAnalyzeVerifyAcceptsBothUnits() async throws {
        let dir = try Self.unitsWithBuiltBinary()
        defer { try? FileManager.default.removeItem(at: dir) }
        // --man=no: the man page of Documentation= is not installed here; scripts/check-package.sh
        // verifies the units again in the package's unpacked root, with the man page found there.
        let r = try await BuiltExecutable.run(
            URL(fileURLWithPath: systemdAnalyzePath!),
            ["verify", "--man=no", dir.appendingPathComponent("smarticod.service").path, dir.appendingPathComponent("smarticod.socket").path],
            environment: ["PATH": "/usr/bin:/bin", "SYSTEMD_LOG_COLOR": "0"])
        #expect(r.status == 0 && !r.signaled, "\(r)")
        #expect(r.stderr.isEmpty, "warnings: \(r.stderr)")
    }

    @Test(.enabled(if: systemdSysusersPath != nil, "systemd-sysusers is not installed here: the sysusers.d file was NOT applied"))
    func theSysusersFileCreatesTheUserAndGroup() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("sysusers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("etc"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let r = try await BuiltExecutable.run(
            URL(fileURLWithPath: systemdSysusersPath!),
            ["--root=\(root.path)", Self.unitDir.appendingPathComponent("smarticod.sysusers").path],
            environment: ["PATH": "/usr/bin:/bin", "SYSTEMD_LOG_COLOR": "0"])
        #expect(r.status == 0 && !r.signaled, "\(r)")
        let passwd = try String(contentsOf: root.appendingPathComponent("etc/passwd"), encoding: .utf8)
        let group = try String(contentsOf: root.appendingPathComponent("etc/group"), encoding: .utf8)
        let user = try #require(passwd.split(separator: "\n").first { $0.hasPrefix("smarticod:") }, "\(passwd)")
        let fields = user.split(separator: ":", omittingEmptySubsequences: false)
        #expect(fields.count == 7)
        #expect(fields[5] == "/var/lib/smarticod")
        #expect(fields[6].hasSuffix("nologin"))
        // A system account (below 1000 on Debian), and its primary group is the socket's group.
        let uid = try #require(Int(fields[2]))
        #expect(uid > 0 && uid < 1000)
        let smarticodGroup = try #require(group.split(separator: "\n").first { $0.hasPrefix("smarticod:") }, "\(group)")
        #expect(smarticodGroup.split(separator: ":", omittingEmptySubsequences: false)[2] == fields[3])
    }

    @Test(.enabled(if: systemdAnalyzePath != nil, "systemd-analyze is not installed here: the service's exposure was NOT rated"))
    func systemdAnalyzeSecurityRatesTheService2OrLower() async throws {
        let r = try await BuiltExecutable.run(
            URL(fileURLWithPath: systemdAnalyzePath!),
            ["security", "--offline=true", "--no-pager", Self.unitDir.appendingPathComponent("smarticod.service").path],
            environment: ["PATH": "/usr/bin:/bin", "SYSTEMD_LOG_COLOR": "0", "SYSTEMD_COLORS": "0"])
        #expect(r.status == 0 && !r.signaled, "\(r)")
        let marker = "Overall exposure level for smarticod.service: "
        let line = try #require(r.stdout.split(separator: "\n").first { $0.contains(marker) }, "\(r)")
        let rest = line[line.range(of: marker)!.upperBound...]
        let score = try #require(Double(rest.prefix { $0 == "." || $0.isNumber }), "\(line)")
        #expect(score <= 2.0, "\(line)")
    }
}
