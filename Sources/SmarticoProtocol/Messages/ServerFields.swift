// How the fields of server messages are read (daemon.md session rule 7, "Be transparent").
//
// The real server is not held to 002's types: Smartico's own SDK reads every field loosely
// (a number where a string is documented is read as its text, a string holding an integer as
// that integer), so a server that sends `"avatar_id": 17` or `"errCode": "0"` works for its
// apps. The daemon reads the fields it acts on the same way, treats a field of any other type
// as absent, and never rejects a server message over one field: the message is kept whole, as
// received, and forwarded. docs/protocol.md lists each case.

extension JSONValue {
    /// A field the daemon reads as text, read as the SDK reads it: a string as is, a number as
    /// its decimal text (ids: `17` → `"17"`; an integer spelled `1.7e1` also → `"17"`). nil for
    /// null, booleans, arrays and objects: treated as absent.
    public var lenientString: String? {
        switch self {
        case .string(let s): return s
        case .number(let n):
            if n.isIntegerLiteral { return n.literal }
            return n.int64.map(String.init) ?? n.literal
        default: return nil
        }
    }

    /// A field the daemon reads as an integer, read as the SDK reads it: an integral number
    /// (`5`, `5.0`, `5e0`), or a string holding one (`"5"`, `" 5 "`). nil for anything else
    /// (fractions, text, booleans, arrays, objects): treated as absent.
    public var lenientInt64: Int64? {
        switch self {
        case .number(let n): return n.int64
        case .string(let s):
            let t = s.trimmingSpaces()
            guard !t.isEmpty, let n = JSONNumber(literal: String(t)) else { return nil }
            return n.int64
        default: return nil
        }
    }
}

extension String {
    /// Without leading and trailing spaces and tabs.
    func trimmingSpaces() -> Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return s
    }
}

extension JSONObject {
    /// `key` read with ``JSONValue/lenientString``; nil when absent, null or of another type.
    public func lenientString(_ key: String) -> String? { self[key]?.lenientString }

    /// `key` read with ``JSONValue/lenientInt64``; nil when absent, null or of another type.
    public func lenientInt64(_ key: String) -> Int64? { self[key]?.lenientInt64 }

    /// Why `key` cannot be read as `expected` (`"an integer"`, `"a string"`, `"an object"`), or
    /// nil when `read` found a value. For the `problem` text of a message the daemon cannot act on.
    func fieldProblem(_ key: String, expected: String, read: (JSONValue) -> Bool) -> String? {
        guard let v = self[key], !v.isNull else { return "\"\(key)\" is missing" }
        if read(v) { return nil }
        return "\"\(key)\" is \(describeForError(v)), not \(expected)"
    }
}

/// Reads the class id of a message from the server (`cid`) or from Smartico's page (`bcid`) as
/// the SDK reads it: an integer, or a string holding one (`"110"`, `" 110 "`, as
/// ``JSONValue/lenientInt64``). Anything else throws ``ProtocolError/classIDNotInteger(field:found:)``,
/// naming the field. The messages the daemon sends are held to integers (``readClassID(_:field:)``).
func readServerClassID(_ json: JSONObject, field: String) throws(ProtocolError) -> Int64 {
    if let v = json[field], case .string = v {
        guard let c = v.lenientInt64 else { throw .classIDNotInteger(field: field, found: describeForError(v)) }
        return c
    }
    return try readClassID(json, field: field)
}

/// Checks the class id of a server message: the only thing that can make one unreadable once
/// the bytes are a JSON object. Every other field is read loosely by the type's properties.
func checkServerClassID(_ json: JSONObject, _ classIDs: [ClassID]) throws(ProtocolError) {
    let c = try readServerClassID(json, field: "cid")
    guard classIDs.contains(ClassID(c)) else {
        throw .unexpectedClassID(expected: .cid(classIDs[0].rawValue), found: .cid(c))
    }
}
