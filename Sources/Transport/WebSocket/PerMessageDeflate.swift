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

/// The permessage-deflate parameters in force on a connection (after negotiation).
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

    public init(
        serverNoContextTakeover: Bool = false, clientNoContextTakeover: Bool = false,
        serverMaxWindowBits: Int = 15, clientMaxWindowBits: Int = 15,
        compressionLevel: Int = 6, memoryLevel: Int = 8
    ) {
        self.serverNoContextTakeover = serverNoContextTakeover
        self.clientNoContextTakeover = clientNoContextTakeover
        self.serverMaxWindowBits = serverMaxWindowBits
        self.clientMaxWindowBits = clientMaxWindowBits
        self.compressionLevel = compressionLevel
        self.memoryLevel = memoryLevel
    }

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

// MARK: - the codecs (deflate: zlib; inflate: DeflateDecoder)

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
/// codec ``WebSocketProtocol`` uses for permessage-deflate. Public so benchmarks and tools can
/// measure or use it alone; not thread-safe (one owner).
public final class MessageDeflater {
    private let strm: UnsafeMutablePointer<z_stream>
    private let noContextTakeover: Bool

    /// - Parameters:
    ///   - windowBits: 8...15 (8 deflates with 9, which a peer inflating with 8 can read).
    ///   - noContextTakeover: reset the compression context after every message.
    ///   - level: zlib level 0...9; `memoryLevel`: 1...9.
    public init(windowBits: Int, noContextTakeover: Bool, level: Int, memoryLevel: Int) {
        strm = .allocate(capacity: 1)
        self.noContextTakeover = noContextTakeover
        // zlib cannot deflate with a 2^8 window; 9 is safe for a peer inflating with 8 (see above).
        let bits = Int32(max(9, min(15, windowBits)))
        let rc = smartico_deflate_init_raw(strm, Int32(max(0, min(9, level))), bits, Int32(max(1, min(9, memoryLevel))))
        precondition(rc == Z_OK, "deflateInit2 failed with \(rc) (out of memory?)")
    }

    deinit {
        deflateEnd(strm)
        strm.deallocate()
    }

    /// Output staging buffer, allocated once: zlib writes here, produced bytes are appended to `out`.
    private var staging = [UInt8](repeating: 0, count: 16384)

    /// Appends the compressed form of `message` to `out` (one whole message).
    public func compress(_ message: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        let start = out.count
        // zlib counts in UInt32: feed messages of 4 GiB and more in slices.
        var offset = 0
        repeat {
            let n = min(message.count - offset, 1 << 30)
            compressSlice(message.baseAddress.map { $0 + offset }, n, flush: offset + n == message.count, into: &out)
            offset += n
        } while offset < message.count
        // A sync flush ends with an empty stored block: 00 00 FF FF. RFC 7692 §7.2.1: remove it.
        // (Compared byte by byte: an array literal here would be a heap allocation per message.)
        let n = out.count
        if n - start >= 4 && out[n - 4] == 0 && out[n - 3] == 0 && out[n - 2] == 0xFF && out[n - 1] == 0xFF {
            out.removeLast(4)
        }
        // An empty message right after a flush makes zlib produce nothing; an empty payload would
        // inflate as a broken stored block. RFC 7692 §7.2.3.6: send a single 0x00 byte instead.
        if out.count == start { out.append(0) }
        if noContextTakeover { deflateReset(strm) }
    }

