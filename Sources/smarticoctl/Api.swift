import ArgumentParser
import SmarticoSocketAPI
import SmarticoProtocol

struct Api: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Call Smartico's data API by name (missions, inbox, store, …), or list the calls.",
        discussion: """
            `smarticoctl api list` prints every call with its role, arguments (name* required, \
            name=default optional), the class ids it sends and its result shape; docs/api.md \
            explains each. `smarticoctl api CALL key=value …` makes one call: the values are \
            converted to the argument's type (integer, number, true/false, text). Lists print as a \
            table, other results as name: value lines; --json prints the daemon's answer line; \
            --raw asks for the server's answer unchanged instead of the public shape. Calls that \
            change something need the control role.

            Examples:
              smarticoctl api list
              smarticoctl api missions.list
              smarticoctl api inbox.list from=0 to=10 --json | jq '.result[].message_guid'
              smarticoctl api missions.opt_in id=12
            """)
    @Argument(help: ArgumentHelp("A call (area.verb, e.g. missions.list), or list.", valueName: "call"))
    var call: String
    @Argument(help: ArgumentHelp("The call's arguments.", valueName: "key=value"))
    var arguments: [String] = []
    @Flag(name: .long, help: "Answer with the server's message(s) unchanged, not the public shape.")
    var raw = false
    @Option(name: .customLong("timeout-ms"), help: ArgumentHelp("How long the daemon waits for each server answer (1…300000).", valueName: "ms"))
    var timeoutMs: Int?
    @OptionGroup var options: GlobalOptions

    func validate() throws {
        if let timeoutMs, !(1...300_000).contains(timeoutMs) { throw ValidationError("--timeout-ms must be in 1...300000, got \(timeoutMs)") }
        if call == "list" {
            if !arguments.isEmpty { throw ValidationError("api list takes no arguments") }
            return
        }
        guard let spec = DataAPICatalog.call(named: call) else {
            throw ValidationError("unknown call \"\(call)\"; known: \(DataAPICatalog.suggestions(for: call).joined(separator: ", ")) (smarticoctl api list shows them all)")
        }
        _ = try Self.arguments(arguments, spec: spec)
    }

    func run() throws {
        if call == "list" {
            Output.text(DataAPICatalog.table())
            return
        }
        guard let spec = DataAPICatalog.call(named: call) else { return }
        try runOp(.api(call, args: try Self.arguments(arguments, spec: spec), raw: raw, timeoutMs: timeoutMs), options: options)
    }

    /// `key=value` words as the call's `args`, each value of its argument's type.
    static func arguments(_ words: [String], spec: DataAPICallSpec) throws(ValidationError) -> JSONObject {
        var args = JSONObject()
        for word in words {
            guard let eq = word.firstIndex(of: "=") else {
                throw ValidationError("argument \"\(word)\" of \(spec.name) must be key=value; \(takes(spec))")
            }
            let key = String(word[..<eq]), text = String(word[word.index(after: eq)...])
            guard let arg = spec.args.first(where: { $0.name == key }) else {
                throw ValidationError("\(spec.name) has no argument \"\(key)\"; \(takes(spec))")
            }
            let value: JSONValue?
            switch arg.type {
            case .string: value = .string(text)
            case .integer: value = Int64(text).map { .number($0) }
            case .number: value = Double(text).flatMap { JSONNumber($0) }.map(JSONValue.number)
            case .boolean: value = text == "true" ? .bool(true) : text == "false" ? .bool(false) : nil
            }
            guard let value else {
                throw ValidationError("\(key)=\(text): \(spec.name)'s \(key) must be \(arg.type.phrase)")
            }
            args[key] = value
        }
        for arg in spec.args where arg.required && args[arg.name] == nil {
            throw ValidationError("\(spec.name) needs \(arg.name)=… (\(arg.type.rawValue): \(arg.help))")
        }
        return args
    }

    private static func takes(_ spec: DataAPICallSpec) -> String {
        spec.args.isEmpty ? "it takes no arguments" : "it takes: " + spec.args.map(\.name).joined(separator: ", ")
    }
}

extension Format {
    /// An `api` result for people: a list of objects as a table of its scalar fields (the first
    /// `maxColumns` that have a value), an object as `name: value` lines (a list inside it as a
    /// table after them), anything else as compact JSON.
    static func apiResult(_ r: JSONValue, maxColumns: Int = 7, cellWidth: Int = 32) -> [String] {
        switch r {
        case .array(let items):
            let rows = items.compactMap(\.objectValue)
            guard rows.count == items.count, !rows.isEmpty else { return items.isEmpty ? ["(none)"] : [r.serializedString()] }
            var columns: [String] = []
            for row in rows {
                for (key, value) in row where !columns.contains(key) && isScalar(value) && !value.isNull { columns.append(key) }
            }
            columns = Array(columns.prefix(maxColumns))
            let cells = [columns] + rows.map { row in columns.map { oneLine(describe(row[$0] ?? .null), limit: cellWidth) } }
            let widths = columns.indices.map { i in cells.map { $0[i].count }.max() ?? 0 }
            return cells.map { row in
                row.enumerated().map { i, c in i == row.count - 1 ? c : c + String(repeating: " ", count: widths[i] - c.count) }
                    .joined(separator: "  ")
            } + ["(\(rows.count) \(rows.count == 1 ? "row" : "rows"); --json shows every field)"]
        case .object(let o):
            var lines = aligned(o.filter { isScalar($0.value) || $0.value.objectValue != nil }.map { ($0.key, describe($0.value)) })
            for (key, value) in o where value.arrayValue != nil {
                lines.append("\(key):")
                lines += apiResult(value, maxColumns: maxColumns, cellWidth: cellWidth).map { "  " + $0 }
            }
            return lines.isEmpty ? ["ok"] : lines
        default:
            return [r.serializedString()]
        }
    }

    private static func isScalar(_ v: JSONValue) -> Bool {
        switch v {
        case .array, .object: false
        default: true
        }
    }
}
