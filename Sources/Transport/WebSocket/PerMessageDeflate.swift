import COpenSSL

/// What this endpoint is willing to negotiate for permessage-deflate (RFC 7692).
///
/// Window bits are 8...15. zlib cannot *deflate* with a 256-byte window (8); when 8 is negotiated
/// for our sending direction we deflate with 9. That is safe: zlib's deflate never references
/// more than `window - 262` bytes back (512 − 262 = 250 < 256), so the peer can inflate the
/// output with a 256-byte window.
public struct PerMessageDeflateOptions: Hashable, Sendable {
    /// Client: ask the server to reset its compression context per message.
    /// Server: reset our compression context per message even if the client did not ask.
    public var serverNoContextTakeover: Bool
    /// Client: announce that we reset our compression context per message.
    /// Server: ask the client to reset its context per message.
    public var clientNoContextTakeover: Bool
    /// Client: the largest window the server may compress with (offered as `server_max_window_bits`).
    /// Server: the largest window we compress with.
    public var serverMaxWindowBits: Int?
    /// Client: the largest window we will compress with (`client_max_window_bits=N`; without a
    /// value the parameter is still offered, allowing the server to limit us).
    /// Server: the window we ask the client to limit itself to (only if the client offered the parameter).
    public var clientMaxWindowBits: Int?
    /// zlib compression level, 0...9.
    public var compressionLevel: Int
    /// zlib memory level, 1...9.
    public var memoryLevel: Int

    public init(
        serverNoContextTakeover: Bool = false, clientNoContextTakeover: Bool = false,
        serverMaxWindowBits: Int? = nil, clientMaxWindowBits: Int? = nil,
        compressionLevel: Int = 6, memoryLevel: Int = 8
    ) {
        self.serverNoContextTakeover = serverNoContextTakeover
        self.clientNoContextTakeover = clientNoContextTakeover
        self.serverMaxWindowBits = serverMaxWindowBits
        self.clientMaxWindowBits = clientMaxWindowBits
        self.compressionLevel = compressionLevel
        self.memoryLevel = memoryLevel
    }

    /// The client's offer, as a `Sec-WebSocket-Extensions` value.
    public var offerHeaderValue: String {
        var params: [WebSocketExtensionElement.Parameter] = []
        if clientNoContextTakeover { params.append(.init("client_no_context_takeover")) }
        if serverNoContextTakeover { params.append(.init("server_no_context_takeover")) }
        if let s = serverMaxWindowBits { params.append(.init("server_max_window_bits", String(s))) }
        params.append(.init("client_max_window_bits", clientMaxWindowBits.map { String($0) }))
        return WebSocketExtensionElement(name: PerMessageDeflateParameters.extensionName, parameters: params).description
    }
}

/// The permessage-deflate parameters in force on a connection, as negotiation gives them (the
/// handshakes); within the module and its tests, the memberwise initializer.
public struct PerMessageDeflateParameters: Hashable, Sendable, CustomStringConvertible {
    public static let extensionName = "permessage-deflate"

    public var serverNoContextTakeover: Bool = false
    public var clientNoContextTakeover: Bool = false
    /// Window the server compresses with (and the client inflates with), 8...15.
    public var serverMaxWindowBits: Int = 15
    /// Window the client compresses with (and the server inflates with), 8...15.
    public var clientMaxWindowBits: Int = 15
    /// zlib compression level and memory level used by our compressor.
    public var compressionLevel: Int = 6
    public var memoryLevel: Int = 8

    /// The server's response element as a header value.
    public var responseHeaderValue: String { responseElement.description }

    var responseElement: WebSocketExtensionElement {
        var params: [WebSocketExtensionElement.Parameter] = []
        if serverNoContextTakeover { params.append(.init("server_no_context_takeover")) }
        if clientNoContextTakeover { params.append(.init("client_no_context_takeover")) }
        if serverMaxWindowBits != 15 { params.append(.init("server_max_window_bits", String(serverMaxWindowBits))) }
        if clientMaxWindowBits != 15 { params.append(.init("client_max_window_bits", String(clientMaxWindowBits))) }
        return WebSocketExtensionElement(name: Self.extensionName, parameters: params)
    }

    public var description: String { responseHeaderValue }

    // MARK: negotiation

