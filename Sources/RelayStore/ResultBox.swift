import RelayLocks

/// Hands one result from a completion callback to a waiting thread.
final class ResultBox<T: Sendable>: Sendable {
    private let value = LockedValue<Result<T, StoreError>?>(nil)

    func set(_ result: Result<T, StoreError>) { value.withLock { $0 = result } }
    func get() -> Result<T, StoreError>? { value.withLock { $0 } }
}
