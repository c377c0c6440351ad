/// How an HTTP/1.1 message body is delimited (RFC 9112 §6).
public enum HTTPBodyFraming: Hashable, Sendable {
    /// No body (1xx, 204, 304, responses to HEAD).
    case none
    case contentLength(Int)
    case chunked
    /// The body ends when the connection closes (responses only).
    case closeDelimited

    /// The framing of a response to a request with `requestMethod`.
    public static func forResponse(_ head: HTTPResponseHead, requestMethod: String = "GET") throws(HTTPParseError) -> HTTPBodyFraming {
        if requestMethod == "HEAD" || (100 ..< 200).contains(head.status) || head.status == 204 || head.status == 304 {
            return .none
        }
        if requestMethod == "CONNECT" && (200 ..< 300).contains(head.status) { return .none }
        return try forMessage(head.headers, isRequest: false)
    }

    /// The framing of a request.
    public static func forRequest(_ head: HTTPRequestHead) throws(HTTPParseError) -> HTTPBodyFraming {
        try forMessage(head.headers, isRequest: true)
    }

    private static func forMessage(_ headers: HTTPHeaders, isRequest: Bool) throws(HTTPParseError) -> HTTPBodyFraming {
        let te = headers.listElements(for: "Transfer-Encoding")
        if !te.isEmpty {
            // Chunked must be the final coding; otherwise a response is close-delimited and a request invalid.
            if HTTPSyntax.equalsIgnoringCase(te.last!, "chunked") { return .chunked }
            if isRequest { throw .invalidContentLength("Transfer-Encoding without final chunked") }
            return .closeDelimited
        }
        let cl = headers.listElements(for: "Content-Length")
        if let first = cl.first {
            // Several identical values are tolerated (RFC 9110 §8.6); differing ones are not.
            guard cl.allSatisfy({ $0 == first }), first.utf8.count <= 18, first.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let n = Int(first)
            else { throw .invalidContentLength(cl.joined(separator: ", ")) }
            return .contentLength(n)
        }
        return isRequest ? .contentLength(0) : .closeDelimited
    }
}

/// Incremental body decoder: feed bytes, get body bytes out; `isComplete` once the body ended.
/// Bytes after the body stay in `remainder`.
public struct HTTPBodyDecoder: Sendable {
    public let framing: HTTPBodyFraming
    /// Maximum body bytes to accept (error beyond).
    public let maxBodySize: Int
    public private(set) var isComplete: Bool
    public private(set) var received = 0
    /// Bytes after the end of the body.
    public private(set) var remainder: [UInt8] = []

    private enum ChunkState: Sendable {
        case size(value: Int, digits: Int, inExtension: Bool, sawCR: Bool)
        case data(remaining: Int)
        case dataCR
        case dataLF
        case trailerLineStart
        case trailerLine
        case finalLF
    }
    private var chunk: ChunkState = .size(value: 0, digits: 0, inExtension: false, sawCR: false)
    private var wireOffset = 0

    public init(framing: HTTPBodyFraming, maxBodySize: Int = 16 * 1024 * 1024) {
        self.framing = framing
        self.maxBodySize = maxBodySize
        switch framing {
        case .none, .contentLength(0): isComplete = true
        default: isComplete = false
        }
    }

    /// Decodes `bytes`, appending body bytes to `body`.
    public mutating func decode(_ bytes: UnsafeRawBufferPointer, into body: inout [UInt8]) throws(HTTPParseError) {
        if isComplete {
            remainder.append(contentsOf: bytes)
            return
        }
        switch framing {
        case .none:
            remainder.append(contentsOf: bytes)
        case let .contentLength(n):
            let take = min(bytes.count, n - received)
            try append(UnsafeRawBufferPointer(rebasing: bytes[0 ..< take]), to: &body)
            if received == n {
                isComplete = true
                remainder.append(contentsOf: bytes[take...])
            }
        case .closeDelimited:
            try append(bytes, to: &body)
        case .chunked:
            try decodeChunked(bytes, into: &body)
        }
    }

