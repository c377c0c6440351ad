/// HTTP/1.1 message heads (RFC 9112), sans-I/O: request line / status line and header fields,
/// parsed incrementally with limits. Reusable by the WebSocket handshake, an HTTP CONNECT proxy
/// client and a plain HTTP/1.1 client.

/// Header fields in order, with case-insensitive lookup.
public struct HTTPHeaders: Hashable, Sendable, Sequence, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    public struct Field: Hashable, Sendable {
        public var name: String
        public var value: String
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    public private(set) var fields: [Field] = []

    public init() {}
    public init(_ pairs: [(String, String)]) {
        fields = pairs.map { Field(name: $0.0, value: $0.1) }
    }
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    public var count: Int { fields.count }
    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

    public mutating func add(name: String, value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Replaces every field named `name` with one field.
    public mutating func replaceOrAdd(name: String, value: String) {
        remove(name: name)
        add(name: name, value: value)
    }

    public mutating func remove(name: String) {
        fields.removeAll { HTTPSyntax.equalsIgnoringCase($0.name, name) }
    }

    /// The first value of `name` (case-insensitive), or `nil`.
    public subscript(name: String) -> String? {
        fields.first { HTTPSyntax.equalsIgnoringCase($0.name, name) }?.value
    }

    /// All values of `name`, in order.
    public func values(for name: String) -> [String] {
        fields.filter { HTTPSyntax.equalsIgnoringCase($0.name, name) }.map(\.value)
    }

    /// All values of `name` joined as one comma-separated list (RFC 9110 §5.3).
    public func combinedValue(for name: String) -> String? {
        let v = values(for: name)
        return v.isEmpty ? nil : v.joined(separator: ", ")
    }

    /// The comma-separated elements of every `name` field, trimmed, empty ones dropped.
    public func listElements(for name: String) -> [String] {
        values(for: name).flatMap { $0.split(separator: ",") }
            .map { HTTPSyntax.trimOWS(Substring($0)) }.filter { !$0.isEmpty }
    }

    /// Whether the list header `name` contains `token` (case-insensitive), e.g. `Connection: keep-alive, Upgrade`.
    public func containsToken(_ token: String, in name: String) -> Bool {
        listElements(for: name).contains { HTTPSyntax.equalsIgnoringCase($0, token) }
    }

    public var description: String {
        fields.map { "\($0.name): \($0.value)" }.joined(separator: "\r\n")
    }

    /// Serializes as `Name: value\r\n` lines.
    public func write(into out: inout [UInt8]) {
        for f in fields {
            out.append(contentsOf: f.name.utf8)
            out.append(contentsOf: ": ".utf8)
            out.append(contentsOf: f.value.utf8)
            out.append(contentsOf: "\r\n".utf8)
        }
    }

    /// A whole head: `startLine`, these fields, the blank line.
    func serializedHead(startLine: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        out.append(contentsOf: "\(startLine)\r\n".utf8)
        write(into: &out)
        out.append(contentsOf: "\r\n".utf8)
        return out
    }
}

/// A request head: `GET /path?query HTTP/1.1` and header fields.
public struct HTTPRequestHead: Hashable, Sendable {
    public var method: String
    /// The request target as sent (origin form `/path?query`, or authority form for CONNECT).
    public var target: String
    public var version: HTTPVersion
    public var headers: HTTPHeaders

    public init(method: String, target: String, version: HTTPVersion = .http11, headers: HTTPHeaders = HTTPHeaders()) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
    }

    /// The path part of an origin-form target (before `?`).
    public var path: String {
        if let q = target.firstIndex(of: "?") { return String(target[..<q]) }
        return target
    }

    /// The query part of the target (after `?`, without it), or `nil`.
    public var query: String? {
        if let q = target.firstIndex(of: "?") { return String(target[target.index(after: q)...]) }
        return nil
    }

    /// Serializes the head (request line, headers, blank line).
    public func serialized() -> [UInt8] { headers.serializedHead(startLine: "\(method) \(target) \(version)") }
}

/// A response head: `HTTP/1.1 101 Switching Protocols` and header fields.
public struct HTTPResponseHead: Hashable, Sendable {
    public var version: HTTPVersion
    public var status: Int
    public var reason: String
    public var headers: HTTPHeaders

    public init(version: HTTPVersion = .http11, status: Int, reason: String, headers: HTTPHeaders = HTTPHeaders()) {
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers
    }

    /// `HTTP/1.1 403 Forbidden`
    public var statusLine: String { "\(version) \(status) \(reason)" }

    /// Serializes the head (status line, headers, blank line).
    public func serialized() -> [UInt8] { headers.serializedHead(startLine: statusLine) }
}

public struct HTTPVersion: Hashable, Sendable, CustomStringConvertible {
    public var major: Int
    public var minor: Int
    public static let http10 = HTTPVersion(major: 1, minor: 0)
    public static let http11 = HTTPVersion(major: 1, minor: 1)
    public var description: String { "HTTP/\(major).\(minor)" }
}

