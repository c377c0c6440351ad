#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a configuration file and reports every problem at once.
///
/// Order of the work: read the file (a missing or unreadable file is one problem naming it),
/// parse JSON (a syntax error is one problem with its line and column), decode every key
/// (unknown keys at any level, wrong types, repeated keys, the missing label key: all
/// collected), then ``DaemonConfig/validate()``, then the process environment
/// (proxy variables, `SMARTICOD_LOG_LEVEL`). A problem found while decoding a key hides
/// the validation problems of the same key, so each mistake is reported once.
///
/// These functions do blocking file I/O: call them at start-up or from the thread that
/// handles SIGHUP, not from Swift concurrency's cooperative pool.
public enum ConfigLoader {
    /// The default configuration path (systemd's `ConfigurationDirectory=smarticod`).
    public static let defaultPath = "/etc/smarticod/config.json"

    /// Reads, decodes and validates the file at `path`.
    public static func load(path: String) throws(ConfigError) -> DaemonConfig {
        let bytes = try readFile(path: path)
        return try decode(bytes, source: path)
    }

    /// Reads, decodes and validates the file at `path`, then derives the runtime values with
    /// `environment` (normally `ProcessInfo.processInfo.environment`). Every problem of the
    /// file and of the environment is in the one error.
    public static func loadResolved(path: String, environment: [String: String]) throws(ConfigError) -> ResolvedConfig {
        let bytes = try readFile(path: path)
        return try resolve(bytes, source: path, environment: environment)
    }

    /// Decodes and validates a configuration held in memory. `source` names it in messages.
    public static func decode(_ bytes: [UInt8], source: String = "<memory>") throws(ConfigError) -> DaemonConfig {
        let (config, problems) = decodeCollecting(bytes)
        guard let config else { throw ConfigError(source: source, problems: problems) }
        let all = merge(decoding: problems, validation: config.validate())
        if !all.isEmpty { throw ConfigError(source: source, problems: all) }
        return config
    }

    /// ``decode(_:source:)`` followed by ``ResolvedConfig/init(_:environment:source:)``, with
    /// the problems of both in one error.
    public static func resolve(_ bytes: [UInt8], source: String = "<memory>", environment: [String: String]) throws(ConfigError) -> ResolvedConfig {
        let (config, problems) = decodeCollecting(bytes)
        guard let config else { throw ConfigError(source: source, problems: problems) }
        var all = merge(decoding: problems, validation: config.validate())
        if all.isEmpty {
            return try ResolvedConfig(config, environment: environment, source: source)
        }
        all += ResolvedConfig.environmentProblems(config, environment: environment)
        throw ConfigError(source: source, problems: all)
    }

    // MARK: steps

    /// The configuration (nil when the bytes are not a JSON object at all) and the problems
    /// found while decoding.
    static func decodeCollecting(_ bytes: [UInt8]) -> (DaemonConfig?, [ConfigProblem]) {
        guard bytes.count <= ConfigJSONParser.maximumBytes else {
            return (nil, [ConfigProblem(key: "", message: "the file is \(bytes.count) bytes long; a configuration may have at most \(ConfigJSONParser.maximumBytes)")])
        }
        var parser = ConfigJSONParser(bytes: bytes)
        let root: ConfigJSON
        do {
            root = try parser.parseDocument()
        } catch {
            return (nil, [ConfigProblem(key: "line \(error.line), column \(error.column)", message: "invalid JSON: \(error.reason)")])
        }
        guard case .object = root else {
            return (nil, [ConfigProblem(key: "", message: "the file must contain one JSON object, found \(root.kindDescription)")])
        }
        let sink = ConfigProblemSink()
        var problems = parser.duplicateKeys.map {
            ConfigProblem(key: $0, message: "appears more than once in the same object (only one value may be given)")
        }
        let decoder = ConfigTreeDecoder(node: root, codingPath: [], userInfo: [.configProblemSink: sink])
        do {
            let config = try DaemonConfig(from: decoder)
            problems += sink.all
            return (config, problems)
        } catch {
            // Only reachable through a bug in a section's init(from:): every field failure is collected.
            problems += sink.all
            problems.append(ConfigProblem(key: "", message: "could not be decoded: \(error)"))
            return (nil, problems)
        }
    }

    /// The decoding problems and the validation problems of keys that decoded fine, in the
    /// order of the keys in the file's schema (`server…` first, `log…` last; unknown keys
    /// after the known keys of their object).
    static func merge(decoding: [ConfigProblem], validation: [ConfigProblem]) -> [ConfigProblem] {
        let decoded = Set(decoding.map(\.key))
        let extra = validation.filter { problem in
            !decoded.contains { problem.key == $0 || problem.key.hasPrefix($0 + ".") || problem.key.hasPrefix($0 + "[") }
        }
        let all = decoding + extra
        let ranks = all.map { schemaRank($0.key) }
        return all.indices
            .sorted { a, b in ranks[a] == ranks[b] ? a < b : ranks[a].lexicographicallyPrecedes(ranks[b]) }
            .map { all[$0] }
    }

    /// Where a key sorts: the position of each of its components among its siblings.
    static func schemaRank(_ key: String) -> [Int] {
        let unknown = Int.max - 1
        guard !key.isEmpty, !key.hasPrefix("line ") else { return [-1] }
        var rank: [Int] = []
        var prefix = ""
        for part in key.split(separator: ".", omittingEmptySubsequences: false) {
            // `pinned_spki_sha256[2]` → the key, then the index.
            let name = part.prefix { $0 != "[" }
            prefix = prefix.isEmpty ? String(name) : prefix + "." + name
            rank.append(DaemonConfig.allKeyPaths.firstIndex(of: prefix) ?? unknown)
            if let open = part.firstIndex(of: "["), let index = Int(part[part.index(after: open)...].dropLast()) {
                rank.append(index)
            }
        }
        return rank
    }

    /// The file's bytes, or a problem naming what went wrong (with the system's reason).
    static func readFile(path: String) throws(ConfigError) -> [UInt8] {
        func fail(_ message: String) -> ConfigError {
            ConfigError(source: path, problems: [ConfigProblem(key: "", message: message)])
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw fail("cannot open the configuration file: \(String(cString: strerror(errno))) (errno \(errno))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw fail("cannot read the configuration file: \(String(cString: strerror(errno)))")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw fail("is not a regular file (a directory or a device?); --config takes the path of a JSON file")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw fail("cannot read the configuration file: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
            if bytes.count > ConfigJSONParser.maximumBytes {
                throw fail("the file is larger than \(ConfigJSONParser.maximumBytes) bytes; is it really the configuration?")
            }
        }
        return bytes
    }
}
