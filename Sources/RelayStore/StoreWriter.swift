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
        /// Runs on the writer thread inside a savepoint.
        let run: @Sendable (SQLiteConnection) throws -> Void
        /// Runs on the completion queue once the transaction's fate (or the write's own failure) is known.
        let finish: @Sendable (Result<Void, StoreError>) -> Void
    }

    private let connection: SQLiteConnection
    private struct State {
        var queue: [Operation] = []
        var stopping = false
        var stopped = false
    }

    private let state = LockedValue(State())
    /// Called with each committed batch's size (metrics).
    private let onBatch: @Sendable (Int) -> Void
    /// Completions (building answers, resuming connections) run here, so that the writer starts
    /// the next transaction at once instead of spending its time on them.
    private let completions = DispatchQueue(label: "pushrelay-store-completions")

    /// The most writes one transaction takes; bounds the latency of the first of them.
    static let maxBatch = 1024

    init(connection: SQLiteConnection, onBatch: @escaping @Sendable (Int) -> Void) {
        self.connection = connection
        self.onBatch = onBatch
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "pushrelay-writer"
        thread.start()
    }

    /// Queues `work`; `completion` runs on the completion queue after the commit (or the failure).
    func submit<T: Sendable>(
        _ work: @escaping @Sendable (SQLiteConnection) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        // Carries the value from `run` (writer thread) to `finish` (completion queue, later).
        let box = LockedValue<T?>(nil)
        let operation = Operation(
            run: { connection in
                let value = try work(connection)
                box.withLock { $0 = value }
            },
            finish: { outcome in
                switch (outcome, box.withLock { $0 }) {
                case (.success, let value?): completion(.success(value))
                case (.failure(let error), _): completion(.failure(error))
                case (.success, nil): completion(.failure(.closed))
                }
            })
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
            completions.async { for operation in batch { operation.finish(.failure(failure)) } }
            return
        }
        var succeeded: [Operation] = []
        var failed: [(Operation, StoreError)] = []
        succeeded.reserveCapacity(batch.count)
        for operation in batch {
            do {
                try connection.run("SAVEPOINT op")
                try operation.run(connection)
                try connection.run("RELEASE op")
                succeeded.append(operation)
            } catch {
                _ = try? connection.run("ROLLBACK TO op")
                _ = try? connection.run("RELEASE op")
                failed.append((operation, Self.storeError(error)))
            }
        }
        let outcome: Result<Void, StoreError>
        do {
            try connection.run("COMMIT")
            onBatch(batch.count)
            outcome = .success(())
        } catch {
            _ = try? connection.run("ROLLBACK")
            outcome = .failure(Self.storeError(error))
        }
        completions.async { [succeeded, failed] in
            for operation in succeeded { operation.finish(outcome) }
            for (operation, error) in failed { operation.finish(.failure(error)) }
        }
    }

    private static func storeError(_ error: any Error) -> StoreError {
        if let error = error as? SQLiteError { return .unavailable(error) }
        if let error = error as? StoreError { return error }
        return .unavailable(SQLiteError(code: 1, message: "\(error)", sql: nil))
    }
}
