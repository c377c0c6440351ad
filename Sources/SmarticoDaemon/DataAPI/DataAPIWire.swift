import SmarticoProtocol

// Reading the server's answers for the public shapes by the official SDK's rules (its
// Serialization/Lenient.swift): a missing key or `null` is nil (→ `null` in the public shape);
// an integer field takes `5`, `5.0`, `1.37861765E8` and `"5"`, a fraction is truncated toward zero,
// and any other value present reads as 0; a number field takes numbers and numeric text, else 0;
// a boolean is true for `true`, `1`, `"true"`, `"1"`, `"1.0"` (any case) and false for any other
// value present; a number or boolean in a text field is its text. Fields the server adds are
// ignored by the shapes (and kept by `raw: true`). Nothing here throws.

extension JSONObject {
    /// A present, non-null member.
    private func present(_ key: String) -> JSONValue? {
        guard let v = self[key], !v.isNull else { return nil }
        return v
    }

    /// An integer field (see above).
    func int(_ key: String) -> Int64? {
        guard let v = present(key) else { return nil }
        if let i = v.lenientInt64 { return i }
        if let d = v.doubleValue ?? v.stringValue.flatMap({ Double($0.trimmingCharacters(in: " \t")) }) { return Self.truncate(d) }
        return 0
    }

    /// A number field (see above).
    func double(_ key: String) -> Double? {
        guard let v = present(key) else { return nil }
        if let d = v.doubleValue { return d }
        return v.stringValue.flatMap { Double($0.trimmingCharacters(in: " \t")) } ?? 0
    }

    /// Toward zero, saturating, NaN → 0 (the SDK's `Lenient.truncate`).
    static func truncate(_ d: Double) -> Int64 {
        if d.isNaN { return 0 }
        if d >= 9_223_372_036_854_775_807.0 { return .max }
        if d <= -9_223_372_036_854_775_808.0 { return .min }
        return Int64(d.rounded(.towardZero))
    }

    /// Text: a string, a number's text (``JSONValue/lenientString``), or a boolean's
    /// (`"true"`/`"false"`, as the SDK's lenient string reads one).
    func string(_ key: String) -> String? {
        if case .bool(let b)? = present(key) { return b ? "true" : "false" }
        return lenientString(key)
    }

    /// A boolean field (see above).
    func bool(_ key: String) -> Bool? {
        switch present(key) {
        case nil: return nil
        case .bool(let b)?: return b
        case .number(let n)?: return n.double == 1
        case .string(let s)?: return ["true", "1", "1.0"].contains(s.lowercased())
        default: return false
        }
    }

    /// An object member, nil when absent or of another type.
    func object(_ key: String) -> JSONObject? { self[key]?.objectValue }

    /// The objects of an array member (other elements skipped); empty when absent.
    func objects(_ key: String) -> [JSONObject] { (self[key]?.arrayValue ?? []).compactMap(\.objectValue) }

    /// The integers of an array member, each read as an integer field is (fractions truncated,
    /// numeric text read, anything else 0, as the SDK reads an element: so no position shifts);
    /// nil when absent.
    func ints(_ key: String) -> [Int64]? {
        self[key]?.arrayValue.map { $0.map { v in
            v.lenientInt64 ?? v.doubleValue.map(Self.truncate)
                ?? v.stringValue.flatMap { Double($0.trimmingCharacters(in: " \t")) }.map(Self.truncate) ?? 0
        } }
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

    /// The SDK's `{err_code, err_message}` of an action's answer, then the members of `extra` (a
    /// refusal never gets here: ``DataAPIContext/request(cid:_:expect:)`` throws it as `server_error`).
    static func errResult(_ answer: JSONObject, extra: JSONObject = [:]) -> JSONValue {
        var o: JSONObject = ["err_code": .of(answer.int("errCode")), "err_message": .of(answer.string("errMsg"))]
        for (k, v) in extra { o[k] = v }
        return .object(o)
    }

    /// A URL field of an answer (an avatar, an icon, a CDN image): null for nil, and null for a
    /// URL that is not http or https with a host (``WebURL``: no `javascript:` or `file:` reaches an
    /// app as a URL). A value without a scheme (an avatar id, a relative path, as the SDK passes
    /// them) is kept.
    static func url(_ v: String?) -> JSONValue {
        guard let v else { return .null }
        return hasScheme(v) ? .of(WebURL.checked(v)) : .string(v)
    }

    /// Whether `v` starts with something a browser reads as a scheme: a `:` before any `/`, `?` or
    /// `#` (a control character or space anywhere counts too: browsers drop some of them).
    private static func hasScheme(_ v: String) -> Bool {
        for scalar in v.unicodeScalars {
            if scalar == ":" || scalar.value <= 0x20 || (0x7F...0x9F).contains(scalar.value) { return true }
            if scalar == "/" || scalar == "?" || scalar == "#" { return false }
        }
        return false
    }

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
