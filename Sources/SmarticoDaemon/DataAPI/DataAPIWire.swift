import SmarticoProtocol

// Reading the server's answers for the public shapes as the official SDK does: leniently. A field
// of another type than expected reads as absent (nil → `null` in the public shape); fields the
// server adds are ignored by the shapes (and kept by `raw: true`); nothing here throws.

extension JSONObject {
    /// An integer: a number or a string holding one (``JSONValue/lenientInt64``); a fractional number
    /// is truncated, as the SDK's `Lenient.truncate`.
    func int(_ key: String) -> Int64? {
        guard let v = self[key] else { return nil }
        if let i = v.lenientInt64 { return i }
        if let d = v.doubleValue, d.isFinite, abs(d) < 9.2e18 { return Int64(d) }
        return nil
    }

    /// A number: a number or a string holding one.
    func double(_ key: String) -> Double? {
        guard let v = self[key] else { return nil }
        if let d = v.doubleValue { return d }
        if let s = v.stringValue, let d = Double(s.trimmingCharacters(in: " \t")), d.isFinite { return d }
        return nil
    }

    /// Text: a string, or a number's text (``JSONValue/lenientString``).
    func string(_ key: String) -> String? { lenientString(key) }

    /// A boolean: `true`/`false`, `1`/`0`, or `"true"`/`"false"`.
    func bool(_ key: String) -> Bool? {
        switch self[key] {
        case .bool(let b)?: return b
        case .number(let n)?: return n.int64.map { $0 != 0 }
        case .string(let s)?: return s == "true" ? true : s == "false" ? false : nil
        default: return nil
        }
    }

    /// An object member, nil when absent or of another type.
    func object(_ key: String) -> JSONObject? { self[key]?.objectValue }

    /// The objects of an array member (other elements skipped); empty when absent.
    func objects(_ key: String) -> [JSONObject] { (self[key]?.arrayValue ?? []).compactMap(\.objectValue) }

    /// The integers of an array member (others skipped); nil when absent.
    func ints(_ key: String) -> [Int64]? {
        self[key]?.arrayValue.map { $0.compactMap { v in v.lenientInt64 ?? v.doubleValue.flatMap { $0.isFinite ? Int64($0) : nil } } }
    }

    /// A member as it is (`null` when absent), for fields the SDK passes through untyped.
    func value(_ key: String) -> JSONValue { self[key] ?? .null }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var s = Substring(self)
        while let f = s.first, set.contains(f) { s = s.dropFirst() }
        while let l = s.last, set.contains(l) { s = s.dropLast() }
        return String(s)
    }
}

extension JSONValue {
    /// `null` for nil.
    static func of(_ v: String?) -> JSONValue { v.map(JSONValue.string) ?? .null }
    static func of(_ v: Int64?) -> JSONValue { v.map { .number($0) } ?? .null }
    static func of(_ v: Bool?) -> JSONValue { v.map(JSONValue.bool) ?? .null }
    static func of(_ v: Double?) -> JSONValue { v.flatMap { JSONNumber($0) }.map(JSONValue.number) ?? .null }
    static func of(_ v: [Int64]?) -> JSONValue { v.map { .array($0.map { .number($0) }) } ?? .null }
    static func of(_ v: JSONObject?) -> JSONValue { v.map(JSONValue.object) ?? .null }

    /// Operator `custom_data`, as the SDK surfaces it: JSON when it is JSON text (or already JSON),
    /// else the text; absent or empty → `{}`.
    static func customData(_ raw: JSONValue?) -> JSONValue {
        switch raw {
        case nil, .null?: return .object([:])
        case .string(let s)?:
            if s.isEmpty { return .object([:]) }
            if s.contains("{") || s.contains("["), let parsed = try? JSONValue(parsing: s) { return parsed }
            return .string(s)
        case let other?: return other
        }
    }
}
