import Foundation

/// The sanitizer runtime's settings, handed on from the test process to the package's own
/// executables it spawns.
///
/// Most tests start `smarticod`, `smartico-sim` or `smarticoctl` with an exact environment
/// (nothing inherited), so in a sanitized build (`scripts/sanitize.sh`) the children would run
/// with the runtime's defaults: their reports would go to a stderr that many tests discard or
/// delete with their temporary directory. With these variables handed on, every child writes its
/// reports where the script looks (`log_path=`), and the script fails on any of them. Outside a
/// sanitized run none of them is set and this adds nothing.
public enum SanitizerEnvironment {
    /// The variables handed on: the sanitizer runtimes' options, and `SWIFT_BACKTRACE` (the
    /// sanitizer script turns Swift's backtracer off so that it does not race the sanitizer's
    /// own report on a crash).
    public static let names = [
        "ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", "UBSAN_OPTIONS", "ASAN_SYMBOLIZER_PATH",
        "TSAN_SYMBOLIZER_PATH", "SMARTICO_SANITIZER_RUN", "SWIFT_BACKTRACE",
    ]

    /// The handed-on variables set in this (the test) process, only when it runs under
    /// `scripts/sanitize.sh` (which sets `SMARTICO_SANITIZER_RUN`); empty otherwise, so an
    /// ordinary run's children keep exactly the environment their test gives them.
    public static let inherited: [String: String] = {
        let all = ProcessInfo.processInfo.environment
        guard all["SMARTICO_SANITIZER_RUN"] != nil else { return [:] }
        return all.filter { names.contains($0.key) }
    }()

    /// `environment` with the handed-on variables added (the test's own values win).
    public static func adding(to environment: [String: String]) -> [String: String] {
        inherited.merging(environment) { _, own in own }
    }

    /// Whether the tests' bounds on a process's resident memory (`VmRSS`, `RssAnon`) apply: not in
    /// a sanitized run. AddressSanitizer replaces malloc with an allocator that keeps freed memory
    /// in a quarantine (256 MiB by default), pads every block with redzones and never gives pages
    /// back to the kernel; ThreadSanitizer maps shadow memory several times the heap. What those
    /// bounds measure (glibc's heap, `malloc_trim`) is not there to measure. The rest of each such
    /// test still runs and is checked. Set by `scripts/sanitize.sh` only (`SMARTICO_SANITIZER_RUN`).
    public static let memoryBoundsApply: Bool = ProcessInfo.processInfo.environment["SMARTICO_SANITIZER_RUN"] == nil

    /// Whether the tests' bounds on how the product spreads work over time apply (the reconnect
    /// storm's histogram): not in a sanitized run, where instrumented code runs several times slower
    /// and 200 sessions in one instrumented process bunch their reconnects (the first
    /// ThreadSanitizer run: 31 in one 100 ms bucket against a bound of 25). What they measure is the
    /// product's timing, which a sanitizer changes; every count and order is still checked.
    public static let timingBoundsApply: Bool = ProcessInfo.processInfo.environment["SMARTICO_SANITIZER_RUN"] == nil

    /// Prints that a memory bound was not checked (a sanitized run), with what was measured.
    public static func memoryBoundNotChecked(_ what: String) {
        let kind = ProcessInfo.processInfo.environment["SMARTICO_SANITIZER_RUN"] ?? "?"
        print("memory bound not checked under the \(kind) sanitizer: \(what)")
    }

    /// Threads a sanitizer's runtime adds to every process it runs in, named like the process:
    /// ThreadSanitizer's background thread (seen as a third `smarticod` thread in the first TSan
    /// run); none otherwise.
    public static let runtimeThreads: Int = ProcessInfo.processInfo.environment["SMARTICO_SANITIZER_RUN"] == "thread" ? 1 : 0

    /// How many times longer the few waits that measure throughput may take in a sanitized run:
    /// `SMARTICO_SANITIZER_TIME_SCALE`, set by `scripts/sanitize.sh` only (1 otherwise, and never
    /// below 1). Used only where a sanitized run was measured to need it (docs/reliability.md,
    /// "Sanitizers"); every other wait keeps its bound.
    public static let timeScale: Double = {
        guard let text = ProcessInfo.processInfo.environment["SMARTICO_SANITIZER_TIME_SCALE"],
              let value = Double(text), value > 1 else { return 1 }
        return value
    }()

    /// `duration` × ``timeScale``.
    public static func scaled(_ duration: Duration) -> Duration { duration * timeScale }

    /// `systemd-socket-activate` gives the program it starts only PATH, TERM, USER, HOME and
    /// the `LISTEN_*` variables: the `-E NAME` arguments that copy the handed-on ones too.
    public static var socketActivateArguments: [String] {
        inherited.keys.sorted().flatMap { ["-E", $0] }
    }
}
