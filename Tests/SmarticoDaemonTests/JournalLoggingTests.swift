// Issue 29: under systemd (`JOURNAL_STREAM` set) log lines carry their syslog priority and no
// timestamp of their own; the level is shared by all loggers and changeable at run time.
import Foundation
import Logging
import SmarticoProtocol
import SmarticoTestSupport
import Synchronization
import Testing
@testable import SmarticoDaemon

@Suite("Journal logging: priority prefixes, shared level")
struct JournalLoggingUnitTests {
    /// The lines a handler wrote.
    final class Lines: Sendable {
        let lines = Mutex<[String]>([])
        func withLock<R>(_ body: ([String]) -> R) -> R { lines.withLock { body($0) } }
    }

    private static func capture(journal: Bool, level: DaemonLogLevel? = nil) -> (Logger, Lines) {
        let lines = Lines()
        var logger = Logger(label: "smarticod") { label in
            DaemonLogHandler(label: label, journal: journal, level: level, output: { line in lines.lines.withLock { $0.append(line) } })
        }
        if level == nil { logger.logLevel = .trace }
        return (logger, lines)
    }

    @Test func underTheJournalEveryLineStartsWithItsPriorityAndHasNoTimestamp() {
        let (logger, lines) = Self.capture(journal: true)
        logger.trace("t")
        logger.debug("d")
        logger.info("i", metadata: ["conn": "3"])
        logger.notice("n")
        logger.warning("w")
        logger.error("e")
        logger.critical("c\nforged")
        let written = lines.withLock { $0 }
        #expect(written == [
            "<7>trace smarticod: [SmarticoDaemonTests] t\n",
            "<7>debug smarticod: [SmarticoDaemonTests] d\n",
            "<6>info smarticod: conn=3 [SmarticoDaemonTests] i\n",
            "<5>notice smarticod: [SmarticoDaemonTests] n\n",
            "<4>warning smarticod: [SmarticoDaemonTests] w\n",
            "<3>error smarticod: [SmarticoDaemonTests] e\n",
            #"<2>critical smarticod: [SmarticoDaemonTests] c\nforged"# + "\n",
        ])
    }

    @Test func withoutTheJournalLinesKeepTheirTimestampAndNoPrefix() throws {
        let (logger, lines) = Self.capture(journal: false)
        logger.warning("w")
        let line = try #require(lines.withLock { $0 }.first)
        #expect(!line.hasPrefix("<"), "\(line)")
        let timestamp = String(line.prefix(while: { $0 != " " }))
        #expect(timestamp.count == "2026-11-27T23:15:02+0000".count && timestamp.contains("T"), "\(timestamp)")
        #expect(line.hasSuffix(" warning smarticod: [SmarticoDaemonTests] w\n"), "\(line)")
    }

    @Test func aSharedLevelIsReadByEveryLoggerAndChangedThroughAny() {
        let shared = DaemonLogLevel(.info)
        let (first, lines) = Self.capture(journal: true, level: shared)
        var second = first
        first.debug("hidden")
        second.logLevel = .debug  // writes the shared level
        #expect(shared.level == .debug)
        first.debug("shown")
        shared.level = .warning
        second.info("hidden too")
        #expect(lines.withLock { $0 } == ["<7>debug smarticod: [SmarticoDaemonTests] shown\n"])
    }
}