    /// Validated parameters of one element (no duplicates, known names, values where required).
    struct Parsed {
        var serverNoContextTakeover = false
        var clientNoContextTakeover = false
        var serverMaxWindowBits: Int?
        /// `.some(nil)`: present without a value.
        var clientMaxWindowBits: Int??
    }

    static func parse(_ element: WebSocketExtensionElement) throws(PerMessageDeflateError) -> Parsed {
        var r = Parsed()
        var seen = Set<String>()
        for p in element.parameters {
            let name = p.name.lowercased()
            guard seen.insert(name).inserted else { throw .duplicateParameter(p.name) }
            switch name {
            case "server_no_context_takeover":
                guard p.value == nil else { throw .invalidParameterValue(name: p.name, value: p.value) }
                r.serverNoContextTakeover = true
            case "client_no_context_takeover":
                guard p.value == nil else { throw .invalidParameterValue(name: p.name, value: p.value) }
                r.clientNoContextTakeover = true
            case "server_max_window_bits":
                guard let v = p.value, let bits = windowBits(v) else { throw .invalidParameterValue(name: p.name, value: p.value) }
                r.serverMaxWindowBits = bits
            case "client_max_window_bits":
                if let v = p.value {
                    guard let bits = windowBits(v) else { throw .invalidParameterValue(name: p.name, value: p.value) }
                    r.clientMaxWindowBits = .some(bits)
                } else {
                    r.clientMaxWindowBits = .some(nil)
                }
            default:
                throw .unknownParameter(p.name)
            }
        }
        return r
    }

    /// 1*DIGIT without leading zeros, 8...15.
    static func windowBits(_ s: String) -> Int? {
        let u = Array(s.utf8)
        guard (1 ... 2).contains(u.count), u.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), u[0] != 0x30 else { return nil }
        guard let v = Int(s), (8 ... 15).contains(v) else { return nil }
        return v
    }

    /// Server side: picks the first acceptable permessage-deflate offer among `offers` (other
    /// extensions are ignored). Offers with invalid, unknown or duplicate parameters are declined
    /// (RFC 7692 §7.1). Returns `nil` when no offer is acceptable (then no extension is used).
    public static func negotiate(offers: [WebSocketExtensionElement], options: PerMessageDeflateOptions) -> PerMessageDeflateParameters? {
        negotiateResponse(offers: offers, options: options)?.parameters
    }

    /// Like `negotiate`, also returning the exact `Sec-WebSocket-Extensions` response value. It
    /// differs from `responseHeaderValue` only when the client offered `server_max_window_bits=15`:
    /// an offered `server_max_window_bits` must be answered even when its value is the default.
    public static func negotiateResponse(offers: [WebSocketExtensionElement], options: PerMessageDeflateOptions) -> (parameters: PerMessageDeflateParameters, response: String)? {
        for offer in offers where offer.name.lowercased() == extensionName {
            guard let o = try? parse(offer) else { continue }
            var r = PerMessageDeflateParameters(compressionLevel: options.compressionLevel, memoryLevel: options.memoryLevel)
            r.serverNoContextTakeover = o.serverNoContextTakeover || options.serverNoContextTakeover
            r.clientNoContextTakeover = o.clientNoContextTakeover || options.clientNoContextTakeover
            r.serverMaxWindowBits = min(o.serverMaxWindowBits ?? 15, options.serverMaxWindowBits ?? 15)
            if let offered = o.clientMaxWindowBits {
                // The client supports the parameter; we may limit it to at most what it offered.
                r.clientMaxWindowBits = min(offered ?? 15, options.clientMaxWindowBits ?? 15)
            } else {
                r.clientMaxWindowBits = 15  // we must not send the parameter; we inflate with 15
            }
            var element = r.responseElement
            if o.serverMaxWindowBits != nil && r.serverMaxWindowBits == 15 {
                element.parameters.append(.init("server_max_window_bits", "15"))
            }
            return (r, element.description)
        }
        return nil
    }

    /// Client side: validates the server's response against what we offered.
    public static func accept(response: [WebSocketExtensionElement], offered options: PerMessageDeflateOptions) throws(PerMessageDeflateError) -> PerMessageDeflateParameters? {
        if response.isEmpty { return nil }
        guard response.count == 1 else { throw .tooManyExtensions(response.map(\.name)) }
        let element = response[0]
        guard element.name.lowercased() == extensionName else { throw .notOffered(element.name) }
        let o = try parse(element)
        var r = PerMessageDeflateParameters(compressionLevel: options.compressionLevel, memoryLevel: options.memoryLevel)
        r.serverNoContextTakeover = o.serverNoContextTakeover
        if options.serverNoContextTakeover && !o.serverNoContextTakeover {
            throw .missingParameter("server_no_context_takeover")
        }
        r.clientNoContextTakeover = o.clientNoContextTakeover || options.clientNoContextTakeover
        if let s = o.serverMaxWindowBits {
            if let offered = options.serverMaxWindowBits, s > offered {
                throw .windowLargerThanOffered(name: "server_max_window_bits", offered: offered, received: s)
            }
            r.serverMaxWindowBits = s
        } else if options.serverMaxWindowBits != nil {
            throw .missingParameter("server_max_window_bits")
        }
        if let c = o.clientMaxWindowBits {
            guard let bits = c else { throw .invalidParameterValue(name: "client_max_window_bits", value: nil) }
            if let offered = options.clientMaxWindowBits, bits > offered {
                throw .windowLargerThanOffered(name: "client_max_window_bits", offered: offered, received: bits)
            }
            r.clientMaxWindowBits = bits
        } else {
            r.clientMaxWindowBits = options.clientMaxWindowBits ?? 15
        }
        return r
    }
}

