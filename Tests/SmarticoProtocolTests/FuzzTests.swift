import Testing
import SmarticoProtocol
import SmarticoTestSupport

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
    /// Known cids with their known field names filled with values of random types: every
    /// decode gives a typed message (that round-trips) or a ProtocolError naming a field.
    @Test func knownCIDsWithRandomFieldTypes() throws {
        var rng = SplitMix64(seed: 0x5EED_0004)
        let fields = ["errCode", "errMsg", "products", "payload", "settings", "props", "public_username", "avatar_id",
                      "native_app_gf_url", "native_app_popup_url", "engagement_uid", "activityType", "engagement_id",
                      "saw_template_id", "pending_message_id", "saw_game_type_id", "label_key", "brand_key", "device_id",
                      "page", "tracker_version", "session_id", "ua", "ext_user_id", "hash", "token", "platform",
                      "pushNotificationUserStatus", "eventType", "action", "ts", "uuid", "dp", "bcid"]
        let samples: [JSONValue] = [nil, true, 0, 3, 12, -1, 1.5, "1e400", "", "x", "dp:gf", [], [1, "2"], [:],
                                    ["dp": "dp:ok"], ["language": "en"], ["tzoffset": "x"], ["ua_fp": 1]]
        let cids: [Int64] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 103, 104, 105, 106, 108, 110, 707, 711, 1003, 2003, 504]
        var accepted = 0, rejected = 0
        for _ in 0..<3000 {
            var o: JSONObject = ["cid": .number(cids[Int(rng.next() % UInt64(cids.count))])]
            for _ in 0..<Int(rng.next() % 8) {
                o[fields[Int(rng.next() % UInt64(fields.count))]] = samples[Int(rng.next() % UInt64(samples.count))]
            }
            let bytes = o.serialized()
            for side in 0..<2 {
                do throws(ProtocolError) {
                    let json = side == 0 ? try ServerMessage.decode(bytes).json : try ClientMessage.decode(bytes).json
                    accepted += 1
                    #expect(json == o)
                } catch {
                    rejected += 1
                    switch error {
                    case .missingField(_, let path), .wrongFieldType(_, let path, _, _), .invalidFieldValue(_, let path, _):
                        #expect(!path.isEmpty && error.description.contains(path))
                    default:
                        Issue.record("unexpected error kind for \(o): \(error)")
                    }
                }
            }
            _ = try? BridgeMessage.decode(bytes)
        }
        #expect(accepted > 500 && rejected > 500, "accepted \(accepted), rejected \(rejected)")
    }
}
