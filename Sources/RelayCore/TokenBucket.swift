/// A token bucket: `burst` requests at once, refilled at `ratePerSecond`. Pure; the caller
/// supplies the time.
package struct TokenBucket: Sendable, Equatable {
    package let ratePerSecond: Double
    package let burst: Double
    private var tokens: Double
    private var updatedAt: Timestamp

    package init(ratePerSecond: Double, burst: Double, now: Timestamp) {
        self.ratePerSecond = ratePerSecond
        self.burst = burst
        tokens = burst
        updatedAt = now
    }

    /// Takes one token; nil when allowed, else the seconds until one is available
    /// (for `Retry-After`, rounded up).
    package mutating func take(now: Timestamp) -> Int? {
        let elapsed = Double(max(0, now.milliseconds - updatedAt.milliseconds)) / 1000
        tokens = min(burst, tokens + elapsed * ratePerSecond)
        updatedAt = now
        if tokens >= 1 {
            tokens -= 1
            return nil
        }
        return max(1, Int(((1 - tokens) / ratePerSecond).rounded(.up)))
    }
}
