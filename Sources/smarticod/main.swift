// `smarticod`: the daemon's command line. Thin on purpose: parse the arguments, load the
// configuration, hand it to `SmarticoDaemon`.
//
// No Foundation and no ArgumentParser (which imports FoundationEssentials): the daemon must not
// link them (idle RSS, docs/benchmarks.md "Static build"). The four options are parsed by hand.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import SmarticoDaemon

/// What the command line asks for.
enum Command: Equatable {
    case run(configPath: String, checkOnly: Bool)
    case help
    case version
}

/// A usage error: the message names the offending argument.
struct UsageError: Error {
    var message: String
    /// Adds the option's help line under the error (as for a missing value).
    var helpLine: String?
}

enum CommandLineParser {
    static let usage = "smarticod [--config <path>] [--check-config]"

    /// Parses `arguments` (without the program name). `--help`/`-h` and `--version` win over
    /// everything else, in the order given; `--config` may be repeated (the last one counts) and
    /// takes its value as the next argument or after `=`; `--` ends the options (nothing may follow).
    static func parse(_ arguments: [String]) -> Result<Command, UsageError> {
        for argument in arguments {
            if argument == "--" { break }
            if argument == "--help" || argument == "-h" { return .success(.help) }
            if argument == "--version" { return .success(.version) }
        }
        var configPath = ConfigLoader.defaultPath
        var checkOnly = false
        var i = 0
        while i < arguments.count {
            let argument = arguments[i]
            i += 1
            switch argument {
            case "--config":
                guard i < arguments.count, !isOption(arguments[i]), !arguments[i].isEmpty else {
                    return .failure(UsageError(
                        message: "Missing value for '--config <path>'",
                        helpLine: "--config <path>  Path of the JSON configuration file."))
                }
                configPath = arguments[i]
                i += 1
            case "--check-config":
                checkOnly = true
            case "--":
                if i < arguments.count { return .failure(UsageError(message: "Unexpected argument '\(arguments[i])'")) }
            default:
                if argument.hasPrefix("--config=") {
                    let value = String(argument.dropFirst("--config=".count))
                    guard !value.isEmpty else {
                        return .failure(UsageError(
                            message: "Missing value for '--config <path>'",
                            helpLine: "--config <path>  Path of the JSON configuration file."))
                    }
                    configPath = value
                } else if argument.hasPrefix("--check-config=") {
                    return .failure(UsageError(message: "The flag '--check-config' does not take a value (got '\(argument)')"))
                } else if argument.hasPrefix("-") && argument != "-" {
                    return .failure(UsageError(message: "Unknown option '\(argument)'"))
                } else {
                    return .failure(UsageError(message: "Unexpected argument '\(argument)'"))
                }
            }
        }
        return .success(.run(configPath: configPath, checkOnly: checkOnly))
    }

    /// An argument that looks like an option rather than a value (`-x`, `--x`; not `-` alone).
    private static func isOption(_ argument: String) -> Bool {
        argument.hasPrefix("-") && argument != "-"
    }

    static let help = """
        OVERVIEW: Keep this device's session with Smartico alive and serve it on a
        local Unix socket.

        Runs in the foreground (systemd style) and logs to stderr. The configuration is
        one JSON file; every key is documented in docs/configuration.md and
        config.example.json.

        Exit codes: 0 success (stopped by SIGTERM/SIGINT), 1 cannot start (the reason is
        logged), 2 usage error, 73 the state directory or the socket's directory cannot be
        created or written, or its store is one only an operator can fix (a newer
        smarticod's, another program's database), 78 invalid configuration (one line per
        problem on stderr: <path>: <key>: <problem>; warnings, which fail nothing, read
        <path>: <key>: warning: <problem>). SIGHUP reloads the configuration file.

        Environment: https_proxy / http_proxy / no_proxy (either case) when
        server.proxy is not set; SMARTICOD_LOG_LEVEL overrides log.level.

        Examples:
          smarticod --config /etc/smarticod/config.json
          smarticod --config ./config.example.json --check-config
          SMARTICOD_LOG_LEVEL=debug smarticod --config ./my-config.json

        USAGE: \(usage)

        OPTIONS:
          --config <path>         Path of the JSON configuration file. (default:
                                  \(ConfigLoader.defaultPath))
          --check-config          Validate the configuration and exit (0 when valid, 78
                                  otherwise): also the CA file, the socket's directory
                                  (present or creatable) and the placeholder label key.
                                  Needs neither the state directory nor the server.
          --version               Show the version.
          -h, --help              Show help information.

        """
}

/// Writes `line` and a newline to stderr (unbuffered, whole).
private func printError(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress! + offset, $0.count - offset) }
        if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { return }
    }
}

/// The process environment as a dictionary (the first of duplicate names wins, as getenv).
private func processEnvironment() -> [String: String] {
    var result: [String: String] = [:]
    var p = environ
    while let entry = p.pointee {
        let text = String(cString: entry)
        if let eq = text.firstIndex(of: "=") {
            let name = String(text[..<eq])
            if result[name] == nil { result[name] = String(text[text.index(after: eq)...]) }
        }
        p += 1
    }
    return result
}

switch CommandLineParser.parse(Array(CommandLine.arguments.dropFirst())) {
case .failure(let error):
    // Usage errors exit with 2 (daemon.md).
    printError("Error: " + error.message)
    if let helpLine = error.helpLine { printError("Help:  " + helpLine) }
    printError("Usage: " + CommandLineParser.usage)
    printError("  See 'smarticod --help' for more information.")
    exit(2)
case .success(.help):
    print(CommandLineParser.help)
    exit(0)
case .success(.version):
    print(SmarticoVersion.string)
    exit(0)
case .success(.run(let configPath, let checkOnly)):
    let environment = processEnvironment()
    let resolved: ResolvedConfig
    do {
        resolved = try ConfigLoader.loadResolved(path: configPath, environment: environment)
    } catch {
        for line in error.lines { printError(line) }
        exit(78)
    }
    // What can be checked on this machine without the network. At start the socket's directory
    // is left to the daemon, which creates it (exit 73 when it cannot), and so is the metrics
    // textfile's (a warning in the log when it cannot write it).
    let hostProblems = resolved.config.hostProblems(socketDirectory: checkOnly, metricsDirectory: checkOnly, stateDirectory: checkOnly)
    for warning in hostProblems where warning.severity == .warning {
        printError("\(configPath): \(warning.key): warning: \(warning.message)")
    }
    let hostErrors = hostProblems.filter { $0.severity == .error }
    if !hostErrors.isEmpty {
        for line in ConfigError(source: configPath, problems: hostErrors).lines { printError(line) }
        exit(78)
    }
    if checkOnly {
        print("configuration OK: \(configPath)")
        for line in resolved.summary { print("  " + line) }
        exit(0)
    }
    Daemon.bootstrapLogging(level: resolved.logLevel.loggerLevel, environment: environment)
    let status = Daemon.runBlocking(config: resolved, configPath: configPath, environment: environment)
    exit(status)
}