    /// The connection closed: completes a close-delimited body, otherwise reports truncation.
    public mutating func finish() throws(HTTPParseError) {
        if isComplete { return }
        if case .closeDelimited = framing {
            isComplete = true
            return
        }
        if case let .contentLength(n) = framing { throw .truncatedBody(expected: n, received: received) }
        throw .truncatedBody(expected: nil, received: received)
    }

    private mutating func append(_ bytes: UnsafeRawBufferPointer, to body: inout [UInt8]) throws(HTTPParseError) {
        if received + bytes.count > maxBodySize { throw .bodyTooLarge(limit: maxBodySize) }
        body.append(contentsOf: bytes)
        received += bytes.count
    }

    private mutating func decodeChunked(_ bytes: UnsafeRawBufferPointer, into body: inout [UInt8]) throws(HTTPParseError) {
        var i = 0
        while i < bytes.count {
            if isComplete {
                remainder.append(contentsOf: bytes[i...])
                return
            }
            let c = bytes[i]
            switch chunk {
            case let .size(value, digits, inExt, sawCR):
                if sawCR {
                    guard c == 0x0A else { throw .invalidChunk(offset: wireOffset + i, problem: "expected LF after chunk size") }
                    chunk = value == 0 ? .trailerLineStart : .data(remaining: value)
                } else if c == 0x0D {
                    guard digits > 0 else { throw .invalidChunk(offset: wireOffset + i, problem: "missing chunk size") }
                    chunk = .size(value: value, digits: digits, inExtension: inExt, sawCR: true)
                } else if c == 0x0A {
                    guard digits > 0 else { throw .invalidChunk(offset: wireOffset + i, problem: "missing chunk size") }
                    chunk = value == 0 ? .trailerLineStart : .data(remaining: value)
                } else if inExt {
                    // chunk extensions are skipped up to the line end
                } else if let d = Self.hexValue(c) {
                    guard digits < 15 else { throw .invalidChunk(offset: wireOffset + i, problem: "chunk size too long") }
                    chunk = .size(value: value << 4 | d, digits: digits + 1, inExtension: false, sawCR: false)
                } else if c == UInt8(ascii: ";") || c == 0x20 || c == 0x09 {
                    guard digits > 0 else { throw .invalidChunk(offset: wireOffset + i, problem: "missing chunk size") }
                    chunk = .size(value: value, digits: digits, inExtension: true, sawCR: false)
                } else {
                    throw .invalidChunk(offset: wireOffset + i, problem: "invalid character in chunk size")
                }
                i += 1
            case let .data(remaining):
                let take = min(remaining, bytes.count - i)
                try append(UnsafeRawBufferPointer(rebasing: bytes[i ..< i + take]), to: &body)
                i += take
                chunk = take == remaining ? .dataCR : .data(remaining: remaining - take)
            case .dataCR:
                if c == 0x0D { chunk = .dataLF } else if c == 0x0A {
                    chunk = .size(value: 0, digits: 0, inExtension: false, sawCR: false)
                } else {
                    throw .invalidChunk(offset: wireOffset + i, problem: "expected CRLF after chunk data")
                }
                i += 1
            case .dataLF:
                guard c == 0x0A else { throw .invalidChunk(offset: wireOffset + i, problem: "expected LF after chunk data") }
                chunk = .size(value: 0, digits: 0, inExtension: false, sawCR: false)
                i += 1
            case .trailerLineStart:
                if c == 0x0D { chunk = .finalLF } else if c == 0x0A { isComplete = true } else { chunk = .trailerLine }
                i += 1
            case .trailerLine:
                if c == 0x0A { chunk = .trailerLineStart }
                i += 1
            case .finalLF:
                guard c == 0x0A else { throw .invalidChunk(offset: wireOffset + i, problem: "expected LF after last chunk") }
                isComplete = true
                i += 1
            }
        }
        wireOffset += bytes.count
    }

    private static func hexValue(_ c: UInt8) -> Int? {
        switch c {
        case 0x30 ... 0x39: return Int(c - 0x30)
        case 0x41 ... 0x46: return Int(c - 0x41 + 10)
        case 0x61 ... 0x66: return Int(c - 0x61 + 10)
        default: return nil
        }
    }
}
