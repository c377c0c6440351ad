/// Why an HTTP response could not be read.
public enum HTTPClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The URL is not `http://` or `https://host[:port][/path]`.
    case invalidURL(url: String, problem: String)
    /// The response head or body is not valid HTTP/1.1.
    case malformedResponse(HTTPParseError)
    /// The body is larger than the limit.
    case responseTooLarge(limit: Int)
    /// The server closed the connection before the response was complete.
    case connectionClosed(bytesReceived: Int)

    public var description: String {
        switch self {
        case let .invalidURL(url, problem): return "invalid HTTP URL \"\(url)\": \(problem)"
        case let .malformedResponse(e): return "invalid HTTP response: \(e)"
        case let .responseTooLarge(limit): return "response body larger than the limit of \(limit) bytes"
        case let .connectionClosed(n): return "connection closed after \(n) bytes, before the response was complete"
        }
    }
}
