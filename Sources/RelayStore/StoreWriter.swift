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
/// `@unchecked Sendable`: the connection is touched only by the writer thread; the queue is
/// guarded by `condition`.
package final class StoreWriter: @unchecked Sendable {
    private struct Operation {
        /// Runs on the writer thread inside a savepoint.
        let run: @Sendable (SQLiteConnection) throws -> Void
        /// Runs on the completion queue once the transaction's fate (or the write's own failure) is known.
        let finish: @Sendable (Result<Void, StoreError>) -> Void
    }

    private let connection: SQLiteConnection
    private let condition = NSCondition()
    private var queue: [Operation] = []
    private var stopping = false
    private var stopped = false
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
        condition.lock()
        guard !stopping else {
            condition.unlock()
            completion(.failure(.closed))
            return
        }
        queue.append(operation)
        condition.signal()
        condition.unlock()
    }

    /// Finishes every queued write, then stops the thread. Later submissions fail with `.closed`.
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        while !stopped { condition.wait() }
        condition.unlock()
        completions.sync {}  // every completion has run
    }

    private func run() {
        while true {
            condition.lock()
            while queue.isEmpty && !stopping { condition.wait() }
            if queue.isEmpty {
                stopped = true
                condition.broadcast()
                condition.unlock()
                return
            }
            let take = min(queue.count, Self.maxBatch)
            let batch = Array(queue.prefix(take))
            queue.removeFirst(take)
            condition.unlock()
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
