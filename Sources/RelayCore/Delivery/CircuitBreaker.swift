/// Per-host circuit breaker for webhook deliveries (docs/ARCHITECTURE.md §2): after `threshold` failures in a
/// row a host is paused — its jobs wait instead of tying up delivery threads — then probed with
/// one request after a delay that grows with each reopening (capped).
package struct CircuitBreaker: Sendable, Equatable {
    package enum State: Sendable, Equatable {
        case closed(failures: Int)
        /// Paused until `until`; `openings` counts consecutive openings (for the probe backoff).
        case open(until: Timestamp, openings: Int)
        /// One probe is in flight; its outcome closes or reopens the breaker.
        case halfOpen(openings: Int)
    }

    package private(set) var state: State = .closed(failures: 0)
    package var threshold: Int
    package var retry: RetryPolicy

    package init(
        threshold: Int = 5, retry: RetryPolicy = RetryPolicy(baseMilliseconds: 1000, capMilliseconds: 60_000)
    ) {
        self.threshold = threshold
        self.retry = retry
    }

    package var isOpen: Bool {
        if case .closed = state { return false }
        return true
    }

    /// Until when the host is paused, or nil when a delivery could start now (as the probe, if
    /// the pause is over). Changes nothing: `allows(at:)` takes the go-ahead.
    package func pausedUntil(at now: Timestamp) -> Int64? {
        switch state {
        case .closed: return nil
        // A probe is in flight: its outcome decides; look again a second later.
        case .halfOpen: return now.milliseconds + 1000
        case .open(let until, _): return now >= until ? nil : until.milliseconds
        }
    }

    /// Whether a delivery may start now; moves an expired pause to half-open (the probe).
    package mutating func allows(at now: Timestamp) -> Bool {
        switch state {
        case .closed: return true
        case .halfOpen: return false
        case .open(let until, let openings):
            guard now >= until else { return false }
            state = .halfOpen(openings: openings)
            return true
        }
    }

    package mutating func recordSuccess() { state = .closed(failures: 0) }

    /// The probe said nothing about the host (its job had expired, its URL was refused, the host
    /// answered a 4xx): pause again as long as before and probe again then, instead of staying
    /// half-open with no probe in flight.
    package mutating func recordInconclusive(at now: Timestamp) {
        guard case .halfOpen(let openings) = state else { return }
        open(openings: openings, now)
    }

    package mutating func recordFailure(at now: Timestamp) {
        switch state {
        case .closed(let failures):
            if failures + 1 >= threshold { open(openings: 1, now) } else { state = .closed(failures: failures + 1) }
        case .halfOpen(let openings): open(openings: openings + 1, now)
        case .open: break
        }
    }

    private mutating func open(openings: Int, _ now: Timestamp) {
        state = .open(
            until: Timestamp(milliseconds: now.milliseconds + retry.ceiling(afterAttempt: openings)), openings: openings
        )
    }
}
