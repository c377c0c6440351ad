import CBench
import Foundation
import SmarticoProtocol
import SmarticoSim
import Transport

/// A 110 engagement whose `template_html` reads like a real one (varied words, markup, inline
/// styles) rather than one sentence repeated, so deflate works as hard as on real traffic
/// (about 3–4× smaller, not 100×). Deterministic.
func realisticEngagementBytes(templateBytes: Int) -> [UInt8] {
    let words = ["spin", "the", "wheel", "and", "win", "up", "to", "free", "spins", "today", "bonus", "cash", "deposit",
                 "level", "mission", "complete", "reward", "points", "jackpot", "tournament", "leaderboard", "prize", "your",
                 "weekly", "daily", "challenge", "unlock", "exclusive", "offer", "players", "only", "until", "midnight",
                 "claim", "now", "terms", "apply", "minimum", "wager", "golden", "ticket", "store", "badge", "streak",
                 "boost", "multiplier", "raffle", "draw", "winner", "announced", "friday", "limited", "time"]
    var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
    func next() -> Int {
        seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Int(truncatingIfNeeded: seed >> 33)
    }
    var html = "<div class=\\\"sm-popup\\\" style=\\\"background:#1b1f3a;color:#fff;padding:16px\\\">"
    var paragraph = 0
    while html.utf8.count < templateBytes - 40 {
        paragraph += 1
        html += "<p id=\\\"p\(paragraph)\\\" style=\\\"margin:\(next() % 24)px;font-size:\(12 + next() % 10)px\\\">"
        for _ in 0..<(8 + next() % 24) {
            html += words[next() % words.count] + (next() % 7 == 0 ? " \(next() % 1000) " : " ")
        }
        html += "</p>"
    }
    html = String(html.utf8.prefix(templateBytes - 6))!
    while html.hasSuffix("\\") { html.removeLast() }  // never cut an escape in half
    html += "</div>"
    return engagementBytes(templateHTML: html)
}

/// permessage-deflate of JSON engagements: Transport's zlib wrappers (`MessageDeflater` /
/// `MessageInflater`, what `WebSocketProtocol` calls) against zlib called directly from C on the
/// same bytes with the same parameters (raw deflate, window 15, level 6, memLevel 8, sync flush,
/// tail stripped, context reset per message so every message costs the same).
func deflateBenchmarks(_ report: Report) {
    guard report.wants("permessage-deflate") else { return }
    print("Transport: permessage-deflate")
    for (label, templateBytes) in [("2 KB", 1_650), ("50 KB", 50 * 1024)] {
        let message = realisticEngagementBytes(templateBytes: templateBytes)
        let cDeflater = cbench_deflater_new(6, 15, 8)!
        let cInflater = cbench_inflater_new(15)!
        var cOut = [UInt8](repeating: 0, count: message.count + 4096)
        let cLength = message.withUnsafeBytes { m in
            cOut.withUnsafeMutableBytes { o in
                cbench_deflate_message(cDeflater, m.baseAddress!.assumingMemoryBound(to: UInt8.self), m.count,
                                       o.baseAddress!.assumingMemoryBound(to: UInt8.self), o.count)
            }
        }
        precondition(cLength > 0, "zlib deflate failed")
        let compressed = Array(cOut[0..<cLength])

        let deflater = MessageDeflater(windowBits: 15, noContextTakeover: true, level: 6, memoryLevel: 8)
        let inflater = MessageInflater(windowBits: 15, noContextTakeover: true)
        var out: [UInt8] = []
        // Same zlib, same parameters: the same bytes, and they inflate back to the message.
        message.withUnsafeBytes { deflater.compress($0, into: &out) }
        precondition(out == compressed, "Transport's deflate output differs from zlib's (\(out.count) vs \(compressed.count) bytes)")
        out.removeAll(keepingCapacity: true)
        compressed.withUnsafeBytes { try! inflater.inflate($0, limit: 16 << 20, into: &out) }
        try! inflater.finish(limit: 16 << 20, into: &out)
        precondition(out == message, "Transport's inflate did not give the message back")

        let what = "\(label) 110 (\(message.count) B ↔ \(compressed.count) B)"
        report.add("permessage-deflate deflate, \(what)", unit: .megabytesPerSecond(bytesPerOp: message.count),
                   subject: Timed { n in
                       for _ in 0..<n {
                           out.removeAll(keepingCapacity: true)
                           message.withUnsafeBytes { deflater.compress($0, into: &out) }
                           blackHole(out.count)
                       }
                   },
                   referenceName: "zlib from C",
                   reference: Timed { n in
                       message.withUnsafeBytes { m in
                           cOut.withUnsafeMutableBytes { o in
                               for _ in 0..<n {
                                   blackHole(cbench_deflate_message(cDeflater, m.baseAddress!.assumingMemoryBound(to: UInt8.self), m.count,
                                                                    o.baseAddress!.assumingMemoryBound(to: UInt8.self), o.count))
                               }
                           }
                       }
                   },
                   goal: 0.9, fineRounds: true)
        var cPlain = [UInt8](repeating: 0, count: message.count + 4096)
        report.add("permessage-deflate inflate, \(what)", unit: .megabytesPerSecond(bytesPerOp: message.count),
                   subject: Timed { n in
                       compressed.withUnsafeBytes { c in
                           for _ in 0..<n {
                               out.removeAll(keepingCapacity: true)
                               try! inflater.inflate(c, limit: 16 << 20, into: &out)
                               try! inflater.finish(limit: 16 << 20, into: &out)
                               blackHole(out.count)
                           }
                       }
                   },
                   referenceName: "zlib from C",
                   reference: Timed { n in
                       compressed.withUnsafeBytes { c in
                           cPlain.withUnsafeMutableBytes { o in
                               for _ in 0..<n {
                                   blackHole(cbench_inflate_message(cInflater, c.baseAddress!.assumingMemoryBound(to: UInt8.self), c.count,
                                                                    o.baseAddress!.assumingMemoryBound(to: UInt8.self), o.count))
                               }
                           }
                       }
                   },
                   goal: 0.9, fineRounds: true)
        cbench_zlib_free(cDeflater)
        cbench_zlib_free(cInflater)
    }
}

/// `count` 110s as `smartico-sim` sends them in the daemon rows: the generator's 110 (template of
/// `templateBytes` padded with `x`, a random `engagement_uid`, consecutive engagement ids),
/// stamped as a session stamps it (a random `uuid`, `ts` in milliseconds). Seeded: the same bytes
/// every run.
func simulatorEngagements(count: Int, templateBytes: Int = 1_650, seed: UInt64 = 0x5EED) -> [[UInt8]] {
    var generator = SimPushGenerator(templateBytes: templateBytes)
    var random = SimRandom(seed: seed)
    return (0..<count).map { i in
        var m = generator.make(.engagement, random: &random)
        m["ts"] = .number(1_632_913_275_835 + Int64(i))
        m["uuid"] = .string(random.uuid())
        return m.serialized()
    }
}
