import RelayLocks

/// Tells whoever listens that the store committed a write (new jobs, acks, outcomes): the store
/// is opened before its listeners exist, so the listener is set afterwards.
final class CommitSignal: Sendable {
    private let listener = LockedValue<(@Sendable () -> Void)?>(nil)

    func listen(_ body: @escaping @Sendable () -> Void) { listener.withLock { $0 = body } }

    func fire() { listener.withLock { $0 }?() }
}
