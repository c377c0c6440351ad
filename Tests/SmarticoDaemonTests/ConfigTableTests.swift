import Foundation
import Testing
@testable import SmarticoDaemon

/// docs/configuration.md and smarticod.json(5) are written by hand; these tests hold them to the
/// table of keys (`DaemonConfig.keys`): every key, no other, each with its type and default.
@Suite("Config table against the docs")
struct ConfigTableTests {
    static let defaults = DaemonConfig(labelKey: "")
    static var leaves: [String: ConfigKey] { Dictionary(uniqueKeysWithValues: DaemonConfig.keys.map { ($0.path, $0) }) }

    static func read(_ path: String) throws -> String {
        try String(contentsOf: ConfigTestSupport.packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    /// Whether a default as a document writes it (`null: derived …`, `5 (OTHER)`) is the table's.
    static func sameDefault(_ written: String, _ key: ConfigKey) -> Bool {
        if key.presence == .required { return written.contains("required") }
        let value = key.show(defaults)
        return written == value || written.hasPrefix(value + " ") || written.hasPrefix(value + ":")
    }

    @Test func theTableIsConsistent() {
        #expect(DaemonConfig.keys.count == Set(DaemonConfig.keys.map(\.path)).count, "a key is listed twice")
        for key in DaemonConfig.keys {
            #expect(!key.doc.isEmpty && !key.doc.contains("\n"), "\(key.path): one line of doc")
            #expect(key.check(Self.defaults) == nil, "\(key.path): the default is outside its bounds")
        }
        #expect(DaemonConfig.keys.filter { $0.presence == .required }.map(\.path) == ["server.label_key"])
    }

    @Test func theDocsTableHasEveryKeyWithItsTypeAndDefault() throws {
        let docs = try Self.read("docs/configuration.md")
        let start = try #require(docs.range(of: "\n## Keys\n"))
        let end = try #require(docs.range(of: "\n## ", range: start.upperBound..<docs.endIndex))
        var rows: [String: [String]] = [:]
        for line in docs[start.upperBound..<end.lowerBound].split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            let key = cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            #expect(rows[key] == nil, "docs/configuration.md has two rows for \(key)")
            rows[key] = [cells[2], cells[3].replacingOccurrences(of: "`", with: "")]
        }
        #expect(Set(rows.keys).symmetricDifference(DaemonConfig.allKeyPaths).isEmpty, "keys of only one of docs/configuration.md and the table")
        for (path, cells) in rows {
            guard let key = Self.leaves[path] else {
                #expect(cells == ["object", ""], "\(path) is an object in the table, not in docs/configuration.md")
                continue
            }
            #expect(cells[0].hasPrefix(key.type), "\(path): docs/configuration.md says \(cells[0]), the table \(key.type)")
            #expect(Self.sameDefault(cells[1], key), "\(path): docs/configuration.md's default is \(cells[1]), the table's \(key.show(Self.defaults))")
        }
    }

    /// The headings of KEYS: `.BR a ", " b " (type; default-a, default-b)"`, or one default for all.
    @Test func theManPageHasEveryKeyWithItsDefault() throws {
        let page = try Self.read("man/smarticod.json.5")
        let start = try #require(page.range(of: "\n.SH KEYS\n"))
        let end = try #require(page.range(of: "\n.SH ", range: start.upperBound..<page.endIndex))
        let lines = page[start.upperBound..<end.lowerBound].split(separator: "\n").map(String.init)
        var defaults: [String: String] = [:]
        for (i, line) in lines.enumerated() where i > 0 && lines[i - 1] == ".TP" {
            #expect(line.hasPrefix(".BR "), "a heading of KEYS is not .BR: \(line)")
            let parts = line.dropFirst(4).split(separator: "\"", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            let keys = stride(from: 0, to: parts.count, by: 2).map { parts[$0] }.filter { !$0.isEmpty }
            let inside = try #require(parts.last { $0.hasPrefix("(") }).dropFirst().dropLast()
            let values = (inside.split(separator: ";").last ?? inside).trimmingCharacters(in: .whitespaces)
                .replacingOccurrences(of: "\\(dq", with: "\"").components(separatedBy: ", ")
            for (n, key) in keys.enumerated() {
                #expect(defaults[key] == nil, "smarticod.json(5) names \(key) twice")
                defaults[key] = values.count == keys.count ? values[n] : values[0]
            }
        }
        #expect(Set(defaults.keys).symmetricDifference(Self.leaves.keys).isEmpty, "keys of only one of smarticod.json(5) and the table")
        for (path, written) in defaults {
            guard let key = Self.leaves[path] else { continue }
            #expect(Self.sameDefault(written, key), "\(path): smarticod.json(5)'s default is \(written), the table's \(key.show(Self.defaults))")
        }
    }
}