/// A permessage-deflate negotiation problem.
public enum PerMessageDeflateError: Error, Hashable, Sendable, CustomStringConvertible {
    case duplicateParameter(String)
    case unknownParameter(String)
    case invalidParameterValue(name: String, value: String?)
    case missingParameter(String)
    case windowLargerThanOffered(name: String, offered: Int, received: Int)
    case notOffered(String)
    case tooManyExtensions([String])

    public var description: String {
        switch self {
        case let .duplicateParameter(n): return "permessage-deflate: parameter \(n) appears twice"
        case let .unknownParameter(n): return "permessage-deflate: unknown parameter \(n)"
        case let .invalidParameterValue(n, v): return "permessage-deflate: invalid value \(v.map { "\"\($0)\"" } ?? "(none)") for \(n) (window bits are 8...15)"
        case let .missingParameter(n): return "permessage-deflate: the response lacks \(n), which the offer required"
        case let .windowLargerThanOffered(n, o, r): return "permessage-deflate: \(n)=\(r) is larger than the offered \(o)"
        case let .notOffered(n): return "server accepted extension \"\(n)\", which the client did not offer"
        case let .tooManyExtensions(ns): return "server accepted several extensions \(ns); only one permessage-deflate was offered"
        }
    }
}

// MARK: - the codecs: zlib's raw deflate and inflate

/// Why inflating a message failed.
public enum InflateFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The inflated message passed the caller's limit (`produced` bytes when inflation stopped).
    case tooLarge(produced: Int)
    /// The compressed message passed ``MessageInflater/compressedLimit(_:)`` (`bytes` so far).
    case compressedTooLarge(bytes: Int)
    /// The data is not valid DEFLATE: what was wrong.
    case invalidData(String)

    public var description: String {
        switch self {
        case let .tooLarge(n): "inflated message passed its size limit (\(n) bytes produced)"
        case let .compressedTooLarge(n): "compressed message of \(n) bytes or more passed its size limit"
        case let .invalidData(m): "invalid compressed data: \(m)"
        }
    }
}

/// Compresses messages for one direction (raw deflate, trailing `00 00 FF FF` stripped): the
/// codec ``WebSocketProtocol`` uses for permessage-deflate. Not thread-safe (one owner).
public final class MessageDeflater {
    /// zlib keeps a pointer back to its `z_stream`: it must not move, so it lives on the heap.
    private let stream: UnsafeMutablePointer<z_stream>
    private let noContextTakeover: Bool

