import Foundation
import SmarticoProtocol
import SmarticoSocketAPI
import SmarticoTestSupport
import Testing
@testable import SmarticoDaemon

/// docs/api.md and `smarticoctl api` against the catalog: the table in the docs is what
/// `smarticoctl api list` prints, each call has its section, and the command-line converts
/// `key=value` to the argument types.
@Suite("Data API: docs and smarticoctl", .awaitsCleanup)
struct DataAPIDocsTests {
    static let docsPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../../docs/api.md").standardized.path
    static let begin = "<!-- api-list:"
    static let end = "<!-- /api-list -->"

    /// The text between the markers' fence lines.
    static func documentedTable(_ docs: String) throws -> String {
        let start = try #require(docs.range(of: begin), "docs/api.md has no api-list block")
        let stop = try #require(docs.range(of: end, range: start.upperBound..<docs.endIndex))
        let block = docs[start.upperBound..<stop.lowerBound]
        let fenceOpen = try #require(block.range(of: "```text\n"))
        let fenceClose = try #require(block.range(of: "```\n", range: fenceOpen.upperBound..<block.endIndex))
        return String(block[fenceOpen.upperBound..<fenceClose.lowerBound])
    }

    @Test func theDocsTableIsWhatSmarticoctlApiListPrints() async throws {
        let run = try await runCtl(["api", "list"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout == DataAPICatalog.table())
        var docs = try String(contentsOfFile: Self.docsPath, encoding: .utf8)
        if ProcessInfo.processInfo.environment["SMARTICO_WRITE_API_LIST"] == "1" {
            let old = try Self.documentedTable(docs)
            docs = docs.replacingOccurrences(of: "```text\n" + old + "```\n", with: "```text\n" + run.stdout + "```\n")
            try docs.write(toFile: Self.docsPath, atomically: true, encoding: .utf8)
        }
        #expect(try Self.documentedTable(docs) == run.stdout, "docs/api.md's table differs from `smarticoctl api list` (SMARTICO_WRITE_API_LIST=1 rewrites it)")
    }

    @Test func everyCallHasItsOwnSectionAndNoOtherCallsAreDocumented() throws {
        let docs = try String(contentsOfFile: Self.docsPath, encoding: .utf8)
        let headings = docs.split(separator: "\n").filter { $0.hasPrefix("### `") }.map {
            String($0.dropFirst(5).prefix { $0 != "`" })
        }
        #expect(Set(headings).count == headings.count, "a call is documented twice")
        #expect(Set(headings) == Set(DataAPICatalog.calls.map(\.name)),
                "undocumented: \(Set(DataAPICatalog.calls.map(\.name)).subtracting(headings).sorted()); unknown: \(Set(headings).subtracting(DataAPICatalog.calls.map(\.name)).sorted())")
        for spec in DataAPICatalog.calls {
            guard let r = docs.range(of: "### `\(spec.name)`") else { continue }
            let rest = docs[r.upperBound...]
            let section = rest[..<(rest.range(of: "\n#")?.lowerBound ?? rest.endIndex)]
            for arg in spec.args {
                // `name`, `name*` (required) or `name=default`, as the table writes them.
                #expect(["`\(arg.name)`", "`\(arg.name)*`", "`\(arg.name)="].contains(where: section.contains),
                        "docs/api.md's \(spec.name) does not describe its argument \(arg.name)")
            }
        }
    }

    @Test func smarticoctlApiConvertsArgumentsToTheirTypes() async throws {
        let daemon = try await CtlRig.start()
        defer { cleanUpAfterTest { await daemon.stop() } }
        let spec = try #require(DataAPICatalog.calls.first { c in c.args.contains { $0.type == .integer } })
        let intArg = try #require(spec.args.first { $0.type == .integer })
        var words = ["\(intArg.name)=7"]
        for arg in spec.args where arg.required && arg.name != intArg.name {
            words.append("\(arg.name)=" + (arg.type == .boolean ? "true" : arg.type == .string ? "abc" : "1"))
        }
        let run = try await daemon.ctl(["api", spec.name] + words + ["--json"])
        #expect(run.status == 0, "\(run.stderr)")
        let answer = try JSONValue(parsing: Array(run.stdout.utf8))
        #expect(answer["result"]?["call"] == .string(spec.name))
        #expect(answer["result"]?["args"]?[intArg.name] == 7, "\(run.stdout)")

        let bad = try await daemon.ctl(["api", spec.name, "\(intArg.name)=seven"])
        #expect(bad.status == 2 && bad.stderr.contains("\(intArg.name)=seven") && bad.stderr.contains("must be an integer"), "\(bad.stderr)")
        let unknown = try await daemon.ctl(["api", "nosuch.call"])
        #expect(unknown.status == 2 && unknown.stderr.contains("unknown call \"nosuch.call\""), "\(unknown.stderr)")
        let noKey = try await daemon.ctl(["api", spec.name, "nonsense=1"])
        #expect(noKey.status == 2 && noKey.stderr.contains("has no argument \"nonsense\""), "\(noKey.stderr)")
    }

    @Test func smarticoctlApiPrintsListsAsATable() async throws {
        let daemon = try await CtlRig.start()
        defer { cleanUpAfterTest { await daemon.stop() } }
        let spec = try #require(DataAPICatalog.calls.first { !$0.args.contains(where: \.required) })
        // The canned daemon answers a raw call with a two-row list.
        let run = try await daemon.ctl(["api", spec.name, "--raw"])
        #expect(run.status == 0, "\(run.stderr)")
        let lines = run.stdoutLines
        #expect(lines.first?.split(separator: " ") == ["id", "name", "is_completed"], "\(lines)")
        #expect(lines.count == 4 && lines[1].contains("Play 3 rounds") && lines[2].contains("Deposit") && lines[3].contains("2 rows"), "\(lines)")
    }
}
