/// A JSON object kept as the bytes that arrived: validated (exactly as the parser would) and
/// mapped to its members' byte ranges, but not parsed. Members are parsed one at a time when
/// asked, and the rest can be copied as they are.
public struct RawJSONObject: Sendable {
    /// The document's bytes as received (may have whitespace around the object).
    public let bytes: [UInt8]
    /// The object's members in order (duplicates kept), as ranges into `bytes`.
    public let members: [JSONMemberRange]
    /// The object's bytes without surrounding whitespace.
    public let objectRange: Range<Int>
    /// True when `bytes` contain a line feed or carriage return (whitespace between tokens).
    public let containsLineBreaks: Bool

    /// Validates `bytes` as one JSON object. Errors are the ones `parseObject` (every decode
    /// entry point) reports for the same bytes: not JSON, too deep, too large, not an object.
    public init(validating bytes: [UInt8], options: JSONParseOptions = JSONParseOptions()) throws(ProtocolError) {
        let scan: JSONScan
        do { scan = try JSONScanner.scan(bytes, options: options) } catch { throw ProtocolError(error) }
        try self.init(bytes: bytes, scan: scan)
    }

    init(bytes: [UInt8], scan: JSONScan) throws(ProtocolError) {
        guard scan.type == .object else { throw .notAnObject(found: scan.type) }
        self.bytes = bytes
        self.members = scan.members
        self.objectRange = scan.value
        self.containsLineBreaks = scan.containsLineBreaks
    }

    /// The compact serialization of `object` (no line breaks, trusted: not validated again
    /// against parse limits).
    public init(compacting object: JSONObject) {
        let bytes = object.serialized()
        let scan = try? JSONScanner.scan(bytes, options: JSONParseOptions(maxDepth: .max))
        // The serializer writes valid JSON; an unusable scan cannot happen, and would mean an empty object.
        self.bytes = scan == nil ? [0x7B, 0x7D] : bytes
        self.members = scan?.members ?? []
        self.objectRange = scan?.value ?? 0..<2
        self.containsLineBreaks = false
    }

    /// The (decoded) name of a member.
    public func name(of member: JSONMemberRange) -> String {
        if !member.keyHasEscapes {
            return bytes.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[member.key]), as: UTF8.self) }
        }
        return value(in: (member.key.lowerBound - 1)..<(member.key.upperBound + 1)).stringValue ?? ""
    }

    /// True when the member's (decoded) name is `name`, compared by code points as `JSONObject` does.
    public func member(_ member: JSONMemberRange, isNamed name: String) -> Bool {
        if member.keyHasEscapes { return sameCodePoints(self.name(of: member), name) }
        guard name.utf8.count == member.key.count else { return false }
        return bytes.withUnsafeBufferPointer { b in
            let key = UnsafeBufferPointer(rebasing: b[member.key])
            return name.utf8.withContiguousStorageIfAvailable { sameBytes($0, key) } ?? name.utf8.elementsEqual(key)
        }
    }

    /// The last member named `name` (the one a `JSONObject` lookup sees), if any.
    public func lastMember(named name: String) -> JSONMemberRange? {
        members.last { member($0, isNamed: name) }
    }

    /// The parsed value of a member.
    public func value(of member: JSONMemberRange) -> JSONValue { value(in: member.value) }

    /// The value of the last member named `name`, parsed; nil when absent.
    public subscript(name: String) -> JSONValue? { lastMember(named: name).map(value(of:)) }

    /// An object of just the (last) members named in `names`, parsed, in the order of `names`:
    /// what a typed message checks, without parsing the rest.
    public func picking(_ names: [String]) -> JSONObject {
        var found = [JSONMemberRange?](repeating: nil, count: names.count)
        for m in members {
            for (k, name) in names.enumerated() where member(m, isNamed: name) { found[k] = m }
        }
        // Sized once: appending member by member regrew both arrays (allocations on every 110).
        var keys: [String] = []
        var values: [JSONValue] = []
        keys.reserveCapacity(names.count)
        values.reserveCapacity(names.count)
        for (k, m) in found.enumerated() {
            if let m {
                keys.append(names[k])
                values.append(value(of: m))
            }
        }
        return JSONObject(keys: keys, values: values)
    }

    /// The whole object, parsed.
    public func parsed() -> JSONObject { value(in: objectRange).objectValue ?? JSONObject() }

    /// Parses bytes this object already validated (so it cannot fail; the limits were checked then).
    private func value(in range: Range<Int>) -> JSONValue {
        bytes.withUnsafeBytes { b in
            (try? JSONValue(parsing: UnsafeRawBufferPointer(rebasing: b[range]), options: JSONParseOptions(maxDepth: .max))) ?? .null
        }
    }

    /// Appends `{`, `prefix`, then every member not named `dropping`, then `}`. Members are
    /// copied as they arrived: consecutive kept members as one run of bytes (with the commas and
    /// whitespace between them), runs joined by `,`. With `prefix` non-empty, a `,` separates it
    /// from the first member.
    public func appendObject(prefix: StaticString, dropping dropped: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        out.appendLiteral(prefix)
        var needsComma = prefix.utf8CodeUnitCount > 0
        var runStart: Int?
        var runEnd = 0
        bytes.withUnsafeBufferPointer { b in
            func flush() {
                guard let s = runStart else { return }
                if needsComma { out.append(UInt8(ascii: ",")) }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: b[s..<runEnd]))
                needsComma = true
                runStart = nil
            }
            for m in members {
                if member(m, isNamed: dropped) {
                    flush()
                } else {
                    if runStart == nil { runStart = m.whole.lowerBound }
                    runEnd = m.value.upperBound
                }
            }
            flush()
        }
        out.append(UInt8(ascii: "}"))
    }
}

extension RawJSONObject: Equatable {
    /// Same bytes (and so the same object). Two different spellings of one JSON value are not
    /// equal here: compare `parsed()` for that.
    public static func == (lhs: RawJSONObject, rhs: RawJSONObject) -> Bool { lhs.bytes == rhs.bytes }
}
