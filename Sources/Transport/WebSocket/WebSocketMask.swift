/// A WebSocket masking key (RFC 6455 §5.3): four bytes XORed cyclically over a payload.
public struct WebSocketMaskKey: Hashable, Sendable {
    /// The four key bytes in wire order.
    public var bytes: (UInt8, UInt8, UInt8, UInt8)

    public init(_ b0: UInt8, _ b1: UInt8, _ b2: UInt8, _ b3: UInt8) {
        bytes = (b0, b1, b2, b3)
    }

    /// The key from its 32-bit wire representation (first wire byte in the lowest address).
    public init(wireValue: UInt32) {
        let le = wireValue.littleEndian
        bytes = (UInt8(truncatingIfNeeded: le), UInt8(truncatingIfNeeded: le >> 8),
                 UInt8(truncatingIfNeeded: le >> 16), UInt8(truncatingIfNeeded: le >> 24))
    }

    public static func == (a: WebSocketMaskKey, b: WebSocketMaskKey) -> Bool {
        a.bytes.0 == b.bytes.0 && a.bytes.1 == b.bytes.1 && a.bytes.2 == b.bytes.2 && a.bytes.3 == b.bytes.3
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(bytes.0); hasher.combine(bytes.1); hasher.combine(bytes.2); hasher.combine(bytes.3)
    }

    /// Key byte `i` (0...3).
    @inlinable
    public subscript(i: Int) -> UInt8 {
        switch i & 3 {
        case 0: return bytes.0
        case 1: return bytes.1
        case 2: return bytes.2
        default: return bytes.3
        }
    }

    /// XORs the key over `buffer` in place, as if `buffer` started at byte `keyOffset` of the
    /// masked payload (so a payload can be (un)masked in pieces: pass the number of payload
    /// bytes already processed). Returns the key offset for the next piece.
    @discardableResult
    public func apply(to buffer: UnsafeMutableRawBufferPointer, keyOffset: Int = 0) -> Int {
        for i in buffer.indices { buffer[i] ^= self[keyOffset &+ i] }
        return (keyOffset &+ buffer.count) & 3
    }

    /// Convenience over an array.
    @discardableResult
    public func apply(to bytes: inout [UInt8], keyOffset: Int = 0) -> Int {
        bytes.withUnsafeMutableBytes { apply(to: $0, keyOffset: keyOffset) }
    }
}
