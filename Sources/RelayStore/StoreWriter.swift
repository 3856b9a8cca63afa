import Dispatch
import Foundation
import RelayLocks

/// The single writer of the database, with group commit.
///
/// Requests from every HTTP thread queue their writes here; one thread takes all queued writes,
/// runs each inside its own savepoint of one transaction, commits once (`synchronous=FULL`,
/// so one fsync), and only then completes them. Many concurrent requests therefore share one
/// fsync, which is where durable throughput comes from. A write that fails rolls back its own
/// savepoint only; a failed COMMIT fails the whole batch, and nothing of it was stored.
///
/// A caller that finds the writer idle may commit its own write on its thread (`leadIfIdle`):
/// at low load a request then never changes threads; under load nothing changes.
///
/// `@unchecked Sendable`: the connection is touched only by whoever holds `committing` (the
/// writer thread or one leading caller), set and cleared under the `LockedValue` of the queue.
package final class StoreWriter: @unchecked Sendable {
    private struct Operation {
        /// Runs inside a savepoint of the current transaction; returns what completes it once the
        /// transaction's fate is known (it carries the write's value, if any).
        let run: @Sendable (SQLiteConnection) throws -> Completion
        /// Completes it when the write itself (or the transaction's start) failed.
        let fail: @Sendable (StoreError) -> Void
        /// Housekeeping (see `CommittedBatch.maintenanceOnly`).
        let maintenance: Bool
    }

    private typealias Completion = @Sendable (Result<Void, StoreError>) -> Void

    /// What `submit` does with a write.
    private enum Admission { case closed, queued, leading }

    private let connection: SQLiteConnection
    private struct State {
        var queue: [Operation] = []
        /// A transaction is running (on the writer thread, or on a caller leading its own write).
        var committing = false
        var stopping = false
        var stopped = false
    }

    private let state = LockedValue(State())
    /// Called with each committed batch's size (metrics).
    private let onBatch: @Sendable (CommittedBatch) -> Void
    /// Completions (building answers, resuming connections) run here, so that the writer starts
    /// the next transaction at once instead of spending its time on them.
    private let completions = DispatchQueue(label: "pushrelay-store-completions")
    /// Marks code running as a completion: a write submitted from there never leads (its
    /// `completions.sync` would wait for the very block that calls it).
    private static let inCompletion = DispatchSpecificKey<Bool>()

    /// The most writes one transaction takes; bounds the latency of the first of them.
    static let maxBatch = 1024

    init(connection: SQLiteConnection, onBatch: @escaping @Sendable (CommittedBatch) -> Void) {
        self.connection = connection
        self.onBatch = onBatch
        completions.setSpecific(key: Self.inCompletion, value: true)
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "pushrelay-writer"
        thread.start()
    }

    /// Queues `work`; `completion` runs on the completion queue after the commit (or the failure).
    /// A `maintenance` write does not count as a change for the commit's listeners.
    ///
    /// With `leadIfIdle`, a caller that finds the writer idle and nothing queued commits its
    /// write itself, on its own thread, and runs the completion there before returning: a lone
    /// write then costs no thread hand-off at all (the writer's wake-up, the completion queue's,
    /// and for a request its connection's suspend and resume). Under load the writer is busy and
    /// the write joins the next group as usual. Only for callers that hold no lock a completion
    /// might need (the HTTP handlers: a completion runs live delivery); a write submitted by a
    /// completion (the Matrix gateway stores an event's messages one after the other) is queued.
    func submit<T: Sendable>(
        maintenance: Bool = false, leadIfIdle: Bool = false,
        _ work: @escaping @Sendable (SQLiteConnection) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        let operation = Operation(
            run: { connection in
                let value = try work(connection)
                return { outcome in completion(outcome.map { value }) }
            },
            fail: { completion(.failure($0)) }, maintenance: maintenance)
        let mayLead = leadIfIdle && DispatchQueue.getSpecific(key: Self.inCompletion) == nil
        let admission = state.withLock { state -> Admission in
            guard !state.stopping else { return .closed }
            if mayLead, !state.committing, state.queue.isEmpty {
                state.committing = true
                return .leading
            }
            state.queue.append(operation)
            return .queued
        }
        switch admission {
        case .closed:
            completion(.failure(.closed))
        case .queued:
            state.signal()
        case .leading:
            // Completions keep commit order: this one runs (after any still queued) before the
            // writer may start the next transaction.
            completions.sync(execute: commit([operation]))
            // Wake the writer only if writes queued up meanwhile (or it is stopping): waking it for
            // nothing would put a futex call on every lone request's path.
            let waiting = state.withLock { state -> Bool in
                state.committing = false
                return !state.queue.isEmpty || state.stopping
            }
            if waiting { state.broadcast() }
        }
    }

    /// Finishes every queued write, then stops the thread. Later submissions fail with `.closed`.
    func stop() {
        state.withLock { $0.stopping = true }
        state.broadcast()
        state.withLock(when: { $0.stopped }) { _ in }
        completions.sync {}  // every completion has run
    }

    private func run() {
        while true {
            let batch = state.withLock(when: { (!$0.queue.isEmpty || $0.stopping) && !$0.committing }) {
                state -> [Operation] in
                guard !state.queue.isEmpty else {
                    state.stopped = true
                    return []
                }
                state.committing = true
                let take = min(state.queue.count, Self.maxBatch)
                defer { state.queue.removeFirst(take) }
                return Array(state.queue.prefix(take))
            }
            guard !batch.isEmpty else {
                state.broadcast()  // `stop()` waits for `stopped`
                return
            }
            completions.async(execute: commit(batch))
            state.withLock { $0.committing = false }
        }
    }

    /// Runs one transaction; returns what completes its writes (in order, after earlier ones).
    private func commit(_ batch: [Operation]) -> @Sendable () -> Void {
        do {
            try connection.run("BEGIN IMMEDIATE")
        } catch {
            let failure = Self.storeError(error)
            return { for operation in batch { operation.fail(failure) } }
        }
        var succeeded: [Completion] = []
        var failed: [(@Sendable (StoreError) -> Void, StoreError)] = []
        succeeded.reserveCapacity(batch.count)
        for operation in batch {
            do {
                try connection.run("SAVEPOINT op")
                let completion = try operation.run(connection)
                try connection.run("RELEASE op")
                succeeded.append(completion)
            } catch {
                _ = try? connection.run("ROLLBACK TO op")
                _ = try? connection.run("RELEASE op")
                failed.append((operation.fail, Self.storeError(error)))
            }
        }
        let outcome: Result<Void, StoreError>
        do {
            try connection.run("COMMIT")
            onBatch(CommittedBatch(writes: batch.count, maintenanceOnly: batch.allSatisfy(\.maintenance)))
            outcome = .success(())
        } catch {
            _ = try? connection.run("ROLLBACK")
            outcome = .failure(Self.storeError(error))
        }
        return { [succeeded, failed] in
            for completion in succeeded { completion(outcome) }
            for (fail, error) in failed { fail(error) }
        }
    }

    private static func storeError(_ error: any Error) -> StoreError {
        if let error = error as? SQLiteError { return .unavailable(error) }
        if let error = error as? StoreError { return error }
        return .unavailable(SQLiteError(code: 1, message: "\(error)", sql: nil))
    }
}
