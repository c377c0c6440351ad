extension JSONValue {
    /// Compact UTF-8 JSON (no whitespace). Numbers are written from their literal text,
    /// strings escaped per RFC 8259 (`"`, `\`, control characters; everything else as UTF-8).
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        serialize(into: &out)
        return out
    }

    /// Compact JSON as a `String`.
    public func serializedString() -> String { String(decoding: serialized(), as: UTF8.self) }

    /// Appends the compact UTF-8 JSON of this value to `out`.
    ///
    /// Recursive over nesting depth: values produced by the parser are bounded by its
    /// `maxDepth`; do not hand-build values nested tens of thousands deep.
    public func serialize(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
        case .bool(true): out.append(contentsOf: [0x74, 0x72, 0x75, 0x65])
        case .bool(false): out.append(contentsOf: [0x66, 0x61, 0x6C, 0x73, 0x65])
        case .number(let n): out.append(contentsOf: n.literal.utf8)
        case .string(let s): JSONValue.serializeString(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (k, v) in a.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                v.serialize(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            o.serialize(into: &out)
        }
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends a JSON string literal.
    public static func serializeString(_ string: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for b in string.utf8 {
            guard b < 0x20 || b == 0x22 || b == 0x5C else { out.append(b); continue }
            out.append(0x5C)
            switch b {
            case 0x22: out.append(0x22)
            case 0x5C: out.append(0x5C)
            case 0x0A: out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(UInt8(ascii: "r"))
            case 0x09: out.append(UInt8(ascii: "t"))
            case 0x08: out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(UInt8(ascii: "f"))
            default:
                out.append(contentsOf: "u00".utf8)
                out.append(hex[Int(b >> 4)]); out.append(hex[Int(b & 0xF)])
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

extension JSONObject {
    /// Compact UTF-8 JSON of this object, members in their order.
    public func serialized() -> [UInt8] { JSONValue.object(self).serialized() }

    /// Appends the compact JSON of this object to `out`.
    public func serialize(into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for k in 0..<keys.count {
            if k > 0 { out.append(UInt8(ascii: ",")) }
            JSONValue.serializeString(keys[k], into: &out)
            out.append(UInt8(ascii: ":"))
            values[k].serialize(into: &out)
        }
        out.append(UInt8(ascii: "}"))
    }
}

extension JSONValue: CustomStringConvertible {
    /// The compact JSON text.
    public var description: String { serializedString() }
}
