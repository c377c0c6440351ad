import Foundation
import SmarticoProtocol

/// The same 110 engagement the daemon receives, as Foundation would decode it
/// into a Codable struct: the reference for "how fast is our decoder" (and for the daemon's
/// CPU-per-event row).
struct FoundationEngagement: Decodable {
    var engagement_uid: String
    var activityType: Int
    var engagement_id: Int64
    var root_audience_id: Int64?
    var audience_id: Int64?
    var resource_id: Int64?
    var resource_variation_id: Int64?
    var template_html: String?
    var template_engine: Int?
    var params: [String: String]?
    var source_product_id: Int?
    var cid: Int
    var ts: Int64
    var uuid: String
}

func engagementBytes(templateBytes: Int) -> [UInt8] {
    var html = "<div class=\\\"popup\\\"><h1>Welcome back!</h1><p>"
    while html.utf8.count < templateBytes - 10 { html += "Spin the wheel and win up to 500 free spins today. " }
    html += "</p></div>"
    return engagementBytes(templateHTML: html)
}

/// A 110 engagement with fixed ids around `templateHTML` (already JSON-escaped).
func engagementBytes(templateHTML html: String) -> [UInt8] {
    let json = """
    {"engagement_uid":"06f0cd67-ec24-4eeb-bbe9-c3529e8743fa","activityType":30,"engagement_id":236356783,\
    "root_audience_id":31068,"audience_id":31068,"resource_id":5843,"resource_variation_id":5843,\
    "template_html":"\(html)","template_engine":1,"params":{"title":"Welcome","button":"Play now","dp":"dp:gf_saw&id=5"},\
    "source_product_id":0,"cid":110,"ts":1632913275835,"uuid":"df4a39fb-0536-4c68-9c32-0c1db7e75588"}
    """
    return Array(json.utf8)
}

func protocolBenchmarks(_ report: Report) {
    print("SmarticoProtocol")
    let ping = Array(#"{"cid":1,"ts":1632897982843,"uuid":"dcc747c1-4a3b-4cb1-a62d-7095f01c16a7"}"#.utf8)
    let big = engagementBytes(templateBytes: 50 * 1024)
    let small = engagementBytes(templateBytes: 1_500)  // ~2 KB message in all
    precondition((try? ServerMessage.decode(big))?.cid == 110)
    precondition((try? ServerMessage.decode(ping))?.cid == 1)

    let decoder = JSONDecoder()
    func ours(_ bytes: [UInt8]) -> Timed {
        Timed { n in for _ in 0..<n { blackHole(try? ServerMessage.decode(bytes)) } }
    }
    func foundation(_ bytes: [UInt8]) -> Timed {
        let data = Data(bytes)
        return Timed { n in for _ in 0..<n { blackHole(try? decoder.decode(FoundationEngagement.self, from: data)) } }
    }
    report.add("decode PING (\(ping.count) B) → ServerMessage", unit: .opsPerSecond,
               subject: ours(ping), referenceName: nil, reference: nil, goal: nil)
    report.add("decode 110 with 50 KB template_html (\(big.count) B)", unit: .opsPerSecond,
               subject: ours(big), referenceName: "Foundation JSONDecoder", reference: foundation(big), goal: nil)
    report.add("decode 110 of \(small.count) B", unit: .opsPerSecond,
               subject: ours(small), referenceName: "Foundation JSONDecoder", reference: foundation(small), goal: nil)
}
