import Foundation
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Transport

private let key = WebSocketMaskKey(0x37, 0xFA, 0x21, 0x3D)

/// Unmasking in place against `memcpy` of the same buffer: both touch every
/// byte once, so memcpy is the physical reference.
func maskingBenchmarks(_ report: Report) {
    print("Transport: masking")
    let size = 1 << 20
    let src = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 64)
    let dst = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 64)
    for i in 0..<size { src[i] = UInt8(truncatingIfNeeded: i &* 31) }
    let unmask = Timed { n in for _ in 0..<n { blackHole(key.apply(to: src)) } }
    let copy = Timed { n in for _ in 0..<n { memcpy(dst.baseAddress!, src.baseAddress!, size); blackHole(dst.baseAddress) } }
    report.add("unmasking 1 MiB in place", unit: .gigabytesPerSecond(bytesPerOp: size),
               subject: unmask, referenceName: "memcpy", reference: copy, goal: 1.0)
}

/// Masked client frames of `size` bytes, enough of them to make about 1 MiB.
private func maskedFrames(size: Int) -> (bytes: [UInt8], count: Int) {
    let count = max(1, (1 << 20) / max(size, 1))
    let payload = [UInt8]((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
    var out: [UInt8] = []
    out.reserveCapacity(count * (size + 14))
    for _ in 0..<count {
        WebSocketFrameEncoder.writeFrame(fin: true, opcode: .binary, payload: payload, maskKey: key, into: &out)
    }
    return (out, count)
}

/// Frame decoding (header parsing + unmasking) in the server role, against SwiftNIO's
/// `WebSocketFrameDecoder` plus `unmaskedData` on the same bytes. Both sides start
/// each pass by copying the wire bytes into their own buffer (NIO: a ByteBuffer
/// written into an EmbeddedChannel, as a NIO server receives them).
func frameDecodeBenchmarks(_ report: Report) {
    print("Transport: frame decode")
    for size in [16, 1024, 64 * 1024, 1 << 20] {
        let (wire, count) = maskedFrames(size: size)
        let work = UnsafeMutableRawBufferPointer.allocate(byteCount: wire.count, alignment: 64)
        var parser = WebSocketFrameParser(role: .server, maxFrameSize: 1 << 24, maxMessageSize: 1 << 24)
        let ours = Timed { n in
            for _ in 0..<n {
                wire.withUnsafeBytes { memcpy(work.baseAddress!, $0.baseAddress!, wire.count) }
                var index = 0
                var frames = 0
                var checksum = 0
                while true {
                    let item: WebSocketFrameParser.Item?
                    do { item = try parser.next(in: work, at: &index) } catch { fatalError("\(error)") }
                    guard let item else { break }
                    switch item {
                    case .header: frames += 1
                    case .payload(let r): checksum &+= Int(work[r.lowerBound])
                    case .end: break
                    }
                }
                precondition(frames == count)
                blackHole(checksum)
            }
        }
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 24)))
        let allocator = ByteBufferAllocator()
        let nio = Timed { n in
            for _ in 0..<n {
                var buffer = allocator.buffer(capacity: wire.count)
                buffer.writeBytes(wire)
                try! channel.writeInbound(buffer)
                var frames = 0
                var checksum = 0
                while let frame = try! channel.readInbound(as: WebSocketFrame.self) {
                    let data = frame.unmaskedData
                    checksum &+= Int(data.getInteger(at: data.readerIndex, as: UInt8.self) ?? 0)
                    frames += 1
                }
                precondition(frames == count)
                blackHole(checksum)
            }
        }
        let label = size >= 1 << 20 ? "\(size >> 20) MiB" : (size >= 1024 ? "\(size >> 10) KiB" : "\(size) B")
        let goal = size <= 16 ? 3.0 : 10.0
        report.add("frame decode, \(label) masked frames (\(count) per pass)",
                   unit: .framesAndMegabytesPerSecond(bytesPerOp: wire.count, framesPerOp: count),
                   subject: ours, referenceName: "SwiftNIO WebSocketFrameDecoder", reference: nio, goal: goal)
    }
}

/// UTF-8 validation against a memchr scan of the same bytes (a byte that is absent,
/// so memchr reads everything): the speed of merely looking at each byte.
func utf8Benchmarks(_ report: Report) {
    print("Transport: UTF-8")
    let json = Array(String(decoding: engagementBytes(templateBytes: 60 * 1024), as: UTF8.self).utf8)
    var mixedText = ""
    while mixedText.utf8.count < 64 * 1024 { mixedText += "Grüße, добро пожаловать, 欢迎, bienvenue — 🎰 spin! " }
    let mixed = Array(mixedText.utf8)
    for (name, bytes) in [("ASCII JSON", json), ("mixed text", mixed)] {
        let ours = Timed { n in
            bytes.withUnsafeBytes { raw in
                for _ in 0..<n {
                    var v = UTF8Validator()
                    precondition(v.validate(raw) == nil && v.isComplete)
                }
            }
        }
        let scan = Timed { n in
            bytes.withUnsafeBytes { raw in
                // memchr is declared pure: vary the length by one byte so no call can be
                // hoisted out of the loop, and consume every result.
                for i in 0..<n { blackHole(memchr(raw.baseAddress!, 0, raw.count - (i & 1))) }
            }
        }
        report.add("UTF-8 validation, \(name) (\(bytes.count / 1024) KiB)", unit: .gigabytesPerSecond(bytesPerOp: bytes.count),
                   subject: ours, referenceName: "memchr scan", reference: scan,
                   goal: name == "ASCII JSON" ? 0.5 : nil, goalText: name == "ASCII JSON" ? "≥ 0.50×" : "—")
    }
}