@Suite("Journal logging through the daemon", .serialized)
struct JournalLoggingDaemonTests {
    /// smarticod started with `JOURNAL_STREAM` writes every line with its priority and no
    /// timestamp: info and debug while connected, warning once the server goes away.
    @Test func theDaemonUnderSystemdPrefixesPrioritiesAndOmitsTimestamps() async throws {
        let (setup, sim, client) = try await startAgainstSim(environment: ["JOURNAL_STREAM": "8:12345"]) { setup, sim in
            try setup.writeConfig(url: sim.serverURL, user: nil, hash: nil, logLevel: "debug")
        }
        defer { client.close(); setup.remove() }
        let sent = try await eventually { try await !sim.received(cids: [3]).isEmpty }
        #expect(sent, "no INIT; log:\n\(setup.log)")
        _ = await sim.stop()
        let warned = await eventually { setup.log.split(separator: "\n").contains { $0.hasPrefix("<4>warning ") } }
        #expect(warned, "no <4> warning after the server went away; log:\n\(setup.log)")
        expectExitedZero(await setup.stop())
        let lines = setup.log.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("<6>info smarticod: ") }, "\(setup.log)")
        #expect(lines.contains { $0.hasPrefix("<7>debug ") }, "\(setup.log)")
        let levels = ["<7>trace ", "<7>debug ", "<6>info ", "<5>notice ", "<4>warning ", "<3>error ", "<2>critical "]
        for line in lines {
            #expect(levels.contains { line.hasPrefix($0) }, "not a journal line: \(line)")
            #expect(line.range(of: #"^\S*\d{4}-\d\d-\d\dT\d\d:\d\d"#, options: .regularExpression) == nil, "timestamp: \(line)")
        }
    }

    /// The words of a non-journal line: the level is the second (after the timestamp).
    private static func debugLines(_ log: String) -> Int {
        log.split(separator: "\n").filter { $0.split(separator: " ", maxSplits: 2).dropFirst().first == "debug" }.count
    }

    /// `log_level debug` makes debug lines appear, `log_level info` stops them; the answer names
    /// the level before; a read-role peer is refused; a reload restores the file's level.
    @Test func theLogLevelOpChangesTheDaemonsLevelAtRunTime() async throws {
        #expect(SocketOp.logLevel.isReadOnly == false)
        let (setup, sim, client) = try await startAgainstSim { setup, sim in
            try setup.writeConfig(url: sim.serverURL, socket: ["mode": "0666"], logLevel: "info")
            #expect(chmod(setup.dir, 0o755) == 0)
        }
        defer { client.close(); setup.remove() }
        let identified = try await eventually { try await !sim.received(cids: [5]).isEmpty }
        #expect(identified, "no IDENTIFY; log:\n\(setup.log)")
        _ = try await client.ok("event", ["event_type": "before"])
        #expect(Self.debugLines(setup.log) == 0, "debug lines at info:\n\(setup.log)")

        let raised = try await client.ok("log_level", ["level": "debug"])
        #expect(raised == ["level": "debug", "previous": "info"])
        _ = try await client.ok("event", ["event_type": "while_debug"])
        let debugShown = await eventually { Self.debugLines(setup.log) > 0 }
        #expect(debugShown, "no debug line after log_level debug; log:\n\(setup.log)")

        let lowered = try await client.ok("log_level", ["level": "info"])
        #expect(lowered == ["level": "info", "previous": "debug"])
        let debugCount = Self.debugLines(setup.log)
        _ = try await client.ok("event", ["event_type": "after_info"])
        let arrived = try await eventually {
            try await sim.received(cids: [9]).contains { $0["eventType"]?.stringValue == "after_info" }
        }
        #expect(arrived, "the last event did not reach the server; log:\n\(setup.log)")
        #expect(Self.debugLines(setup.log) == debugCount, "debug lines after log_level info:\n\(setup.log)")

        let refused = try await ForeignPeer(uid: 65534, gid: 65534).run(
            dir: setup.dir, ["calls", setup.socketPath, #"{"id":1,"op":"log_level","level":"trace"}"#])
        #expect(refused.first?["error"]?["code"] == "not_permitted", "\(refused)")
        // A reload (SIGHUP) applies log.level from the file again.
        #expect(try await client.ok("log_level", ["level": "trace"]) == ["level": "trace", "previous": "info"])
        setup.daemon?.signal(SIGHUP)
        let reloaded = await eventually { setup.log.contains("configuration reloaded") }
        #expect(reloaded, "no reload; log:\n\(setup.log.suffix(2000))")
        #expect(try await client.ok("log_level", ["level": "info"]) == ["level": "info", "previous": "info"])
        expectExitedZero(await setup.stop())
        _ = await sim.stop()
    }
}
