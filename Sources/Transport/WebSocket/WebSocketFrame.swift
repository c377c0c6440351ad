/// The endpoint's role: it decides who masks (clients) and who closes TCP first (servers).
public enum WebSocketRole: Sendable, Hashable {
    case client
    case server
}

/// The opcodes RFC 6455 defines (§5.2). Other values are reserved and fail the connection.
public enum WebSocketOpcode: UInt8, Sendable, Hashable {
    case continuation = 0x0
    case text = 0x1
    case binary = 0x2
    case close = 0x8
    case ping = 0x9
    case pong = 0xA

    /// Close, ping and pong.
    public var isControl: Bool { rawValue & 0x8 != 0 }
}

/// A parsed frame header.
public struct WebSocketFrameHeader: Hashable, Sendable {
    public var fin: Bool
    /// RSV1–RSV3 as the bits 0x4, 0x2, 0x1.
    public var rsv: UInt8
    public var opcode: WebSocketOpcode
    public var maskKey: WebSocketMaskKey?
    public var payloadLength: UInt64

    public init(fin: Bool, rsv: UInt8 = 0, opcode: WebSocketOpcode, maskKey: WebSocketMaskKey? = nil, payloadLength: UInt64) {
        self.fin = fin
        self.rsv = rsv
        self.opcode = opcode
        self.maskKey = maskKey
        self.payloadLength = payloadLength
    }

    /// RSV1: "compressed" under permessage-deflate.
    public var rsv1: Bool { rsv & 0x4 != 0 }
}

/// Incremental frame parser (RFC 6455 §5.2): bytes arrive in arbitrary pieces; it keeps a few
/// integers of state, never re-parses, allocates nothing per frame, and unmasks payload in place.
///
/// Drive it with `next(in:at:)` until it returns `nil` (buffer consumed). Each frame yields one
/// `.header`, zero or more `.payload` ranges (already unmasked, in the buffer you passed), then
/// `.end`. It validates everything a single frame can violate, plus message sequencing
/// (continuations, RSV1 only on a message's first frame) and, for uncompressed messages, the
/// message-size limit. Lengths must be minimally encoded (strict: RFC 6455 says MUST).
public struct WebSocketFrameParser: Sendable {
    /// One step of parsing.
    public enum Item: Hashable, Sendable {
        /// A complete, validated header; `position` identifies the frame in errors.
        case header(WebSocketFrameHeader, position: WebSocketStreamPosition)
        /// Payload bytes (unmasked) at this range of the buffer given to `next(in:at:)`.
        case payload(Range<Int>)
        /// The frame's payload is complete.
        case end
    }

    public let role: WebSocketRole
    /// Maximum payload of one frame (1009 beyond).
    public var maxFrameSize: Int
    /// Maximum size of an uncompressed message on the wire (1009 beyond). Compressed messages are
    /// limited after inflation by `WebSocketProtocol`.
    public var maxMessageSize: Int
    /// RSV bits allowed on the first frame of a data message (0x4 when permessage-deflate is negotiated).
    public var allowedRSV: UInt8

    private enum State: Sendable {
        case header
        case payload(remaining: UInt64)
        case end
    }

    private var state: State = .header
    /// Header bytes collected so far when a header spans calls (capacity 14, allocated once).
    private var partial: [UInt8] = []
    private var current = WebSocketFrameHeader(fin: true, opcode: .binary, payloadLength: 0)
    private var payloadDone: Int = 0
    private var inFragmentedMessage = false
    private var messageCompressed = false
    private var messageWireSize: UInt64 = 0
    /// Frames seen so far.
    public private(set) var frameCount = 0
    /// Bytes consumed so far (the offset of the next byte in the WebSocket stream).
    public private(set) var streamOffset = 0
    private var frameStart = 0

    public init(role: WebSocketRole, maxFrameSize: Int, maxMessageSize: Int, allowedRSV: UInt8 = 0) {
        self.role = role
        self.maxFrameSize = maxFrameSize
        self.maxMessageSize = maxMessageSize
        self.allowedRSV = allowedRSV
        partial.reserveCapacity(14)
    }

    /// The header of the frame being parsed (valid after `.header` was returned).
    public var currentHeader: WebSocketFrameHeader { current }
    /// Where the frame being parsed started.
    public var currentPosition: WebSocketStreamPosition { .init(frame: frameCount, frameOffset: frameStart) }

