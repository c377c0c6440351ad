import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The bench's options, its table, and small helpers. Every row prints its figure, the reference
/// measured in the same run where there is one, its goal and whether the goal was met.

func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

struct Options {
    var quick = false
    var filter: String? = nil

    static let usage = """
        usage: smartico-bench [--quick] [--filter SUBSTRING]
          --quick     a short smoke run (fewer events, shorter windows; the figures are not the goal figures)
          --filter    run only the rows whose name contains SUBSTRING: idle, burst, replay, latency, throughput, start
        """

    static func parse(_ args: [String]) -> Options {
        var o = Options()
        var it = args.dropFirst().makeIterator()
        while let a = it.next() {
            switch a {
            case "--quick": o.quick = true
            case "--filter":
                guard let f = it.next() else { fail("--filter needs a value: \(usage)") }
                o.filter = f
            case "-h", "--help":
                print(usage)
                exit(0)
            default:
                fail("unknown argument \(a)\n\(usage)")
            }
        }
        return o
    }

    private static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("smartico-bench: \(message)\n".utf8))
        exit(2)
    }
}

func fmt(_ v: Double, _ digits: Int) -> String {
    String(format: "%.\(digits)f", v)
}

/// A count with thousands separators: 12,345.
func thousands(_ v: Double) -> String {
    guard v.isFinite else { return "—" }
    let digits = String(Int(v.rounded()))
    var out = ""
    for (i, c) in digits.reversed().enumerated() {
        if i > 0, i % 3 == 0, c != "-" { out.append(",") }
        out.append(c)
    }
    return String(out.reversed())
}

func mb(_ kb: Int) -> String { fmt(Double(kb) / 1024, 1) + " MB" }

/// A row of the final table.
struct Row {
    var what: String
    var figure: String
    var reference: String
    var goal: String
    var met: String
}

final class Report {
    private(set) var rows: [Row] = []
    let options: Options

    init(options: Options) { self.options = options }

    func wants(_ name: String) -> Bool {
        guard let f = options.filter else { return true }
        return name.lowercased().contains(f.lowercased())
    }

    /// `met`: nil when the row has no goal.
    func add(_ what: String, figure: String, reference: String = "—", goal: String = "—", met: Bool?) {
        let row = Row(what: what, figure: figure, reference: reference, goal: goal, met: met.map { $0 ? "yes" : "NO" } ?? "")
        rows.append(row)
        print("  \(what): \(figure)" + (reference == "—" ? "" : "  [\(reference)]") + (met == nil ? "" : "  goal \(goal): \(row.met)"))
    }

    var failures: Int { rows.filter { $0.met == "NO" }.count }

    func printTable() {
        print("")
        print("| what | figure | reference (same run) | goal | met |")
        print("|---|---|---|---|---|")
        for r in rows {
            print("| \(r.what) | \(r.figure) | \(r.reference) | \(r.goal) | \(r.met) |")
        }
    }
}
