/// A WebSocket close status code (RFC 6455 §7.4).
public struct WebSocketCloseCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let normalClosure = WebSocketCloseCode(1000)
    public static let goingAway = WebSocketCloseCode(1001)
    public static let protocolError = WebSocketCloseCode(1002)
    public static let unsupportedData = WebSocketCloseCode(1003)
    /// Never sent on the wire: reported when a Close frame carried no status code.
    public static let noStatusReceived = WebSocketCloseCode(1005)
    /// Never sent on the wire: reported when the connection ended without a Close frame.
    public static let abnormalClosure = WebSocketCloseCode(1006)
    public static let invalidPayloadData = WebSocketCloseCode(1007)
    public static let policyViolation = WebSocketCloseCode(1008)
    public static let messageTooBig = WebSocketCloseCode(1009)
    public static let mandatoryExtension = WebSocketCloseCode(1010)
    public static let internalError = WebSocketCloseCode(1011)
    public static let serviceRestart = WebSocketCloseCode(1012)
    public static let tryAgainLater = WebSocketCloseCode(1013)
    public static let badGateway = WebSocketCloseCode(1014)

    /// Whether this code may appear in a Close frame on the wire.
    ///
    /// Valid: 1000–1003, 1007–1011, the IANA-registered 1012–1014 (service restart, try again
    /// later, bad gateway), and 3000–4999 (libraries/applications). Invalid: < 1000, 1004
    /// (reserved), 1005/1006/1015 (reporting-only), 1016–2999 (unassigned), ≥ 5000.
    public var isValidOnWire: Bool {
        switch rawValue {
        case 1000...1003, 1007...1014, 3000...4999: return true
        default: return false
        }
    }

    public var description: String {
        let name: String
        switch rawValue {
        case 1000: name = "normal closure"
        case 1001: name = "going away"
        case 1002: name = "protocol error"
        case 1003: name = "unsupported data"
        case 1005: name = "no status received"
        case 1006: name = "abnormal closure"
        case 1007: name = "invalid payload data"
        case 1008: name = "policy violation"
        case 1009: name = "message too big"
        case 1010: name = "mandatory extension"
        case 1011: name = "internal error"
        case 1012: name = "service restart"
        case 1013: name = "try again later"
        case 1014: name = "bad gateway"
        case 1015: name = "TLS handshake failure"
        default: name = rawValue >= 3000 && rawValue <= 4999 ? "application-defined" : "unassigned"
        }
        return "\(rawValue) (\(name))"
    }
}

/// Where in the inbound stream something happened.
public struct WebSocketStreamPosition: Hashable, Sendable, CustomStringConvertible {
    /// 1-based number of the frame (counting every frame received on this connection).
    public var frame: Int
    /// Byte offset in the inbound WebSocket stream (after the HTTP handshake) of the frame's first byte.
    public var frameOffset: Int
    public var description: String { "frame #\(frame) at stream offset \(frameOffset)" }
}

/// Why the WebSocket connection was failed. Each case says what was wrong and where, and maps to
/// the close code sent to the peer (`closeCode`).
public enum WebSocketError: Error, Hashable, Sendable, CustomStringConvertible {
    /// RSV bits set that no negotiated extension allows (RSV1 only with permessage-deflate, and only
    /// on the first frame of a data message).
    case reservedBitsSet(rsv: UInt8, opcode: UInt8, at: WebSocketStreamPosition)
    /// Opcode 3–7 or 11–15.
    case reservedOpcode(UInt8, at: WebSocketStreamPosition)
    /// A control frame (close/ping/pong) without the FIN bit.
    case fragmentedControlFrame(opcode: UInt8, at: WebSocketStreamPosition)
    /// A control frame whose payload is longer than 125 bytes.
    case controlFrameTooLong(opcode: UInt8, length: UInt64, at: WebSocketStreamPosition)
    /// The server sent a masked frame (servers must not mask).
    case maskedFrameFromServer(at: WebSocketStreamPosition)
    /// The client sent an unmasked frame (clients must mask).
    case unmaskedFrameFromClient(at: WebSocketStreamPosition)
    /// A 64-bit payload length with its most significant bit set.
    case lengthHighBitSet(at: WebSocketStreamPosition)
    /// A payload length not in its minimal encoding (e.g. 100 in the 16-bit form). RFC 6455 §5.2
    /// says MUST use the minimal number of bytes; this implementation is strict.
    case nonMinimalLength(length: UInt64, encodedBytes: Int, at: WebSocketStreamPosition)
    /// A frame whose payload is longer than the configured frame-size limit.
    case frameTooLarge(length: UInt64, limit: Int, at: WebSocketStreamPosition)
    /// A message (after reassembly and, if compressed, after inflation) longer than the limit.
    case messageTooLarge(size: Int, limit: Int, at: WebSocketStreamPosition)
    /// A continuation frame with no fragmented message in progress.
    case unexpectedContinuation(at: WebSocketStreamPosition)
    /// A new text/binary frame while a fragmented message is still in progress.
    case expectedContinuation(opcode: UInt8, at: WebSocketStreamPosition)
    /// Invalid UTF-8 in a text message; `messageOffset` is the offset of the first bad byte within
    /// the (inflated) message.
    case invalidUTF8InText(messageOffset: Int, at: WebSocketStreamPosition)
    /// A text message ended in the middle of a UTF-8 sequence.
    case truncatedUTF8InText(messageLength: Int, at: WebSocketStreamPosition)
    /// Invalid UTF-8 in the reason of a Close frame.
    case invalidUTF8InCloseReason(at: WebSocketStreamPosition)
    /// A Close frame whose payload is exactly 1 byte (a status code needs 2).
    case closePayloadTooShort(at: WebSocketStreamPosition)
    /// A Close frame with a status code that may not be sent on the wire.
    case invalidCloseCode(UInt16, at: WebSocketStreamPosition)
    /// A compressed message that is not valid DEFLATE data (what was wrong).
    case inflateFailed(reason: String, at: WebSocketStreamPosition)

