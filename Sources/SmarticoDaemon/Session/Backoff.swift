/// Exponential backoff with full jitter: the delay before reconnect attempt `n` (counting
/// from 0) is uniform in `[0, min(maxMs, initialMs × multiplier^n)]`.
///
/// Full jitter spreads the reconnects of many devices after a server outage; the ceiling
/// grows so that a server that keeps refusing is asked less and less often.
public struct Backoff: Sendable, Equatable {
    public var initialMs: Int64
    public var maxMs: Int64
    public var multiplier: Double

    /// `initialMs` ≥ 1, `maxMs` ≥ `initialMs`, `multiplier` ≥ 1 (the configuration checks it;
    /// other values are clamped).
    public init(initialMs: Int64, maxMs: Int64, multiplier: Double) {
        self.initialMs = max(1, initialMs)
        self.maxMs = max(self.initialMs, maxMs)
        self.multiplier = multiplier.isFinite ? max(1, multiplier) : 1
    }

    /// From `session.reconnect`.
    public init(_ reconnect: DaemonConfig.Session.Reconnect) {
        self.init(initialMs: Int64(reconnect.initialMs), maxMs: Int64(reconnect.maxMs), multiplier: reconnect.multiplier)
    }

    /// `min(maxMs, initialMs × multiplier^attempt)`, without overflow for any attempt.
    public func ceilingMs(attempt: Int) -> Int64 {
        var c = Double(initialMs)
        let cap = Double(maxMs)
        if multiplier == 1 || attempt <= 0 { return min(maxMs, initialMs) }
        for _ in 0..<attempt {
            c *= multiplier
            if c >= cap { return maxMs }
        }
        return min(maxMs, Int64(c))
    }

    /// A delay for `attempt`, uniform in `[0, ceilingMs(attempt)]`, drawn from `generator`.
    public func delayMs<G: RandomNumberGenerator>(attempt: Int, using generator: inout G) -> Int64 {
        Int64.random(in: 0...ceilingMs(attempt: attempt), using: &generator)
    }
}

/// A type-erased random source, so the machine's generator can be injected (seeded in tests).
public struct SessionRandom: RandomNumberGenerator, Sendable {
    private var base: any RandomNumberGenerator & Sendable

    public init(_ base: any RandomNumberGenerator & Sendable) { self.base = base }

    /// The system's secure generator.
    public static var system: SessionRandom { SessionRandom(SystemRandomNumberGenerator()) }

    public mutating func next() -> UInt64 { base.next() }
}
