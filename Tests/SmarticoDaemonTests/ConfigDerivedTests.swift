import Foundation
import Testing
@testable import SmarticoDaemon
import Transport

@Suite("Config derived values")
struct ConfigDerivedTests {
    static let base = "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f"

    // MARK: URLs from the label key's environment

    @Test(arguments: [
        ("-1", 1 as Int?, "api.smartico.ai", "papi.smartico.ai", "img.smr.vc"),
        ("-2", 2, "api.smartico.ai", "papi.smartico.ai", "img.smr.vc"),
        ("-3", 3, "api3.smartico.ai", "papi3.smartico.ai", "img3.smr.vc"),
        ("-10", 10, "api10.smartico.ai", "papi10.smartico.ai", "img10.smr.vc"),
        ("", nil, "api.smartico.ai", "papi.smartico.ai", "img.smr.vc"),
    ])
    func urlsFollowTheEnvironmentSuffix(suffix: String, environment: Int?, api: String, papi: String, img: String) throws {
        var c = DaemonConfig(labelKey: Self.base + suffix)
        c.client.domain = "kiosk.example.com"
        c.client.trackerVersion = "1.2.3"
        let r = try ResolvedConfig(c, environment: [:])
        #expect(r.labelKey.environment == environment)
        #expect(r.labelKey.key.exposedValue == Self.base)
        #expect(r.server.url == "wss://\(api)/websocket/services?master&domain=kiosk.example.com&version=1.2.3")
        #expect(r.server.secure)
        #expect(r.server.host == api)
        #expect(r.server.port == 443)
        #expect(r.server.requestTarget == "/websocket/services?master&domain=kiosk.example.com&version=1.2.3")
        #expect(r.serverURLIsDerived)
        #expect(r.publicAPI.url == "https://\(papi)/services/public")
        #expect(r.publicAPI.path == "/services/public")
        #expect(r.publicAPIURLIsDerived)
        #expect(r.imageDomain == img)
    }

    @Test func theDerivedURLEncodesItsParametersAndDefaultsTheVersion() throws {
        var c = DaemonConfig(labelKey: Self.base + "-4")
        c.client.domain = "my_app&x=1"
        #expect(c.validate().map(\.key) == ["client.domain"])  // '&' is refused…
        c.client.domain = "app:ü"
        let r = try ResolvedConfig(c, environment: [:])  // …anything else is encoded
        #expect(r.server.url == "wss://api4.smartico.ai/websocket/services?master&domain=app%3A%C3%BC&version=\(SmarticoVersion.string)")
        c.client.domain = nil
        #expect(try ResolvedConfig(c, environment: [:]).server.url == "wss://api4.smartico.ai/websocket/services?master&domain=&version=\(SmarticoVersion.string)")
    }

    @Test func configuredURLsWinOverDerivedOnes() throws {
        var c = DaemonConfig(labelKey: Self.base + "-3")
        c.server.url = "ws://127.0.0.1:9000/websocket/services?master&domain=x&version=1.0.0"
        c.http.publicURL = "http://127.0.0.1:9001/services/public"
        let r = try ResolvedConfig(c, environment: [:])
        #expect(!r.server.secure)
        #expect(r.server.host == "127.0.0.1")
        #expect(r.server.port == 9000)
        #expect(r.server.requestTarget == "/websocket/services?master&domain=x&version=1.0.0")
        #expect(!r.serverURLIsDerived)
        #expect(r.publicAPI.port == 9001)
        #expect(!r.publicAPI.secure)
        #expect(!r.publicAPIURLIsDerived)
        #expect(r.imageDomain == "img3.smr.vc")
    }

    // MARK: proxy

    private func resolved(_ env: [String: String], url: String? = nil, proxy: String? = nil) throws -> ResolvedConfig {
        var c = DaemonConfig(labelKey: Self.base + "-2")
        c.server.url = url
        c.server.proxy = try proxy.map { try HTTPProxy(url: $0) }
        return try ResolvedConfig(c, environment: env)
    }

    @Test func theEnvironmentProxyIsUsedForBothDestinations() throws {
        let r = try resolved(["https_proxy": "http://proxy.corp:3128"])
        #expect(r.serverProxy == HTTPProxy(host: "proxy.corp", port: 3128))
        #expect(r.serverProxySource == "https_proxy")
        #expect(r.publicAPIProxy == HTTPProxy(host: "proxy.corp", port: 3128))
        #expect(try resolved([:]).serverProxy == nil)
    }

