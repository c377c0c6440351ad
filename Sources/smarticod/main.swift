import ArgumentParser
import Foundation
import SmarticoDaemon

/// `smarticod`: the daemon's command line. Thin on purpose: parse the arguments, load the
/// configuration, hand it to `SmarticoDaemon`.
struct Smarticod: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "smarticod",
        abstract: "Keep this device's session with Smartico alive and serve it on a local Unix socket.",
        discussion: """
            Runs in the foreground (systemd style) and logs to stderr. The configuration is one \
            JSON file; every key is documented in docs/configuration.md and config.example.json.

            Exit codes: 0 success (stopped by SIGTERM/SIGINT), 1 cannot start (state_dir or \
            socket unusable: the reason is logged), 2 usage error, 78 invalid configuration \
            (one line per problem on stderr: <path>: <key>: <problem>). SIGHUP reloads the \
            configuration file.

            Environment: https_proxy / http_proxy / no_proxy (either case) when server.proxy \
            is not set; SMARTICOD_LOG_LEVEL overrides log.level.

            Examples:
              smarticod --config /etc/smarticod/config.json
              smarticod --config ./config.example.json --check-config
              SMARTICOD_LOG_LEVEL=debug smarticod --config ./my-config.json
            """,
        version: SmarticoVersion.string
    )

    @Option(name: .long, help: ArgumentHelp("Path of the JSON configuration file.", valueName: "path"))
    var config: String = ConfigLoader.defaultPath

    @Flag(name: .customLong("check-config"), help: "Validate the configuration and exit (0 when valid, 78 otherwise). Needs neither the state directory nor the server.")
    var checkConfig = false

    func run() throws {
        let resolved: ResolvedConfig
        do {
            resolved = try ConfigLoader.loadResolved(path: config, environment: ProcessInfo.processInfo.environment)
        } catch {
            for line in error.lines { printError(line) }
            throw ExitCode(78)
        }
        if checkConfig {
            print("configuration OK: \(config)")
            for line in resolved.summary { print("  " + line) }
            return
        }
        Daemon.bootstrapLogging(level: resolved.logLevel.loggerLevel)
        let status = Daemon.runBlocking(
            config: resolved, configPath: config, environment: ProcessInfo.processInfo.environment)
        if status != 0 { throw ExitCode(status) }
    }
}

private func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

// Usage errors exit with 2 (daemon.md), not ArgumentParser's 64.
do {
    var command = try Smarticod.parseAsRoot()
    try command.run()
} catch {
    if Smarticod.exitCode(for: error) == .validationFailure {
        printError(Smarticod.fullMessage(for: error))
        exit(2)
    }
    Smarticod.exit(withError: error)
}
