/// Milliseconds on a monotonic clock, from an arbitrary origin fixed at first use: for deadlines
/// and timers, which must not jump with the wall clock (`Timestamp` is wall-clock time).
package enum MonotonicClock {
    private static let origin = ContinuousClock.now

    package static func milliseconds() -> Int64 {
        let elapsed = origin.duration(to: .now).components
        return elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000
    }
}
