package import RelayCore
import RelayLocks

/// `MemoryOutbox` behind the scheduler's store protocol, under one lock: the push scheduler
/// runs on it as on the SQL store (its writes complete at once, nothing is durable). Events are
/// not kept here: the event outbox stays the SQL store's.
package final class MemoryOutboxStore: PushOutbox {
    private let outbox: LockedValue<MemoryOutbox>
    private let attempts = LockedValue<[PushAttempt]>([])

    package init(_ outbox: MemoryOutbox = MemoryOutbox()) {
        self.outbox = LockedValue(outbox)
    }

    /// Reads or changes the outbox (a test's commits, acks and registrations).
    @discardableResult
    package func withOutbox<T>(_ body: (inout MemoryOutbox) -> T) -> T { outbox.withLock(body) }

    package var delivers: Bool { true }

    package func pushBatches(
        now: Timestamp, limit: Int, skipping: [String: [Int64]], choosing admission: inout HostAdmission
    ) throws(StoreError) -> [PushBatch] {
        outbox.withLock {
            $0.pushBatches(now: now.milliseconds, limit: limit, skipping: skipping, choosing: &admission)
        }
    }

    package func finish(
        _ outcomes: [(batch: PushBatch, result: DeliveryPolicy.Verdict)], now: Timestamp,
        completion: @escaping @Sendable (Result<[String: GoneDecision], StoreError>) -> Void
    ) {
        completion(.success(outbox.withLock { $0.finish(outcomes, now: now.milliseconds) }))
    }

    /// The attempts traced so far (a test reads them).
    package var traced: [PushAttempt] { attempts.withLock { $0 } }

    package func trace(_ attempts: [PushAttempt], now: Timestamp) {
        self.attempts.withLock { $0 += attempts }
    }

    package func apply(_ effect: PushEffect, now: Timestamp) {
        outbox.withLock { $0.apply(effect, now: now.milliseconds) }
    }

    package func nextDueAt(after time: Timestamp?) throws(StoreError) -> Timestamp? {
        outbox.withLock { $0.nextDueAt(after: time?.milliseconds) }.map { Timestamp(milliseconds: $0) }
    }

    package func dueEvents(now: Timestamp, limit: Int, skipping: Set<Int64>) throws(StoreError) -> [EventJob] { [] }

    package func finishEvent(
        _ job: EventJob, result: DeliveryPolicy.Verdict, now: Timestamp,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        completion(.success(()))
    }
}
