/// A JSON value. Objects keep their members in arrival order and numbers keep their
/// literal text, so a parsed message serializes back to the same content.
///
/// `==` means "the same JSON value": objects are compared as key sets regardless of
/// order, numbers numerically (exactly, on their decimal digits).
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The kind of this value, for error messages.
    public var type: JSONType {
        switch self {
        case .null: .null
        case .bool: .bool
        case .number: .number
        case .string: .string
        case .array: .array
        case .object: .object
        }
    }

    public var isNull: Bool { if case .null = self { true } else { false } }
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    public var numberValue: JSONNumber? { if case .number(let n) = self { n } else { nil } }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    public var objectValue: JSONObject? { if case .object(let o) = self { o } else { nil } }
    /// The exact integer value of a number, `nil` for anything else or a non-integer/out-of-range number.
    public var int64Value: Int64? { numberValue?.int64 }
    public var uint64Value: UInt64? { numberValue?.uint64 }
    public var intValue: Int? { numberValue?.intValue }
    public var doubleValue: Double? { numberValue?.double }

    /// Member of an object (last one wins for duplicate keys); `nil` when absent or not an object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    /// Element of an array; `nil` when out of range or not an array.
    public subscript(index: Int) -> JSONValue? {
        if case .array(let a) = self, a.indices.contains(index) { return a[index] }
        return nil
    }

    /// Same JSON value. Strings and member names compare by their code points (RFC 8259 §8.3),
    /// not by Swift's canonical equivalence: `"é"` (U+00E9) and `"e\u0301"` differ, as in JSON.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.string(let a), .string(let b)): return sameCodePoints(a, b)
        case (.array(let a), .array(let b)):
            guard a.count == b.count else { return false }
            for k in a.indices where a[k] != b[k] { return false }
            return true
        case (.object(let a), .object(let b)): return a == b
        default: return false
        }
    }

    public static func number(_ value: Int64) -> JSONValue { .number(JSONNumber(value)) }
    public static func number(_ value: Int) -> JSONValue { .number(JSONNumber(value)) }
}

/// The six JSON types, named as error messages name them.
public enum JSONType: String, Sendable, Equatable, CustomStringConvertible {
    case null, bool = "boolean", number, string, array, object
    public var description: String { rawValue }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .number(JSONNumber(value)) }
    public init(floatLiteral value: Double) { self = JSONNumber(value).map(JSONValue.number) ?? .null }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var o = JSONObject()
        for (k, v) in elements { o.append(key: k, value: v) }
        self = .object(o)
    }
}

/// A JSON object: members in their original order. Duplicate keys are kept (so a
/// forwarded object is unchanged); lookups see the last one, as JavaScript does.
public struct JSONObject: Sendable, Equatable, RandomAccessCollection, ExpressibleByDictionaryLiteral {
    public private(set) var keys: [String]
    public private(set) var values: [JSONValue]

    public init() { keys = []; values = [] }

