/// The relay's time, injected as one value: the wall clock for what is stored, sent and compared
/// with a token's expiry, the monotonic one for durations and retry deadlines (which must not
/// jump when the wall clock is set). The in-process tests step both.
package struct RelayClock: Sendable {
    package var now: @Sendable () -> Timestamp
    /// Milliseconds from an arbitrary origin (`MonotonicClock` on the system clock).
    package var uptimeMs: @Sendable () -> Int64

    package init(now: @escaping @Sendable () -> Timestamp, uptimeMs: @escaping @Sendable () -> Int64) {
        self.now = now
        self.uptimeMs = uptimeMs
    }
}
