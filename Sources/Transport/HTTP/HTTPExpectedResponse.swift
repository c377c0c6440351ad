/// The answer to a request that expects one kind of status (a proxy's 2xx to `CONNECT`, a
/// server's 101 to an upgrade), sans-I/O: its head, and for any other status the start of its
/// body, which the caller's error quotes. ``HTTPConnectHandshake`` and
/// ``WebSocketClientHandshake`` read their answers with it.
struct HTTPExpectedResponse: Sendable {
    enum Outcome {
        /// The head has an expected status; ``remainder`` holds the bytes after it.
        case accepted(HTTPResponseHead)
        /// Another status, with the start of its body: all of it, as much as is kept, or as far as
        /// it could be decoded.
        case refused(HTTPResponseHead, bodyPrefix: [UInt8])
    }

    private let expected: Range<Int>
    private var parser: HTTPHeadParser
    private var decoder: HTTPBodyDecoder?
    /// The head of a refusal, once it is complete.
    private(set) var refusal: HTTPResponseHead?
    /// The refusal's body so far.
    private(set) var body: [UInt8] = []
    /// Bytes received so far.
    private(set) var received = 0

    init(expecting expected: Range<Int>, limits: HTTPHeadLimits = HTTPHeadLimits()) {
        self.expected = expected
        parser = HTTPHeadParser(limits: limits)
    }

    /// The bytes after an accepted head.
    var remainder: [UInt8] { parser.remainder }

    /// Feeds received bytes; the outcome once it is known. A refusal's body is kept up to
    /// `maxBodySize` bytes. Throws only for a head that is not valid HTTP.
    mutating func receive(_ bytes: UnsafeRawBufferPointer, maxBodySize: Int) throws(HTTPParseError) -> Outcome? {
        received += bytes.count
        if refusal != nil { return collect(bytes, maxBodySize: maxBodySize) }
        guard let head = try parser.parseResponse(bytes) else { return nil }
        if expected.contains(head.status) { return .accepted(head) }
        refusal = head
        let framing = (try? HTTPBodyFraming.forResponse(head)) ?? .closeDelimited
        decoder = HTTPBodyDecoder(framing: framing, maxBodySize: Int.max)
        let rest = parser.remainder
        return rest.withUnsafeBytes { collect($0, maxBodySize: maxBodySize) }
    }

    /// Adds to the refusal's body; `.refused` once it is complete, undecodable or long enough.
    private mutating func collect(_ bytes: UnsafeRawBufferPointer, maxBodySize: Int) -> Outcome? {
        guard let head = refusal, var d = decoder else { return nil }
        var bad = false
        do { try d.decode(bytes, into: &body) } catch { bad = true }
        decoder = d
        guard bad || d.isComplete || body.count >= maxBodySize else { return nil }
        if body.count > maxBodySize { body.removeLast(body.count - maxBodySize) }
        return .refused(head, bodyPrefix: body)
    }
}