    /// Members in order; `keys.count` must equal `values.count`.
    public init(keys: [String], values: [JSONValue]) {
        precondition(keys.count == values.count, "JSONObject: \(keys.count) keys for \(values.count) values")
        self.keys = keys
        self.values = values
    }

    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init()
        for (k, v) in elements { append(key: k, value: v) }
    }

    public typealias Key = String
    public typealias Value = JSONValue
    public typealias Element = (key: String, value: JSONValue)
    public var startIndex: Int { 0 }
    public var endIndex: Int { keys.count }
    public subscript(position: Int) -> Element { (keys[position], values[position]) }

    /// Index of the last member named `key`.
    public func index(forKey key: String) -> Int? { keys.lastIndex { sameCodePoints($0, key) } }

    /// Reads the (last) member named `key`. Setting replaces it in place (order kept) or
    /// appends it; setting `nil` removes every member with that name.
    public subscript(key: String) -> JSONValue? {
        get { index(forKey: key).map { values[$0] } }
        set {
            if let newValue {
                if let i = index(forKey: key) { values[i] = newValue } else { append(key: key, value: newValue) }
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// Appends a member without looking for an existing one.
    public mutating func append(key: String, value: JSONValue) {
        keys.append(key)
        values.append(value)
    }

    /// Inserts a member at a position (used to put `bcid` first).
    public mutating func insert(key: String, value: JSONValue, at index: Int) {
        keys.insert(key, at: index)
        values.insert(value, at: index)
    }

    /// This object with the members of `other` set on it: existing names are replaced in
    /// place, new ones appended in `other`'s order (how public props are merged).
    public func merging(_ other: JSONObject) -> JSONObject {
        var o = self
        for (k, v) in other { o[k] = v }
        return o
    }

    /// Removes every member named `key`; returns the last removed value.
    @discardableResult
    public mutating func removeValue(forKey key: String) -> JSONValue? {
        var removed: JSONValue?
        while let i = index(forKey: key) {
            if removed == nil { removed = values[i] }
            keys.remove(at: i)
            values.remove(at: i)
        }
        return removed
    }

    /// Members by name, last one winning (linear time).
    func effectiveMembers() -> [CodePointKey: JSONValue] {
        var d: [CodePointKey: JSONValue] = [:]
        d.reserveCapacity(keys.count)
        for (k, v) in zip(keys, values) { d[CodePointKey(k)] = v }
        return d
    }

    /// Same JSON value: same set of keys (effective, last-wins) with equal values, any order.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        if lhs.keys.count == rhs.keys.count,
           zip(lhs.keys, rhs.keys).allSatisfy({ sameCodePoints($0, $1) }), lhs.values == rhs.values {
            return true
        }
        let l = lhs.effectiveMembers(), r = rhs.effectiveMembers()
        guard l.count == r.count else { return false }
        for (k, v) in l {
            guard let w = r[k], v == w else { return false }
        }
        return true
    }
}

// MARK: - Codable

/// `JSONValue` encodes and decodes through any `Encoder`/`Decoder`. Numbers go through
/// `Int64`/`UInt64`/`Double` there (exactness is only guaranteed by this module's own parser
/// and serializer).
extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null; return }
        if let b = try? c.decode(Bool.self) { self = .bool(b); return }
        if let i = try? c.decode(Int64.self) { self = .number(JSONNumber(i)); return }
        if let u = try? c.decode(UInt64.self) { self = .number(JSONNumber(u)); return }
        if let d = try? c.decode(Double.self), let n = JSONNumber(d) { self = .number(n); return }
        if let s = try? c.decode(String.self) { self = .string(s); return }
        if let a = try? c.decode([JSONValue].self) { self = .array(a); return }
        if let o = try? c.decode(JSONObject.self) { self = .object(o); return }
        throw DecodingError.dataCorruptedError(in: c, debugDescription: "not a JSON value")
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let n):
            if let i = n.int64, n.isIntegerLiteral { try c.encode(i) }
            else if let u = n.uint64, n.isIntegerLiteral { try c.encode(u) }
            else { try c.encode(n.double) }
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }
}

extension JSONObject: Codable {
    private struct MemberKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: MemberKey.self)
        self.init()
        for k in c.allKeys { append(key: k.stringValue, value: try c.decode(JSONValue.self, forKey: k)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: MemberKey.self)
        for (k, v) in zip(keys, values) { try c.encode(v, forKey: MemberKey(stringValue: k)) }
    }
}

/// String equality by UTF-8 bytes (code points), as JSON compares strings.
func sameCodePoints(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }

/// A dictionary key that hashes and compares a string by its code points.
struct CodePointKey: Hashable {
    let string: String
    init(_ string: String) { self.string = string }
    static func == (a: CodePointKey, b: CodePointKey) -> Bool { sameCodePoints(a.string, b.string) }
    func hash(into hasher: inout Hasher) {
        for b in string.utf8 { hasher.combine(b) }
    }
}
