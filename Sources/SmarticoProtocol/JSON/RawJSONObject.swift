/// A JSON object kept with the bytes that arrived: parsed, and mapped to its members' byte
/// ranges, so that it can be forwarded as received (``appendObject(prefix:dropping:to:)``).
public struct RawJSONObject: Sendable {
    /// The document's bytes as received (may have whitespace around the object).
    public let bytes: [UInt8]
    /// The object's members in order (duplicates kept), as ranges into `bytes`.
    public let members: [JSONMemberRange]
    /// The object's bytes without surrounding whitespace.
    public let objectRange: Range<Int>
    /// True when `bytes` contain a line feed or carriage return (whitespace between tokens).
    public let containsLineBreaks: Bool
    private let object: JSONObject

    /// Parses `bytes` as one JSON object. Errors are the ones every decode entry point reports
    /// for the same bytes: not JSON, too deep, too large, not an object.
    public init(validating bytes: [UInt8], options: JSONParseOptions = JSONParseOptions()) throws(ProtocolError) {
        let value: JSONValue
        var parser: JSONByteParser
        do {
            parser = try JSONByteParser(bytes, options: options)
            value = try parser.parseDocument()
        } catch {
            throw ProtocolError(error)
        }
        guard case .object(let o) = value else { throw .notAnObject(found: value.type) }
        self.bytes = bytes
        self.members = parser.members
        self.objectRange = parser.valueRange
        self.containsLineBreaks = parser.containsLineBreaks
        self.object = o
    }

    /// The compact serialization of `object` (no line breaks).
    public init(compacting object: JSONObject) {
        let bytes = object.serialized()
        // The serializer writes valid JSON: this cannot fail (an empty object if it ever did).
        self = (try? RawJSONObject(validating: bytes, options: JSONParseOptions(maxDepth: .max)))
            ?? (try! RawJSONObject(validating: [0x7B, 0x7D]))
    }

    /// True when the member's (decoded) name is `name`, compared by code points as `JSONObject` does.
    public func member(_ member: JSONMemberRange, isNamed name: String) -> Bool { sameCodePoints(member.name, name) }

    /// The value of the last member named `name`; nil when absent.
    public subscript(name: String) -> JSONValue? { object[name] }

    /// The whole object, parsed.
    public func parsed() -> JSONObject { object }

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
