package import RelayCore
import RelayLocks

/// Per-caller request budgets (token buckets): one per server key and one per client user, so
/// that one noisy caller gets 429s while everyone else is served as usual.
package final class RateLimiter: Sendable {
    package struct Limits: Sendable {
        package var ratePerSecond: Double
        package var burst: Double

        package init(ratePerSecond: Double, burst: Double) {
            self.ratePerSecond = ratePerSecond
            self.burst = burst
        }
    }

    private let server: Limits
    private let client: Limits
    private let buckets = LockedValue<[String: TokenBucket]>([:])
    /// Buckets of callers not seen for this long are forgotten (they would be full anyway).
    private static let idleMs: Int64 = 60_000

    package init(server: Limits, client: Limits) {
        self.server = server
        self.client = client
    }

    /// Nil when `key` may proceed, else the `Retry-After` seconds.
    package func check(_ key: String, isServer: Bool, now: Timestamp) -> Int? {
        let limits = isServer ? server : client
        guard limits.ratePerSecond > 0 else { return nil }
        return buckets.withLock { buckets in
            if buckets.count > 100_000 { buckets.removeAll() }  // bound memory under a flood of callers
            var bucket = buckets[key] ?? TokenBucket(ratePerSecond: limits.ratePerSecond, burst: limits.burst, now: now)
            let wait = bucket.take(now: now)
            buckets[key] = bucket
            return wait
        }
    }
}
