#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import SmarticoProtocol

/// Reads a configuration file and reports every problem at once: the file (missing, unreadable),
/// its JSON (one syntax error with its line and column), every key (unknown keys at any level,
/// wrong types, repeated keys, the missing label key), ``DaemonConfig/validate()``, then the
/// environment (``ResolvedConfig/environmentProblems(_:environment:)``). A key that could not be
/// decoded is not validated too, so each mistake is reported once.
///
/// Reading the file blocks: call these at start-up or from the thread that handles SIGHUP, not
/// from Swift concurrency's cooperative pool.
public enum ConfigLoader {
    /// The default configuration path (systemd's `ConfigurationDirectory=smarticod`).
    public static let defaultPath = "/etc/smarticod/config.json"

    public static func load(path: String) throws(ConfigError) -> DaemonConfig {
        try decode(readFile(path: path), source: path)
    }

    /// ``load(path:)`` with the runtime values derived from `environment` too.
    public static func loadResolved(path: String, environment: [String: String]) throws(ConfigError) -> ResolvedConfig {
        try resolve(readFile(path: path), source: path, environment: environment)
    }

    /// Decodes and validates a configuration held in memory. `source` names it in messages.
    public static func decode(_ bytes: [UInt8], source: String = "<memory>") throws(ConfigError) -> DaemonConfig {
        let (config, problems) = decodeAndValidate(bytes)
        guard let config, problems.isEmpty else { throw ConfigError(source: source, problems: problems) }
        return config
    }

    /// ``decode(_:source:)`` and ``ResolvedConfig/init(_:environment:source:)``, the problems of both in one error.
    public static func resolve(_ bytes: [UInt8], source: String = "<memory>", environment: [String: String]) throws(ConfigError) -> ResolvedConfig {
        let (config, problems) = decodeAndValidate(bytes)
        guard let config else { throw ConfigError(source: source, problems: problems) }
        guard problems.isEmpty else {
            throw ConfigError(source: source, problems: problems + ResolvedConfig.environmentProblems(config, environment: environment))
        }
        return try ResolvedConfig(config, environment: environment, source: source)
    }

    /// Files larger than this are refused before parsing: a configuration is a few KiB.
    static let maximumBytes = 4 << 20
    static let maximumDepth = 64

    /// The configuration (nil when the bytes are not a JSON object) and its problems, decoding
    /// problems first and the validation problems of the keys that decoded, in schema order.
    static func decodeAndValidate(_ bytes: [UInt8]) -> (DaemonConfig?, [ConfigProblem]) {
        guard bytes.count <= maximumBytes else {
            return (nil, [ConfigProblem(key: "", message: "the file is \(bytes.count) bytes long; a configuration may have at most \(maximumBytes)")])
        }
        let text = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(bytes.dropFirst(3)) : bytes  // UTF-8 BOM
        let root: JSONValue
        do {
            root = try JSONValue(parsing: text, options: JSONParseOptions(maxDepth: maximumDepth))
        } catch {
            let (line, column) = error.lineAndColumn(in: text)
            return (nil, [ConfigProblem(key: "line \(line), column \(column)", message: "invalid JSON: \(syntaxReason(error, in: text))")])
        }
        guard case .object(let object) = root else {
            return (nil, [ConfigProblem(key: "", message: "the file must contain one JSON object, found \(kindDescription(root))")])
        }
        var problems = duplicateKeys(root, path: "").map {
            ConfigProblem(key: $0, message: "appears more than once in the same object (only one value may be given)")
        }
        var config = DaemonConfig(labelKey: "")
        DaemonConfig.decode(object, at: "", keys: DaemonConfig.keys, into: &config, problems: &problems)
        let decoded = Set(problems.map(\.key))
        let validation = config.validate().filter { problem in
            !decoded.contains { problem.key == $0 || problem.key.hasPrefix($0 + ".") || problem.key.hasPrefix($0 + "[") }
        }
        return (config, inSchemaOrder(problems + validation))
    }

    /// The dotted paths of keys given more than once in one object, at any depth.
    static func duplicateKeys(_ value: JSONValue, path: String) -> [String] {
        switch value {
        case .array(let items):
            return items.enumerated().flatMap { duplicateKeys($1, path: path + "[\($0)]") }
        case .object(let members):
            var seen: Set<String> = []
            return members.flatMap { key, member in
                let child = path.isEmpty ? keyComponent(key) : path + "." + keyComponent(key)
                return duplicateKeys(member, path: child) + (seen.insert(key).inserted ? [] : [child])
            }
        default:
            return []
        }
    }

