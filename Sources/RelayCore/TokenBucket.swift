/// A token bucket: `burst` requests at once, refilled at `ratePerSecond`. Pure; the caller
/// supplies the time.
public struct TokenBucket: Sendable, Equatable {
    public let ratePerSecond: Double
    public let burst: Double
    private var tokens: Double
    private var updatedAt: Timestamp

    public init(ratePerSecond: Double, burst: Double, now: Timestamp) {
        self.ratePerSecond = ratePerSecond
        self.burst = burst
        tokens = burst
        updatedAt = now
    }

    /// Takes one token; nil when allowed, else the seconds until one is available
    /// (for `Retry-After`, rounded up).
    public mutating func take(now: Timestamp) -> Int? {
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
