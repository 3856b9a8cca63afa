import RelayLocks
package import RelayStore

/// Tells whoever listens that the store committed a write (new jobs, acks, outcomes), each
/// listener from the effect it cares about up: the store is opened before its listeners exist,
/// so the listener is set afterwards.
package final class CommitSignal: Sendable {
    /// The closure travels inside a struct: a bare function value kept in the generic
    /// `LockedValue` is re-wrapped in a pair of reabstraction thunks at every `withLock` (the
    /// `inout` writes it back), so each commit made the next call one level deeper — quadratic
    /// time, then a stack overflow.
    private struct Listener: Sendable {
        let minimum: WriteEffect
        let body: @Sendable () -> Void
    }

    private let listeners = LockedValue<[Listener]>([])

    package init() {}

    /// Calls `body` after every commit of at least `minimum`.
    package func listen(from minimum: WriteEffect, _ body: @escaping @Sendable () -> Void) {
        listeners.withLock { $0.append(Listener(minimum: minimum, body: body)) }
    }

    package func fire(_ effect: WriteEffect) {
        for listener in listeners.withLock({ $0 }) where effect >= listener.minimum { listener.body() }
    }
}
