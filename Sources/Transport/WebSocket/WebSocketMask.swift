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
    ///
    /// Word-wide: 64 bytes per iteration as eight unrolled `UInt64` XORs (SSE/AVX after
    /// optimization), a `UInt64` loop for the rest of the words, then at most a 4-, 2- and 1-byte XOR. A non-zero `keyOffset` is
    /// handled by rotating the key, so there is no unaligned head to treat separately.
    @discardableResult
    public func apply(to buffer: UnsafeMutableRawBufferPointer, keyOffset: Int = 0) -> Int {
        let count = buffer.count
        guard count > 0, let base = buffer.baseAddress else { return keyOffset & 3 }
        let phase = keyOffset & 3
        var i = 0
        // Rotate the key so that byte 0 of the buffer uses key[phase]; then every 4-byte-aligned
        // position (relative to the buffer start) uses the rotated key from its start.
        let k0 = self[phase], k1 = self[phase + 1], k2 = self[phase + 2], k3 = self[phase + 3]
        let k32 = UInt32(k0) | UInt32(k1) << 8 | UInt32(k2) << 16 | UInt32(k3) << 24
        // Words are read and written with unaligned loads/stores; the pattern must have k0 at the
        // lowest address, which is the little-endian layout of `numeric` (byte j at bits 8j).
        let numeric = UInt64(k32) | UInt64(k32) << 32
        let pattern = numeric.littleEndian
        // 64 bytes per iteration: eight UInt64 XORs (the optimizer turns them into SIMD ops).
        while i &+ 64 <= count {
            let p = base + i
            for w in 0 ..< 8 {
                let o = w &* 8
                p.storeBytes(of: p.loadUnaligned(fromByteOffset: o, as: UInt64.self) ^ pattern, toByteOffset: o, as: UInt64.self)
            }
            i &+= 64
        }
        while i &+ 8 <= count {
            let p = base + i
            p.storeBytes(of: p.loadUnaligned(as: UInt64.self) ^ pattern, as: UInt64.self)
            i &+= 8
        }
        // Tail: 0–7 bytes as at most one 4-, one 2- and one 1-byte XOR. i is a multiple of 8 here;
        // the pattern repeats every 4 bytes, so its low 32 bits fit any 4-aligned position.
        if count &- i >= 4 {
            let p = base + i
            p.storeBytes(of: p.loadUnaligned(as: UInt32.self) ^ UInt32(truncatingIfNeeded: pattern), as: UInt32.self)
            i &+= 4
        }
        if count &- i >= 2 {
            let p = base + i
            let k = UInt16(truncatingIfNeeded: numeric >> UInt64((i & 3) &* 8)).littleEndian
            p.storeBytes(of: p.loadUnaligned(as: UInt16.self) ^ k, as: UInt16.self)
            i &+= 2
        }
        if i < count {
            let k = UInt8(truncatingIfNeeded: numeric >> UInt64((i & 3) &* 8))
            base.storeBytes(of: base.load(fromByteOffset: i, as: UInt8.self) ^ k, toByteOffset: i, as: UInt8.self)
        }
        return (keyOffset + count) & 3
    }

    /// Convenience over an array.
    @discardableResult
    public func apply(to bytes: inout [UInt8], keyOffset: Int = 0) -> Int {
        bytes.withUnsafeMutableBytes { apply(to: $0, keyOffset: keyOffset) }
    }
}
