package import RelayCore
import RelayLocks

/// Lets a flood of similar log lines (one per aborted request, which anyone can cause) through at
/// a bounded rate, and says how many were dropped in the next line that passes.
package final class LogThrottle: Sendable {
    private struct State {
        var bucket: TokenBucket
        var dropped = 0
    }

    private let state: LockedValue<State>

    package init(linesPerSecond: Double, burst: Double, now: Timestamp) {
        state = LockedValue(State(bucket: TokenBucket(ratePerSecond: linesPerSecond, burst: burst, now: now)))
    }

    /// Nil when the line must be dropped; otherwise how many were dropped since the last one.
    package func admit(now: Timestamp) -> Int? {
        state.withLock { state in
            guard state.bucket.take(now: now) == nil else {
                state.dropped += 1
                return nil
            }
            defer { state.dropped = 0 }
            return state.dropped
        }
    }
}