/// Limits on a message head (protection against hostile peers).
public struct HTTPHeadLimits: Hashable, Sendable {
    /// Maximum bytes of the whole head, start line and blank line included.
    public var maxHeadSize: Int
    /// Maximum number of header fields.
    public var maxHeaderCount: Int
    public init(maxHeadSize: Int = 16 * 1024, maxHeaderCount: Int = 100) {
        self.maxHeadSize = maxHeadSize
        self.maxHeaderCount = maxHeaderCount
    }
}

/// A malformed or oversized message head. `offset` is the byte offset within the head.
public enum HTTPParseError: Error, Hashable, Sendable, CustomStringConvertible {
    case headTooLarge(limit: Int)
    case tooManyHeaders(limit: Int)
    case malformedStartLine(String)
    case unsupportedVersion(String)
    case malformedHeader(line: String, offset: Int, problem: String)
    case invalidContentLength(String)
    case invalidChunk(offset: Int, problem: String)
    case bodyTooLarge(limit: Int)
    case truncatedBody(expected: Int?, received: Int)

    public var description: String {
        switch self {
        case let .headTooLarge(l): return "HTTP head larger than \(l) bytes"
        case let .tooManyHeaders(l): return "HTTP head with more than \(l) header fields"
        case let .malformedStartLine(s): return "malformed HTTP start line \"\(s)\""
        case let .unsupportedVersion(s): return "unsupported HTTP version \"\(s)\" (expected HTTP/1.x)"
        case let .malformedHeader(line, off, p): return "malformed HTTP header line \"\(line)\" at head byte \(off): \(p)"
        case let .invalidContentLength(v): return "invalid Content-Length \"\(v)\""
        case let .invalidChunk(off, p): return "invalid chunked body at body byte \(off): \(p)"
        case let .bodyTooLarge(l): return "HTTP body larger than \(l) bytes"
        case let .truncatedBody(e, r): return "HTTP body ended after \(r) bytes" + (e.map { ", expected \($0)" } ?? "")
        }
    }
}

/// Incremental head parser: feed bytes until it returns a head; bytes after the head stay in
/// `remainder` (they belong to the body or to the next protocol, e.g. WebSocket frames).
///
/// Lines end with CRLF; a bare LF is also accepted as a line end (RFC 9112 §2.2 allows it).
/// Obsolete line folding is rejected.
public struct HTTPHeadParser: Sendable {
    public let limits: HTTPHeadLimits
    private var buffer: [UInt8] = []
    private var scanned = 0
    /// Bytes received after the end of the head.
    public private(set) var remainder: [UInt8] = []

    public init(limits: HTTPHeadLimits = HTTPHeadLimits()) {
        self.limits = limits
    }

    /// Appends bytes; returns the head's bytes once the blank line is seen.
    private mutating func collect(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) -> [UInt8]? {
        buffer.append(contentsOf: bytes)
        // Find the end of the head: LF (CR)? LF. Resume where the last scan stopped.
        var i = max(0, scanned - 2)
        while i < buffer.count {
            if buffer[i] == 0x0A {
                var j = i + 1
                if j < buffer.count && buffer[j] == 0x0D { j += 1 }
                if j < buffer.count && buffer[j] == 0x0A {
                    let end = j + 1
                    if end > limits.maxHeadSize { throw .headTooLarge(limit: limits.maxHeadSize) }
                    let head = Array(buffer[0 ..< end])
                    remainder = Array(buffer[end...])
                    buffer = []
                    return head
                }
            }
            i += 1
        }
        scanned = buffer.count
        if buffer.count > limits.maxHeadSize { throw .headTooLarge(limit: limits.maxHeadSize) }
        return nil
    }

    /// Feeds bytes of a response; returns the head when complete.
    public mutating func parseResponse(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) -> HTTPResponseHead? {
        guard let head = try collect(bytes) else { return nil }
        var lines = try HTTPSyntax.lines(head)
        let start = lines.removeFirst()
        let startLine = String(decoding: head[start.range], as: UTF8.self)
        // HTTP-version SP status-code SP [reason-phrase]
        let parts = startLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2 else { throw .malformedStartLine(startLine) }
        let version = try HTTPSyntax.version(String(parts[0]))
        guard parts[1].utf8.count == 3, let status = Int(parts[1]), status >= 100 else {
            throw .malformedStartLine(startLine)
        }
        let reason = parts.count > 2 ? String(parts[2]) : ""
        let headers = try HTTPSyntax.headers(head, lines, limits)
        return HTTPResponseHead(version: version, status: status, reason: reason, headers: headers)
    }