    private func compressSlice(_ base: UnsafeRawPointer?, _ count: Int, flush: Bool, into out: inout [UInt8]) {
        strm.pointee.next_in = UnsafeMutablePointer(mutating: base?.assumingMemoryBound(to: Bytef.self))
        strm.pointee.avail_in = UInt32(count)
        let mode = flush ? Z_SYNC_FLUSH : Z_NO_FLUSH
        while true {
            let (produced, full): (Int, Bool) = staging.withUnsafeMutableBytes { raw in
                strm.pointee.next_out = raw.baseAddress!.assumingMemoryBound(to: Bytef.self)
                strm.pointee.avail_out = UInt32(raw.count)
                let rc = deflate(strm, mode)
                precondition(rc == Z_OK || rc == Z_BUF_ERROR, "deflate failed with \(rc)")
                return (raw.count - Int(strm.pointee.avail_out), strm.pointee.avail_out == 0)
            }
            out.append(contentsOf: staging[0 ..< produced])
            if !full && strm.pointee.avail_in == 0 { break }
        }
        strm.pointee.next_in = nil
        strm.pointee.next_out = nil
    }
}

/// Inflates messages for one direction, with a cap on the output: the codec ``WebSocketProtocol``
/// uses for permessage-deflate. A message's compressed pieces (frames, or parts of one) are gathered
/// and decoded whole at ``finish(limit:into:)`` by ``DeflateDecoder`` (docs/transport.md,
/// "Inflate"). Public so benchmarks and tools can measure or use it alone; not thread-safe (one
/// owner).
public final class MessageInflater {
    private let decoder: DeflateDecoder
    private let noContextTakeover: Bool
    /// The message's compressed bytes so far.
    /// Not checked for exclusive access at run time (see `WebSocketProtocol.parser`): only this
    /// class's synchronous methods touch it.
    @exclusivity(unchecked) private var pending: [UInt8] = []

    /// - Parameters:
    ///   - windowBits: the peer's window, 8...15.
    ///   - noContextTakeover: reset the context after every message (as negotiated for the peer).
    public init(windowBits: Int, noContextTakeover: Bool) {
        decoder = DeflateDecoder(windowBits: windowBits)
        self.noContextTakeover = noContextTakeover
    }

    private static let tail: [UInt8] = [0, 0, 0xFF, 0xFF]

    /// The most compressed bytes a message of at most `limit` bytes is taken with. DEFLATE's worst
    /// expansion is small (stored blocks: 5 bytes per 64 KiB; fixed codes: 9 bits for some bytes):
    /// a message past this is refused before it is decoded, as one past `limit` is while it is.
    public static func compressedLimit(_ limit: Int) -> Int {
        let (quarter, _) = (limit / 4).addingReportingOverflow(1024)
        let (sum, overflow) = limit.addingReportingOverflow(quarter)
        return overflow ? Int.max : sum
    }

    /// Takes a piece of a compressed message (decoded with the rest by ``finish(limit:into:)``:
    /// `out` is not written here); throws when the message's compressed bytes pass
    /// ``compressedLimit(_:)``.
    public func inflate(_ input: UnsafeRawBufferPointer, limit: Int, into out: inout [UInt8]) throws(InflateFailure) {
        guard !input.isEmpty else { return }
        let total = pending.count + input.count
        guard total <= Self.compressedLimit(limit) else {
            pending = []
            throw .compressedTooLarge(bytes: total)
        }
        pending.append(contentsOf: input)
    }

    /// Ends a message: appends the stripped `00 00 FF FF` tail, decodes the message into `out`
    /// (which never grows past `limit + 1` bytes) and resets the context if negotiated.
    public func finish(limit: Int, into out: inout [UInt8]) throws(InflateFailure) {
        pending.append(contentsOf: Self.tail)
        defer {
            // A big message's buffer is not kept for the next one.
            if pending.capacity > 1 << 16 { pending = [] } else { pending.removeAll(keepingCapacity: true) }
        }
        let room = limit - out.count
        guard room >= 0 else { throw .tooLarge(produced: out.count) }
        do {
            _ = try withTypedBytes(pending) { (raw) throws(DeflateDecoder.Failure) in
                try decoder.decodeMessage(raw, limit: room, into: &out)
            }
        } catch {
            decoder.reset()
            switch error {
            case .tooLarge: throw .tooLarge(produced: limit + 1)
            case .invalid(let reason): throw .invalidData(reason)
            }
        }
        if noContextTakeover { decoder.reset() }
    }
}