    @Test func upperCaseWorksAndLowerCaseWins() throws {
        #expect(try resolved(["HTTPS_PROXY": "proxy-a:8080"]).serverProxy == HTTPProxy(host: "proxy-a", port: 8080))
        let both = try resolved(["HTTPS_PROXY": "proxy-a:8080", "https_proxy": "proxy-b:8081"])
        #expect(both.serverProxy == HTTPProxy(host: "proxy-b", port: 8081))
        #expect(both.serverProxySource == "https_proxy")
        // An empty lower-case variable does not hide the upper-case one.
        #expect(try resolved(["https_proxy": "", "HTTPS_PROXY": "proxy-a:8080"]).serverProxySource == "HTTPS_PROXY")
    }

    @Test func wsUsesHttpProxyAndWssUsesHttpsProxy() throws {
        let env = ["http_proxy": "http://plain:3128", "https_proxy": "http://secure:3129"]
        #expect(try resolved(env).serverProxy?.host == "secure")
        #expect(try resolved(env, url: "ws://sim.example:8080/websocket/services?master").serverProxy?.host == "plain")
        #expect(try resolved(["http_proxy": "http://plain:3128"]).serverProxy == nil)
    }

    @Test(arguments: [
        ("*", true),
        ("smartico.ai", true),
        ("SMARTICO.AI", true),
        (".smartico.ai", true),
        ("*.smartico.ai", true),
        ("api.smartico.ai", true),
        ("api.smartico.ai:443", true),
        ("api.smartico.ai:8443", false),
        ("i.smartico.ai", false),
        ("other.com, smartico.ai", true),
        (" other.com ,  .smartico.ai ", true),
        ("co.ai", false),
        ("ai", true),
        ("", false),
        ("localhost,127.0.0.1", false),
    ])
    func noProxyRules(noProxy: String, bypass: Bool) throws {
        let r = try resolved(["https_proxy": "proxy.corp:3128", "no_proxy": noProxy])
        #expect((r.serverProxy == nil) == bypass, "no_proxy=\(noProxy)")
    }

    @Test func noProxyDoesNotOverrideAConfiguredProxy() throws {
        let r = try resolved(["no_proxy": "*", "https_proxy": "http://env:1"], proxy: "http://conf.example:3128")
        #expect(r.serverProxy == HTTPProxy(host: "conf.example", port: 3128))
        #expect(r.serverProxySource == "server.proxy")
        #expect(r.publicAPIProxySource == "server.proxy")
    }

