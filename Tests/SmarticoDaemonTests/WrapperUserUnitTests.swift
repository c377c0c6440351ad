// The systemd *user* unit of smartico-wrapper (systemd/user/smartico-wrapper.service): what the
// wrapper needs of it, checked always; and `systemd-analyze --user verify` run for real when the
// tool is installed. The wrapper is its own package (Wrapper/) and is not built with these tests,
// so verify runs with ExecStart= pointed at a binary that is (verify checks only that it exists
// and is executable); scripts/check-package-wrapper.sh verifies the unit again with the packaged
// smartico-wrapper and its man page.
import Foundation
import Testing
import SmarticoTestSupport

@Suite("smartico-wrapper: systemd user unit")
struct WrapperUserUnitTests {
    static let unit = CtlSystemdUnitTests.unitDir.appendingPathComponent("user/smartico-wrapper.service")

    /// `[Section]` → its `key=value` settings, in order (comments dropped).
    static func sections() throws -> [String: [(String, String)]] {
        let text = try String(contentsOf: unit, encoding: .utf8)
        var result: [String: [(String, String)]] = [:]
        var section = ""
        for line in text.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("#") || trimmed.isEmpty { continue }
            if trimmed.hasPrefix("[") {
                section = trimmed
                continue
            }
            guard let eq = trimmed.firstIndex(of: "=") else { continue }
            result[section, default: []].append((String(trimmed[..<eq]), String(trimmed[trimmed.index(after: eq)...])))
        }
        return result
    }

    @Test func theUnitBelongsToTheGraphicalSession() throws {
        let s = try Self.sections()
        func values(_ section: String, _ key: String) -> [String] { (s[section] ?? []).filter { $0.0 == key }.map(\.1) }
        // Started with the session, after it has a display, and stopped with it.
        #expect(values("[Unit]", "PartOf") == ["graphical-session.target"])
        #expect(values("[Unit]", "After") == ["graphical-session.target"])
        #expect(values("[Install]", "WantedBy") == ["graphical-session.target"])
        #expect(values("[Unit]", "Documentation").first?.contains("man:smartico-wrapper(1)") == true)
        // The packaged binary, with no --config: the wrapper reads the user's (or the machine's)
        // file by itself, the same one the menu entry's wrapper reads.
        #expect(values("[Service]", "ExecStart") == ["/usr/bin/smartico-wrapper"])
        // Restarted on a crash, not on a usage error (2) or a bad configuration (78): a restart
        // fixes neither.
        #expect(values("[Service]", "Restart") == ["on-failure"])
        #expect(values("[Service]", "RestartPreventExitStatus") == ["2 78"])
        // A user unit: no User= (it runs as the session's user), and nothing that would keep
        // WebKit's bubblewrap sandbox from creating its namespaces.
        for key in ["User", "Group", "DynamicUser", "RestrictNamespaces", "PrivateUsers"] {
            #expect(values("[Service]", key).isEmpty, "\(key)")
        }
        // The text the unit's comments give for `systemctl --user edit` is a valid override.
        let text = try String(contentsOf: Self.unit, encoding: .utf8)
        #expect(text.contains("#   ExecStart=\n#   ExecStart=/usr/bin/smartico-wrapper --kiosk\n"))
    }

    @Test(.enabled(if: systemdAnalyzePath != nil, "systemd-analyze is not installed here: the user unit was NOT verified"))
    func systemdAnalyzeUserVerifyAcceptsTheUnit() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("user-unit-\(UUID().uuidString)")
        let runtime = dir.appendingPathComponent("runtime")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: dir) }
        let standIn = try BuiltExecutable.find("smarticoctl").path
        let text = try String(contentsOf: Self.unit, encoding: .utf8)
        #expect(text.contains("\nExecStart=/usr/bin/smartico-wrapper\n"))
        let copy = dir.appendingPathComponent("smartico-wrapper.service")
        try text.replacingOccurrences(of: "\nExecStart=/usr/bin/smartico-wrapper\n", with: "\nExecStart=\(standIn)\n")
            .write(to: copy, atomically: true, encoding: .utf8)
        // --user needs a runtime directory to set up its (offline) manager; --man=no: the page is
        // not installed here (check-package-wrapper.sh finds it in the package's root).
        let r = try await BuiltExecutable.run(
            URL(fileURLWithPath: systemdAnalyzePath!),
            ["--user", "verify", "--man=no", copy.path],
            environment: ["PATH": "/usr/bin:/bin", "SYSTEMD_LOG_COLOR": "0", "XDG_RUNTIME_DIR": runtime.path])
        #expect(r.status == 0 && !r.signaled, "\(r)")
        // systemd-analyze exits 0 on a setting it ignores: its warnings are the failures.
        #expect(r.stderr.isEmpty, "warnings: \(r.stderr)")
    }
}