    /// Parses from `buffer[index...]`, advancing `index`. Returns `nil` when more bytes are needed.
    /// Payload ranges refer to `buffer` and are unmasked in place.
    public mutating func next(in buffer: UnsafeMutableRawBufferPointer, at index: inout Int) throws(WebSocketError) -> Item? {
        switch state {
        case .end:
            state = .header
            return .end
        case let .payload(remaining):
            let available = buffer.count - index
            if available == 0 { return nil }
            let n = Int(min(UInt64(available), remaining))
            let range = index ..< index + n
            if let key = current.maskKey {
                key.apply(to: UnsafeMutableRawBufferPointer(rebasing: buffer[range]), keyOffset: payloadDone)
            }
            payloadDone &+= n
            index += n
            streamOffset += n
            if UInt64(n) == remaining {
                state = .end
            } else {
                state = .payload(remaining: remaining - UInt64(n))
            }
            return .payload(range)
        case .header:
            return try parseHeader(buffer, &index)
        }
    }

    private mutating func parseHeader(_ buffer: UnsafeMutableRawBufferPointer, _ index: inout Int) throws(WebSocketError) -> Item? {
        let available = buffer.count - index
        if partial.isEmpty {
            if available == 0 { return nil }
            // Fast path: the whole header is in the buffer.
            if available >= 2 {
                let need = Self.headerLength(buffer[index], buffer[index + 1])
                if available >= need {
                    let start = index
                    frameStart = streamOffset
                    index += need
                    streamOffset += need
                    return try decodeHeader(UnsafeRawBufferPointer(rebasing: buffer[start ..< start + need]))
                }
            }
            frameStart = streamOffset
        }
        // Slow path: collect the header across calls.
        var i = index
        while i < buffer.count {
            partial.append(buffer[i])
            i += 1
            if partial.count >= 2 && partial.count == Self.headerLength(partial[0], partial[1]) {
                streamOffset += i - index
                index = i
                // Swap the buffer out so decodeHeader can mutate self; keeps its capacity.
                var header: [UInt8] = []
                swap(&header, &partial)
                defer {
                    header.removeAll(keepingCapacity: true)
                    swap(&header, &partial)
                }
                return try withTypedBytes(header) { (raw) throws(WebSocketError) -> Item in try decodeHeader(raw) }
            }
        }
        streamOffset += i - index
        index = i
        return nil
    }

    @inline(__always)
    private static func headerLength(_ b0: UInt8, _ b1: UInt8) -> Int {
        var n = 2
        switch b1 & 0x7F {
        case 126: n += 2
        case 127: n += 8
        default: break
        }
        if b1 & 0x80 != 0 { n += 4 }
        return n
    }

    private mutating func decodeHeader(_ h: UnsafeRawBufferPointer) throws(WebSocketError) -> Item {
        frameCount += 1
        let at = WebSocketStreamPosition(frame: frameCount, frameOffset: frameStart)
        let b0 = h[0], b1 = h[1]
        let fin = b0 & 0x80 != 0
        let rsv = (b0 >> 4) & 0x7
        let rawOpcode = b0 & 0x0F
        guard let opcode = WebSocketOpcode(rawValue: rawOpcode) else {
            throw .reservedOpcode(rawOpcode, at: at)
        }
        let masked = b1 & 0x80 != 0
        switch role {
        case .client where masked: throw .maskedFrameFromServer(at: at)
        case .server where !masked: throw .unmaskedFrameFromClient(at: at)
        default: break
        }
        var length = UInt64(b1 & 0x7F)
        var p = 2
        if length == 126 {
            length = UInt64(h[2]) << 8 | UInt64(h[3])
            p = 4
            if length < 126 { throw .nonMinimalLength(length: length, encodedBytes: 2, at: at) }
        } else if length == 127 {
            var v: UInt64 = 0
            for k in 0 ..< 8 { v = v << 8 | UInt64(h[2 + k]) }
            p = 10
            if v & (1 << 63) != 0 { throw .lengthHighBitSet(at: at) }
            if v <= 0xFFFF { throw .nonMinimalLength(length: v, encodedBytes: 8, at: at) }
            length = v
        }
        if opcode.isControl {
            if !fin { throw .fragmentedControlFrame(opcode: rawOpcode, at: at) }
            if length > 125 { throw .controlFrameTooLong(opcode: rawOpcode, length: length, at: at) }
            if rsv != 0 { throw .reservedBitsSet(rsv: rsv, opcode: rawOpcode, at: at) }
        } else {
            if opcode == .continuation {
                if !inFragmentedMessage { throw .unexpectedContinuation(at: at) }
                if rsv != 0 { throw .reservedBitsSet(rsv: rsv, opcode: rawOpcode, at: at) }
                messageWireSize &+= length
            } else {
                if inFragmentedMessage { throw .expectedContinuation(opcode: rawOpcode, at: at) }
                if rsv & ~allowedRSV != 0 { throw .reservedBitsSet(rsv: rsv, opcode: rawOpcode, at: at) }
                messageCompressed = rsv & 0x4 != 0
                messageWireSize = length
            }
            inFragmentedMessage = !fin
            if length > UInt64(maxFrameSize) {
                throw .frameTooLarge(length: length, limit: maxFrameSize, at: at)
            }
            if !messageCompressed && messageWireSize > UInt64(maxMessageSize) {
                throw .messageTooLarge(size: Int(clamping: messageWireSize), limit: maxMessageSize, at: at)
            }
        }
        var key: WebSocketMaskKey? = nil
        if masked {
            key = WebSocketMaskKey(h[p], h[p + 1], h[p + 2], h[p + 3])
        }
        current = WebSocketFrameHeader(fin: fin, rsv: rsv, opcode: opcode, maskKey: key, payloadLength: length)
        payloadDone = 0
        state = length == 0 ? .end : .payload(remaining: length)
        return .header(current, position: at)
    }
}

