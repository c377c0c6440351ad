import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A small benchmark harness built for one purpose: print each figure beside a
/// reference measured in the same run, as a ratio. The machines are shared and
/// noisy, so the subject and its reference are measured in alternating rounds
/// and each side keeps its best round (the least disturbed one); a ratio of two
/// such figures taken seconds apart is far steadier than either absolute number.

/// Written by `blackHole`, so the optimiser must compute every value passed to it.
nonisolated(unsafe) var blackHoleSink: UInt8 = 0

@inline(never)
func blackHole<T>(_ value: T) {
    withUnsafeBytes(of: value) { raw in
        if let first = raw.first { blackHoleSink &+= first }
    }
}

func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

struct Options {
    var quick = false
    var filter: String? = nil

    static func parse(_ args: [String]) -> Options {
        var o = Options()
        var it = args.dropFirst().makeIterator()
        while let a = it.next() {
            switch a {
            case "--quick": o.quick = true
            case "--filter": o.filter = it.next()
            case "-h", "--help":
                print("usage: smartico-bench [--quick] [--filter SUBSTRING]")
                exit(0)
            default:
                FileHandle.standardError.write(Data("smartico-bench: unknown argument \(a)\n".utf8))
                exit(2)
            }
        }
        return o
    }
}

/// One timed body: `run(n)` performs `n` operations.
struct Timed {
    let run: (Int) -> Void
}

/// Calibrates a batch size so one batch takes about `target` nanoseconds.
func calibrate(_ t: Timed, targetNanos: UInt64) -> Int {
    var n = 1
    while true {
        let start = monotonicNanos()
        t.run(n)
        let elapsed = monotonicNanos() - start
        if elapsed >= targetNanos / 4 || n >= 1 << 30 {
            let perOp = Double(elapsed) / Double(n)
            return max(1, Int(Double(targetNanos) / max(perOp, 0.01)))
        }
        n *= 4
    }
}

/// Best (lowest) nanoseconds per operation of `subject` and `reference`,
/// measured in alternating batches.
func compare(_ subject: Timed, _ reference: Timed?, rounds: Int, batchNanos: UInt64) -> (Double, Double?) {
    let ns = calibrate(subject, targetNanos: batchNanos)
    let nr = reference.map { calibrate($0, targetNanos: batchNanos) } ?? 0
    var bestS = Double.infinity
    var bestR = Double.infinity
    for _ in 0..<rounds {
        let s0 = monotonicNanos()
        subject.run(ns)
        bestS = min(bestS, Double(monotonicNanos() - s0) / Double(ns))
        if let reference {
            let r0 = monotonicNanos()
            reference.run(nr)
            bestR = min(bestR, Double(monotonicNanos() - r0) / Double(nr))
        }
    }
    return (bestS, reference == nil ? nil : bestR)
}

enum Unit {
    case gigabytesPerSecond(bytesPerOp: Int)
    case megabytesPerSecond(bytesPerOp: Int)
    case framesAndMegabytesPerSecond(bytesPerOp: Int, framesPerOp: Int)
    case opsPerSecond
    case nanoseconds

    func format(nsPerOp: Double) -> String {
        switch self {
        case .gigabytesPerSecond(let b): return fmt(Double(b) / nsPerOp, 2) + " GB/s"
        case .megabytesPerSecond(let b): return fmt(Double(b) / nsPerOp * 1000, 1) + " MB/s"
        case .framesAndMegabytesPerSecond(let b, let f):
            let perSecond = Double(f) / nsPerOp * 1e9
            let frames = perSecond >= 1e6 ? fmt(perSecond / 1e6, 2) + " M" : (perSecond >= 1e3 ? fmt(perSecond / 1e3, 1) + " k" : fmt(perSecond, 0) + " ")
            return frames + " frames/s, " + fmt(Double(b) / nsPerOp * 1000, 0) + " MB/s"
        case .opsPerSecond: return fmt(1e9 / nsPerOp / 1000, 1) + " k/s"
        case .nanoseconds: return fmt(nsPerOp, 1) + " ns"
        }
    }
}

func fmt(_ v: Double, _ digits: Int) -> String {
    String(format: "%.\(digits)f", v)
}

/// A row of the final table.
struct Row {
    var what: String
    var figure: String
    var reference: String
    var ratio: String
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

    var rounds: Int { options.quick ? 5 : 15 }
    var batchNanos: UInt64 { options.quick ? 20_000_000 : 50_000_000 }

    /// Measures `subject` beside `reference`; `higherIsBetter` decides how the
    /// ratio is oriented (throughput: subject/reference speed).
    /// `goal` is the minimum ratio (subject speed / reference speed) or nil.
    /// `fineRounds`: many short alternating batches (10 ms) instead of the default, for figures
    /// whose batches are disturbed often on a loaded machine (best-of needs more draws).
    func add(_ what: String, unit: Unit, subject: Timed, referenceName: String?, reference: Timed?, goal: Double?, goalText: String? = nil,
             fineRounds: Bool = false) {
        guard wants(what) else { return }
        let (s, r) = fineRounds
            ? compare(subject, reference, rounds: options.quick ? 25 : 60, batchNanos: 10_000_000)
            : compare(subject, reference, rounds: rounds, batchNanos: batchNanos)
        var row = Row(what: what, figure: unit.format(nsPerOp: s), reference: "—", ratio: "—", goal: goalText ?? "—", met: "")
        if let r, let referenceName {
            row.reference = "\(referenceName): \(unit.format(nsPerOp: r))"
            let ratio = r / s  // speed of subject relative to reference
            row.ratio = fmt(ratio, 2) + "×"
            if let goal {
                row.goal = goalText ?? "≥ \(fmt(goal, 2))×"
                row.met = ratio >= goal ? "yes" : "NO"
            }
        }
        rows.append(row)
        print("  \(what): \(row.figure)  [\(row.reference)]  \(row.ratio)", terminator: "\n")
    }

    func addFigure(_ what: String, figure: String, reference: String = "—", ratio: String = "—", goal: String = "—", met: String = "") {
        guard wants(what) else { return }
        rows.append(Row(what: what, figure: figure, reference: reference, ratio: ratio, goal: goal, met: met))
        print("  \(what): \(figure)")
    }

    func printTable() {
        print("")
        print("| what | figure | reference (same run) | ratio | goal | met |")
        print("|---|---|---|---|---|---|")
        for r in rows {
            print("| \(r.what) | \(r.figure) | \(r.reference) | \(r.ratio) | \(r.goal) | \(r.met) |")
        }
    }
}
