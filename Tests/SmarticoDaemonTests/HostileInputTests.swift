// Hostile input (issue 25): untrusted text cannot forge log lines, `ext_user_id` is bounded and
// free of control characters, `hash_command` runs with a minimal environment and its stderr
// never reaches events.
import Foundation
import Logging
import SmarticoProtocol
import SmarticoTestSupport
import Synchronization
import Testing
@testable import SmarticoDaemon

@Suite("Hostile input: log escaping, ext_user_id, hash_command")
struct HostileInputUnitTests {
    @Test func escapingKeepsEveryRecordOnOneLineAndIsReversible() {
        #expect(LogEscaping.escaped("plain é 日本 text") == "plain é 日本 text")
        #expect(LogEscaping.escaped("a\nb\rc\td") == #"a\nb\rc\td"#)
        #expect(LogEscaping.escaped(#"back\slash"#) == #"back\\slash"#)
        // A literal backslash-n and a real newline stay distinguishable.
        #expect(LogEscaping.escaped(#"x\n"#) != LogEscaping.escaped("x\n"))
        #expect(LogEscaping.escaped("\u{1b}[31mred") == #"\u{1b}[31mred"#)
        #expect(LogEscaping.escaped("nul\u{0}del\u{7f}nel\u{85}") == #"nul\u{0}del\u{7f}nel\u{85}"#)
        #expect(LogEscaping.escaped("ls\u{2028}ps\u{2029}") == #"ls\u{2028}ps\u{2029}"#)
    }

    @Test func theHandlerWritesOneLinePerCallWithEveryUntrustedPartEscaped() {
        let lines = Mutex<[String]>([])
        var logger = Logger(label: "smarticod") { label in
            DaemonLogHandler(label: label, output: { line in lines.withLock { $0.append(line) } })
        }
        logger.logLevel = .debug
        logger.info("identify from peer: user=bob\n2026-11-27T23:00:00+0000 critical smarticod: [SmarticoDaemon] forged",
                    metadata: ["peer\nkey": "v1\r\nv2", "conn": "3"])
        logger.debug("plain")
        logger.trace("below the level")
        let written = lines.withLock { $0 }
        #expect(written.count == 2)
        for line in written {
            #expect(line.hasSuffix("\n"))
            #expect(line.dropLast().allSatisfy { $0 != "\n" && $0 != "\r" }, "\(line)")
        }
        let first = written[0]
        // The shape of StreamLogHandler's lines: timestamp, level, label, sorted metadata, source, message.
        let expectedTail = #" info smarticod: conn=3 peer\nkey=v1\r\nv2 [SmarticoDaemonTests] identify from peer: user=bob\n2026-11-27T23:00:00+0000 critical smarticod: [SmarticoDaemon] forged"# + "\n"
        #expect(first.hasSuffix(expectedTail), "\(first)")
        let timestamp = String(first.prefix(while: { $0 != " " }))
        #expect(timestamp.count == "2026-11-27T23:15:02+0000".count && timestamp.contains("T"), "\(timestamp)")
        #expect(written[1].hasSuffix(" debug smarticod: [SmarticoDaemonTests] plain\n"))
    }

    @Test func untrustedTextIsCutToItsBoundOnAScalarBoundaryWithTheCutMarked() {
        // Short text is kept whole.
        #expect(LogEscaping.bounded("short") == "short")
        #expect(LogEscaping.escaped("a\nb", limit: 100) == #"a\nb"#)
        // 50 KB of two-byte scalars: at most 1 KiB, whole scalars, the whole size in the mark.
        let long = String(repeating: "é", count: 25_600)
        let cut = LogEscaping.bounded(long)
        #expect(cut.utf8.count <= LogEscaping.maxFieldBytes, "\(cut.utf8.count)")
        #expect(cut.hasSuffix("…(cut, 51200 bytes)"), "\(cut.suffix(40))")
        #expect(cut.dropLast("…(cut, 51200 bytes)".count).allSatisfy { $0 == "é" })
        // Escaping counts: a cut never splits an escape, and the bound holds after escaping.
        let controls = String(repeating: "\u{1}", count: 5000)
        let escaped = LogEscaping.escaped(controls, limit: 1024)
        #expect(escaped.utf8.count <= 1024 && escaped.hasSuffix("…(cut, 5000 bytes)"), "\(escaped.suffix(40))")
        #expect(escaped.dropLast("…(cut, 5000 bytes)".count).hasSuffix(#"\u{1}"#))
    }

