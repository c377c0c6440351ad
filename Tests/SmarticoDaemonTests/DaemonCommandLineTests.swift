import Foundation
import SmarticoProtocol
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

/// The hand-written command line of the built `smarticod` (no ArgumentParser, no Foundation),
/// run as a real subprocess; and the check that keeps Foundation out of the binary.
@Suite("smarticod: command line and linkage")
struct DaemonCommandLineTests {
    static let usageLine = "Usage: smarticod [--config <path>] [--check-config]"

    static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> BuiltExecutable.Run {
        try await BuiltExecutable.run(try TestExecutables.url("smarticod"), arguments, environment: environment)
    }

    /// Exit 2, nothing on stdout, and stderr names `named` and shows the usage line.
    static func expectUsageError(_ arguments: [String], naming named: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let r = try await run(arguments)
        #expect(r.status == 2 && !r.signaled, "\(arguments): \(r)", sourceLocation: sourceLocation)
        #expect(r.stdout.isEmpty, "\(arguments): \(r)", sourceLocation: sourceLocation)
        let lines = r.stderr.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("Error: ") == true, "\(arguments): \(r)", sourceLocation: sourceLocation)
        #expect(lines.first?.contains(named) == true, "\(arguments): \(r)", sourceLocation: sourceLocation)
        #expect(lines.contains(usageLine), "\(arguments): \(r)", sourceLocation: sourceLocation)
    }

    @Test func anUnknownOptionIsAUsageErrorNamingIt() async throws {
        try await Self.expectUsageError(["--no-such-option"], naming: "'--no-such-option'")
        try await Self.expectUsageError(["-x"], naming: "'-x'")
        // Even after valid options, and before a valid --check-config.
        try await Self.expectUsageError(["--config", ConfigTestSupport.examplePath, "--chek-config"], naming: "'--chek-config'")
        try await Self.expectUsageError(["--check-config=yes"], naming: "'--check-config'")
    }

    @Test func aMissingValueIsAUsageError() async throws {
        try await Self.expectUsageError(["--config"], naming: "'--config <path>'")
        try await Self.expectUsageError(["--config", "--check-config"], naming: "'--config <path>'")
        try await Self.expectUsageError(["--config="], naming: "'--config <path>'")
        try await Self.expectUsageError(["--config", ""], naming: "'--config <path>'")
    }

    @Test func anExtraArgumentIsAUsageError() async throws {
        try await Self.expectUsageError(["run"], naming: "'run'")
        try await Self.expectUsageError(["--config", ConfigTestSupport.examplePath, "extra"], naming: "'extra'")
        try await Self.expectUsageError(["--", "--check-config"], naming: "'--check-config'")
    }

    @Test func configWithEqualsAndRepeatedConfigUseThePathGiven() async throws {
        // The example with its placeholder label key replaced (the placeholder fails the check).
        let path = try ConfigTestSupport.exampleWithRealKey()
        let r = try await Self.run(["--config=\(path)", "--check-config"])
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.hasPrefix("configuration OK: \(path)\n"))
        // The last --config counts (as before); the first one does not even have to exist.
        let last = try await Self.run(["--config", "/nonexistent/first.json", "--check-config", "--config", path])
        #expect(last.status == 0, "\(last)")
        #expect(last.stdout.hasPrefix("configuration OK: \(path)\n"))
        // Without --config: the default path (absent here), exit 78 naming it.
        let absent = try await Self.run(["--check-config"])
        if !FileManager.default.fileExists(atPath: ConfigLoader.defaultPath) {
            #expect(absent.status == 78, "\(absent)")
            #expect(absent.stderr.hasPrefix(ConfigLoader.defaultPath + ": cannot open the configuration file"))
        }
    }

    @Test func everyExecutableShowsTheSameVersion() async throws {
        for name in ["smarticod", "smarticoctl", "smartico-sim", "smartico-ws"] {
            let r = try await BuiltExecutable.run(try TestExecutables.url(name), ["--version"], environment: [:])
            #expect(r.status == 0 && !r.signaled, "\(name): \(r)")
            #expect(r.stdout == SmarticoVersion.string + "\n", "\(name): \(r)")
        }
    }

    @Test func helpAndVersionExit0AndWinOverOtherArguments() async throws {
        for arguments in [["--help"], ["-h"], ["--bogus", "--help"], ["--config", "/x", "-h"]] {
            let r = try await Self.run(arguments)
            #expect(r.status == 0, "\(arguments): \(r)")
            #expect(r.stderr.isEmpty)
            #expect(r.stdout.hasPrefix("OVERVIEW: Keep this device's session with Smartico alive"))
            #expect(r.stdout.contains("\nUSAGE: smarticod [--config <path>] [--check-config]\n"))
            #expect(r.stdout.contains("  --config <path>         Path of the JSON configuration file. (default:\n                          /etc/smarticod/config.json)\n"))
            #expect(r.stdout.contains("  --check-config          Validate the configuration and exit (0 when valid, 78\n"))
            #expect(r.stdout.contains("  --version               Show the version.\n  -h, --help              Show help information.\n"))
            #expect(r.stdout.contains("2 usage error, 73 the state directory or the socket's directory cannot be\n"))
            #expect(r.stdout.contains("created or written, or its store is one only an operator can fix (a newer\n"))
            #expect(r.stdout.contains("database), 78 invalid configuration"))
        }
        for arguments in [["--version"], ["--version", "--bogus"], ["--check-config", "--version"]] {
            let r = try await Self.run(arguments)
            #expect(r.status == 0, "\(arguments): \(r)")
            #expect(r.stdout == SmarticoVersion.string + "\n")
            #expect(r.stderr.isEmpty)
        }
    }

    /// Foundation (and its ICU data) must not come back into the daemon: the built executable's
    /// DT_NEEDED entries, read from its ELF dynamic section, name none of them.
    @Test func theDaemonLinksNoFoundationAndNoICU() throws {
        let url = try TestExecutables.url("smarticod")
        let needed = try ELFNeeded.libraries(of: Array(try Data(contentsOf: url)))
        #expect(needed.contains { $0.hasPrefix("libc.so") }, "DT_NEEDED was not read: \(needed)")
        #expect(needed.contains { $0.hasPrefix("libswiftCore") }, "DT_NEEDED was not read: \(needed)")
        let foundation = needed.filter { $0.localizedCaseInsensitiveContains("foundation") || $0.localizedCaseInsensitiveContains("icu") }
        #expect(foundation.isEmpty, "smarticod links \(foundation); keep Foundation out of smarticod and SmarticoDaemon (docs/benchmarks.md, Static build)")
        // The control: smarticoctl still uses ArgumentParser, hence FoundationEssentials.
        if let ctl = try? TestExecutables.url("smarticoctl") {
            let ctlNeeded = try ELFNeeded.libraries(of: Array(try Data(contentsOf: ctl)))
            #expect(ctlNeeded.contains { $0.contains("Foundation") }, "the ELF reader found no Foundation in smarticoctl either: \(ctlNeeded)")
        }
    }

    /// `ua.tzoffset` comes from the C library's local time (`TZ`), not from Foundation: the daemon
    /// run with `TZ=Europe/Berlin` sends Berlin's offset at the INIT's own `ts`.
    @Test func theDaemonTakesTzoffsetFromTZ() async throws {
        let (setup, sim, client) = try await startAgainstSim(environment: ["TZ": "Europe/Berlin"]) { setup, sim in
            try setup.writeConfig(url: sim.serverURL, user: nil, hash: nil)
        }
        defer { client.close(); setup.remove() }
        let sent = try await eventually { try await !sim.received(cids: [3]).isEmpty }
        #expect(sent, "no INIT; log:\n\(setup.log)")
        let initMessage = try #require(try await sim.received(cids: [3]).first)
        let ts = try #require(initMessage["ts"]?.int64Value)
        let berlin = try #require(TimeZone(identifier: "Europe/Berlin"))
        let expected = -Int64(berlin.secondsFromGMT(for: Date(timeIntervalSince1970: Double(ts) / 1000))) / 60
        #expect(initMessage["ua"]?["tzoffset"]?.int64Value == expected, "INIT: \(initMessage)")
        #expect(expected == -60 || expected == -120)
        #expect(abs(ts - Int64(Date().timeIntervalSince1970 * 1000)) < 120_000, "ts is not the wall clock: \(ts)")
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }
}

