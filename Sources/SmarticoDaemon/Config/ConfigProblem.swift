import Synchronization

/// One thing wrong with a configuration: which key, and what is wrong with it.
///
/// `key` is the dotted path of the JSON key (`session.keepalive_s`, `socket.control_uids`),
/// the name of an environment variable (`https_proxy`), or, for a file that cannot be read
/// or parsed, a position (`line 3, column 7`) or `file`. `message` never contains the value
/// of a secret.
public struct ConfigProblem: Error, Sendable, Hashable, CustomStringConvertible {
    public var key: String
    public var message: String

    public init(key: String, message: String) {
        self.key = key
        self.message = message
    }

    /// `<key>: <message>`, or the message alone for a problem of the whole file.
    public var description: String { key.isEmpty ? message : "\(key): \(message)" }
}

/// Every problem found in one configuration, with where it came from (a file path).
/// Its ``lines`` are what `smarticod --check-config` prints, one per problem.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file path, or a label such as `<memory>` for a configuration decoded from bytes.
    public var source: String
    /// At least one problem, in file order (decoding problems, then validation problems,
    /// then problems of the environment).
    public var problems: [ConfigProblem]

    public init(source: String, problems: [ConfigProblem]) {
        self.source = source
        self.problems = problems
    }

    /// One line per problem: `<source>: <key>: <message>` (`<source>: <message>` for a
    /// problem of the whole file, whose key is empty).
    public var lines: [String] {
        problems.map { $0.key.isEmpty ? "\(source): \($0.message)" : "\(source): \($0.key): \($0.message)" }
    }

    public var description: String { lines.joined(separator: "\n") }
}

/// Collects the problems found while decoding; shared by the decoders of every section.
/// A class so that nested `init(from:)` calls, which only see a `Decoder`, all reach it.
final class ConfigProblemSink: Sendable {
    private let problems = Mutex<[ConfigProblem]>([])

    func add(_ problem: ConfigProblem) {
        problems.withLock { $0.append(problem) }
    }

    var all: [ConfigProblem] { problems.withLock { $0 } }
}

extension CodingUserInfoKey {
    /// Where ``ConfigObject`` records problems instead of throwing at the first one.
    static let configProblemSink = CodingUserInfoKey(rawValue: "smarticod.configProblemSink")!
}

/// Thrown by the configuration types' `init(from:)` when they are decoded by a decoder
/// that has no problem sink (for instance Foundation's `JSONDecoder`): the first problem.
public struct ConfigDecodingFailure: Error, Sendable, CustomStringConvertible {
    public var problem: ConfigProblem
    public var description: String { problem.description }
}

/// The dotted form of a coding path: `session.reconnect.initial_ms`, `server.tls.pinned_spki_sha256[1]`.
func dottedPath(_ path: [any CodingKey]) -> String {
    var out = ""
    for key in path {
        if let i = key.intValue, key.stringValue == "[\(i)]" || key.stringValue == "Index \(i)" || key.stringValue == "\(i)" {
            out += "[\(i)]"
        } else {
            if !out.isEmpty { out += "." }
            out += keyComponent(key.stringValue)
        }
    }
    return out
}

/// The decoding side of one configuration object: reads each field with its default,
/// turns every failure into a ``ConfigProblem`` naming the key, and reports unknown keys.
///
/// With the configuration decoder (``ConfigLoader``) problems are collected and decoding
/// goes on with the default, so one run finds them all; with any other decoder the first
/// problem is thrown as ``ConfigDecodingFailure``.
struct ConfigObject<Key: CodingKey & CaseIterable> {
    let container: KeyedDecodingContainer<Key>
    let path: [any CodingKey]
    private let sink: ConfigProblemSink?

    /// Opens the object at `decoder` and reports its unknown keys.
    init(_ decoder: any Decoder, _ keys: Key.Type) throws {
        container = try decoder.container(keyedBy: Key.self)
        path = decoder.codingPath
        sink = decoder.userInfo[.configProblemSink] as? ConfigProblemSink
        let known = Key.allCases.map(\.stringValue)
        let present = try decoder.container(keyedBy: AnyCodingKey.self).allKeys.map(\.stringValue)
        for name in present where !known.contains(name) {
            let prefix = dottedPath(path)
            let key = prefix.isEmpty ? keyComponent(name) : prefix + "." + keyComponent(name)
            try report(key, ConfigKeySuggestion.unknownKeyMessage(name, siblings: known, path: prefix))
        }
    }

