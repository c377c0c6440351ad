import SmarticoWrapperCore
import Testing

@Suite("WrapperArguments.parse")
struct WrapperArgumentsTests {
    func refused(_ args: [String], sourceLocation: SourceLocation = #_sourceLocation) -> String {
        do {
            let parsed = try WrapperArguments.parse(args)
            Issue.record("accepted \(args): \(parsed)", sourceLocation: sourceLocation)
            return ""
        } catch {
            return error.text
        }
    }

    @Test("no arguments: the defaults")
    func none() throws {
        let a = try WrapperArguments.parse([])
        #expect(a == WrapperArguments())
        #expect(a.socket == nil)
        #expect(a.config == nil)
        #expect(!a.kiosk)
        #expect(!a.open)
        #expect(a.openDeepLink == nil)
        #expect(a.logLevel == .info)
        #expect(!a.help)
        #expect(!a.version)
    }

    @Test("every flag, as separate values")
    func everyFlag() throws {
        let a = try WrapperArguments.parse([
            "--socket", "/run/smarticod/s.sock", "--config", "/etc/w.json", "--kiosk", "--open", "dp:gf_missions",
            "--log-level", "debug", "--help", "--version",
        ])
        #expect(a.socket == "/run/smarticod/s.sock")
        #expect(a.config == "/etc/w.json")
        #expect(a.kiosk)
        #expect(a.open)
        #expect(a.openDeepLink == "dp:gf_missions")
        #expect(a.logLevel == .debug)
        #expect(a.help)
        #expect(a.version)
    }

    @Test("every flag with =")
    func inlineValues() throws {
        let a = try WrapperArguments.parse(["--socket=/tmp/a=b.sock", "--config=/etc/w.json", "--open=dp:gf", "--log-level=error"])
        #expect(a.socket == "/tmp/a=b.sock", "split at the first =")
        #expect(a.config == "/etc/w.json")
        #expect(a.open)
        #expect(a.openDeepLink == "dp:gf")
        #expect(a.logLevel == .error)
    }

    @Test("log levels", arguments: [("debug", LogLevel.debug), ("info", .info), ("warning", .warning), ("error", .error)])
    func logLevels(_ text: String, _ level: LogLevel) throws {
        #expect(try WrapperArguments.parse(["--log-level", text]).logLevel == level)
        #expect(level.description == text)
    }

    @Test("-h is --help")
    func shortHelp() throws {
        #expect(try WrapperArguments.parse(["-h"]).help)
    }

    @Test("--open without a value: the widget's home; the next flag is not its value")
    func openWithoutValue() throws {
        let alone = try WrapperArguments.parse(["--open"])
        #expect(alone.open)
        #expect(alone.openDeepLink == nil)
        let before = try WrapperArguments.parse(["--open", "--kiosk"])
        #expect(before.open)
        #expect(before.openDeepLink == nil)
        #expect(before.kiosk)
        let after = try WrapperArguments.parse(["--kiosk", "--open"])
        #expect(after.open)
        #expect(after.openDeepLink == nil)
    }

    @Test("--open takes gamification links only", arguments: [
        ["--open", "dp:cashier"], ["--open=dp:cashier"], ["--open", "https://example.com/"], ["--open", "gf_missions"],
        ["--open", "dp:inbox"], ["--open="],
    ])
    func badOpen(_ args: [String]) {
        let text = refused(args)
        #expect(text.hasPrefix("--open takes a gamification deep link"), "\(text)")
    }

    @Test("--open accepts any dp:gf… link, any case")
    func goodOpen() throws {
        #expect(try WrapperArguments.parse(["--open", "DP:GF_Badges"]).openDeepLink == "DP:GF_Badges")
        #expect(try WrapperArguments.parse(["--open", "dp:gf_saw&id=5&standalone=true"]).openDeepLink == "dp:gf_saw&id=5&standalone=true")
    }

    @Test("unknown arguments", arguments: [["--bogus"], ["-x"], ["positional"], ["--kiosk", "extra"], ["--SOCKET", "/x"], ["--socket", "/x", "/y"]])
    func unknown(_ args: [String]) {
        let text = refused(args)
        #expect(text.hasPrefix("unknown argument \""), "\(text)")
        #expect(text.hasSuffix("(see --help)"))
    }

    @Test("missing values", arguments: [
        (["--socket"], "--socket needs a value"),
        (["--socket", "--kiosk"], "--socket needs a value"),
        (["--config"], "--config needs a value"),
        (["--config", "--open"], "--config needs a value"),
        (["--log-level"], "--log-level needs a value"),
        (["--socket="], "--socket needs a non-empty value"),
        (["--socket", ""], "--socket needs a non-empty value"),
        (["--config="], "--config needs a non-empty value"),
    ])
    func missingValues(_ args: [String], _ expected: String) {
        #expect(refused(args) == expected)
    }

    @Test("a bad log level", arguments: [["--log-level", "loud"], ["--log-level="], ["--log-level", "DEBUG"], ["--log-level=trace"]])
    func badLogLevel(_ args: [String]) {
        #expect(refused(args).hasPrefix("--log-level must be debug, info, warning or error, got \""))
    }

    @Test("flags without a value take none: --kiosk=false is refused, not read as --kiosk",
          arguments: [["--kiosk=false"], ["--kiosk=yes"], ["--help=1"], ["--version=2"]])
    func flagWithValue(_ args: [String]) {
        let text = refused(args)
        #expect(text.contains("takes no value"), "\(text)")
    }

    @Test("the usage names every flag")
    func usage() {
        for flag in ["--socket", "--config", "--kiosk", "--open", "--log-level", "--version", "--help"] {
            #expect(WrapperArguments.usage.contains(flag))
        }
    }
}