    @Test func anInvalidEnvironmentProxyIsAProblemNamingTheVariable() throws {
        var c = DaemonConfig(labelKey: Self.base)
        #expect(throws: ConfigError(source: "<memory>", problems: [
            ConfigProblem(key: "HTTPS_PROXY", message: "invalid proxy URL \"proxy:http\": invalid port \"http\" (must be 1…65535)"),
        ])) {
            try ResolvedConfig(c, environment: ["HTTPS_PROXY": "proxy:http"])
        }
        // Not used → not checked: no_proxy excludes it, or server.proxy replaces it.
        #expect(ResolvedConfig.environmentProblems(c, environment: ["https_proxy": "bad:port", "no_proxy": "*"]).isEmpty)
        c.server.proxy = try HTTPProxy(url: "http://ok:1")
        #expect(ResolvedConfig.environmentProblems(c, environment: ["https_proxy": "bad:port"]).isEmpty)
    }

    // MARK: fingerprint

    static let machineID = "4c4c4544004e4a10804bb4c04f4d3732"

    @Test func theFingerprintIsStablePerMachineAndKey() {
        let a = Secret(Self.base + "-2")
        let b = Secret("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-2")
        let fpA = DeviceFingerprint.derive(machineID: Self.machineID, labelKey: a)
        #expect(fpA == DeviceFingerprint.derive(machineID: Self.machineID, labelKey: a))
        #expect(fpA != DeviceFingerprint.derive(machineID: Self.machineID, labelKey: b))
        #expect(fpA != DeviceFingerprint.derive(machineID: "0123456789abcdef0123456789abcdef", labelKey: a))
        // Pinned: changing the derivation changes every device's fp.
        let input = Array("smarticod-fp-v1".utf8) + [0] + Array(Self.machineID.utf8) + [0] + Array((Self.base + "-2").utf8)
        let digest = Digest.sha256(input)
        #expect(fpA == Int32(bitPattern: UInt32(digest[0]) << 24 | UInt32(digest[1]) << 16 | UInt32(digest[2]) << 8 | UInt32(digest[3])))
    }

    @Test func theFingerprintIsNeverASliceOfTheMachineID() {
        let idBytes = Array(Self.machineID.utf8)
        var rawWindows = Set<Int32>()  // every 4 bytes of the id's text or its hex value, both byte orders
        let hexBytes: [UInt8] = stride(from: 0, to: idBytes.count, by: 2).map { UInt8(Self.machineID.dropFirst($0).prefix(2), radix: 16)! }
        for bytes in [idBytes, hexBytes] where bytes.count >= 4 {
            for i in 0...(bytes.count - 4) {
                let w = Array(bytes[i..<(i + 4)])
                rawWindows.insert(Int32(bitPattern: UInt32(w[0]) << 24 | UInt32(w[1]) << 16 | UInt32(w[2]) << 8 | UInt32(w[3])))
                rawWindows.insert(Int32(bitPattern: UInt32(w[3]) << 24 | UInt32(w[2]) << 16 | UInt32(w[1]) << 8 | UInt32(w[0])))
            }
        }
        for n in 0..<20 {
            let key = Secret(String(format: "%08x-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2", n))
            let fp = DeviceFingerprint.derive(machineID: Self.machineID, labelKey: key)
            #expect(!rawWindows.contains(fp))
            let hex = String(UInt32(bitPattern: fp), radix: 16)
            #expect(!Self.machineID.contains(hex) || hex.count < 6)
        }
    }

    @Test func aConfiguredFpWins() throws {
        var c = DaemonConfig(labelKey: Self.base + "-2")
        let derived = try ResolvedConfig(c, environment: [:]).fingerprint(machineID: Self.machineID)
        #expect(derived == DeviceFingerprint.derive(machineID: Self.machineID, labelKey: Secret(Self.base + "-2")))
        c.client.fp = -1461686277
        #expect(try ResolvedConfig(c, environment: [:]).fingerprint(machineID: Self.machineID) == -1461686277)
    }

    @Test func theMachineIDFallsBackAlongItsPaths() throws {
        let dir = try ConfigTestSupport.temporaryDirectory()
        let missing = dir.appendingPathComponent("machine-id").path
        let empty = dir.appendingPathComponent("empty").path
        let dbus = dir.appendingPathComponent("dbus-machine-id").path
        try Data("\n".utf8).write(to: URL(fileURLWithPath: empty))
        try Data("  \(Self.machineID)  \n".utf8).write(to: URL(fileURLWithPath: dbus))
        #expect(MachineID.read(paths: [missing, empty, dbus]) == Self.machineID)
        #expect(MachineID.read(paths: [missing, empty]) == nil)
        #expect(MachineID.defaultPaths == ["/etc/machine-id", "/var/lib/dbus/machine-id"])
    }

    @Test func aReloadReconnectsOnlyWhenTheConnectionChanges() throws {
        let env = ["https_proxy": "proxy:3128"]
        let before = DaemonConfig(labelKey: Self.base + "-2")
        let old = try ResolvedConfig(before, environment: env)
        var c = before
        c.log.level = .debug
        c.session.keepaliveS = 10
        c.user.extUserID = "someone"
        #expect(!(try ResolvedConfig(c, environment: env)).requiresReconnect(from: old))
        c.client.language = "de"  // sent as CORE_LANGUAGE_CHANGE on the open session
        #expect(!(try ResolvedConfig(c, environment: env)).requiresReconnect(from: old))
        c.client.deviceType = "NATIVE_TABLET"
        #expect(try ResolvedConfig(c, environment: env).requiresReconnect(from: old))
        #expect(try ResolvedConfig(before, environment: [:]).requiresReconnect(from: old))
        #expect(try ResolvedConfig(DaemonConfig(labelKey: Self.base + "-3"), environment: env).requiresReconnect(from: old))
    }

    // MARK: log level

    @Test func theLogLevelCanBeOverriddenFromTheEnvironment() throws {
        var c = DaemonConfig(labelKey: Self.base)
        c.log.level = .warning
        let plain = try ResolvedConfig(c, environment: [:])
        #expect(plain.logLevel == .warning)
        #expect(plain.logLevel.loggerLevel == .warning)
        #expect(plain.logLevelSource == "log.level")
        let overridden = try ResolvedConfig(c, environment: ["SMARTICOD_LOG_LEVEL": "DEBUG"])
        #expect(overridden.logLevel == .debug)
        #expect(overridden.logLevelSource == "SMARTICOD_LOG_LEVEL")
        #expect(ResolvedConfig.environmentProblems(c, environment: ["SMARTICOD_LOG_LEVEL": "loud"]).map(\.key) == ["SMARTICOD_LOG_LEVEL"])
    }
}
