import Foundation
import Testing
@testable import SmarticoDaemon
import SmarticoProtocol

@Suite("Config defaults")
struct ConfigDefaultsTests {
    /// Every value of daemon.md's Configuration table, written out literally.
    private func expectTableDefaults(_ c: DaemonConfig) {
        #expect(c.server.url == nil)
        #expect(c.server.brandKey == nil)
        #expect(c.server.headers == [:])
        #expect(c.server.tls.caFile == nil)
        #expect(c.server.tls.pinnedSPKISHA256 == [])
        #expect(c.server.proxy == nil)
        #expect(c.server.compression == true)
        #expect(c.client.trackerVersion == nil)
        #expect(c.client.effectiveTrackerVersion == SmarticoVersion.string)
        #expect(c.client.domain == nil)
        #expect(c.client.deviceID == nil)
        #expect(c.client.deviceType == "DESKTOP")
        #expect(c.client.os == "Linux")
        #expect(c.client.agent == nil)
        #expect(c.client.host == nil)
        #expect(c.client.page == nil)
        #expect(c.client.fp == nil)
        #expect(c.client.language == nil)
        #expect(c.user.extUserID == nil)
        #expect(c.user.hash == nil)
        #expect(c.user.hashCommand == nil)
        #expect(c.user.push.token == nil)
        #expect(c.user.push.platform == 5)
        #expect(c.user.push.status == 4)
        #expect(c.user.push.appPackageID == nil)
        #expect(c.user.reidentifyAfterS == 82_800)
        #expect(c.session.connectTimeoutS == 10)
        #expect(c.session.responseTimeoutS == 15)
        #expect(c.session.keepaliveS == 29)
        #expect(c.session.deadAfterS == 15)
        #expect(c.session.loginAfterInactivityMin == 30)
        #expect(c.session.loginPolicy == .logicalSession)
        #expect(c.session.loginPolicy.rawValue == "logical_session")
        #expect(c.session.reconnect.initialMs == 500)
        #expect(c.session.reconnect.maxMs == 60000)
        #expect(c.session.reconnect.multiplier == 2.0)
        #expect(c.socket.path == "/run/smarticod/smarticod.sock")
        #expect(c.socket.mode == "0660")
        #expect(c.socket.modeBits == 0o660)
        #expect(c.socket.group == nil)
        #expect(c.socket.controlUIDs == nil)
        #expect(c.socket.controlGIDs == nil)
        #expect(c.socket.maxLineBytes == 1_048_576)
        #expect(c.socket.maxQueueBytes == 262_144)
        #expect(c.socket.maxTotalQueueBytes == 16_777_216)
        #expect(c.socket.maxPeersPerUID == 64)
        #expect(c.socket.maxDurablePerUID == 16)
        #expect(c.socket.readRequestsPerS == 16)
        #expect(c.socket.readRequestsBurst == 64)
        #expect(c.socket.maxPeerMemoryBytes == 48 << 20)
        #expect(c.socket.partialLineTimeoutS == 30)
        #expect(c.stateDir == "/var/lib/smarticod")
        #expect(c.journal.retentionEvents == 10000)
        #expect(c.journal.retentionHours == 168)
        #expect(c.journal.maxBytes == 67_108_864)
        #expect(c.outbox.maxMessages == 10000)
        #expect(c.http.publicURL == nil)
        #expect(c.log.level == .info)
        #expect(c.metrics.textfile == nil)
        #expect(c.metrics.intervalS == 15)
    }

    @Test func programmaticDefaultsMatchTheSpecTable() {
        let c = DaemonConfig(labelKey: ConfigTestSupport.validKey)
        #expect(c.server.labelKey.exposedValue == ConfigTestSupport.validKey)
        expectTableDefaults(c)
        #expect(c.validate().isEmpty)
    }

    @Test func aFileWithOnlyTheLabelKeyDecodesToTheDefaults() throws {
        let c = try ConfigLoader.decode(Array(#"{"server": {"label_key": "\#(ConfigTestSupport.validKey)"}}"#.utf8))
        expectTableDefaults(c)
        #expect(c == DaemonConfig(labelKey: ConfigTestSupport.validKey))
    }

    @Test func theExampleDecodesToExactlyTheDefaultsPlusItsLabelKey() throws {
        let c = try ConfigLoader.load(path: ConfigTestSupport.examplePath)
        #expect(c.server.labelKey.exposedValue == "00000000-0000-0000-0000-000000000000-2")
        expectTableDefaults(c)
        #expect(c == DaemonConfig(labelKey: "00000000-0000-0000-0000-000000000000-2"))
    }

    @Test func theExampleWritesEveryKeyOutAndNothingElse() throws {
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: ConfigTestSupport.examplePath)))
        let root = try JSONValue(parsing: bytes)
        var paths: [String] = []
        func walk(_ node: JSONValue, _ prefix: String) {
            guard case .object(let members) = node else { return }
            for member in members {
                let path = prefix.isEmpty ? member.key : prefix + "." + member.key
                paths.append(path)
                if path != "server.headers" { walk(member.value, path) }
            }
        }
        walk(root, "")
        #expect(paths.sorted() == DaemonConfig.allKeyPaths.sorted())
        #expect(ConfigLoader.duplicateKeys(root, path: "").isEmpty)
    }

    @Test func theExampleResolvesWithoutAnyEnvironment() throws {
        let r = try ConfigLoader.loadResolved(path: ConfigTestSupport.examplePath, environment: [:])
        #expect(r.server.url == "wss://api.smartico.ai/websocket/services?master&domain=&version=\(SmarticoVersion.string)")
        #expect(r.publicAPI.url == "https://papi.smartico.ai/services/public")
        #expect(r.serverProxy == nil)
        #expect(r.logLevel == .info)
    }

    @Test func theDocsDescribeEveryKey() throws {
        let docs = try String(contentsOf: ConfigTestSupport.packageRoot.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        for path in DaemonConfig.allKeyPaths {
            #expect(docs.contains("`\(path)`"), "docs/configuration.md does not mention `\(path)`")
        }
    }

    @Test func theDocsExampleOfABadFileGivesTheOutputTheDocsShow() throws {
        let docs = try String(contentsOf: ConfigTestSupport.packageRoot.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        let afterExample = try #require(docs.range(of: "Example: this file\n\n```json\n"))
        let jsonEnd = try #require(docs.range(of: "```", range: afterExample.upperBound..<docs.endIndex))
        let json = String(docs[afterExample.upperBound..<jsonEnd.lowerBound])
        let outputStart = try #require(docs.range(of: "gives (exit code 78):\n\n```\n"))
        let outputEnd = try #require(docs.range(of: "```", range: outputStart.upperBound..<docs.endIndex))
        let shown = docs[outputStart.upperBound..<outputEnd.lowerBound].split(separator: "\n").map(String.init)
        do {
            _ = try ConfigLoader.decode(Array(json.utf8), source: "bad.json")
            Issue.record("the docs' bad example is valid")
        } catch {
            #expect(error.lines == shown)
        }
    }

    @Test func durationsFollowTheSeconds() {
        let s = DaemonConfig.Session()
        #expect(s.keepalive == .seconds(29))
        #expect(s.deadAfter == .seconds(15))
        #expect(s.loginAfterInactivity == .seconds(30 * 60))
    }
}
