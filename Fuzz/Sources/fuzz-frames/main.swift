// The WebSocket receive path the daemon runs after the upgrade (WebSocketProtocol: frame parser,
// masking rules of both roles, fragmentation, control frames, UTF-8, close handshake and, with
// permessage-deflate, zlib's inflate behind the size limits).
//
// Input: byte 0 picks the setting, byte 1 how the rest is cut into reads, the rest is the stream.
//   bit 0: role (0 client: the daemon, frames must be unmasked; 1 server: the simulator, masked)
//   bit 1: permessage-deflate negotiated
//   bit 2: server_no_context_takeover, bit 3: client_no_context_takeover
//   bits 4-6: the peer's window bits (8 + value)
//   bit 7: text delivered as bytes (the daemon's setting) or as String
// Checks: the stream fed whole and fed in pieces gives the same events (close codes for failures)
// and, when nothing failed, the same bytes to write; `.closed` comes once, last; every byte the
// protocol writes (pongs, close frames) is valid for the peer; every message received, sent again
// by a peer with the same parameters, arrives unchanged (encoder, deflater and inflater round trip).
import FuzzSupport
// @testable: the negotiated parameters are made with their internal memberwise initializer.
@testable import Transport

struct Setting {
    var role: WebSocketRole
    var deflate: PerMessageDeflateParameters?
    var configuration: WebSocketConfiguration

    init(_ flags: UInt8) {
        role = flags & 1 == 0 ? .client : .server
        if flags & 2 != 0 {
            let bits = 8 + Int((flags >> 4) & 7)
            deflate = PerMessageDeflateParameters(
                serverNoContextTakeover: flags & 4 != 0, clientNoContextTakeover: flags & 8 != 0,
                serverMaxWindowBits: role == .client ? bits : 15, clientMaxWindowBits: role == .server ? bits : 15)
        }
        // Limits smaller than the daemon's 16 MiB keep a run fast; the checks are the same code.
        configuration = WebSocketConfiguration(
            maxFrameSize: 64 << 10, maxMessageSize: 256 << 10, textAsBytes: flags & 0x80 != 0)
    }

    func make(_ role: WebSocketRole, fragmentSize: Int? = nil) -> WebSocketProtocol {
        var c = configuration
        c.outboundFragmentSize = fragmentSize
        return WebSocketProtocol(role: role, configuration: c, deflate: deflate, random: SeededGenerator(seed: 7))
    }

    var peerRole: WebSocketRole { role == .client ? .server : .client }
}

struct Run {
    var events: [WebSocketEvent] = []
    var outbound: [UInt8] = []
    var failed: Bool {
        events.contains { if case .failed = $0 { true } else { false } }
    }

    /// Events with failures and closes reduced to their codes (a failure's text may name how far
    /// into a piece it was found).
    var comparable: [String] {
        events.map { e in
            switch e {
            case let .failed(error): "failed \(error.closeCode.rawValue)"
            case let .closed(code, _): "closed \(code.rawValue)"
            default: "\(e)"
            }
        }
    }
}

func receive(_ setting: Setting, _ reads: [[UInt8]]) -> Run {
    let ws = setting.make(setting.role)
    var run = Run()
    for read in reads {
        let out = ws.receive(read)
        run.events += out.events
        run.outbound += out.outbound
        if ws.state == .closed { break }
    }
    if ws.state != .closed {
        let out = ws.transportClosed()
        run.events += out.events
    }
    invariant(ws.state == .closed, "not closed after transportClosed")
    let after = ws.receive([0x81, 0x00])
    invariant(after.events.isEmpty && after.outbound.isEmpty, "a closed protocol still acted: \(after)")
    return run
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFrames(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = input(data, size)
    guard bytes.count >= 2 else { return 0 }
    let setting = Setting(bytes[0])
    let stream = Array(bytes[2...])

    let whole = receive(setting, [stream])
    let closes = whole.events.indices.filter { if case .closed = whole.events[$0] { true } else { false } }
    invariant(closes == [whole.events.count - 1], "`.closed` not once and last: \(whole.events)")

    if bytes[1] != 0 {
        let split = receive(setting, pieces(of: stream, seed: bytes[1]))
        invariant(whole.comparable == split.comparable, "whole and in pieces differ:\n\(whole.events)\n\(split.events)")
        if !whole.failed {
            invariant(whole.outbound == split.outbound, "whole and in pieces wrote different bytes")
        }
    }

    // What we wrote is valid for the peer.
    if !whole.outbound.isEmpty {
        let peer = setting.make(setting.peerRole)
        let heard = peer.receive(whole.outbound)
        for e in heard.events {
            if case .failed(let error) = e { invariant(false, "the peer refuses what we wrote: \(error)") }
        }
    }

    // Messages round trip through a peer's sender with the same parameters (its deflate context
    // carried from message to message, as on a connection). Made only when there are messages:
    // a codec pair costs a few hundred KiB of zlib state.
    let messages = whole.events.filter {
        switch $0 {
        case .text, .textBytes, .binary: true
        default: false
        }
    }
    guard !messages.isEmpty else { return 0 }
    let sender = setting.make(setting.peerRole, fragmentSize: bytes[1] % 4 == 0 ? nil : Int(bytes[1]))
    let receiver = setting.make(setting.role)
    for event in messages {
        let sent: WebSocketOutput
        do {
            switch event {
            case let .text(s): sent = try sender.send(text: s)
            case let .textBytes(b): sent = try sender.send(text: String(decoding: b, as: UTF8.self))
            case let .binary(b): sent = try sender.send(binary: b)
            default: continue
            }
        } catch {
            invariant(false, "the peer cannot send \(event): \(error)")
            return 0
        }
        let back = receiver.receive(sent.outbound)
        invariant(back.events == [event], "round trip changed \(event) into \(back.events)")
    }
    return 0
}

runFuzzer(fuzzFrames)
