import Testing
import SmarticoProtocol

/// Seeded, bounded fuzzing: every input gives a value or a typed error, and whatever the
/// parser accepts serializes to something that parses back to an equal value.
@Suite struct FuzzTests {
    static let alphabet: [UInt8] = Array(#"{}[]:,"\ tfnrue01-9.eE+u/abcdDF"#.utf8) + [0x00, 0x0A, 0x80, 0xC3, 0xA9, 0xED, 0xF0, 0xFF]

    func check(_ input: [UInt8], _ stats: inout (accepted: Int, rejected: Int)) {
        do {
            let v = try JSONValue(parsing: input, options: JSONParseOptions(maxDepth: 64))
            stats.accepted += 1
            let again = v.serialized()
            do {
                let w = try JSONValue(parsing: again, options: JSONParseOptions(maxDepth: 64))
                #expect(w == v, "round trip changed \(input) → \(again.text)")
                #expect(w.serialized() == again, "serialization is not stable for \(again.text)")
            } catch {
                Issue.record("serialized output \(again.text) does not parse: \(error)")
            }
        } catch {
            stats.rejected += 1
            #expect(error.offset >= 0 && error.offset <= input.count, "offset \(error.offset) outside input of \(input.count)")
        }
        // The message layer never crashes either, and only throws ProtocolError (typed throws).
        _ = try? ServerMessage.decode(input)
        _ = try? ClientMessage.decode(input)
        _ = try? BridgeMessage.decode(input)
    }

    @Test func randomByteStrings() {
        var rng = SplitMix64(seed: 0x5EED_0001)
        var stats = (accepted: 0, rejected: 0)
        for _ in 0..<4000 {
            let n = Int(rng.next() % 48)
            let input = (0..<n).map { _ in
                rng.next() % 4 == 0 ? UInt8(truncatingIfNeeded: rng.next()) : Self.alphabet[Int(rng.next() % UInt64(Self.alphabet.count))]
            }
            check(input, &stats)
        }
        #expect(stats.rejected > 0)
        #expect(stats.accepted > 0, "the generator should produce some valid JSON (numbers, literals)")
    }

    @Test func mutationsOfTheFixtures() throws {
        var rng = SplitMix64(seed: 0x5EED_0002)
        let seeds = try allFixtureNames().map { try fixture($0) }
        var stats = (accepted: 0, rejected: 0)
        for round in 0..<3000 {
            var input = seeds[round % seeds.count]
            let edits = 1 + Int(rng.next() % 4)
            for _ in 0..<edits where !input.isEmpty {
                let at = Int(rng.next() % UInt64(input.count))
                switch rng.next() % 5 {
                case 0: input[at] ^= UInt8(1) << UInt8(rng.next() % 8)                            // bit flip
                case 1: input.removeSubrange(at...)                                               // truncation
                case 2: input.insert(Self.alphabet[Int(rng.next() % UInt64(Self.alphabet.count))], at: at) // insertion
                case 3: input.remove(at: at)                                                       // deletion
                default: input.insert(contentsOf: input[at..<min(input.count, at + 8)], at: at)   // duplication
                }
            }
            check(input, &stats)
        }
        #expect(stats.accepted > 100 && stats.rejected > 100, "accepted \(stats.accepted), rejected \(stats.rejected)")
    }

    @Test func randomValuesRoundTrip() throws {
        var rng = SplitMix64(seed: 0x5EED_0003)
        func randomString() -> String {
            let pool: [String] = ["a", "\"", "\\", "\n", "\u{0}", "\u{1F}", "é", "€", "😀", "\u{FFFF}", "/", " "]
            return (0..<Int(rng.next() % 6)).map { _ in pool[Int(rng.next() % UInt64(pool.count))] }.joined()
        }
        func randomValue(_ depth: Int) -> JSONValue {
            switch rng.next() % (depth > 4 ? 4 : 6) {
            case 0: return .null
            case 1: return .bool(rng.next() % 2 == 0)
            case 2:
                let lits = ["0", "-0", "1.5e-300", "18446744073709551615", "-9223372036854775808", "1e400", "0.1", "123"]
                return .number(JSONNumber(literal: lits[Int(rng.next() % UInt64(lits.count))])!)
            case 3: return .string(randomString())
            case 4: return .array((0..<Int(rng.next() % 4)).map { _ in randomValue(depth + 1) })
            default:
                var o = JSONObject()
                for _ in 0..<Int(rng.next() % 4) { o.append(key: randomString(), value: randomValue(depth + 1)) }
                return .object(o)
            }
        }
        for _ in 0..<1500 {
            let v = randomValue(0)
            let s = v.serialized()
            let back = try JSONValue(parsing: s)
            #expect(back.serialized() == s)
        }
    }
}