    /// Feeds bytes of a request; returns the head when complete.
    public mutating func parseRequest(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) -> HTTPRequestHead? {
        guard let head = try collect(bytes) else { return nil }
        var lines = try HTTPSyntax.lines(head)
        let start = lines.removeFirst()
        let startLine = String(decoding: head[start.range], as: UTF8.self)
        let parts = startLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty,
              parts[0].utf8.allSatisfy(HTTPSyntax.isTokenChar),
              parts[1].utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { throw .malformedStartLine(startLine) }
        let version = try HTTPSyntax.version(String(parts[2]))
        let headers = try HTTPSyntax.headers(head, lines, limits)
        return HTTPRequestHead(method: String(parts[0]), target: String(parts[1]), version: version, headers: headers)
    }

    public mutating func parseResponse(_ bytes: [UInt8]) throws(HTTPParseError) -> HTTPResponseHead? {
        try withTypedBytes(bytes) { (raw) throws(HTTPParseError) in try parseResponse(raw) }
    }

    public mutating func parseRequest(_ bytes: [UInt8]) throws(HTTPParseError) -> HTTPRequestHead? {
        try withTypedBytes(bytes) { (raw) throws(HTTPParseError) in try parseRequest(raw) }
    }
}

/// Shared HTTP syntax helpers.
enum HTTPSyntax {
    struct Line { var range: Range<Int> }

    /// tchar (RFC 9110 §5.6.2).
    @inline(__always)
    static func isTokenChar(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a") ... UInt8(ascii: "z"), UInt8(ascii: "A") ... UInt8(ascii: "Z"), UInt8(ascii: "0") ... UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
        let x = a.utf8, y = b.utf8
        guard x.count == y.count else { return false }
        return zip(x, y).allSatisfy { lower($0) == lower($1) }
    }

    @inline(__always)
    static func lower(_ c: UInt8) -> UInt8 { (c >= 0x41 && c <= 0x5A) ? c | 0x20 : c }

    static func trimOWS(_ s: Substring) -> String {
        var u = s.utf8[...]
        while let f = u.first, f == 0x20 || f == 0x09 { u = u.dropFirst() }
        while let l = u.last, l == 0x20 || l == 0x09 { u = u.dropLast() }
        return String(decoding: u, as: UTF8.self)
    }

    /// Splits a complete head into its non-empty lines (without line ends).
    static func lines(_ head: [UInt8]) throws(HTTPParseError) -> [Line] {
        var result: [Line] = []
        var start = 0
        for i in 0 ..< head.count where head[i] == 0x0A {
            var end = i
            if end > start && head[end - 1] == 0x0D { end -= 1 }
            if end == start { break }  // the blank line
            result.append(Line(range: start ..< end))
            start = i + 1
        }
        if result.isEmpty { throw .malformedStartLine("") }
        return result
    }

    static func version(_ s: String) throws(HTTPParseError) -> HTTPVersion {
        let u = Array(s.utf8)
        guard u.count == 8, s.hasPrefix("HTTP/"), u[6] == UInt8(ascii: "."),
              (0x30 ... 0x39).contains(u[5]), (0x30 ... 0x39).contains(u[7])
        else { throw .malformedStartLine(s) }
        let v = HTTPVersion(major: Int(u[5] - 0x30), minor: Int(u[7] - 0x30))
        guard v.major == 1 else { throw .unsupportedVersion(s) }
        return v
    }

    static func headers(_ head: [UInt8], _ lines: [Line], _ limits: HTTPHeadLimits) throws(HTTPParseError) -> HTTPHeaders {
        if lines.count > limits.maxHeaderCount { throw .tooManyHeaders(limit: limits.maxHeaderCount) }
        var headers = HTTPHeaders()
        for line in lines {
            let bytes = head[line.range]
            let text = String(decoding: bytes, as: UTF8.self)
            guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else {
                throw .malformedHeader(line: text, offset: line.range.lowerBound, problem: "no ':'")
            }
            if bytes.first == 0x20 || bytes.first == 0x09 {
                throw .malformedHeader(line: text, offset: line.range.lowerBound, problem: "obsolete line folding is not accepted")
            }
            let name = head[line.range.lowerBound ..< colon]
            guard !name.isEmpty, name.allSatisfy(isTokenChar) else {
                throw .malformedHeader(line: text, offset: line.range.lowerBound, problem: "invalid field name")
            }
            let value = head[(colon + 1) ..< line.range.upperBound]
            if let bad = value.firstIndex(where: { $0 == 0x00 || $0 == 0x0D || $0 == 0x0A || ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
                throw .malformedHeader(line: text, offset: bad, problem: "control character in field value")
            }
            headers.add(
                name: String(decoding: name, as: UTF8.self),
                value: trimOWS(Substring(String(decoding: value, as: UTF8.self))))
        }
        return headers
    }
}

/// `withUnsafeBytes` that keeps a typed error (the standard one rethrows `any Error`).
@inline(__always)
func withTypedBytes<T, E: Error>(_ array: [UInt8], _ body: (UnsafeRawBufferPointer) throws(E) -> T) throws(E) -> T {
    var result: Result<T, E>?
    array.withUnsafeBytes { raw in result = Result { () throws(E) -> T in try body(raw) } }
    return try result!.get()
}
