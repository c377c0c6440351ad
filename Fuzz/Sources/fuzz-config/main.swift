// The configuration file's decoding and validation as the daemon runs it at start, on SIGHUP and
// for --check-config (ConfigLoader: size limit, BOM, JSON with its line/column errors, every key
// decoded with unknown keys, wrong types and repeated keys collected, DaemonConfig.validate, then
// ResolvedConfig: label key, derived URLs, proxies from the file or the environment, log level).
//
// Input: the bytes of config.json. No file is read: the bytes go to ConfigLoader.decode/resolve,
// which the file reader (ConfigLoader.loadResolved) hands its bytes to.
// Checks: decode accepts exactly what resolve accepts with an empty environment (validate() and
// environmentProblems() check everything derive() needs), and with a valid proxy environment
// too; a refusal names at least one problem, each with a message; an accepted configuration
// validates clean and resolves to itself; a UTF-8 BOM in front changes nothing.
import FuzzSupport
import SmarticoDaemon

let proxyEnvironment = [
    "https_proxy": "http://user:pass@proxy.example:3128", "http_proxy": "http://proxy.example:3128",
    "no_proxy": "localhost,127.0.0.1,.internal", "SMARTICOD_LOG_LEVEL": "debug",
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = input(data, size)
    let decoded: Result<DaemonConfig, ConfigError> = Result { () throws(ConfigError) in try ConfigLoader.decode(bytes) }
    let resolved: Result<ResolvedConfig, ConfigError> = Result { () throws(ConfigError) in
        try ConfigLoader.resolve(bytes, environment: [:])
    }
    switch (decoded, resolved) {
    case let (.success(config), .success(r)):
        invariant(r.config == config, "resolve gave another configuration than decode")
        invariant(config.validate().isEmpty, "an accepted configuration does not validate: \(config.validate())")
        let again: Result<ResolvedConfig, ConfigError> = Result { () throws(ConfigError) in
            try ResolvedConfig(config, environment: [:])
        }
        invariant(again == .success(r), "the configuration resolved again differs")
        let proxied: Result<ResolvedConfig, ConfigError> = Result { () throws(ConfigError) in
            try ConfigLoader.resolve(bytes, environment: proxyEnvironment)
        }
        guard case .success(let p) = proxied else {
            invariant(false, "a valid proxy environment refused: \(proxied)")
            return 0
        }
        invariant(p.logLevel == .debug, "SMARTICOD_LOG_LEVEL=debug gave \(p.logLevel)")
        invariant(p.config == config, "the environment changed the configuration")
    case let (.failure(a), .failure(b)):
        for e in [a, b] {
            invariant(!e.problems.isEmpty, "a refusal without a problem")
            for problem in e.problems { invariant(!problem.message.isEmpty, "a problem without a message: \(problem.key)") }
            _ = e.description
        }
    default:
        invariant(false, "decode and resolve disagree: \(decoded) / \(resolved)")
    }
    if !bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
        let withBOM: Result<DaemonConfig, ConfigError> = Result { () throws(ConfigError) in try ConfigLoader.decode([0xEF, 0xBB, 0xBF] + bytes) }
        switch (decoded, withBOM) {
        case let (.success(a), .success(b)): invariant(a == b, "a BOM changed the configuration")
        case (.failure, .failure): break
        default: invariant(bytes.count + 3 > 4 << 20, "a BOM changed the outcome")
        }
    }
    return 0
}

runFuzzer(fuzzConfig)