    @Test func noLogLineIsLongerThan8KiBWhateverItCarries() {
        let lines = Mutex<[String]>([])
        var logger = Logger(label: "smarticod") { label in
            DaemonLogHandler(label: label, output: { line in lines.withLock { $0.append(line) } })
        }
        logger.logLevel = .debug
        let big = String(repeating: "x", count: 51_200)
        var metadata: Logger.Metadata = [:]
        for i in 0..<20 { metadata["k\(i)"] = .string(big) }
        logger.warning("server said: \(big)", metadata: metadata)
        logger.warning("\(big)\n\(big)")
        for line in lines.withLock({ $0 }) {
            #expect(line.utf8.count <= LogEscaping.maxLineBytes, "\(line.utf8.count)")
            #expect(line.contains("…(cut, "), "\(line.prefix(200))")
            #expect(line.dropLast().allSatisfy { $0 != "\n" })
        }
        // A metadata value keeps at most 1 KiB.
        let first = lines.withLock { $0[0] }
        #expect(first.contains(" k0=" + String(repeating: "x", count: 1024 - "…(cut, 51200 bytes)".utf8.count) + "…(cut, 51200 bytes) "), "\(first.prefix(1200))")
    }

    @Test func extUserIDRules() {
        #expect(ExtUserID.problem("player-1") == nil)
        #expect(ExtUserID.problem(String(repeating: "é", count: 128)) == nil)  // 256 bytes
        #expect(ExtUserID.problem(String(repeating: "a", count: 257))?.contains("257 bytes") == true)
        #expect(ExtUserID.problem(String(repeating: "é", count: 128) + "a")?.contains("at most 256") == true)
        #expect(ExtUserID.problem("")?.contains("empty") == true)
        #expect(ExtUserID.problem("alice\nx")?.contains("U+000A at byte offset 5") == true)
        #expect(ExtUserID.problem("é\u{0}")?.contains("U+0000 at byte offset 2") == true)
        for bad in ["a\tb", "a\rb", "a\u{7f}", "a\u{85}", "a\u{2028}", "a\u{2029}", "\u{1b}[2J"] {
            #expect(ExtUserID.problem(bad)?.contains("control character") == true, "\(bad.debugDescription)")
        }
    }

    @Test func identifyRefusesAnExtUserIDWithAControlCharacterOrTooLong() throws {
        func outcome(_ id: String) -> Result<SocketRequest, SocketAPIError> {
            let line = String(decoding: (["op": "identify", "ext_user_id": .string(id)] as JSONObject).serialized(), as: UTF8.self)
            return SocketRequestParser.parse(line).request
        }
        let ok = String(repeating: "u", count: 256)
        #expect(try outcome(ok).get() == .session(.identify(extUserID: ok, hash: nil)))
        for (id, words) in [("alice\nCRITICAL", "U+000A at byte offset 5"), ("a\u{0}b", "U+0000 at byte offset 1"),
                            (String(repeating: "u", count: 257), "257 bytes")] {
            guard case .failure(let error) = outcome(id) else { Issue.record("accepted \(id.debugDescription)"); continue }
            #expect(error.code == .badRequest)
            #expect(error.message.contains("\"ext_user_id\"") && error.message.contains(words), "\(error.message)")
        }
        // The raw line as a peer would write it, NUL as a JSON escape.
        guard case .failure(let nul) = SocketRequestParser.parse(#"{"op":"identify","ext_user_id":"bob\u0000"}"#).request else {
            Issue.record("NUL accepted"); return
        }
        #expect(nul.code == .badRequest)
    }