/// The DT_NEEDED entries of a 64-bit little-endian ELF file (what `readelf -d` lists as
/// "Shared library"), read from its section headers, without any tool.
enum ELFNeeded {
    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    static func libraries(of bytes: [UInt8]) throws -> [String] {
        func u16(_ at: Int) throws -> Int {
            guard at >= 0, at + 2 <= bytes.count else { throw Malformed(description: "read past the end at \(at)") }
            return Int(bytes[at]) | Int(bytes[at + 1]) << 8
        }
        func u32(_ at: Int) throws -> Int { try u16(at) | u16(at + 2) << 16 }
        func u64(_ at: Int) throws -> Int { try u32(at) | u32(at + 4) << 32 }
        guard bytes.count >= 64, bytes[0..<4] == [0x7F, 0x45, 0x4C, 0x46] else { throw Malformed(description: "not an ELF file") }
        guard bytes[4] == 2, bytes[5] == 1 else { throw Malformed(description: "not ELF64 little-endian") }
        let sectionHeaders = try u64(0x28)
        let entrySize = try u16(0x3A)
        let count = try u16(0x3C)
        func section(_ i: Int) throws -> (type: Int, offset: Int, size: Int, link: Int) {
            let h = sectionHeaders + i * entrySize
            return (try u32(h + 4), try u64(h + 0x18), try u64(h + 0x20), try u32(h + 0x28))
        }
        var names: [String] = []
        for i in 0..<count {
            let dynamic = try section(i)
            guard dynamic.type == 6 else { continue }  // SHT_DYNAMIC
            let strings = try section(dynamic.link)
            var at = dynamic.offset
            while at + 16 <= dynamic.offset + dynamic.size {
                let tag = try u64(at)
                let value = try u64(at + 8)
                at += 16
                if tag == 0 { break }  // DT_NULL
                guard tag == 1 else { continue }  // DT_NEEDED
                let start = strings.offset + value
                guard start < bytes.count, let end = bytes[start...].firstIndex(of: 0) else { throw Malformed(description: "bad DT_NEEDED string") }
                names.append(String(decoding: bytes[start..<end], as: UTF8.self))
            }
        }
        return names
    }
}
