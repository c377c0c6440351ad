/// A JSON object kept with the bytes that arrived: validated, and mapped to its members' byte
/// ranges, so that it can be forwarded as received (``appendObject(prefix:dropping:to:)``).
///
/// Validating builds no tree: a member is parsed when it is read (``subscript(_:)``), the whole
/// object only when asked for (``parsed()``).
public struct RawJSONObject: Sendable {
    /// The document's bytes as received (may have whitespace around the object).
    public let bytes: [UInt8]
    /// The object's members in order (duplicates kept), as ranges into `bytes`.
    public let members: [JSONMemberRange]
    /// The object's bytes without surrounding whitespace.
    public let objectRange: Range<Int>
    /// True when `bytes` contain a line feed or carriage return (whitespace between tokens).
    public let containsLineBreaks: Bool
    /// The members of the first member's value, when that is an object (``firstMemberObject()``).
    private let firstValueMembers: [JSONMemberRange]

    /// Checks `bytes` as one JSON object (and keeps where the members of its first member's value
    /// are, when that is an object: ``firstMemberObject()``). Errors are the ones every decode entry point reports
    /// for the same bytes: not JSON, too deep, too large, not an object.
    public init(validating bytes: [UInt8], options: JSONParseOptions = JSONParseOptions()) throws(ProtocolError) {
        var parser: JSONByteParser
        do {
            parser = try JSONByteParser(bytes, options: options, buildsValues: false)
            _ = try parser.parseDocument()
        } catch {
            throw ProtocolError(error)
        }
        guard parser.valueType == .object else { throw .notAnObject(found: parser.valueType) }
        self.bytes = bytes
        self.members = parser.members
        self.objectRange = parser.valueRange
        self.containsLineBreaks = parser.containsLineBreaks
        self.firstValueMembers = parser.firstValueMembers
    }

    private init(bytes: [UInt8], members: [JSONMemberRange], containsLineBreaks: Bool) {
        self.bytes = bytes
        self.members = members
        self.objectRange = 0..<bytes.count
        self.containsLineBreaks = containsLineBreaks
        self.firstValueMembers = []
    }

    /// The value of the first member, when it is an object, as an object of its own: its bytes
    /// copied, its members (found when this object was validated) with them. Nil when the first
    /// member's value is not an object, or there is no member.
    public func firstMemberObject() -> RawJSONObject? {
        guard let range = members.first?.value, bytes[range.lowerBound] == UInt8(ascii: "{") else { return nil }
        let shift = range.lowerBound
        let moved = firstValueMembers.map { m in
            JSONMemberRange(name: m.name, key: (m.key.lowerBound - shift)..<(m.key.upperBound - shift),
                            keyHasEscapes: m.keyHasEscapes, value: (m.value.lowerBound - shift)..<(m.value.upperBound - shift))
        }
        let value = Array(bytes[range])
        // Outside strings (where valid JSON has them escaped) a line break is whitespace.
        let breaks = containsLineBreaks && value.contains { $0 == 0x0A || $0 == 0x0D }
        return RawJSONObject(bytes: value, members: moved, containsLineBreaks: breaks)
    }

    /// The compact serialization of `object` (no line breaks).
    public init(compacting object: JSONObject) {
        let bytes = object.serialized()
        // The serializer writes valid JSON: this cannot fail (an empty object if it ever did).
        self = (try? RawJSONObject(validating: bytes, options: JSONParseOptions(maxDepth: .max)))
            ?? (try! RawJSONObject(validating: [0x7B, 0x7D]))
    }

    /// True when the member's (decoded) name is `name`, compared by code points as `JSONObject` does
    /// (for a name without escapes, its bytes are its UTF-8: compared as they are).
    public func member(_ member: JSONMemberRange, isNamed name: String) -> Bool {
        guard !member.keyHasEscapes else { return sameCodePoints(member.name, name) }
        let key = member.key
        var name = name
        return name.withUTF8 { utf8 in
            guard utf8.count == key.count else { return false }
            return bytes.withUnsafeBufferPointer { buffer in
                var i = 0
                while i < utf8.count, buffer[key.lowerBound + i] == utf8[i] { i += 1 }
                return i == utf8.count
            }
        }
    }

    /// The value of the last member named `name` (as `JSONObject` reads it), parsed from its
    /// bytes; nil when absent.
    public subscript(name: String) -> JSONValue? {
        members.last(where: { member($0, isNamed: name) }).map(value(of:))
    }

    /// The value of one of ``members``, parsed from its bytes.
    public func value(of member: JSONMemberRange) -> JSONValue { Self.value(bytes[member.value]) }

    /// The whole object, parsed (each call parses it again).
    public func parsed() -> JSONObject {
        (try? JSONValue(parsing: bytes, options: JSONParseOptions(maxDepth: .max)))?.objectValue ?? JSONObject()
    }

    /// Bytes validated with the object: parsed without limits (the object's were applied).
    private static func value(_ slice: ArraySlice<UInt8>) -> JSONValue {
        (try? JSONValue(parsing: Array(slice), options: JSONParseOptions(maxDepth: .max))) ?? .null
    }

    /// Appends `{`, `prefix`, then every member not named `dropping`, then `}`. Members are
    /// copied as they arrived: consecutive kept members as one run of bytes (with the commas and
    /// whitespace between them), runs joined by `,`. With `prefix` non-empty, a `,` separates it
    /// from the first member.
    public func appendObject(prefix: String, dropping dropped: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        out.append(contentsOf: prefix.utf8)
        var needsComma = !prefix.isEmpty
        var run: Range<Int>?
        func flush() {
            guard let r = run else { return }
            if needsComma { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: bytes[r])
            needsComma = true
            run = nil
        }
        for m in members {
            if member(m, isNamed: dropped) {
                flush()
            } else {
                run = (run?.lowerBound ?? m.whole.lowerBound)..<m.value.upperBound
            }
        }
        flush()
        out.append(UInt8(ascii: "}"))
    }
}

extension RawJSONObject: Equatable {
    /// Same bytes (and so the same object). Two different spellings of one JSON value are not
    /// equal here: compare `parsed()` for that.
    public static func == (lhs: RawJSONObject, rhs: RawJSONObject) -> Bool { lhs.bytes == rhs.bytes }
}
