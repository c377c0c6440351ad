import SmarticoTestSupport
import Testing
@testable import Transport

@Suite struct WebSocketUTF8Tests {
    /// Reference: the standard library's validating decoder.
    func reference(_ bytes: [UInt8]) -> Bool { String(validating: bytes, as: UTF8.self) != nil }

    /// The length of the longest prefix of `bytes` that is a prefix of some valid UTF-8 string.
    func referenceFailOffset(_ bytes: [UInt8]) -> Int? {
        // A prefix p can be extended to valid UTF-8 iff p + (completion) is valid for some
        // completion of ≤ 3 continuation bytes; try the smallest continuation bytes that work.
        func extendable(_ p: ArraySlice<UInt8>) -> Bool {
            if reference(Array(p)) { return true }
            for tail in [[0x80], [0x80, 0x80], [0x80, 0x80, 0x80], [0xA0], [0xA0, 0x80], [0x90], [0x90, 0x80], [0x90, 0x80, 0x80], [0xBF], [0xBF, 0x80], [0xBF, 0x80, 0x80]] as [[UInt8]] {
                if reference(Array(p) + tail) { return true }
            }
            return false
        }
        for n in 1 ... max(1, bytes.count) where n <= bytes.count {
            if !extendable(bytes[0 ..< n]) { return n - 1 }
        }
        return nil
    }

    func edgeCases() -> [[UInt8]] {
        var cases: [[UInt8]] = [
            [], [0x00], [0x7F], [0x80], [0xBF], [0xC0, 0x80], [0xC1, 0xBF], [0xC2, 0x80], [0xDF, 0xBF],
            [0xE0, 0x80, 0x80], [0xE0, 0x9F, 0xBF], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xED, 0xA0, 0x80],
            [0xED, 0xBF, 0xBF], [0xEE, 0x80, 0x80], [0xEF, 0xBF, 0xBF], [0xF0, 0x8F, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80],
            [0xF4, 0x8F, 0xBF, 0xBF], [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF], [0xFE],
            Array("κόσμε".utf8), Array("κόσμε".utf8) + [0xED, 0xA0, 0x80] + Array("edited".utf8),
            Array("Hello-µ@ßöäüàá-UTF-8!!".utf8), [0xCE, 0xBA, 0xE1, 0xBD, 0xB9, 0xCF, 0x83, 0xCE, 0xBC, 0xCE, 0xB5, 0xF4, 0x90, 0x80, 0x80, 0x65, 0x64],
            [0xF0, 0x9F, 0x98, 0x80], [0xF0, 0x9F, 0x98], [0xE2, 0x82], [0xC2],
        ]
        cases.append([UInt8](repeating: 0x41, count: 40) + [0xC3, 0xA9] + [UInt8](repeating: 0x42, count: 20))
        cases.append([UInt8](repeating: 0x41, count: 33) + [0xC3] + [UInt8](repeating: 0x42, count: 20))
        return cases
    }

    func randomCases(count: Int) -> [[UInt8]] {
        var rng = SplitMix64(seed: 42)
        let pieces: [[UInt8]] = [[0x41], [0x7F], [0xC3, 0xA9], [0xE2, 0x82, 0xAC], [0xF0, 0x9F, 0x98, 0x80], [0xED, 0x9F, 0xBF],
                                 [0xF4, 0x8F, 0xBF, 0xBF], [0xEF, 0xBF, 0xBF]]
        var out: [[UInt8]] = []
        for i in 0 ..< count {
            var b: [UInt8] = []
            let n = Int.random(in: 0 ... 40, using: &rng)
            if i % 3 == 0 {
                b = rng.bytes(n)  // mostly invalid
            } else {
                for _ in 0 ..< n { b += pieces.randomElement(using: &rng)! }
                if i % 3 == 1 && !b.isEmpty {  // corrupt one byte
                    b[Int.random(in: 0 ..< b.count, using: &rng)] = UInt8.random(in: 0x80 ... 0xFF, using: &rng)
                }
            }
            out.append(b)
        }
        return out
    }

    func check(_ bytes: [UInt8]) {
        let valid = reference(bytes)
        let failAt = referenceFailOffset(bytes)
        // Whole buffer.
        var v = UTF8Validator()
        let r = bytes.withUnsafeBytes { v.validate($0) }
        #expect((r == nil && v.isComplete) == valid, "\(bytes)")
        #expect(r == failAt, "fail-fast offset for \(bytes)")
        // Split at every point.
        for split in 0 ... bytes.count {
            var w = UTF8Validator()
            let a = bytes[0 ..< split].withUnsafeBytes { w.validate($0) }
            var result = a
            if a == nil { result = bytes[split...].withUnsafeBytes { w.validate($0) } }
            #expect(result == failAt, "split \(split) of \(bytes)")
            #expect((result == nil && w.isComplete) == valid)
        }
    }

    @Test func edgeCasesAgainstReference() {
        for c in edgeCases() { check(c) }
    }

    @Test func thousandsOfRandomStringsAgainstReference() {
        for c in randomCases(count: 3000) { check(c) }
    }

    @Test func longASCIIRunsBeforeEveryEdgeCase() {
        // Exercises the 64-, 16- and 8-byte ASCII paths: the edge case lands at every
        // alignment after runs long enough for the widest path.
        for run in [63, 64, 65, 79, 128, 131] {
            for c in edgeCases() {
                check([UInt8](repeating: 0x61, count: run) + c + [UInt8](repeating: 0x62, count: 70))
            }
        }
    }

    @Test func failsFastInsideALongMessage() {
        // The bad byte is found at its offset even though the message would continue.
        var v = UTF8Validator()
        let first = Array("ascii prefix that is long enough for the fast path ".utf8)
        #expect(first.withUnsafeBytes { v.validate($0) } == nil)
        #expect([0xF4, 0x90].withUnsafeBytes { v.validate($0) } == first.count + 1)
    }
}
