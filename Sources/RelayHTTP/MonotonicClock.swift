import Glibc

/// Milliseconds of `CLOCK_MONOTONIC`: for deadlines and timers, which must not jump with the
/// wall clock.
package enum MonotonicClock {
    package static func milliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}
