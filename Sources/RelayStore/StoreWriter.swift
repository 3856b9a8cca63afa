import Dispatch
import Foundation
import RelayLocks

/// The single writer of the database, with group commit.
///
/// Requests from every HTTP thread queue their writes here; one thread takes all queued writes
/// (a group), runs each inside its own savepoint, makes the group durable with one fsync, and only
/// then completes them. Many concurrent requests therefore share one fsync, which is where
/// durable throughput comes from. On PostgreSQL a group is a transaction, committed once; on
/// SQLite it is appended to the message log and synced there, the database committing many
/// groups later (`StatementJournal`, `commitJournaled`). A write that fails rolls back its own
/// savepoint only; a group that cannot be made durable fails whole, and nothing of it counts.
///
/// A caller that finds the writer idle may commit its own write on its thread (`leadIfIdle`):
/// at low load a request then never changes threads; under load nothing changes.
///
/// One group holds at most `maxRows` inbox rows (a write says how many it makes), so that
/// its savepoints, its sub-journal and the wait of whoever queued behind it stay bounded however
/// large a request is. The messages of a batch are queued as bulk writes, one per message, in a
/// lane of their own: each transaction takes the ordinary writes first and then bulk writes up to
/// the bound (at least one), so a single post queued behind a large batch waits for one
/// transaction, not for the whole batch, and batches still progress under any load of singles.
///
/// `@unchecked Sendable`: the connection is touched only by whoever holds `committing` (the
/// writer thread or one leading caller), set and cleared under the `LockedValue` of the queue.
package final class StoreWriter: @unchecked Sendable {
    struct Operation {
        /// Runs inside a savepoint of the current transaction; returns what completes it once the
        /// transaction's fate is known (it carries the write's value, if any).
        let run: @Sendable (SQLWrite) throws(DatabaseError) -> Ran
        /// Completes it when the write itself (or the transaction's start) failed.
        let fail: @Sendable (StoreError) -> Void
        /// Keys (user ids) whose rows this write locks (see `lockKeys`).
        let keys: [String]
        /// Inbox rows it makes (1 for a write that makes none): what `maxRows` counts.
        let rows: Int
        /// A message of a batch (the bulk lane).
        let bulk: Bool
    }

    typealias Completion = @Sendable (Result<Void, StoreError>) -> Void

    /// A write that ran: what completes it, what its commit means for the listeners, and what
    /// runs the moment it is durable (`submit`'s `durable`).
    struct Ran {
        let completion: Completion
        let effect: WriteEffect
        let durable: (@Sendable () -> Void)?
    }

    /// What `submit` does with a write.
    private enum Submission { case closed, queued, leading }

    let connection: any SQLConnection
    /// SQLite's log in front of the database (`StatementJournal`); nil on PostgreSQL.
    let journal: StatementJournal?
    /// Locks the rows of the given keys, in the order given, at the start of each transaction
    /// (PostgreSQL): every writer of every node then takes them in one order — sorted —, and two
    /// batches never wait for each other in a circle. Nil where one writer is all there is.
    private let lockKeys: (@Sendable ([String], SQLWrite) throws(DatabaseError) -> Void)?
    struct State {
        var queue: [Operation] = []
        /// Bulk writes (the messages of batches): taken after `queue` (see the type's comment).
        var bulk: [Operation] = []
        var health = WriterHealth()
        /// A transaction is running (on the writer thread, or on a caller leading its own write).
        var committing = false
        var stopping = false
        var stopped = false
        /// Journaled: a write was acknowledged that the database has not committed yet (a read
        /// starting now would miss it), and how many commits there were (`awaitCommitted`).
        var acknowledgedUncommitted = false
        /// When the first and the last of those were written (`UncommittedBound.wait`).
        var uncommitted = (first: Int64(0), last: Int64(0))
        var commits: UInt64 = 0
        /// A reader waits for the open transaction to commit.
        var commitWanted = false
        /// A caller that led its write waits for its completions (see `awaitCommitted`).
        var leaderParked = false
        /// Journaled: a commit failed, and acknowledged writes wait to be run again.
        var restoring = false
    }

    let state = LockedValue(State())
    /// Called with each committed batch's size (metrics).
    let onBatch: @Sendable (CommittedBatch) -> Void
    /// Completions (building answers, resuming connections) run here, so that the writer starts
    /// the next transaction at once instead of spending its time on them.
    private let completions = DispatchQueue(label: "pushrelay-store-completions")
    /// Marks code running as a completion: a write submitted from there never leads (its
    /// `completions.sync` would wait for the very block that calls it).
    private static let inCompletion = DispatchSpecificKey<Bool>()

    /// The most writes one transaction takes; bounds the latency of the first of them.
    package static let maxBatch = 1024

    /// The most inbox rows one transaction takes (one write may exceed it alone: a message has
    /// at most 1,000 recipients). Measured with 1,000-recipient batches streaming in
    /// (`Benchmarks/batch_bystander.py`, SQLite): at 5,000 a bystander's single post waited
    /// p50 428 / p99 603 ms, at 2,000 121 / 193 ms, for the same rows per second; 100k rows took
    /// 6.6 s at 1 M stored rows either way. (`make bench`'s 100 x 10 batches: 89 batches/s.)
    package static let maxRows = 2000

    /// Attempts of one batch that lost a race with another node's transaction (PostgreSQL).
    static let maxAttempts = 5

    init(
        connection: any SQLConnection, journal: StatementJournal? = nil,
        onBatch: @escaping @Sendable (CommittedBatch) -> Void,
        lockKeys: (@Sendable ([String], SQLWrite) throws(DatabaseError) -> Void)? = nil
    ) {
        self.connection = connection
        self.journal = journal
        self.lockKeys = lockKeys
        self.onBatch = onBatch
        completions.setSpecific(key: Self.inCompletion, value: true)
    }

    func start() {
        ServiceThread.start("relay-writer") { [self] in run() }
    }

    /// Queues `work`; `completion` runs on the completion queue after the commit (or the failure).
    /// `effect` tells, from the write's value, what its commit means for the listeners
    /// (`CommittedBatch.effect`). `durable` runs on the thread that saw the group's sync return,
    /// right after it, in commit order and before any completion of the group: live delivery,
    /// with no hand-off to another thread. Keep it short: the next group waits for it.
    ///
    /// With `leadIfIdle`, a caller that finds the writer idle and nothing queued commits its
    /// write itself, on its own thread, and runs the completion there before returning: a lone
    /// write then costs no thread hand-off at all (the writer's wake-up, the completion queue's,
    /// and for a request its connection's suspend and resume). Under load the writer is busy and
    /// the write joins the next group as usual. Only for callers that hold no lock a completion
    /// might need (the HTTP handlers: `durable` runs live delivery there); a write submitted by a
    /// completion (the Matrix gateway stores an event's messages one after the other) is queued.
    ///
    /// `rows` is the number of inbox rows the write makes (`maxRows`); a `bulk` write goes into
    /// the lane taken after the others (the messages of a batch) and never leads.
    func submit<T: Sendable>(
        effect: @escaping @Sendable (T) -> WriteEffect = { _ in .jobs }, leadIfIdle: Bool = false,
        rows: Int = 1, bulk: Bool = false,
        locking keys: [String] = [], _ work: @escaping @Sendable (SQLWrite) throws(DatabaseError) -> T,
        durable: (@Sendable (T) -> Void)? = nil,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        let operation = Operation(
            run: { connection throws(DatabaseError) in
                let value = try work(connection)
                var ran: (@Sendable () -> Void)?
                if let durable { ran = { durable(value) } }
                return Ran(
                    completion: { outcome in completion(outcome.map { value }) }, effect: effect(value), durable: ran)
            },
            fail: { completion(.failure($0)) }, keys: keys, rows: max(1, rows), bulk: bulk)
        let mayLead =
            leadIfIdle && !bulk && connection.dialect.isInProcess
            && DispatchQueue.getSpecific(key: Self.inCompletion) == nil
        let began = DemandTimer.now()
        let submission = state.withLock { state -> Submission in
            guard !state.stopping else { return .closed }
            if mayLead, !state.committing, state.queue.isEmpty, state.bulk.isEmpty {
                state.committing = true
                state.health.began(at: began)
                return .leading
            }
            if bulk { state.bulk.append(operation) } else { state.queue.append(operation) }
            return .queued
        }
        switch submission {
        case .closed:
            completion(.failure(.closed))
        case .queued:
            state.broadcast()  // (readers may wait on the same condition: `awaitCommitted`)
        case .leading:
            // Completions keep commit order: this one runs (after any still queued) before the
            // writer may start the next transaction.
            let (complete, committed) = commit([operation])
            // A completion that reads meanwhile commits on this thread's behalf (`awaitCommitted`):
            // the connection is idle while this thread waits for it, and no other may take it.
            state.withLock { $0.leaderParked = true }
            completions.sync(execute: complete)
            let wanted = state.withLock { state -> Bool in
                state.leaderParked = false
                return state.commitWanted
            }
            if wanted { commitPending() }
            // Wake the writer only if writes queued up meanwhile (or it is stopping), or to time
            // the commit of what this left uncommitted (or make a failed one good): waking it
            // for nothing would put a futex call on every lone request's path.
            let waiting = state.withLock { state -> Bool in
                state.committing = false
                state.health.finished(committed: committed)
                return !state.queue.isEmpty || !state.bulk.isEmpty || state.stopping || state.restoring
                    || state.acknowledgedUncommitted
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

    /// What `/readyz` does (`WriterHealth`); never waits for the writer.
    func readiness() -> WriterHealth.Readiness {
        let now = DemandTimer.now()
        return state.withLock { state in
            state.health.readiness(
                idle: !state.committing && state.queue.isEmpty && state.bulk.isEmpty, now: now)
        }
    }

    /// Asks for acknowledged writes to be committed at the end of the current group, as a read
    /// does (`WALCheckpointer`: a small commit lets the write-ahead log start over).
    func requestCommit() {
        let asked = state.withLock { state in
            if state.acknowledgedUncommitted { state.commitWanted = true }
            return state.commitWanted
        }
        if asked { state.broadcast() }
    }

    /// The longest a read waits for the database to take what was acknowledged before it.
    static let readWaitMilliseconds: Int64 = 2000

    /// Waits until every write acknowledged so far is in the database, so that a read starting
    /// then sees it: a journaled group is acknowledged from the log, before the database commits
    /// it (`StatementJournal`); the writer commits when asked, after the group it is running.
    /// Throws if the database cannot take them (a failed commit, say on a full disk, not made
    /// good yet): the read would see less than was acknowledged.
    func awaitCommitted() throws(StoreError) {
        guard journal != nil else { return }
        enum Step {
            case read
            case commitHere
            case wait(ticket: UInt64)
        }
        let step = state.withLock { state -> Step in
            guard state.acknowledgedUncommitted || state.restoring, !state.stopped else { return .read }
            // A completion of a leading caller, which waits for it holding the connection: the
            // writer thread cannot commit, and the caller is parked; this completion may.
            if state.leaderParked, DispatchQueue.getSpecific(key: Self.inCompletion) != nil { return .commitHere }
            state.commitWanted = true
            return .wait(ticket: state.commits)
        }
        let ticket: UInt64
        switch step {
        case .read:
            return
        case .commitHere:
            commitPending()
            if state.withLock({ $0.restoring }) { throw .unavailable(.journal(.behind)) }
            return
        case .wait(let waiting):
            ticket = waiting
        }
        state.broadcast()
        let caughtUp = state.withLock(
            when: { !$0.restoring && ($0.commits != ticket || !$0.acknowledgedUncommitted) || $0.stopped },
            waitingAtMost: Self.readWaitMilliseconds
        ) { !$0.restoring && ($0.commits != ticket || !$0.acknowledgedUncommitted) || $0.stopped }
        if !caughtUp { throw .unavailable(.journal(.behind)) }
    }

    /// What the writer thread does next.
    private enum Step {
        case writes([Operation])
        /// Commit the journal's open transaction (idle, or a reader asked), or make a failed
        /// commit good.
        case commit
        case stop
        /// Nothing: look again.
        case wait
    }

    /// How often a failed commit is tried again while nothing else happens.
    static let restoreRetryMilliseconds: Int64 = 1000

    private func run() {
        while true {
            switch nextStep() {
            case .wait:
                continue
            case .writes(let batch):
                let (complete, committed) = commit(batch)
                completions.async(execute: complete)
                state.withLock { state in
                    state.committing = false
                    state.health.finished(committed: committed)
                }
            case .commit:
                commitPending()
                state.withLock { $0.committing = false }
            case .stop:
                closeJournal()
                state.withLock { $0.stopped = true }
                state.broadcast()  // `stop()` waits for `stopped`
                return
            }
        }
    }

    /// How long acknowledged writes may stay uncommitted from now (`UncommittedBound`).
    private static func uncommittedWait(_ state: State) -> Int64 {
        UncommittedBound.wait(first: state.uncommitted.first, last: state.uncommitted.last, now: DemandTimer.now())
    }

    /// Waits for writes (or the stop); with acknowledged writes uncommitted, only so long.
    private func nextStep() -> Step {
        let take = { (state: inout State) -> Step in
            guard !state.committing else { return .wait }
            if !state.queue.isEmpty || !state.bulk.isEmpty {
                state.committing = true
                // Read now, not before the wait: an idle writer's first transaction is not stalled.
                state.health.began(at: DemandTimer.now())
                let take = Self.take(ordinary: state.queue.lazy.map(\.rows), bulk: state.bulk.lazy.map(\.rows))
                defer {
                    state.queue.removeFirst(take.ordinary)
                    state.bulk.removeFirst(take.bulk)
                }
                return .writes(Array(state.queue.prefix(take.ordinary)) + state.bulk.prefix(take.bulk))
            }
            if state.stopping {
                state.committing = true  // (closing the journal)
                return .stop
            }
            guard state.acknowledgedUncommitted || state.restoring else { return .wait }
            // A group came while this waited (a leader's): its bound moved on.
            if !state.restoring, !state.commitWanted, Self.uncommittedWait(state) > 0 { return .wait }
            state.committing = true
            return .commit
        }
        let pending = state.withLock { state -> Int64? in
            state.restoring
                ? Self.restoreRetryMilliseconds : state.acknowledgedUncommitted ? Self.uncommittedWait(state) : nil
        }
        guard let pending else {
            // (Woken too when a leader leaves writes uncommitted: the next turn times the commit.)
            return state.withLock(
                when: {
                    (!$0.queue.isEmpty || !$0.bulk.isEmpty || $0.stopping) && !$0.committing
                        || $0.acknowledgedUncommitted || $0.restoring
                }
            ) { state in
                state.acknowledgedUncommitted || state.restoring ? .wait : take(&state)
            }
        }
        return state.withLock(
            when: { (!$0.queue.isEmpty || !$0.bulk.isEmpty || $0.stopping || $0.commitWanted) && !$0.committing },
            waitingAtMost: pending, take)
    }

    /// How many of the queued writes (their rows, in order) the next transaction takes: ordinary
    /// ones first, up to `maxBatch` writes and `maxRows` rows (at least one), then bulk ones while
    /// they fit, and at least one of them whenever any waits (so batches progress under any load).
    package static func take(
        ordinary: some Collection<Int>, bulk: some Collection<Int>
    ) -> (ordinary: Int, bulk: Int) {
        var writes = 0
        var rows = 0
        var taken = (ordinary: 0, bulk: 0)
        for cost in ordinary {
            guard writes < maxBatch, writes == 0 || rows + cost <= maxRows else { break }
            writes += 1
            rows += cost
            taken.ordinary += 1
        }
        for cost in bulk {
            guard taken.bulk == 0 || (writes < maxBatch && rows + cost <= maxRows) else { break }
            writes += 1
            rows += cost
            taken.bulk += 1
        }
        return taken
    }

    /// Runs one transaction; returns what completes its writes (in order, after earlier ones) and
    /// whether it committed.
    /// A batch that lost a race with another node's transaction (deadlock, serialization failure)
    /// is run again whole: nothing of it was committed, and nobody was answered yet.
    ///
    /// Each write runs in its own savepoint, so that one failing write fails alone — except on a
    /// connection where savepoints are dear (not `SQLDialect.isInProcess`): there the batch
    /// first runs without them, and only if a write fails, again with them.
    private func commit(_ batch: [Operation]) -> (@Sendable () -> Void, committed: Bool) {
        if let journal { return commitJournaled(batch, journal) }
        var attempts = 1
        var guarded = connection.dialect.isInProcess
        while true {
            switch attempt(batch, guarded: guarded) {
            case .finished(let completions, let committed):
                return (completions, committed)
            case .writeFailed:
                guarded = true
            case .lostRace(let error):
                attempts += 1
                guard attempts <= Self.maxAttempts else {
                    return ({ for operation in batch { operation.fail(error) } }, false)
                }
            }
        }
    }

    private enum Attempt {
        case finished(@Sendable () -> Void, committed: Bool)
        case lostRace(StoreError)
        /// A write failed in a batch run without savepoints (rolled back whole).
        case writeFailed
    }

    private func attempt(_ batch: [Operation], guarded: Bool) -> Attempt {
        let write: SQLWrite
        do throws(DatabaseError) {
            write = SQLWrite(connection, optimistic: try connection.beginWrite(pipelined: !guarded))
            if let lockKeys {
                let keys = Set(batch.flatMap(\.keys)).sorted()
                if !keys.isEmpty { try lockKeys(keys, write) }
            }
        } catch  where error.lostRace {
            connection.rollbackWrite()
            return .lostRace(StoreError.unavailable(error))
        } catch {
            connection.rollbackWrite()
            let failure = StoreError.unavailable(error)
            return .finished({ for operation in batch { operation.fail(failure) } }, committed: false)
        }
        var succeeded: [Ran] = []
        var effect = WriteEffect.maintenance  // (a batch whose every write failed changed nothing)
        var failed: [(@Sendable (StoreError) -> Void, StoreError)] = []
        succeeded.reserveCapacity(batch.count)
        for operation in batch {
            var tries = 0
            while true {
                tries += 1
                do throws(DatabaseError) {
                    if guarded { try write.savepoint() }
                    let ran = try operation.run(write)
                    if guarded { try write.releaseSavepoint() }
                    succeeded.append(ran)
                    effect = max(effect, ran.effect)
                } catch  where !guarded && !connection.isBroken {
                    connection.rollbackWrite()
                    return .writeFailed
                } catch  where error.lostRace {
                    connection.rollbackWrite()
                    return .lostRace(StoreError.unavailable(error))
                } catch  where error.keyTakenMeanwhile && tries == 1 {
                    // Another node inserted the same key (a message id) and committed while this
                    // write waited for it: run it again, and it finds that row.
                    write.rollbackToSavepoint()
                    continue
                } catch {
                    write.rollbackToSavepoint()
                    failed.append((operation.fail, StoreError.unavailable(error)))
                }
                break
            }
        }
        let outcome: Result<Void, StoreError>
        do throws(DatabaseError) {
            try connection.commitWrite(effect: effect, notes: write.notes)
            onBatch(CommittedBatch(writes: batch.count, effect: effect))
            Self.runDurable(succeeded)
            outcome = .success(())
        } catch  where error.lostRace {
            connection.rollbackWrite()
            return .lostRace(StoreError.unavailable(error))
        } catch  where !guarded && !connection.isBroken {
            // (A write's error may surface only here when its statement was pipelined.)
            connection.rollbackWrite()
            return .writeFailed
        } catch {
            connection.rollbackWrite()
            outcome = .failure(StoreError.unavailable(error))
        }
        let committed = if case .success = outcome { true } else { false }
        return .finished(
            { [succeeded, failed] in
                for ran in succeeded { ran.completion(outcome) }
                for (fail, error) in failed { fail(error) }
            }, committed: committed)
    }

    /// What runs the moment a group is durable, in order, on the thread that made it so.
    static func runDurable(_ writes: [Ran]) {
        for ran in writes { ran.durable?() }
    }
}
