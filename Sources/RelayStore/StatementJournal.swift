package import RelayLog

/// Why the journal could not do its part.
package enum JournalError: Error, Sendable, CustomStringConvertible {
    case log(MessageLog.Failure)
    case malformed(lsn: UInt64, offset: Int)
    /// The log belongs to another database (a restored copy beside the old log, say).
    case foreign(path: String)
    /// A record is missing between what the database holds and what the log holds.
    case gap(expected: UInt64, found: UInt64)
    /// Acknowledged writes are not in the database yet, and it cannot take them now.
    case behind

    package var description: String {
        switch self {
        case .log(let failure): "message log: \(failure)"
        case .malformed(let lsn, let offset): "message log: record \(lsn) unreadable at byte \(offset)"
        case .foreign(let path):
            "\(path) belongs to another database (a restore? delete it with the old -wal and -shm)"
        case .gap(let expected, let found): "message log: record \(expected) missing (found \(found))"
        case .behind: "the database cannot take acknowledged writes yet (they are kept in the message log)"
        }
    }
}

/// SQLite's write path with a log in front (docs/ARCHITECTURE.md §7): each group of writes is
/// appended to the message log as the statements it ran and made durable by one `fdatasync`
/// of that log, while the database commits (and syncs) only every so many groups — one
/// transaction spans many of them, so a B-tree page many messages touch is written once, not
/// once per group. On opening, the groups the database does not
/// hold (their record numbers above `meta.log_lsn`, written by each commit) are run again.
///
/// Not thread-safe: the store's writer owns it, like its connection.
final class StatementJournal {
    /// Past this the log is emptied at the next durable point (the database made durable first):
    /// what bounds the start after a crash (`SQLStore.messageLogLimit`).
    let logLimit: Int

    /// The writer's connection.
    let connection: SQLiteConnection
    private let log: MessageLog
    private let logId: String
    /// The last record written.
    private(set) var lsn: UInt64
    /// Statement numbers of this log (`JournalRecord`), and those the last record defined.
    private var numbers: [String: UInt32] = [:]
    private var numbersBeforeLastWrite: [String: UInt32] = [:]
    /// A transaction is open on the connection (spanning groups).
    private(set) var inTransaction = false
    /// Where in the log the groups of the open transaction start (nil: none), acknowledged from
    /// the log alone: what a failed commit has to run again. Read back from there, not kept in
    /// memory: held until the commit, thousands of them churned the heap (3 % of the relay's CPU
    /// in `malloc`).
    private var pendingStart: Int?
    /// When the first of them was written (monotonic milliseconds).
    private(set) var pendingSince: Int64 = 0
    private var pendingRows = 0
    private var pendingBytes = 0
    /// Groups acknowledged from the log alone are in the open transaction.
    var hasPending: Bool { pendingStart != nil }
    /// The open transaction holds a group not in the log, made durable by the commit itself
    /// before it is answered (`markUnlogged`).
    private var unlogged = false
    /// A commit failed and the pending groups are not in the database: nothing else runs until
    /// they are.
    private(set) var needsRestore = false
    /// Groups run again from the log when it was opened (acknowledged, not yet in the database).
    private(set) var replayed = 0
    /// A write or sync of the log failed: it takes nothing until the database is durable and the
    /// log emptied (`makeDurableAndEmpty`).
    private(set) var isPoisoned = false

    /// Opens (creating) the log beside the database and runs again what the database misses.
    init(path: String, connection: SQLiteConnection, logLimit: Int) throws(DatabaseError) {
        self.connection = connection
        self.logLimit = logLimit
        var committed: UInt64 = 0
        var id = ""
        try connection.query("SELECT key, value FROM meta WHERE key IN ('log_id', 'log_lsn')") { row in
            if row.text(0) == "log_id" { id = row.text(1) } else { committed = UInt64(row.text(1)) ?? 0 }
        }
        logId = id
        var records: [[UInt8]] = []
        do throws(MessageLog.Failure) {
            log = try MessageLog(path: path) { records.append($0) }
        } catch {
            throw .journal(.log(error))
        }
        var texts: [UInt32: String] = [:]
        var replay: [JournalRecord.Decoded] = []
        var last = committed
        for bytes in records {
            let record: JournalRecord.Decoded
            do throws(JournalRecord.Malformed) {
                record = try JournalRecord.decode(bytes, texts: &texts)
            } catch {
                throw .journal(.malformed(lsn: last + 1, offset: error.offset))
            }
            guard record.logId == logId else { throw .journal(.foreign(path: path)) }
            guard record.lsn > committed else { continue }
            guard record.lsn == last + 1 else { throw .journal(.gap(expected: last + 1, found: record.lsn)) }
            last = record.lsn
            replay.append(record)
        }
        lsn = last
        replayed = replay.count
        try commitThenEmpty(running: replay.map(\.statements))
    }

    private func run(_ statements: [RecordedStatement]) throws(DatabaseError) {
        for statement in statements { try connection.run(statement.sql, statement.bindings) }
    }