/// Frame encoder for both roles: writes header + payload, masking the payload copy when a key
/// is given (client role), and splits a message into frames of at most N bytes on request.
public enum WebSocketFrameEncoder {
    /// Size of the header for a payload of `length` bytes.
    public static func headerSize(payloadLength length: Int, masked: Bool) -> Int {
        let base = length < 126 ? 2 : (length <= 0xFFFF ? 4 : 10)
        return base + (masked ? 4 : 0)
    }

    /// Appends one frame to `out`. The payload is copied and, with a `maskKey`, masked in `out`.
    public static func writeFrame(
        fin: Bool, rsv: UInt8 = 0, opcode: WebSocketOpcode, payload: UnsafeRawBufferPointer,
        maskKey: WebSocketMaskKey?, into out: inout [UInt8]
    ) {
        let length = payload.count
        out.reserveCapacity(out.count + headerSize(payloadLength: length, masked: maskKey != nil) + length)
        out.append((fin ? 0x80 : 0) | (rsv & 0x7) << 4 | opcode.rawValue)
        let maskBit: UInt8 = maskKey != nil ? 0x80 : 0
        if length < 126 {
            out.append(maskBit | UInt8(length))
        } else if length <= 0xFFFF {
            out.append(maskBit | 126)
            out.append(UInt8(length >> 8))
            out.append(UInt8(length & 0xFF))
        } else {
            out.append(maskBit | 127)
            let v = UInt64(length)
            for shift in stride(from: 56, through: 0, by: -8) {
                out.append(UInt8(truncatingIfNeeded: v >> UInt64(shift)))
            }
        }
        if let key = maskKey {
            out.append(key.bytes.0); out.append(key.bytes.1); out.append(key.bytes.2); out.append(key.bytes.3)
        }
        let start = out.count
        out.append(contentsOf: payload)
        if let key = maskKey, length > 0 {
            out.withUnsafeMutableBytes { raw in
                _ = key.apply(to: UnsafeMutableRawBufferPointer(rebasing: raw[start ..< start + length]))
            }
        }
    }

    /// Convenience over an array payload.
    public static func writeFrame(
        fin: Bool, rsv: UInt8 = 0, opcode: WebSocketOpcode, payload: [UInt8],
        maskKey: WebSocketMaskKey?, into out: inout [UInt8]
    ) {
        payload.withUnsafeBytes { writeFrame(fin: fin, rsv: rsv, opcode: opcode, payload: $0, maskKey: maskKey, into: &out) }
    }

    /// Appends a whole data message as one frame, or as frames of at most `fragmentSize` payload
    /// bytes. `rsv` goes on the first frame only (RSV1 = compressed). `maskKey` is called once per
    /// frame (return `nil` for the server role).
    public static func writeMessage(
        opcode: WebSocketOpcode, rsv: UInt8 = 0, payload: UnsafeRawBufferPointer, fragmentSize: Int?,
        maskKey: () -> WebSocketMaskKey?, into out: inout [UInt8]
    ) {
        let size = max(1, fragmentSize ?? Int.max)
        if payload.count <= size {
            writeFrame(fin: true, rsv: rsv, opcode: opcode, payload: payload, maskKey: maskKey(), into: &out)
            return
        }
        var offset = 0
        var first = true
        while offset < payload.count {
            let end = min(payload.count, offset + size)
            writeFrame(
                fin: end == payload.count, rsv: first ? rsv : 0, opcode: first ? opcode : .continuation,
                payload: UnsafeRawBufferPointer(rebasing: payload[offset ..< end]), maskKey: maskKey(), into: &out)
            first = false
            offset = end
        }
    }
}
