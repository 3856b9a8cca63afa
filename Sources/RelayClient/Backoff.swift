/// Reconnect delays: exponential with full jitter — a uniformly random delay between 0 and
/// `min(cap, base · 2^(attempt−1))` — so that clients cut off together do not return together.
public struct Backoff: Sendable, Equatable {
    /// The first attempt's ceiling, in seconds.
    public var base: Double
    /// The largest ceiling, in seconds, however many attempts failed.
    public var cap: Double

    /// - Parameters:
    ///   - base: the first attempt's ceiling (seconds).
    ///   - cap: the largest ceiling (seconds).
    public init(base: Double = 1, cap: Double = 30) {
        self.base = base
        self.cap = cap
    }

    /// The largest delay for the `attempt`-th consecutive failure (1-based), in seconds.
    public func ceiling(attempt: Int) -> Double {
        min(cap, base * Double(1 << min(max(attempt - 1, 0), 30)))
    }

    /// The delay for `attempt`, given `random` in 0...1.
    public func delay(attempt: Int, random: Double) -> Double {
        ceiling(attempt: attempt) * min(max(random, 0), 1)
    }
}