    @Test func configChecksExtUserIDAndHashCommandEnv() {
        var c = DaemonConfig(labelKey: ConfigTestSupport.validKey)
        c.user.extUserID = "alice\nbob"
        #expect(c.validate().map(\.key) == ["user.ext_user_id"])
        #expect(c.validate().first?.message.contains("U+000A") == true)
        c.user.extUserID = String(repeating: "x", count: 257)
        #expect(c.validate().map(\.key) == ["user.ext_user_id"])
        c.user.extUserID = "alice"
        c.user.hashCommandEnv = ["HASH_SALT_FILE", "_X1", "1BAD", "A-B", ""]
        #expect(c.validate().map(\.key) == ["user.hash_command_env[2]", "user.hash_command_env[3]", "user.hash_command_env[4]"])
        let decoded = ConfigTestSupport.decode(#"{"server": {"label_key": "\#(ConfigTestSupport.validKey)"}, "user": {"hash_command_env": ["VAULT_ADDR"]}}"#)
        #expect((try? decoded.get())?.user.hashCommandEnv == ["VAULT_ADDR"])
        #expect(DaemonConfig(labelKey: ConfigTestSupport.validKey).user.hashCommandEnv == [])
    }

    @Test func theChildEnvironmentIsMinimal() {
        let daemon = ["PATH": "/opt/bin:/usr/bin", "LANG": "C.UTF-8", "HOME": "/root", "SMARTICO_LABEL_KEY": "secret",
                      "VAULT_ADDR": "https://vault", "SMARTICO_EXT_USER_ID": "mallory"]
        #expect(HashCommandRunner.childEnvironment(user: "alice", daemonEnvironment: daemon, passing: ["VAULT_ADDR", "ABSENT"])
                == ["LANG=C.UTF-8", "PATH=/opt/bin:/usr/bin", "SMARTICO_EXT_USER_ID=alice", "VAULT_ADDR=https://vault"])
        // No PATH: a default; SMARTICO_EXT_USER_ID is never passed through, even when named.
        #expect(HashCommandRunner.childEnvironment(user: nil, daemonEnvironment: ["SMARTICO_EXT_USER_ID": "mallory"],
                                                   passing: ["SMARTICO_EXT_USER_ID"])
                == ["PATH=/usr/local/bin:/usr/bin:/bin"])
    }

    @Test func aHashCommandSeesOnlyTheAllowedVariables() async throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let script = try writeEnvDumpingHashScript(dir: dir.path)
        let dump = dir.appendingPathComponent("env.txt").path
        let daemonEnvironment = ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/root", "SECRET_TOKEN": "s3cr3t",
                                 "SMARTICO_LABEL_KEY": "label", "VAULT_ADDR": "https://vault.local"]
        let r = await HashCommandRunner.run(argv: ["/bin/sh", script, dump], user: "alice", environment: daemonEnvironment,
                                            passing: ["VAULT_ADDR"], timeoutMs: 10_000)
        #expect(r == .hash(Secret("h-alice")))
        var seen = try environmentDump(dump)
        seen["PWD"] = nil  // the shell's own (dash exports it)
        #expect(seen == ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "SMARTICO_EXT_USER_ID": "alice", "VAULT_ADDR": "https://vault.local"])
    }

    @Test func failureDescriptionsCarryNoStderr() async {
        let r = await HashCommandRunner.run(
            argv: ["/bin/sh", "-c", "printf 'first\\nSECRET-abc\\n' >&2; exit 4"], user: "u", timeoutMs: 10_000)
        guard case .failed(let error) = r else { Issue.record("expected a failure, got \(r)"); return }
        #expect(error.description == "\"/bin/sh\" exited with status 4; its stderr is in the daemon's log at debug level")
        #expect(error.stderrExcerpt == "first\nSECRET-abc")
        #expect(HashCommandError.timedOut(program: "p", timeoutMs: 5).stderrExcerpt == "")
    }

    @Test func maskingHidesSecretLookingText() {
        #expect(HashCommandRunner.masked("cannot read /etc/smartico/salt: permission denied") == "cannot read /etc/smartico/salt: permission denied")
        #expect(HashCommandRunner.masked("bad token=abc123 for alice") == "bad token=***")
        #expect(HashCommandRunner.masked("API_KEY : xyz") == "API_KEY :***")
        #expect(HashCommandRunner.masked("Secret:hunter2") == "Secret:***")
        #expect(HashCommandRunner.masked("got 0123456789abcdef0123456789abcdef instead") == "got *** instead")
        #expect(HashCommandRunner.masked("b64 dGhpcyBpcyBhIHNlY3JldA2= end") == "b64 *** end")
        // Long words without a digit are not secrets.
        #expect(HashCommandRunner.masked("internationalization") == "internationalization")
        let long = String(repeating: "word ", count: 100)
        let cut = HashCommandRunner.masked(long)
        #expect(cut.utf8.count <= HashCommandRunner.maskedMaxBytes + 3 && cut.hasSuffix("…"))
    }
}

/// A hash command that writes its environment (NUL-separated, as `env -0`) to the file in argv[1]
/// and prints `h-<user>`. `env -0` is exec'd so the shell adds little of its own (dash: `PWD`).
/// Run it as `/bin/sh SCRIPT FILE`: exec'ing a file just written fails with ETXTBSY while a
/// child spawned by a concurrent test still holds the write descriptor.
func writeEnvDumpingHashScript(dir: String) throws -> String {
    let path = dir + "/hash-env.sh"
    let script = """
        #!/bin/sh
        echo "h-$SMARTICO_EXT_USER_ID"
        exec /usr/bin/env -0 > "$1"

        """
    try Data(script.utf8).write(to: URL(fileURLWithPath: path))
    chmod(path, 0o755)
    return path
}

/// The variables in a file written by `env -0`.
func environmentDump(_ path: String) throws -> [String: String] {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    var out: [String: String] = [:]
    for entry in data.split(separator: 0) {
        let text = String(decoding: entry, as: UTF8.self)
        guard let eq = text.firstIndex(of: "=") else { continue }
        out[String(text[..<eq])] = String(text[text.index(after: eq)...])
    }
    return out
}