    /// - Parameters:
    ///   - windowBits: 8...15 (8 deflates with 9, which a peer inflating with 8 can read).
    ///   - noContextTakeover: reset the compression context after every message.
    ///   - level: zlib level 0...9; `memoryLevel`: 1...9.
    public init(windowBits: Int, noContextTakeover: Bool, level: Int, memoryLevel: Int) {
        stream = .allocate(capacity: 1)
        self.noContextTakeover = noContextTakeover
        // zlib cannot deflate with a 2^8 window; 9 is safe for a peer inflating with 8 (see above).
        let bits = Int32(max(9, min(15, windowBits)))
        let rc = smartico_deflate_init_raw(stream, Int32(max(0, min(9, level))), bits, Int32(max(1, min(9, memoryLevel))))
        precondition(rc == Z_OK, "deflateInit2 failed with \(rc) (out of memory?)")
    }

    deinit {
        deflateEnd(stream)
        stream.deallocate()
    }

    /// Appends the compressed form of `message` (one whole message) to `out`.
    public func compress(_ message: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        let start = out.count
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        var input = message[...]
        repeat {
            let piece = input.prefix(1 << 30)  // zlib counts in UInt32
            input = input.dropFirst(piece.count)
            stream.pointee.next_in = UnsafeMutablePointer(mutating: UnsafeRawBufferPointer(rebasing: piece).baseAddress?.assumingMemoryBound(to: Bytef.self))
            stream.pointee.avail_in = UInt32(piece.count)
            let flush = input.isEmpty ? Z_SYNC_FLUSH : Z_NO_FLUSH
            repeat {
                let produced = chunk.withUnsafeMutableBytes { raw in
                    stream.pointee.next_out = raw.baseAddress!.assumingMemoryBound(to: Bytef.self)
                    stream.pointee.avail_out = UInt32(raw.count)
                    let rc = deflate(stream, flush)
                    precondition(rc == Z_OK || rc == Z_BUF_ERROR, "deflate failed with \(rc)")
                    return raw.count - Int(stream.pointee.avail_out)
                }
                out.append(contentsOf: chunk[..<produced])
            } while stream.pointee.avail_out == 0
        } while !input.isEmpty
        stream.pointee.next_in = nil
        stream.pointee.next_out = nil
        // A sync flush ends with an empty stored block: 00 00 FF FF. RFC 7692 §7.2.1: remove it.
        if out.count - start >= 4 && out.suffix(4).elementsEqual(MessageInflater.tail) {
            out.removeLast(4)
        }
        // An empty message right after a flush makes zlib produce nothing; an empty payload would
        // inflate as a broken stored block. RFC 7692 §7.2.3.6: send a single 0x00 byte instead.
        if out.count == start { out.append(0) }
        if noContextTakeover { deflateReset(stream) }
    }
}

/// Inflates messages for one direction with zlib, with a cap on the output and on the input: the
/// codec ``WebSocketProtocol`` uses for permessage-deflate. Each piece of a compressed message
/// (a frame, or the part of one a read brought) is inflated as it arrives, in chunks of at most
/// 16 KiB, so the message never holds more than `limit + 1` bytes: a small message that inflates
/// to gigabytes is refused after `limit + 1`. Not thread-safe (one owner).
public final class MessageInflater {
    /// zlib keeps a pointer back to its `z_stream`: it must not move, so it lives on the heap.
    private let stream: UnsafeMutablePointer<z_stream>
    private let noContextTakeover: Bool
    /// Compressed bytes of the message so far.
    private var compressedCount = 0
    /// The message held a final block (BFINAL): the rest of it is ignored, and the next message
    /// starts a new stream.
    private var streamEnded = false
    /// Where zlib writes before the bytes are appended to the message.
    private var chunk = [UInt8](repeating: 0, count: 16 << 10)

    /// The empty stored block a sender strips from the end of every message (RFC 7692 §7.2.2).
    static let tail: [UInt8] = [0, 0, 0xFF, 0xFF]

    /// - Parameters:
    ///   - windowBits: the peer's window, 8...15.
    ///   - noContextTakeover: reset the context after every message (as negotiated for the peer).
    public init(windowBits: Int, noContextTakeover: Bool) {
        stream = .allocate(capacity: 1)
        self.noContextTakeover = noContextTakeover
        let rc = smartico_inflate_init_raw(stream, Int32(max(8, min(15, windowBits))))
        precondition(rc == Z_OK, "inflateInit2 failed with \(rc) (out of memory?)")
    }

