import RelayLocks

/// The writer's transactions on SQLite with the message log in front (`StatementJournal`).
extension StoreWriter {
    /// Runs one group inside the open transaction (a savepoint of its own), appends what it ran to
    /// the log and syncs that; commits the transaction (with one sync of SQLite's own log for many
    /// groups) when a reader asks, the group is a batch's piece, or it holds enough — else the
    /// idle writer does, moments later.
    /// Returns what completes the group's writes and whether they are durable.
    ///
    /// The order keeps a failure clean: the record is written before the commit, so a log that
    /// cannot take it (a full disk) fails the group before anything of it is answered or
    /// committed; a commit that fails takes the record back; only the sync comes after both.
    /// Either failure rolls the transaction back with the acknowledged groups before it, which
    /// stay in the log and run again before anything else (`StatementJournal.restore`); reads
    /// answer 503 meanwhile rather than show less than was acknowledged.
    func commitJournaled(
        _ batch: [Operation], _ journal: StatementJournal
    ) -> (@Sendable () -> Void, committed: Bool) {
        let connection = journal.connection
        func failing(_ error: DatabaseError) -> (@Sendable () -> Void, committed: Bool) {
            let failure = StoreError.unavailable(error)
            return ({ for operation in batch { operation.fail(failure) } }, false)
        }
        do throws(DatabaseError) {
            try journal.restore()
            if journal.wantsEmptying { try journal.makeDurableAndEmpty() }
            try journal.begin()
        } catch {
            if journal.inTransaction { journal.abandonTransaction() }
            publish(journal, committed: false)
            return failing(error)
        }
        // A batch's piece (thousands of rows) is not logged: its commit, right after it, makes it
        // durable, for less than its statements would cost the log in bytes and checksums.
        let bulk = batch.contains { $0.bulk }
        let write = SQLWrite(connection, optimistic: false, recording: !bulk)
        var succeeded: [Ran] = []
        var failed: [(@Sendable (StoreError) -> Void, StoreError)] = []
        var effect = WriteEffect.maintenance
        var rows = 0
        succeeded.reserveCapacity(batch.count)
        for operation in batch {
            do throws(DatabaseError) {
                try write.savepoint()
                let ran = try operation.run(write)
                try write.releaseSavepoint()
                succeeded.append(ran)
                effect = max(effect, ran.effect)
                rows += operation.rows
            } catch {
                if journal.lostTransaction {
                    journal.abandonTransaction()
                    publish(journal, committed: false)
                    return failing(error)
                }
                write.rollbackToSavepoint()
                failed.append((operation.fail, StoreError.unavailable(error)))
            }
        }
        let statements = write.recorded ?? []
        var start: Int?
        var failure: DatabaseError?
        if bulk {
            journal.markUnlogged()
        } else if !statements.isEmpty {
            do throws(JournalError) {
                start = try journal.write(statements, rows: rows, at: DemandTimer.now())
            } catch {
                // The group is in the transaction with the acknowledged groups before it, and no
                // savepoint around it (one spanning a group made SQLite's sub-journal walk grow
                // with the group's rows): all go; those are run again from the log (`restore`).
                journal.abandonTransaction()
                publish(journal, committed: false)
                return failing(.journal(error))
            }
        }
        // Committed before it is answered: a batch's piece (not logged; its items count as
        // stored, readable, when `acceptBatch` reports them), and whatever a reader waits for.
        let now =
            bulk
            || state.withLock { state in
                let wanted = state.commitWanted || state.stopping
                if wanted { state.commitWanted = false }
                return wanted
            }
        var committed = false
        if journal.inTransaction, journal.shouldCommit(now: now, at: DemandTimer.now()) {
            do throws(DatabaseError) {
                try journal.commit()
                committed = true
            } catch {
                if let start { journal.cut(to: start) }
                failure = error
            }
        }
        if failure == nil, start != nil {
            do throws(JournalError) {
                try journal.sync()
            } catch {
                failure = .journal(error)
                if journal.inTransaction {  // (the next group empties the failed log)
                    committed = (try? journal.commit()) != nil
                }
            }
        }
        publish(journal, committed: committed)
        if let failure { return failing(failure) }
        onBatch(CommittedBatch(writes: batch.count, effect: effect))
        Self.runDurable(succeeded)
        return (
            { [succeeded, failed] in
                for ran in succeeded { ran.completion(.success(())) }
                for (fail, error) in failed { fail(error) }
            }, true
        )
    }

    /// Tells readers (`awaitCommitted`) where the journal stands: a commit, acknowledged writes
    /// not committed, or waiting to be run again.
    private func publish(_ journal: StatementJournal, committed: Bool) {
        let acknowledgedUncommitted = journal.inTransaction && journal.hasPending
        let restoring = journal.needsRestore
        let uncommitted = (first: journal.pendingSince, last: DemandTimer.now())
        state.withLock { state in
            if committed {
                state.commits &+= 1
                state.commitWanted = false
            }
            state.acknowledgedUncommitted = acknowledgedUncommitted
            if acknowledgedUncommitted { state.uncommitted = uncommitted }
            state.restoring = restoring
        }
        if committed || restoring { state.broadcast() }
    }

    /// Commits what the writer left uncommitted (it fell idle, or a reader asked), after making a
    /// failed commit good if one waits. Only by whoever holds the connection (`committing`).
    func commitPending() {
        guard let journal else { return }
        var committed = false
        do throws(DatabaseError) {
            try journal.restore()
            try journal.commit()
            committed = true
        } catch {
            // (`restore` tries again at the next step.)
        }
        publish(journal, committed: committed)
    }

    /// At stop: the database made durable and the log emptied, so that the next start has
    /// nothing to run again.
    func closeJournal() {
        guard let journal else { return }
        do throws(DatabaseError) {
            try journal.restore()
            try journal.makeDurableAndEmpty()
        } catch {
            // The log keeps what the database lacks: the next start runs it again.
        }
    }
}