    private func recordPosition() throws(DatabaseError) {
        try connection.run(
            "INSERT INTO meta(key, value) VALUES ('log_lsn', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [.text(String(lsn))])
    }

    // MARK: The writer's steps

    func begin() throws(DatabaseError) {
        guard !inTransaction else { return }
        _ = try connection.beginWrite(pipelined: false)
        inTransaction = true
    }

    /// Writes one group's record (not synced); returns where it starts, for `cut`.
    func write(_ statements: [RecordedStatement], rows: Int, at time: Int64) throws(JournalError) -> Int {
        numbersBeforeLastWrite = numbers
        let bytes = JournalRecord.encode(logId: logId, lsn: lsn + 1, statements, numbers: &numbers)
        do throws(MessageLog.Failure) {
            let start = try log.write(bytes)
            lsn += 1
            if pendingStart == nil {
                pendingStart = start
                pendingSince = time
            }
            pendingRows += rows
            pendingBytes += bytes.count
            return start
        } catch {
            numbers = numbersBeforeLastWrite
            isPoisoned = true
            throw .log(error)
        }
    }

    /// Takes back the record `write` last wrote (its group failed before it was answered).
    func cut(to start: Int) {
        numbers = numbersBeforeLastWrite
        lsn -= 1
        if pendingStart == start { pendingStart = nil }
        do throws(MessageLog.Failure) { try log.cut(to: start) } catch { isPoisoned = true }
    }

    func sync() throws(JournalError) {
        do throws(MessageLog.Failure) {
            try log.sync()
        } catch {
            isPoisoned = true
            throw .log(error)
        }
    }

    /// Whether the open transaction commits at the end of this group: when `now` (the writer's
    /// reasons), at its bound (`UncommittedBound`, at `time`), or when it holds nothing (it is
    /// ended at no cost).
    func shouldCommit(now: Bool, at time: Int64) -> Bool {
        now || !hasPending
            || UncommittedBound.reached(rows: pendingRows, bytes: pendingBytes, age: time - pendingSince)
    }

    /// Commits the open transaction (one sync for many groups; the log held them till now). On
    /// failure the transaction is rolled back; the caller decides what to run again.
    func commit() throws(DatabaseError) {
        guard inTransaction else { return }
        guard hasPending || unlogged else {
            // Nothing in it (its writes failed, or changed nothing): ended without a page written.
            connection.rollbackWrite()
            inTransaction = false
            return
        }
        do throws(DatabaseError) {
            try recordPosition()
            try connection.commitWrite(effect: .data, notes: [])
        } catch {
            abandonTransaction()
            throw error
        }
        inTransaction = false
        unlogged = false
        pendingStart = nil
        pendingRows = 0
        pendingBytes = 0
    }

    /// Rolls the open transaction back (a failed commit, or SQLite's own rollback after a full
    /// disk or an I/O error): the acknowledged groups in it are gone from the database, and
    /// nothing else may run until `restore` has run them again — the next group's seqs follow
    /// theirs.
    func abandonTransaction() {
        if connection.isInTransaction { connection.rollbackWrite() }
        inTransaction = false
        unlogged = false
        needsRestore = true
    }

    /// Whether SQLite ended the open transaction by itself (it does on some errors).
    var lostTransaction: Bool { inTransaction && !connection.isInTransaction }

    /// Runs the acknowledged groups a failed commit rolled back again (their records are still in
    /// the log) and commits them.
    func restore() throws(DatabaseError) {
        guard needsRestore else { return }
        _ = try connection.beginWrite(pipelined: false)
        inTransaction = true
        do throws(DatabaseError) {
            if let pendingStart {
                let records: [[UInt8]]
                do throws(MessageLog.Failure) {
                    records = try log.read(from: pendingStart)
                } catch {
                    throw .journal(.log(error))
                }
                var texts = Dictionary(uniqueKeysWithValues: numbers.map { ($0.value, $0.key) })
                for bytes in records {
                    let record: JournalRecord.Decoded
                    do throws(JournalRecord.Malformed) {
                        record = try JournalRecord.decode(bytes, texts: &texts)
                    } catch {
                        throw .journal(.malformed(lsn: lsn, offset: error.offset))
                    }
                    try run(record.statements)
                }
            }
        } catch {
            abandonTransaction()
            throw error
        }
        try commit()
        needsRestore = false
    }

    /// Commits (durably: every commit syncs) and empties the log: after the log failed (poisoned),
    /// or when it has grown past `logLimit`, or at close.
    func makeDurableAndEmpty() throws(DatabaseError) {
        try commit()
        try emptyLog()
    }

    /// The group now in the open transaction is made durable by the database's commit instead of
    /// the log: a batch's piece, thousands of rows, whose statements would cost the log more bytes
    /// and checksumming than its commit's sync costs.
    func markUnlogged() { unlogged = true }

    /// Runs `groups` and records the position in one commit, then empties the log: its records
    /// are all in the database, durably.
    private func commitThenEmpty(running groups: [[RecordedStatement]]) throws(DatabaseError) {
        _ = try connection.beginWrite(pipelined: false)
        do throws(DatabaseError) {
            for statements in groups { try run(statements) }
            try recordPosition()
            try connection.commitWrite(effect: .data, notes: [])
        } catch {
            connection.rollbackWrite()
            throw error
        }
        try emptyLog()
    }

    private func emptyLog() throws(DatabaseError) {
        do throws(MessageLog.Failure) {
            try log.reset()
        } catch {
            isPoisoned = true
            throw .journal(.log(error))
        }
        numbers = [:]
        isPoisoned = false
    }

    /// Whether the log should be emptied before the next group: it failed, or it is past its
    /// limit and no transaction spans the boundary.
    var wantsEmptying: Bool { isPoisoned || (!inTransaction && log.end >= logLimit) }
}
