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
/// `@unchecked Sendable`: the connection is touched only by the writer thread; the queue is in a
/// `LockedValue`.
package final class StoreWriter: @unchecked Sendable {
    private struct Operation {
        /// Runs on the writer thread inside a savepoint; returns what completes it once the
        /// transaction's fate is known (it carries the write's value, if any).
        let run: @Sendable (SQLiteConnection) throws -> Completion
        /// Completes it when the write itself (or the transaction's start) failed.
        let fail: @Sendable (StoreError) -> Void
        /// Housekeeping (see `CommittedBatch.maintenanceOnly`).
        let maintenance: Bool
    }

    private typealias Completion = @Sendable (Result<Void, StoreError>) -> Void

    private let connection: SQLiteConnection
    private struct State {
        var queue: [Operation] = []
        var stopping = false
        var stopped = false
    }

    private let state = LockedValue(State())
    /// Called with each committed batch's size (metrics).
    private let onBatch: @Sendable (CommittedBatch) -> Void
    /// Completions (building answers, resuming connections) run here, so that the writer starts
    /// the next transaction at once instead of spending its time on them.
    private let completions = DispatchQueue(label: "pushrelay-store-completions")

    /// The most writes one transaction takes; bounds the latency of the first of them.
    static let maxBatch = 1024

    init(connection: SQLiteConnection, onBatch: @escaping @Sendable (CommittedBatch) -> Void) {
        self.connection = connection
        self.onBatch = onBatch
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "pushrelay-writer"
        thread.start()
    }

    /// Queues `work`; `completion` runs on the completion queue after the commit (or the failure).
    /// A `maintenance` write does not count as a change for the commit's listeners.
    func submit<T: Sendable>(
        maintenance: Bool = false, _ work: @escaping @Sendable (SQLiteConnection) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        let operation = Operation(
            run: { connection in
                let value = try work(connection)
                return { outcome in completion(outcome.map { value }) }
            },
            fail: { completion(.failure($0)) }, maintenance: maintenance)
        let queued = state.withLock { state -> Bool in
            guard !state.stopping else { return false }
            state.queue.append(operation)
            return true
        }
        guard queued else {
            completion(.failure(.closed))
            return
        }
        state.signal()
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
            let batch = state.withLock(when: { !$0.queue.isEmpty || $0.stopping }) { state -> [Operation] in
                guard !state.queue.isEmpty else {
                    state.stopped = true
                    return []
                }
                let take = min(state.queue.count, Self.maxBatch)
                defer { state.queue.removeFirst(take) }
                return Array(state.queue.prefix(take))
            }
            guard !batch.isEmpty else {
                state.broadcast()  // `stop()` waits for `stopped`
                return
            }
            commit(batch)
        }
    }

    private func commit(_ batch: [Operation]) {
        do {
            try connection.run("BEGIN IMMEDIATE")
        } catch {
            let failure = Self.storeError(error)
            completions.async { for operation in batch { operation.fail(failure) } }
            return
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
        completions.async { [succeeded, failed] in
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
