/// A `Decoder` over a parsed ``ConfigJSON`` tree.
///
/// It exists because Foundation's `JSONDecoder` stops at the first problem and, on Linux,
/// reports neither positions nor which field failed. With this decoder the configuration
/// types' `init(from:)` see every field and record each problem in a ``ConfigProblemSink``
/// (see ``ConfigObject``), so a file with ten mistakes yields ten lines.
struct ConfigTreeDecoder: Decoder {
    let node: ConfigJSON
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = node else {
            throw DecodingError.typeMismatch(
                [String: Any].self,
                .init(codingPath: codingPath, debugDescription: "expected an object, found \(node.kindDescription)"))
        }
        // A repeated key (already reported by the parser) counts once; its last value wins.
        var byKey: [String: ConfigJSON] = [:]
        var order: [String] = []
        for member in members {
            if byKey.updateValue(member.value, forKey: member.key) == nil { order.append(member.key) }
        }
        return KeyedDecodingContainer(
            KeyedContainer<Key>(members: byKey, order: order, codingPath: codingPath, userInfo: userInfo))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let items) = node else {
            throw DecodingError.typeMismatch(
                [Any].self,
                .init(codingPath: codingPath, debugDescription: "expected an array, found \(node.kindDescription)"))
        }
        return UnkeyedContainer(items: items, codingPath: codingPath, userInfo: userInfo)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValue(node: node, codingPath: codingPath, userInfo: userInfo)
    }

    /// Decodes `T` from this node; ``ConfigJSON`` itself is returned as is.
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if let json = node as? T, T.self == ConfigJSON.self { return json }
        return try T(from: self)
    }
}

/// A coding key for arbitrary object members and array indices.
struct AnyCodingKey: CodingKey, Sendable {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue; intValue = nil }
    init(intValue: Int) { stringValue = "[\(intValue)]"; self.intValue = intValue }
}

private struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [String: ConfigJSON]
    let order: [String]
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]

    var allKeys: [Key] { order.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

    private func child(_ key: Key) throws -> ConfigTreeDecoder {
        guard let node = members[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "required"))
        }
        return ConfigTreeDecoder(node: node, codingPath: codingPath + [key], userInfo: userInfo)
    }

    func decodeNil(forKey key: Key) throws -> Bool { try child(key).node == .null }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try child(key).decode(type) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try child(key).decode(type) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try child(key).decode(type) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try child(key).decode(type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try child(key).decode(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try child(key).decode(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try child(key).decode(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try child(key).decode(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try child(key).decode(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try child(key).decode(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try child(key).decode(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try child(key).decode(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try child(key).decode(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try child(key).decode(type) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try child(key).decode(type) }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try child(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try child(key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        ConfigTreeDecoder(node: .object(order.compactMap { k in members[k].map { (k, $0) } }), codingPath: codingPath, userInfo: userInfo)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder { try child(key) }
}

private struct UnkeyedContainer: UnkeyedDecodingContainer {
    let items: [ConfigJSON]
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]
    var currentIndex = 0

    init(items: [ConfigJSON], codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: Any]) {
        self.items = items
        self.codingPath = codingPath
        self.userInfo = userInfo
    }

    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    private mutating func next() throws -> ConfigTreeDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                Any.self,
                .init(codingPath: codingPath + [AnyCodingKey(intValue: currentIndex)], debugDescription: "the array has no more elements"))
        }
        defer { currentIndex += 1 }
        return ConfigTreeDecoder(node: items[currentIndex], codingPath: codingPath + [AnyCodingKey(intValue: currentIndex)], userInfo: userInfo)
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else { return false }
        if items[currentIndex] == .null { currentIndex += 1; return true }
        return false
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next().decode(type) }
    mutating func decode(_ type: String.Type) throws -> String { try next().decode(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next().decode(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next().decode(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next().decode(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next().decode(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next().decode(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next().decode(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next().decode(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next().decode(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next().decode(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next().decode(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next().decode(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next().decode(type) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().decode(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }

    mutating func superDecoder() throws -> any Decoder { try next() }
}

private struct SingleValue: SingleValueDecodingContainer {
    let node: ConfigJSON
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]

    private func mismatch<T>(_ type: T.Type, _ expected: String) -> DecodingError {
        .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "expected \(expected), found \(node.kindDescription)"))
    }

    func decodeNil() -> Bool { node == .null }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let b) = node else { throw mismatch(type, "true or false") }
        return b
    }

    func decode(_ type: String.Type) throws -> String {
        guard case .string(let s) = node else { throw mismatch(type, "a string") }
        return s
    }

    func decode(_ type: Double.Type) throws -> Double {
        guard case .number(let text) = node else { throw mismatch(type, "a number") }
        guard let value = Double(text), value.isFinite else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "the number \(text) is out of range"))
        }
        return value
    }

    func decode(_ type: Float.Type) throws -> Float { Float(try decode(Double.self)) }

    private func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        guard case .number(let text) = node else { throw mismatch(type, "an integer") }
        guard let value = T(text) else {
            // `Int("10.0")` is nil: integers are written without a fraction or exponent.
            let isIntegral = !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" })
            throw DecodingError.dataCorrupted(.init(
                codingPath: codingPath,
                debugDescription: isIntegral
                    ? "the integer \(text) is out of range \(T.min)…\(T.max)"
                    : "expected an integer, found the number \(text)"))
        }
        return value
    }

    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try ConfigTreeDecoder(node: node, codingPath: codingPath, userInfo: userInfo).decode(type)
    }
}

extension ConfigJSON: Decodable {
    /// Captures the raw JSON value. With the configuration decoder this is exact; with
    /// another decoder it is reconstructed from what its containers offer.
    init(from decoder: any Decoder) throws {
        if let tree = decoder as? ConfigTreeDecoder { self = tree.node; return }
        if let keyed = try? decoder.container(keyedBy: AnyCodingKey.self) {
            var members: [(key: String, value: ConfigJSON)] = []
            for key in keyed.allKeys { members.append((key.stringValue, try keyed.decode(ConfigJSON.self, forKey: key))) }
            self = .object(members)
            return
        }
        if var unkeyed = try? decoder.unkeyedContainer() {
            var items: [ConfigJSON] = []
            while !unkeyed.isAtEnd { items.append(try unkeyed.decode(ConfigJSON.self)) }
            self = .array(items)
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() { self = .null }
        else if let b = try? single.decode(Bool.self) { self = .bool(b) }
        else if let i = try? single.decode(Int64.self) { self = .number(String(i)) }
        else if let d = try? single.decode(Double.self) { self = .number(String(d)) }
        else { self = .string(try single.decode(String.self)) }
    }
}
