import SmarticoProtocol

/// One HTTP/1.1 request head (the simulator's pages take no bodies).
public struct SimHTTPRequest: Sendable, Equatable {
    public var method: String
    /// The request target as sent (`/wrapper-gf.html?label_key=…`).
    public var target: String
    public var version: String
    /// Header names lowercased, in order.
    public var headers: [(name: String, value: String)]
    /// The body (`Content-Length` bytes; empty without one).
    public var body: [UInt8] = []

    /// The last value of a header (name in any case).
    public func header(_ name: String) -> String? {
        let n = name.lowercased()
        return headers.last { $0.name == n }?.value
    }

    /// The raw query string (after `?`, before `#`), or "".
    public var rawQuery: String {
        guard let q = target.firstIndex(of: "?") else { return "" }
        var query = target[target.index(after: q)...]
        if let hash = query.firstIndex(of: "#") { query = query[..<hash] }
        return String(query)
    }

    /// The path without the query, percent-decoded.
    public var path: String {
        let raw = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        return WrapperURL.percentDecode(raw)
    }

    /// Query parameters, percent-decoded (`+` as space), in order.
    public var query: [(name: String, value: String)] { WrapperURL.queryItems(rawQuery) }

    /// The last value of a query parameter.
    public func parameter(_ name: String) -> String? { query.last { $0.name == name }?.value }

    public static func == (a: SimHTTPRequest, b: SimHTTPRequest) -> Bool {
        a.method == b.method && a.target == b.target && a.version == b.version && a.body == b.body
            && a.headers.map(\.name) == b.headers.map(\.name) && a.headers.map(\.value) == b.headers.map(\.value)
    }
}

/// An HTTP response; `bytes(includeBody:)` gives what goes on the wire (`Connection: close`).
public struct SimHTTPResponse: Sendable, Equatable {
    public var status: Int
    public var reason: String
    public var contentType: String
    public var body: [UInt8]
    public var extraHeaders: [(String, String)] = []

    public init(status: Int, reason: String, contentType: String, body: [UInt8], extraHeaders: [(String, String)] = []) {
        self.status = status
        self.reason = reason
        self.contentType = contentType
        self.body = body
        self.extraHeaders = extraHeaders
    }

    public static func text(_ status: Int, _ reason: String, _ text: String, extraHeaders: [(String, String)] = []) -> SimHTTPResponse {
        SimHTTPResponse(status: status, reason: reason, contentType: "text/plain; charset=utf-8", body: Array((text + "\n").utf8),
                        extraHeaders: extraHeaders)
    }

    /// Status line, headers and (unless for a HEAD request) the body. Every response closes the connection.
    public func bytes(includeBody: Bool = true) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(reason)\r\nContent-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n"
        head += "Cache-Control: no-store\r\nConnection: close\r\n"
        for (k, v) in extraHeaders { head += "\(k): \(v)\r\n" }
        head += "\r\n"
        var out = Array(head.utf8)
        if includeBody { out += body }
        return out
    }

    public static func == (a: SimHTTPResponse, b: SimHTTPResponse) -> Bool {
        a.status == b.status && a.reason == b.reason && a.contentType == b.contentType && a.body == b.body
            && a.extraHeaders.map(\.0) == b.extraHeaders.map(\.0) && a.extraHeaders.map(\.1) == b.extraHeaders.map(\.1)
    }
}

/// Reads one request from bytes as they arrive (sans I/O): the head, then a `Content-Length`
/// body. Bounded: a head larger than `maxHeadBytes` is refused with 431, a body larger than
/// `maxBodyBytes` with 413, chunked bodies with 411.
public struct SimHTTPRequestParser: Sendable {
    public enum Outcome: Sendable, Equatable {
        case needMore
        case request(SimHTTPRequest)
        /// Answer with this response and close.
        case reject(SimHTTPResponse)
    }

    public let maxHeadBytes: Int
    public let maxBodyBytes: Int
    private var buffer: [UInt8] = []
    private var head: SimHTTPRequest?
    private var bodyStart = 0
    private var bodyLength = 0
    private var done = false

    public init(maxHeadBytes: Int = 16 * 1024, maxBodyBytes: Int = 1 << 20) {
        self.maxHeadBytes = maxHeadBytes
        self.maxBodyBytes = maxBodyBytes
    }

    /// Feeds bytes; returns the outcome once the request is complete (later bytes are ignored).
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Outcome {
        guard !done else { return .needMore }
        let scanFrom = max(0, buffer.count - 3)
        buffer.append(contentsOf: bytes)
        if head == nil {
            var end: Int?
            var k = scanFrom
            while k + 3 < buffer.count {
                if buffer[k] == 13, buffer[k + 1] == 10, buffer[k + 2] == 13, buffer[k + 3] == 10 { end = k; break }
                k += 1
            }
            guard let end, end <= maxHeadBytes else {
                if buffer.count > maxHeadBytes + 4 {
                    done = true
                    return .reject(.text(431, "Request Header Fields Too Large", "request head larger than \(maxHeadBytes) bytes"))
                }
                return .needMore
            }
            switch Self.parseHead(Array(buffer[..<end])) {
            case .request(let r):
                if r.header("transfer-encoding") != nil {
                    done = true
                    return .reject(.text(411, "Length Required", "chunked bodies are not supported; send Content-Length"))
                }
                let lengthText = r.header("content-length") ?? "0"
                guard let length = Int(lengthText), length >= 0 else {
                    done = true
                    return .reject(.text(400, "Bad Request", "Content-Length \"\(lengthText.truncatedUTF8(40))\" is not a number"))
                }
                guard length <= maxBodyBytes else {
                    done = true
                    return .reject(.text(413, "Content Too Large", "body of \(length) bytes; at most \(maxBodyBytes)"))
                }
                head = r
                bodyStart = end + 4
                bodyLength = length
            case let other:
                done = true
                return other
            }
        }
        guard var request = head, buffer.count - bodyStart >= bodyLength else { return .needMore }
        done = true
        request.body = Array(buffer[bodyStart..<(bodyStart + bodyLength)])
        buffer = []
        return .request(request)
    }

    public mutating func feed(_ bytes: [UInt8]) -> Outcome { bytes.withUnsafeBytes { feed($0) } }

    static func parseHead(_ head: [UInt8]) -> Outcome {
        // Split on LF bytes (in Swift, "\r\n" is one Character, so String splitting would not see it).
        var lines = head.split(separator: 0x0A, omittingEmptySubsequences: false).map { line -> String in
            String(decoding: line.last == 0x0D ? line.dropLast() : line, as: UTF8.self)
        }
        guard !lines.isEmpty else { return .reject(.text(400, "Bad Request", "empty request")) }
        let requestLine = lines.removeFirst()
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[1].hasPrefix("/"), parts[2].hasPrefix("HTTP/1.") else {
            return .reject(.text(400, "Bad Request", "malformed request line \"\(requestLine.truncatedUTF8(100))\""))
        }
        var headers: [(String, String)] = []
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else {
                return .reject(.text(400, "Bad Request", "malformed header line \"\(line.truncatedUTF8(100))\""))
            }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingSpaces()
            headers.append((name, value))
        }
        return .request(SimHTTPRequest(method: String(parts[0]), target: String(parts[1]), version: String(parts[2]), headers: headers))
    }
}

extension Substring {
    func trimmingSpaces() -> String {
        var s = self
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return String(s)
    }
}
