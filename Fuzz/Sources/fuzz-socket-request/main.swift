// The local socket API's request path as the socket server runs it on each read: LineFramer cuts
// the stream into lines (at most `socket.max_line_bytes`), SocketRequestParser parses and
// validates each non-empty line (JSON, `id`, `op`, every argument's type and range, unknown members).
//
// Input: byte 0 picks the line limit (bit 0: 256 bytes, else the default 1 MiB), byte 1 how the
// rest is cut into reads, the rest is what a client writes.
// Checks: fed whole and in pieces, the same lines parse to the same requests and answers, and a
// line past the limit is found at the same offset; a request serialized again (parse → serialize)
// is parsed to the same request or the same refusal; an accepted `id` is a string or a number.
import FuzzSupport
import SmarticoDaemon
import SmarticoProtocol

struct Run: Equatable {
    var parsed: [ParsedLine] = []
    var tooLong: Int? = nil
    var lines: [[UInt8]] = []
}

func serve(_ reads: [[UInt8]], maxLineBytes: Int) -> Run {
    var framer = LineFramer(maxLineBytes: maxLineBytes)
    var run = Run()
    for read in reads {
        let outcome = read.withUnsafeBytes { buffer in
            framer.feed(buffer) { line in
                invariant(line.count <= maxLineBytes, "a line of \(line.count) bytes passed the limit")
                if line.count > 0 {
                    run.parsed.append(SocketRequestParser.parse(line))
                    run.lines.append(Array(line))
                }
                return true
            }
        }
        if case .lineTooLong(let offset) = outcome {
            run.tooLong = offset
            break
        }
        invariant(framer.bufferedByteCount <= maxLineBytes, "the framer holds \(framer.bufferedByteCount) bytes")
    }
    return run
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSocketRequest(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = input(data, size)
    guard bytes.count >= 2 else { return 0 }
    let maxLineBytes = bytes[0] & 1 != 0 ? 256 : 1_048_576
    let stream = Array(bytes[2...])
    let whole = serve([stream], maxLineBytes: maxLineBytes)
    if bytes[1] != 0 {
        let split = serve(pieces(of: stream, seed: bytes[1]), maxLineBytes: maxLineBytes)
        invariant(whole == split, "whole and in pieces differ")
    }
    for (line, parsed) in zip(whole.lines, whole.parsed) {
        if let id = parsed.id {
            switch id {
            case .string, .number: break
            default: invariant(false, "id \(id) accepted")
            }
        }
        guard let value = try? JSONValue(parsing: line, options: JSONParseOptions(maxDepth: 128)) else {
            if case .success = parsed.request { invariant(false, "a request from a line that is not JSON") }
            continue
        }
        let again = value.serialized().withUnsafeBytes { SocketRequestParser.parse($0) }
        invariant(again == parsed, "the request serialized again parses differently:\n\(parsed)\n\(again)")
    }
    return 0
}

runFuzzer(fuzzSocketRequest)
