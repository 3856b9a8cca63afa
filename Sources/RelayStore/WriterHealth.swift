/// Whether the store takes writes, as `/readyz` asks it: decided from what the writer last did,
/// so that the answer never waits behind the writes queued before it.
///
/// Pure; times are monotonic milliseconds given by the caller.
package struct WriterHealth: Sendable, Equatable {
    /// What `/readyz` does.
    package enum Readiness: Sendable, Equatable {
        /// Nothing runs or waits: a probe write runs at once and tells.
        case probe
        /// The writer is busy and its last transaction committed: it takes writes.
        case ready
        /// Its last transaction failed, or the one running has run longer than `stallMilliseconds`.
        case unready
    }

    /// A transaction running longer than this means the writer is stuck (a transaction holds at
    /// most `StoreWriter.maxRows` inbox rows: ~0.1 s on SQLite here).
    package static let stallMilliseconds: Int64 = 10_000

    /// When the running transaction began; nil while none runs.
    package private(set) var runningSince: Int64?
    /// Whether the last finished transaction committed (true before the first).
    package private(set) var lastCommitted = true

    package init() {}

    package mutating func began(at now: Int64) { runningSince = now }

    package mutating func finished(committed: Bool) {
        runningSince = nil
        lastCommitted = committed
    }

    /// `idle`: nothing is queued and no transaction runs.
    package func readiness(idle: Bool, now: Int64) -> Readiness {
        if idle { return .probe }
        guard lastCommitted else { return .unready }
        if let runningSince, now - runningSince > Self.stallMilliseconds { return .unready }
        return .ready
    }
}