    /// A syntax error as a person fixing the file wants it said (the position is given apart).
    static func syntaxReason(_ error: JSONParseError, in text: [UInt8]) -> String {
        func show(_ b: UInt8) -> String {
            switch b {
            case 0x0A: "'\\n'"
            case 0x0D: "'\\r'"
            case 0x09: "'\\t'"
            case 0x20...0x7E: "'\(Character(Unicode.Scalar(b)))'"
            default: "byte 0x" + (b < 16 ? "0" : "") + String(b, radix: 16, uppercase: true)
            }
        }
        let blanks: [UInt8] = [0x20, 0x09, 0x0A, 0x0D]
        let before = text[..<min(error.offset, text.count)].last { !blanks.contains($0) }
        switch error.kind {
        case .unexpectedEnd where text.allSatisfy(blanks.contains):
            return "the file is empty; expected a JSON object"
        case .unexpectedEnd(let expected):
            return "unexpected end of file; expected \(expected)"
        case .unexpectedByte(let b, _) where before == UInt8(ascii: ",") && (b == UInt8(ascii: "}") || b == UInt8(ascii: "]")):
            return "trailing comma before \(show(b))"
        case .unexpectedByte(let b, "end of input"):
            return "unexpected \(show(b)) after the end of the JSON value"
        case .unexpectedByte(let b, "a value"):
            return "unexpected \(show(b)); expected a value (object, array, string, number, true, false or null)"
        case .unexpectedByte(let b, let expected) where ["'true'", "'false'", "'null'"].contains(expected):
            return "unexpected \(show(b)); did you mean \(expected.dropFirst().dropLast())? (strings must be quoted)"
        case .unexpectedByte(let b, "',' or '}'"):
            return "expected ',' or '}' after an object member, found \(show(b))"
        case .unexpectedByte(let b, "',' or ']'"):
            return "expected ',' or ']' in an array, found \(show(b))"
        case .unexpectedByte(let b, let expected):
            return "expected \(expected), found \(show(b))"
        case .invalidNumber(let reason) where reason.hasPrefix("leading zeros"):
            let start = error.offset - (error.offset > 1 && text[error.offset - 2] == UInt8(ascii: "-") ? 2 : 1)
            let end = text[error.offset...].firstIndex { !"0123456789.eE+-".utf8.contains($0) } ?? text.count
            return "numbers must not have leading zeros (write \"\(String(decoding: text[start..<end], as: UTF8.self))\" as a string)"
        case .invalidEscape(let b):
            let shown = (0x20...0x7E).contains(b) ? String(Character(Unicode.Scalar(b))) : show(b)
            return "invalid escape '\\\(shown)' (valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)"
        default:
            return error.reason
        }
    }

    /// `problems` in the order of their keys in the schema (unknown keys after the known keys of
    /// their object); problems of the same key keep their order.
    static func inSchemaOrder(_ problems: [ConfigProblem]) -> [ConfigProblem] {
        let ranks = problems.map { schemaRank($0.key) }
        return problems.indices
            .sorted { a, b in ranks[a] == ranks[b] ? a < b : ranks[a].lexicographicallyPrecedes(ranks[b]) }
            .map { problems[$0] }
    }

    /// Where a key sorts: the position of each of its components among its siblings, then the
    /// index of `pinned_spki_sha256[2]`. Problems of the whole file and positions come first.
    static func schemaRank(_ key: String) -> [Int] {
        guard !key.isEmpty, !key.hasPrefix("line ") else { return [-1] }
        var rank: [Int] = []
        var prefix = ""
        for part in key.split(separator: ".", omittingEmptySubsequences: false) {
            let name = part.prefix { $0 != "[" }
            prefix = prefix.isEmpty ? String(name) : prefix + "." + name
            rank.append(DaemonConfig.allKeyPaths.firstIndex(of: prefix) ?? Int.max - 1)
            if let open = part.firstIndex(of: "["), let index = Int(part[part.index(after: open)...].dropLast()) { rank.append(index) }
        }
        return rank
    }

    /// The file's bytes, or a problem naming what went wrong (with the system's reason).
    static func readFile(path: String) throws(ConfigError) -> [UInt8] {
        func fail(_ message: String) -> ConfigError { ConfigError(source: path, problems: [ConfigProblem(key: "", message: message)]) }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw fail("cannot open the configuration file: \(String(cString: strerror(errno))) (errno \(errno))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw fail("cannot read the configuration file: \(String(cString: strerror(errno)))") }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw fail("is not a regular file (a directory or a device?); --config takes the path of a JSON file")
        }
        guard let bytes = readBytes(fd, limit: maximumBytes + 1) else {
            throw fail("cannot read the configuration file: \(String(cString: strerror(errno)))")
        }
        if bytes.count > maximumBytes { throw fail("the file is larger than \(maximumBytes) bytes; is it really the configuration?") }
        return bytes
    }
}

/// The bytes of `fd` up to its end or to `limit` bytes, whichever comes first; nil (with `errno`
/// set) when a read fails. Shared by the configuration file and the machine id.
func readBytes(_ fd: Int32, limit: Int) -> [UInt8]? {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: min(limit, 64 * 1024))
    while bytes.count < limit {
        let want = min(chunk.count, limit - bytes.count)
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, want) }
        if n > 0 { bytes += chunk[..<n]; continue }
        if n == 0 { break }
        if errno == EINTR { continue }
        return nil
    }
    return bytes
}
