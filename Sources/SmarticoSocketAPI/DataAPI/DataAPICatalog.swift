// The calls of the `api` op (docs/api.md): what each is called, who may make it, its arguments,
// the server messages it uses and the shape it answers with. Shared by the daemon (which checks a
// request against it and runs the call) and smarticoctl (`smarticoctl api list` prints it), so it
// holds descriptions only: the implementations are the daemon's (SmarticoDaemon/DataAPI).

/// Who may make a call (socket-api.md, "Permissions").
public enum DataAPIRole: String, Sendable, Equatable {
    /// Reads the identified user's own data: any peer.
    case read
    /// Changes something (opt in, buy, claim, spin, mark, set): the control role.
    case control
}

/// The JSON type of an argument (smarticoctl converts `key=value` to it).
public enum DataAPIArgType: String, Sendable, Equatable {
    case string, integer, boolean, number

    /// "an integer", "true or false", … (for error messages).
    public var phrase: String {
        switch self {
        case .string: "a string"
        case .integer: "an integer"
        case .boolean: "true or false"
        case .number: "a number"
        }
    }
}

/// One argument of a call, given in the op's `args` object.
public struct DataAPIArg: Sendable, Equatable {
    public var name: String
    public var type: DataAPIArgType
    public var required: Bool
    /// What an absent optional argument means, for the docs ("0", "20", "false", "all").
    public var defaultText: String?
    /// Allowed integer values (checked by the daemon), nil: any.
    public var range: ClosedRange<Int64>?
    public var help: String

    public init(_ name: String, _ type: DataAPIArgType, required: Bool = false, default defaultText: String? = nil,
                range: ClosedRange<Int64>? = nil, _ help: String) {
        self.name = name
        self.type = type
        self.required = required
        self.defaultText = defaultText
        self.range = range
        self.help = help
    }
}

/// One call of the `api` op.
public struct DataAPICallSpec: Sendable, Equatable {
    /// `area.verb`, e.g. `missions.list`.
    public var name: String
    /// The official SDK's method this call matches (`getMissions`).
    public var sdkMethod: String
    public var role: DataAPIRole
    public var args: [DataAPIArg]
    /// The class ids of the requests it sends, in order (`HTTP` steps are named in `result`/docs).
    public var cids: [Int]
    /// The answer's shape, named as the SDK's public type (`[TMissionOrBadge]`).
    public var result: String
    /// One line for the table.
    public var summary: String
    /// Whether it needs an identified user (answers `not_ready` at once while anonymous).
    public var needsUser: Bool
    /// How long each server request of the call may take unless the op gives `timeout_ms`.
    public var timeoutMs: Int

    public init(_ name: String, sdk sdkMethod: String, role: DataAPIRole = .read, args: [DataAPIArg] = [], cids: [Int],
                result: String, needsUser: Bool = true, timeoutMs: Int = DataAPICatalog.defaultTimeoutMs, _ summary: String) {
        self.name = name
        self.sdkMethod = sdkMethod
        self.role = role
        self.args = args
        self.cids = cids
        self.result = result
        self.summary = summary
        self.needsUser = needsUser
        self.timeoutMs = timeoutMs
    }

    /// The area: what comes before the dot.
    public var area: String { String(name.prefix { $0 != "." }) }
}

/// Every call of the `api` op, in the order docs/api.md lists them.
public enum DataAPICatalog {
    /// The wait for each server answer when neither the call nor the op sets one.
    public static let defaultTimeoutMs = 30_000

    public static let calls: [DataAPICallSpec] =
        DataAPIAchievementCalls.calls + DataAPIInboxStoreCalls.calls + DataAPICompetitionCalls.calls + DataAPIGameCalls.calls

    private static let byName: [String: DataAPICallSpec] = Dictionary(calls.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })

    public static func call(named name: String) -> DataAPICallSpec? { byName[name] }

    /// The calls whose name is closest to `name` (same area first), for an "unknown call" answer.
    public static func suggestions(for name: String) -> [String] {
        let area = String(name.prefix { $0 != "." })
        let sameArea = calls.filter { $0.area == area }.map(\.name)
        return sameArea.isEmpty ? Array(Set(calls.map(\.area))).sorted().map { "\($0).…" } : sameArea
    }

    /// The table `smarticoctl api list` prints and docs/api.md holds: one line per call with its
    /// role, arguments (`name*` required, `name=default` optional), cids and result.
    public static func table() -> String {
        var rows: [[String]] = [["CALL", "ROLE", "ARGUMENTS", "CIDS", "RESULT"]]
        for c in calls {
            let args = c.args.map { a in a.required ? "\(a.name)*" : a.defaultText.map { "\(a.name)=\($0)" } ?? a.name }
            rows.append([c.name, c.role.rawValue, args.isEmpty ? "-" : args.joined(separator: " "),
                         c.cids.isEmpty ? "-" : c.cids.map(String.init).joined(separator: ","), c.result])
        }
        var widths = [Int](repeating: 0, count: rows[0].count)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        return rows.map { row in
            row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[i] - cell.count)
            }.joined(separator: "  ")
        }.joined(separator: "\n") + "\n"
    }
}