    deinit {
        inflateEnd(stream)
        stream.deallocate()
    }

    /// The most compressed bytes a message of at most `limit` bytes is taken with. DEFLATE's worst
    /// expansion is small (stored blocks: 5 bytes per 64 KiB; fixed codes: 9 bits for some bytes):
    /// a message past this is refused before zlib sees more of it.
    public static func compressedLimit(_ limit: Int) -> Int {
        let (quarter, _) = (limit / 4).addingReportingOverflow(1024)
        let (sum, overflow) = limit.addingReportingOverflow(quarter)
        return overflow ? Int.max : sum
    }

    /// Inflates a piece of a compressed message, appending to `out`, which never grows past
    /// `limit + 1` bytes. Throws when the output passes `limit` or the message's compressed bytes
    /// pass ``compressedLimit(_:)``; after a failure the context is reset.
    public func inflate(_ input: UnsafeRawBufferPointer, limit: Int, into out: inout [UInt8]) throws(InflateFailure) {
        guard !input.isEmpty else { return }
        compressedCount += input.count
        do throws(InflateFailure) {
            guard compressedCount <= Self.compressedLimit(limit) else { throw .compressedTooLarge(bytes: compressedCount) }
            try feed(input, limit: limit, into: &out)
        } catch {
            endMessage(reset: true)
            throw error
        }
    }

    /// Ends a message: feeds the stripped `00 00 FF FF` tail, checks that the message ended on a
    /// block boundary, and resets the context if negotiated.
    public func finish(limit: Int, into out: inout [UInt8]) throws(InflateFailure) {
        do throws(InflateFailure) {
            try withTypedBytes(Self.tail) { (raw) throws(InflateFailure) in try feed(raw, limit: limit, into: &out) }
            // zlib sets 128 in data_type when it stopped at a block boundary. A message cut off
            // inside a block would otherwise go on into the next message.
            guard streamEnded || stream.pointee.data_type & 128 != 0 else {
                throw .invalidData("the compressed message ends inside a block")
            }
        } catch {
            endMessage(reset: true)
            throw error
        }
        endMessage(reset: noContextTakeover || streamEnded)
    }

    private func endMessage(reset: Bool) {
        if reset { inflateReset(stream) }
        compressedCount = 0
        streamEnded = false
    }

    private func feed(_ input: UnsafeRawBufferPointer, limit: Int, into out: inout [UInt8]) throws(InflateFailure) {
        guard out.count <= limit else { throw .tooLarge(produced: out.count) }
        defer {
            stream.pointee.next_in = nil
            stream.pointee.next_out = nil
        }
        var rest = input[...]
        while !rest.isEmpty && !streamEnded {
            let piece = rest.prefix(1 << 30)  // zlib counts in UInt32
            rest = rest.dropFirst(piece.count)
            stream.pointee.next_in = UnsafeMutablePointer(mutating: UnsafeRawBufferPointer(rebasing: piece).baseAddress!.assumingMemoryBound(to: Bytef.self))
            stream.pointee.avail_in = UInt32(piece.count)
            while true {
                // At most one byte past the limit: enough to know the message is too large.
                let room = limit - out.count < chunk.count ? limit - out.count + 1 : chunk.count
                var rc: Int32 = Z_OK
                let produced = chunk.withUnsafeMutableBytes { raw in
                    stream.pointee.next_out = raw.baseAddress!.assumingMemoryBound(to: Bytef.self)
                    stream.pointee.avail_out = UInt32(room)
                    rc = COpenSSL.inflate(stream, Z_SYNC_FLUSH)
                    return room - Int(stream.pointee.avail_out)
                }
                out.append(contentsOf: chunk[..<produced])
                if out.count > limit { throw .tooLarge(produced: out.count) }
                if rc == Z_STREAM_END {
                    streamEnded = true
                    break
                }
                guard rc == Z_OK || rc == Z_BUF_ERROR else {
                    let message = stream.pointee.msg.map { String(cString: $0) } ?? "zlib error \(rc)"
                    throw .invalidData(message)
                }
                // All of the piece taken and room left, or no progress possible: done with the piece.
                if rc == Z_BUF_ERROR || (stream.pointee.avail_in == 0 && stream.pointee.avail_out > 0) { break }
            }
        }
    }
}
