/// Which message an error is about: a WebSocket message (`cid`), a Native Bridge message
/// (`bcid`) or a public HTTP API body.
public enum MessageTag: Sendable, Equatable, CustomStringConvertible {
    case cid(Int64)
    case bcid(Int64)
    case http(String)

    public var description: String {
        switch self {
        case .cid(let c):
            if let name = ClassID(rawValue: c).name { return "cid \(c) (\(name))" }
            return "cid \(c)"
        case .bcid(let b):
            if let kind = BridgeClassID(rawValue: b) { return "bcid \(b) (\(kind.name))" }
            return "bcid \(b)"
        case .http(let what): return what
        }
    }
}

/// Why bytes or a JSON object are not an acceptable Smartico message. Every case names
/// what is wrong and where: the byte offset, the message (`cid`/`bcid`) and the field path
/// (`payload.dp`, `products[2]`).
public enum ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes are not JSON.
    case notJSON(JSONParseError)
    /// Nesting deeper than the parser's limit.
    case tooDeep(limit: Int, offset: Int)
    /// The message is larger than the parser's limit.
    case tooLarge(limit: Int, size: Int)
    /// The JSON text is not an object.
    case notAnObject(found: JSONType)
    /// The object has no class id (`field` is `cid` or `bcid`).
    case missingClassID(field: String)
    /// The class id is not an integer that fits in 64 bits; `found` describes the value.
    case classIDNotInteger(field: String, found: String)
    /// A required field is absent.
    case missingField(MessageTag, path: String)
    /// A field has the wrong JSON type.
    case wrongFieldType(MessageTag, path: String, expected: String, found: String)
    /// A field has the right type but a value outside what the protocol allows.
    case invalidFieldValue(MessageTag, path: String, reason: String)
    /// A specific message type was asked to decode an object of another class id.
    case unexpectedClassID(expected: MessageTag, found: MessageTag)

    /// Maps a parser error: depth and size limits get their own cases.
    public init(_ error: JSONParseError) {
        switch error.kind {
        case .tooDeep(let limit): self = .tooDeep(limit: limit, offset: error.offset)
        case .tooLarge(let limit, let size): self = .tooLarge(limit: limit, size: size)
        default: self = .notJSON(error)
        }
    }

    public var description: String {
        switch self {
        case .notJSON(let e): return "not JSON: \(e)"
        case .tooDeep(let limit, let offset): return "nesting deeper than \(limit) levels at byte \(offset)"
        case .tooLarge(let limit, let size): return "message of \(size) bytes is larger than the limit of \(limit) bytes"
        case .notAnObject(let t): return "expected a JSON object, found \(t)"
        case .missingClassID(let f): return "the object has no \"\(f)\" field"
        case .classIDNotInteger(let f, let found): return "\"\(f)\" must be an integer, found \(found)"
        case .missingField(let tag, let path): return "\(tag): required field \"\(path)\" is missing"
        case .wrongFieldType(let tag, let path, let expected, let found):
            return "\(tag): field \"\(path)\" must be \(expected), found \(found)"
        case .invalidFieldValue(let tag, let path, let reason): return "\(tag): field \"\(path)\" \(reason)"
        case .unexpectedClassID(let expected, let found): return "expected \(expected), found \(found)"
        }
    }
}

/// Short description of a JSON value for error messages: its type and, for scalars, the value.
func describeForError(_ value: JSONValue) -> String {
    switch value {
    case .null: return "null"
    case .bool(let b): return "boolean \(b)"
    case .number(let n):
        let l = n.literal
        return l.utf8.count > 40 ? "number \(l.prefix(40))…" : "number \(l)"
    case .string(let s):
        let head = s.prefix(40)  // O(40), not O(length): the string may be megabytes long
        return head.endIndex < s.endIndex ? "string \"\(head)…\"" : "string \"\(s)\""
    case .array(let a): return "array of \(a.count)"
    case .object: return "object"
    }
}

