import Foundation
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Transport

private let key = WebSocketMaskKey(0x37, 0xFA, 0x21, 0x3D)

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
