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
///
/// It is also the code base's one way to wait for state: `withLock(when:)` sleeps on the lock's
/// condition variable until a predicate over the value holds, and `signal()` / `broadcast()`
/// wake the waiters after a change (work queues, bounded pools, a result handed between threads).
package final class LockedValue<Value> {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Waits until `ready` holds for the value (sleeping with the lock released), then runs
    /// `body` under the lock.
    package func withLock<Result>(
        when ready: (Value) -> Bool, _ body: (inout Value) throws -> Result
    ) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !ready(value) { pthread_cond_wait(condition, mutex) }
        return try body(&value)
    }

    /// Like `withLock(when:_:)`, but gives up waiting after `milliseconds`; `body` then runs on
    /// the value as it is (check the predicate again inside if it matters).
    package func withLock<Result>(
        when ready: (Value) -> Bool, waitingAtMost milliseconds: Int64, _ body: (inout Value) throws -> Result
    ) rethrows -> Result {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let nanoseconds = Int64(now.tv_nsec) + (milliseconds % 1000) * 1_000_000
        var deadline = timespec(
            tv_sec: now.tv_sec + Int(milliseconds / 1000 + nanoseconds / 1_000_000_000),
            tv_nsec: Int(nanoseconds % 1_000_000_000))
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !ready(value) {
            if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { break }
        }
        return try body(&value)
    }

    /// Wakes one waiter of `withLock(when:)` (it re-checks its predicate).
    package func signal() { pthread_cond_signal(condition) }

    /// Wakes every waiter of `withLock(when:)`.
    package func broadcast() { pthread_cond_broadcast(condition) }

    @inlinable
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
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