    func key(_ key: Key) -> String { dottedPath(path + [key]) }

    func report(_ key: String, _ message: String) throws {
        let problem = ConfigProblem(key: key, message: message)
        guard let sink else { throw ConfigDecodingFailure(problem: problem) }
        sink.add(problem)
    }

    /// What was found at `key`, for a message; secrets only say what kind of value it was.
    private func got(_ key: Key, secret: Bool) -> String {
        guard let json = try? container.decode(ConfigJSON.self, forKey: key) else { return "an unreadable value" }
        if secret, case .string(let s) = json { return "a string of \(s.count) characters" }
        if secret { return json.kindDescription }
        return json.rendered()
    }

    /// A field with a default. `null` is refused unless `T` is optional and the default is nil
    /// (use ``optional(_:expect:secret:)`` for those).
    func field<T: Decodable>(_ key: Key, default value: T, expect: String, secret: Bool = false) throws -> T {
        guard container.contains(key) else { return value }
        do {
            return try container.decode(T.self, forKey: key)
        } catch let failure as ConfigDecodingFailure {
            throw failure
        } catch {
            try report(self.key(key), "must be \(expect), got \(got(key, secret: secret))")
            return value
        }
    }

    /// A field whose default is null; `null` is accepted.
    func optional<T: Decodable>(_ key: Key, expect: String, secret: Bool = false) throws -> T? {
        guard container.contains(key) else { return nil }
        if (try? container.decodeNil(forKey: key)) == true { return nil }
        do {
            return try container.decode(T.self, forKey: key)
        } catch let failure as ConfigDecodingFailure {
            throw failure
        } catch {
            try report(self.key(key), "must be \(expect) or null, got \(got(key, secret: secret))")
            return nil
        }
    }

    /// A required field: missing or `null` is reported as `required`, and `placeholder` is used
    /// so that decoding can go on and find the other problems.
    func required<T: Decodable>(_ key: Key, placeholder: T, expect: String, secret: Bool = false) throws -> T {
        guard container.contains(key), (try? container.decodeNil(forKey: key)) != true else {
            try report(self.key(key), "required (\(expect))")
            return placeholder
        }
        return try field(key, default: placeholder, expect: expect, secret: secret)
    }

    /// A nested object with a default. Problems inside it are reported by its own `init(from:)`.
    func section<T: Decodable>(_ key: Key, default value: @autoclosure () -> T) throws -> T {
        guard container.contains(key) else { return value() }
        guard case .object = (try? container.decode(ConfigJSON.self, forKey: key)) ?? .null else {
            try report(self.key(key), "must be an object, got \(got(key, secret: false))")
            return value()
        }
        return try container.decode(T.self, forKey: key)
    }
}

/// "did you mean …?" for unknown keys.
enum ConfigKeySuggestion {
    static func unknownKeyMessage(_ name: String, siblings: [String], path: String) -> String {
        if let near = closest(to: name, in: siblings) {
            return "unknown key (did you mean \"\(near)\"?)"
        }
        // The right key in the wrong object: `keepalive_s` at the top level.
        if let elsewhere = DaemonConfig.allKeyPaths.first(where: { $0.split(separator: ".").last.map(String.init) == name && $0 != (path.isEmpty ? name : path + "." + name) }) {
            return "unknown key here (did you mean \"\(elsewhere)\"?)"
        }
        let list = siblings.map { "\"\($0)\"" }.joined(separator: ", ")
        return "unknown key (known keys here: \(list))"
    }

    /// The sibling at the smallest edit distance, if it is close enough to be a typo.
    static func closest(to name: String, in candidates: [String]) -> String? {
        let lowered = String(name.lowercased().map { $0 == "-" ? "_" : $0 })
        var best: (String, Int)?
        for candidate in candidates {
            let d = editDistance(lowered, candidate)
            if d <= max(1, min(3, candidate.count / 3)), best == nil || d < best!.1 { best = (candidate, d) }
        }
        return best?.0
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
