import Foundation
import Testing
@testable import SmarticoDaemon
import Transport

@Suite("Config secrets")
struct ConfigSecretTests {
    // Recognisable values: if any of these appears in a text, a secret leaked.
    static let labelKey = "cafebabe-1111-2222-3333-deadbeef0001-3"
    static let hash = "SECRETHASH0123456789abcdef:1700000000000"
    static let token = "PUSHTOKEN-fcm-0123456789-secret"
    static let proxyPassword = "Pr0xyPa55word"
    static let all = [labelKey, String(labelKey.prefix(36)), hash, token, proxyPassword]

    private func expectNoSecret(_ text: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for secret in Self.all {
            #expect(!text.contains(secret), "\(what) contains a secret: \(text)", sourceLocation: sourceLocation)
        }
        // Not even a long slice of one.
        for secret in Self.all {
            let slice = String(secret.dropFirst(4).prefix(8))
            #expect(!text.contains(slice), "\(what) contains a slice of a secret: \(text)", sourceLocation: sourceLocation)
        }
    }

    private func dumped<T>(_ value: T) -> String {
        var out = ""
        dump(value, to: &out)
        return out
    }

    @Test func aSecretIsMaskedEverywhereItCanBeTurnedIntoText() throws {
        let s = Secret(Self.token)
        #expect(s.description == "PUSH…(masked)")
        #expect("\(s)" == "PUSH…(masked)")
        #expect(String(describing: s) == "PUSH…(masked)")
        #expect(String(reflecting: s) == "Secret(PUSH…(masked))")
        #expect(s.debugDescription == "Secret(PUSH…(masked))")
        #expect(dumped(s) == "- Secret(PUSH…(masked))\n")
        #expect(Mirror(reflecting: s).children.isEmpty)
        let encoded = String(decoding: try JSONEncoder().encode([s]), as: UTF8.self)
        expectNoSecret(encoded, "JSONEncoder")
        expectNoSecret("\([s])", "an array of secrets")
        expectNoSecret(String(reflecting: Optional(s)), "an optional secret")
        #expect(s.exposedValue == Self.token)
        #expect(s.count == Self.token.count)
    }

    @Test func shortSecretsAreMaskedCompletely() {
        #expect(Secret("hunter2").description == "(masked)")
        #expect(Secret("12345678901").description == "(masked)")
        #expect(Secret("123456789012").description == "1234…(masked)")
        #expect(Secret("").description == "(empty)")
    }

    private func configWithSecrets() -> DaemonConfig {
        var c = DaemonConfig(labelKey: Self.labelKey)
        c.user.extUserID = "player-1"
        c.user.hash = Secret(Self.hash)
        c.user.push.token = Secret(Self.token)
        c.server.proxy = try! HTTPProxy(url: "http://alice:\(Self.proxyPassword)@proxy.example:3128")
        return c
    }

    @Test func aWholeConfigurationShowsItsSecretsMasked() throws {
        let c = configWithSecrets()
        #expect(c.validate().isEmpty)
        expectNoSecret("\(c)", "interpolation")
        expectNoSecret(String(describing: c), "String(describing:)")
        expectNoSecret(String(reflecting: c), "String(reflecting:)")
        expectNoSecret(dumped(c), "dump")
        expectNoSecret(String(decoding: try JSONEncoder().encode(c), as: UTF8.self), "JSONEncoder")
        #expect(String(describing: c).contains("cafe…(masked)"))
        #expect(c.server.proxy?.description == "http://alice:(masked)@proxy.example:3128")
        let r = try ResolvedConfig(c, environment: [:])
        expectNoSecret(String(reflecting: r), "ResolvedConfig")
        expectNoSecret(r.summary.joined(separator: "\n"), "the summary")
        expectNoSecret(dumped(r), "dump of ResolvedConfig")
        // The raw values are still there for whoever asks explicitly.
        #expect(r.labelKey.full.exposedValue == Self.labelKey)
        #expect(r.labelKey.key.exposedValue == String(Self.labelKey.prefix(36)))
        #expect(r.serverProxy?.password?.exposedValue == Self.proxyPassword)
        let basic = Data("alice:\(Self.proxyPassword)".utf8).base64EncodedString()
        #expect(r.serverProxy?.authorizationHeaderValue == "Basic " + basic)
        expectNoSecret(String(reflecting: r.serverProxy), "the proxy")
    }

    @Test func errorMessagesNeverContainASecret() {
        // Every secret made invalid, in every way the loader can complain about it.
        let json = """
        {
          "server": {"label_key": "\(Self.labelKey)x", "proxy": "socks5://alice:\(Self.proxyPassword)@proxy:1080",
                     "url": "wss://alice:\(Self.proxyPassword)@api.example.com/ws"},
          "user": {"hash": "\(Self.hash)", "push": {"token": 42, "status": 9}},
          "http": {"public_url": "https://alice:\(Self.proxyPassword)@papi.example.com/x"}
        }
        """
        guard case .failure(let error) = ConfigTestSupport.decode(json) else {
            Issue.record("expected a failure")
            return
        }
        #expect(Set(error.problems.map(\.key)) == ["server.label_key", "server.proxy", "server.url", "user.hash", "user.push.token", "user.push.status", "http.public_url"])
        expectNoSecret(error.description, "ConfigError.description")
        expectNoSecret(String(reflecting: error), "String(reflecting: ConfigError)")
        expectNoSecret(dumped(error), "dump(ConfigError)")
        // Secrets of the wrong type say only what kind of value they were.
        let tokenLine = error.problems.first { $0.key == "user.push.token" }
        #expect(tokenLine?.message == "must be a non-empty string or null, got a number")
        let wrongTypeKey = ConfigTestSupport.problems(#"{"server": {"label_key": ["\#(Self.labelKey)"]}}"#)
        #expect(wrongTypeKey.first?.message.hasSuffix("got an array") == true)
        let wrongTypeHash = ConfigTestSupport.problems(#"{"server": {"label_key": "\#(Self.labelKey)"}, "user": {"ext_user_id": "p", "hash": {"v": "\#(Self.hash)"}}}"#)
        expectNoSecret(wrongTypeHash.description, "a hash of the wrong type")
    }

    @Test func proxyErrorsFromTheEnvironmentNeverContainThePassword() {
        let c = DaemonConfig(labelKey: Self.labelKey)
        let problems = ResolvedConfig.environmentProblems(c, environment: ["https_proxy": "socks5h://alice:\(Self.proxyPassword)@proxy:1080"])
        #expect(problems.map(\.key) == ["https_proxy"])
        expectNoSecret(problems.description, "environment problems")
    }
}