/// Parses bytes and requires an object: the first step of every decode entry point.
func parseObject(_ bytes: [UInt8], options: JSONParseOptions) throws(ProtocolError) -> JSONObject {
    let value: JSONValue
    do { value = try JSONValue(parsing: bytes, options: options) } catch { throw ProtocolError(error) }
    guard case .object(let o) = value else { throw .notAnObject(found: value.type) }
    return o
}

func parseObject(_ bytes: UnsafeRawBufferPointer, options: JSONParseOptions) throws(ProtocolError) -> JSONObject {
    try parseObject(Array(bytes), options: options)
}

/// Reads the integer class id named `field` (`cid` or `bcid`).
func readClassID(_ object: JSONObject, field: String) throws(ProtocolError) -> Int64 {
    guard let v = object[field] else { throw .missingClassID(field: field) }
    guard case .number(let n) = v else { throw .classIDNotInteger(field: field, found: describeForError(v)) }
    guard let c = n.int64 else {
        let why = n.isIntegerLiteral ? " (out of the 64-bit range)" : ""
        throw .classIDNotInteger(field: field, found: describeForError(v) + why)
    }
    return c
}

/// Checks the typed fields of one message and names the first offending one.
/// Absent and `null` optional fields are both "not there".
struct FieldReader {
    let object: JSONObject
    let tag: MessageTag
    let prefix: String

    init(_ object: JSONObject, _ tag: MessageTag, prefix: String = "") {
        self.object = object
        self.tag = tag
        self.prefix = prefix
    }

    func path(_ key: String) -> String { prefix + key }

    func present(_ key: String, required: Bool) throws(ProtocolError) -> JSONValue? {
        guard let v = object[key], !v.isNull else {
            if required { throw .missingField(tag, path: path(key)) }
            return nil
        }
        return v
    }

    @discardableResult
    func string(_ key: String, required: Bool = false, nonEmpty: Bool = false) throws(ProtocolError) -> String? {
        guard let v = try present(key, required: required) else { return nil }
        guard case .string(let s) = v else { throw .wrongFieldType(tag, path: path(key), expected: "a string", found: describeForError(v)) }
        if nonEmpty, s.isEmpty { throw .invalidFieldValue(tag, path: path(key), reason: "must not be empty") }
        return s
    }

    @discardableResult
    func integer(_ key: String, required: Bool = false, range: ClosedRange<Int64>? = nil, rangeName: String = "") throws(ProtocolError) -> Int64? {
        guard let v = try present(key, required: required) else { return nil }
        guard case .number(let n) = v, let i = n.int64 else {
            throw .wrongFieldType(tag, path: path(key), expected: "an integer", found: describeForError(v))
        }
        if let range, !range.contains(i) {
            throw .invalidFieldValue(tag, path: path(key), reason: "is \(i), expected \(rangeName) (\(range.lowerBound)...\(range.upperBound))")
        }
        return i
    }

    @discardableResult
    func bool(_ key: String, required: Bool = false) throws(ProtocolError) -> Bool? {
        guard let v = try present(key, required: required) else { return nil }
        guard case .bool(let b) = v else { throw .wrongFieldType(tag, path: path(key), expected: "a boolean", found: describeForError(v)) }
        return b
    }

    @discardableResult
    func object(_ key: String, required: Bool = false) throws(ProtocolError) -> FieldReader? {
        guard let v = try present(key, required: required) else { return nil }
        guard case .object(let o) = v else { throw .wrongFieldType(tag, path: path(key), expected: "an object", found: describeForError(v)) }
        return FieldReader(o, tag, prefix: path(key) + ".")
    }

    @discardableResult
    func integerArray(_ key: String, required: Bool = false) throws(ProtocolError) -> [Int64]? {
        guard let v = try present(key, required: required) else { return nil }
        guard case .array(let a) = v else { throw .wrongFieldType(tag, path: path(key), expected: "an array of integers", found: describeForError(v)) }
        var out: [Int64] = []
        out.reserveCapacity(a.count)
        for (k, e) in a.enumerated() {
            guard case .number(let n) = e, let i = n.int64 else {
                throw .wrongFieldType(tag, path: "\(path(key))[\(k)]", expected: "an integer", found: describeForError(e))
            }
            out.append(i)
        }
        return out
    }
}
