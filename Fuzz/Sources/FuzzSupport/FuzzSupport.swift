// What the fuzz targets share: how an input is cut into the pieces a socket would deliver, a
// seeded generator (masking keys, handshake keys), the failure that stops libFuzzer, and the main.
import CFuzzDriver
#if canImport(Glibc)
import Glibc
#endif

/// A broken invariant: prints what and stops the process, so libFuzzer writes the input as a crash.
public func invariant(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
                      file: StaticString = #fileID, line: UInt = #line) {
    if !condition() {
        fatalError("invariant broken: \(message())", file: file, line: line)
    }
}

/// SplitMix64: deterministic, so that two runs over the same input are comparable.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Cuts `bytes` into pieces, as reads of a socket would: with `seed` 0 one piece (the whole), else
/// pieces of 1 to `maxPiece` bytes chosen by a generator seeded with `seed`.
public func pieces(of bytes: [UInt8], seed: UInt8, maxPiece: Int = 64) -> [[UInt8]] {
    if seed == 0 || bytes.isEmpty { return [bytes] }
    var rng = SeededGenerator(seed: UInt64(seed))
    var out: [[UInt8]] = []
    var i = 0
    while i < bytes.count {
        let n = min(bytes.count - i, Int(rng.next() % UInt64(maxPiece)) + 1)
        out.append(Array(bytes[i ..< i + n]))
        i += n
    }
    return out
}

/// The fuzzer's input as an array.
public func input(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data, size > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: size))
}

/// The main of a fuzz target: runs libFuzzer's driver with the process's arguments and `target`
/// (the target's LLVMFuzzerTestOneInput), and exits with its status.
public func runFuzzer(_ target: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv, target))
}
