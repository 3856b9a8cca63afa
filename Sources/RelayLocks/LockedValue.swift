#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a `pthread_mutex_t`, used like `Synchronization.Mutex` (`withLock { }`).
///
/// Why not `Mutex`: on Linux it locks with futexes the thread sanitizer cannot see, so every
/// access under it was reported as a data race; a pthread mutex is understood by TSan, which
/// keeps `swift test --sanitize=thread` meaningful.
///
/// Sendable only when its value is (like swift-nio's `NIOLockedValueBox`): the lock makes the
/// access exclusive, not the value safe to share, so non-Sendable state cannot cross threads
/// through it unchecked.
public final class LockedValue<Value> {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inlinable
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body(&valueStorage)
    }

    @usableFromInline var valueStorage: Value {
        get { value }
        _modify { yield &value }
    }

    @usableFromInline func lock() { pthread_mutex_lock(mutex) }
    @usableFromInline func unlock() { pthread_mutex_unlock(mutex) }
}

/// `@unchecked`: `value` is only touched while `mutex` is held.
extension LockedValue: @unchecked Sendable where Value: Sendable {}
