/// One element of a `Sec-WebSocket-Extensions` header: a name and its parameters (RFC 6455 §9.1).
public struct WebSocketExtensionElement: Hashable, Sendable, CustomStringConvertible {
    public struct Parameter: Hashable, Sendable {
        public var name: String
        /// `nil` for a parameter without a value; quoted-string values are unquoted.
        public var value: String?
        public init(_ name: String, _ value: String? = nil) {
            self.name = name
            self.value = value
        }
    }

    public var name: String
    public var parameters: [Parameter]

    public init(name: String, parameters: [Parameter] = []) {
        self.name = name
        self.parameters = parameters
    }

    /// The header form, e.g. `permessage-deflate; client_max_window_bits=10`.
    public var description: String {
        var s = name
        for p in parameters {
            s += "; " + p.name
            if let v = p.value { s += "=" + v }
        }
        return s
    }

    /// Parses a `Sec-WebSocket-Extensions` value (several header lines joined with ", ").
    public static func parseList(_ value: String) throws(WebSocketExtensionParseError) -> [WebSocketExtensionElement] {
        var p = ExtensionTokenizer(Array(value.utf8))
        var result: [WebSocketExtensionElement] = []
        p.skipSpace()
        if p.atEnd { return [] }
        while true {
            p.skipSpace()
            if p.peek() == UInt8(ascii: ",") { p.i += 1; continue }  // empty list elements are allowed
            if p.atEnd { break }
            guard let name = p.token() else { throw .init(value: value, offset: p.i, problem: "expected an extension name") }
            var element = WebSocketExtensionElement(name: name)
            p.skipSpace()
            while p.peek() == UInt8(ascii: ";") {
                p.i += 1
                p.skipSpace()
                guard let pname = p.token() else { throw .init(value: value, offset: p.i, problem: "expected a parameter name") }
                p.skipSpace()
                var pvalue: String? = nil
                if p.peek() == UInt8(ascii: "=") {
                    p.i += 1
                    p.skipSpace()
                    if p.peek() == UInt8(ascii: "\"") {
                        guard let q = p.quoted() else { throw .init(value: value, offset: p.i, problem: "unterminated quoted string") }
                        pvalue = q
                    } else if let t = p.token() {
                        pvalue = t
                    } else {
                        throw .init(value: value, offset: p.i, problem: "expected a parameter value")
                    }
                    p.skipSpace()
                }
                element.parameters.append(.init(pname, pvalue))
            }
            result.append(element)
            p.skipSpace()
            if p.atEnd { break }
            guard p.peek() == UInt8(ascii: ",") else { throw .init(value: value, offset: p.i, problem: "expected ',' or ';'") }
            p.i += 1
        }
        return result
    }
}

/// A malformed `Sec-WebSocket-Extensions` header.
public struct WebSocketExtensionParseError: Error, Hashable, Sendable, CustomStringConvertible {
    public var value: String
    public var offset: Int
    public var problem: String
    public var description: String { "malformed Sec-WebSocket-Extensions \"\(value)\" at byte \(offset): \(problem)" }
}

struct ExtensionTokenizer {
    let b: [UInt8]
    var i = 0
    init(_ b: [UInt8]) { self.b = b }
    var atEnd: Bool { i >= b.count }
    func peek() -> UInt8? { i < b.count ? b[i] : nil }
    mutating func skipSpace() {
        while i < b.count && (b[i] == 0x20 || b[i] == 0x09) { i += 1 }
    }
    mutating func token() -> String? {
        let start = i
        while i < b.count && HTTPSyntax.isTokenChar(b[i]) { i += 1 }
        return i > start ? String(decoding: b[start ..< i], as: UTF8.self) : nil
    }
    mutating func quoted() -> String? {
        guard peek() == UInt8(ascii: "\"") else { return nil }
        i += 1
        var out: [UInt8] = []
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "\"") { i += 1; return String(decoding: out, as: UTF8.self) }
            if c == UInt8(ascii: "\\") {
                i += 1
                guard i < b.count else { return nil }
            }
            out.append(b[i])
            i += 1
        }
        return nil
    }
}
