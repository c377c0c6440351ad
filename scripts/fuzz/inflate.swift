// libFuzzer target: DeflateDecoder against zlib (scripts/fuzz-inflate.sh, docs/transport.md "Inflate").
// An input is a window size and up to four messages of one stream; whatever DeflateDecoder accepts,
// zlib must decode to the same bytes. (DeflateDecoder may refuse what zlib would wait on.)
import CZlib

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let windowBits = 8 + Int(data[0] & 7)
    // Messages: split at the byte 0xA5 followed by 0x5A (a seed's separator), at most four.
    var messages: [[UInt8]] = [[]]
    var i = 1
    while i < size {
        if messages.count < 4, i + 1 < size, data[i] == 0xA5, data[i + 1] == 0x5A {
            messages.append([])
            i += 2
            continue
        }
        messages[messages.count - 1].append(data[i])
        i += 1
    }
    let decoder = DeflateDecoder(windowBits: windowBits)
    let z = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    defer { inflateEnd(z); z.deallocate() }
    guard fuzz_inflate_init_raw(z, Int32(windowBits)) == Z_OK else { return 0 }
    let limit = 1 << 20
    for message in messages {
        let input = message + [0, 0, 0xFF, 0xFF]
        var ours: [UInt8] = []
        let final: Bool
        do {
            final = try input.withUnsafeBytes { raw -> Bool in try decoder.decodeMessage(raw, limit: limit, into: &ours) }
        } catch {
            return 0  // refused: the connection would close here
        }
        var theirs = [UInt8](repeating: 0, count: limit + 1)
        var zin = input
        let rc = zin.withUnsafeMutableBufferPointer { i in
            theirs.withUnsafeMutableBufferPointer { o -> Int32 in
                z.pointee.next_in = i.baseAddress
                z.pointee.avail_in = UInt32(i.count)
                z.pointee.next_out = o.baseAddress
                z.pointee.avail_out = UInt32(o.count)
                return inflate(z, Z_SYNC_FLUSH)
            }
        }
        let produced = limit + 1 - Int(z.pointee.avail_out)
        guard rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR else {
            fatalError("DeflateDecoder accepted what zlib refuses (zlib \(rc)): window \(windowBits), \(message.count) bytes")
        }
        guard Array(theirs[0 ..< produced]) == ours else {
            fatalError("DeflateDecoder and zlib disagree: \(ours.count) against \(produced) bytes, window \(windowBits)")
        }
        guard final == (rc == Z_STREAM_END) else { fatalError("final block seen by one decoder only") }
        if final { inflateReset(z) }
    }
    return 0
}