    /// The close code to send to the peer for this failure.
    public var closeCode: WebSocketCloseCode {
        switch self {
        case .invalidUTF8InText, .truncatedUTF8InText, .invalidUTF8InCloseReason, .inflateFailed:
            return .invalidPayloadData
        case .frameTooLarge, .messageTooLarge:
            return .messageTooBig
        default:
            return .protocolError
        }
    }

    public var description: String {
        switch self {
        case let .reservedBitsSet(rsv, opcode, at):
            return "reserved bits 0x\(String(rsv, radix: 16)) set on opcode \(opcode) without a negotiated extension that allows them, \(at)"
        case let .reservedOpcode(op, at):
            return "reserved opcode \(op), \(at)"
        case let .fragmentedControlFrame(op, at):
            return "control frame (opcode \(op)) without FIN: control frames must not be fragmented, \(at)"
        case let .controlFrameTooLong(op, length, at):
            return "control frame (opcode \(op)) with a \(length)-byte payload; the limit is 125, \(at)"
        case let .maskedFrameFromServer(at):
            return "masked frame from the server (servers must not mask), \(at)"
        case let .unmaskedFrameFromClient(at):
            return "unmasked frame from the client (clients must mask), \(at)"
        case let .lengthHighBitSet(at):
            return "64-bit payload length with the most significant bit set, \(at)"
        case let .nonMinimalLength(length, bytes, at):
            return "payload length \(length) encoded in \(bytes) bytes instead of the minimal form, \(at)"
        case let .frameTooLarge(length, limit, at):
            return "frame payload of \(length) bytes exceeds the limit of \(limit), \(at)"
        case let .messageTooLarge(size, limit, at):
            return "message of at least \(size) bytes exceeds the limit of \(limit), \(at)"
        case let .unexpectedContinuation(at):
            return "continuation frame with no fragmented message in progress, \(at)"
        case let .expectedContinuation(op, at):
            return "new data frame (opcode \(op)) while a fragmented message is in progress; expected a continuation, \(at)"
        case let .invalidUTF8InText(offset, at):
            return "invalid UTF-8 in text message at message byte \(offset), \(at)"
        case let .truncatedUTF8InText(length, at):
            return "text message of \(length) bytes ends inside a UTF-8 sequence, \(at)"
        case let .invalidUTF8InCloseReason(at):
            return "close reason is not valid UTF-8, \(at)"
        case let .closePayloadTooShort(at):
            return "close frame with a 1-byte payload (a status code needs 2 bytes), \(at)"
        case let .invalidCloseCode(code, at):
            return "close frame with status code \(WebSocketCloseCode(code)), which may not be sent on the wire, \(at)"
        case let .inflateFailed(msg, at):
            return "permessage-deflate: cannot inflate message (\(msg)), \(at)"
        }
    }
}

/// Misuse of the sending API (the connection is unaffected).
public enum WebSocketSendError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The connection is closing or closed; nothing more can be sent.
    case notOpen
    /// A control frame payload longer than 125 bytes.
    case controlPayloadTooLong(length: Int)
    /// A close reason that makes the payload exceed 125 bytes.
    case closeReasonTooLong(bytes: Int)
    /// A close code that may not be sent on the wire (e.g. 1005, 1006).
    case invalidCloseCode(UInt16)

    public var description: String {
        switch self {
        case .notOpen: return "cannot send: the WebSocket is closing or closed"
        case let .controlPayloadTooLong(n): return "control frame payload of \(n) bytes; the limit is 125"
        case let .closeReasonTooLong(n): return "close reason of \(n) UTF-8 bytes; the limit is 123"
        case let .invalidCloseCode(c): return "close code \(WebSocketCloseCode(c)) may not be sent on the wire"
        }
    }
}
