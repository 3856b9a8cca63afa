import Dispatch
import Glibc
import RelayCore
import RelayLocks

/// The store, on SQLite (embedded, one node) or on PostgreSQL (any number of nodes sharing one
/// database): the same statements on either (see `SQLConnection`), one writer thread per node
/// with group commit, a pool of readers.
package final class SQLStore: RelayStore {
    /// One writer on either engine. On PostgreSQL a batch costs three round trips however large
    /// it is (begin; lock and read ahead; commit and publish), so one writer with large batches
    /// beat four with small ones: 24k against 11k messages/s on the same box (`BENCHMARKS.md`).
    let writer: StoreWriter
    /// Copies SQLite's write-ahead log into the database beside the writer; nil on PostgreSQL.
    let checkpointer: WALCheckpointer?
    let readers: ReaderPool
    /// The epoch a user's inbox gets when it is created (`InboxEpochs`, keyed by this database).
    let epochFor: @Sendable (String) -> String
    /// Told about writes nobody waits for (fire-and-forget) that failed, so none is lost silently.
    let onFailure: @Sendable (_ write: String, _ error: StoreError) -> Void
    /// The other nodes (PostgreSQL); nil on SQLite, where this node is the only one.
    let cluster: PostgresCluster?
    /// Groups of writes run again from the message log at opening (SQLite; after a crash).
    package let replayedFromLog: Int

    /// The message log's size at which it is emptied (`StatementJournal`): 0.2–0.4 s to read at
    /// a start after a crash (BENCHMARKS.md).
    package static let messageLogLimit = 64 << 20

    /// Whether `database` names a PostgreSQL database (a libpq URI) rather than a SQLite file.
    package static func isPostgres(_ database: String) -> Bool {
        database.hasPrefix("postgresql://") || database.hasPrefix("postgres://")
    }

    /// Opens (creating and migrating) the database `database` names: a `postgresql://` URI, else
    /// the path of a SQLite file.
    /// - Parameters:
    ///   - onBatch: called after each committed transaction.
    ///   - onFailure: called with the name of a fire-and-forget write that failed, and why.
    ///   - nodeLeaseMs: on PostgreSQL, how long a node that stopped running still counts (here:
    ///     keeps the delivery lease, `HeldLease`).
    package convenience init(
        database: String, nodeLeaseMs: Int64 = 15_000,
        onBatch: @escaping @Sendable (CommittedBatch) -> Void = { _ in },
        onFailure: @escaping @Sendable (_ write: String, _ error: StoreError) -> Void = { _, _ in }
    ) throws(StoreError) {
        guard Self.isPostgres(database) else {
            try self.init(path: database, onBatch: onBatch, onFailure: onFailure)
            return
        }
        let epochs = LockedValue(InboxEpochs(key: ""))
        let epochFor: @Sendable (String) -> String = { epochs.withLock { $0 }.epoch(for: $0) }
        let nodeId = RandomID.make(bytes: 8)
        // A node that stops running in the middle of a transaction (stopped, hung, paused) would
        // hold its row locks — every other node's writes to those inboxes — for as long: the
        // server ends such a session after the node lease. Between two statements of a healthy
        // transaction lie microseconds.
        let setup = "SET idle_in_transaction_session_timeout = \(nodeLeaseMs)"
        let writer: StoreWriter
        do {
            let connection = try PostgresConnection(uri: database, setup: setup)
            try PostgresMigrations.apply(to: connection)
            connection.nodeId = nodeId
            writer = StoreWriter(
                connection: connection, onBatch: onBatch,
                lockKeys: { users, db throws(DatabaseError) in try Self.lockInboxes(users, db, epochFor: epochFor) })
        } catch {
            throw .unavailable(error)
        }
        self.init(
            writer: writer,
            readers: ReaderPool { () throws(DatabaseError) in try PostgresConnection(uri: database, setup: setup) },
            cluster: PostgresCluster(uri: database, nodeId: nodeId, leaseMilliseconds: nodeLeaseMs), epochFor: epochFor,
            onFailure: onFailure)
        try loadEpochKey(into: epochs)
    }

    /// Opens (creating and migrating) the SQLite database at `path`; its message log is emptied
    /// whenever it passes `logLimit` bytes, its write-ahead log copied as `checkpoints` says.
    package convenience init(
        path: String, logLimit: Int = messageLogLimit, checkpoints: CheckpointSchedule = .standard,
        onBatch: @escaping @Sendable (CommittedBatch) -> Void = { _ in },
        onFailure: @escaping @Sendable (_ write: String, _ error: StoreError) -> Void = { _, _ in }
    ) throws(StoreError) {
        let connection: SQLiteConnection
        let journal: StatementJournal
        do {
            connection = try SQLiteConnection(path: path, buffersLog: true)
            try connection.execute("PRAGMA journal_mode = WAL")
            // FULL: every commit is on disk when it returns (the buffered log relies on it). What
            // is acknowledged is durable in the message log before (`StatementJournal`); the
            // database commits many groups at once, so its syncs are rare.
            try connection.execute("PRAGMA synchronous = FULL")
            // Until `WALCheckpointer` takes over (replay and migrations run before it).
            try connection.execute("PRAGMA wal_autocheckpoint = 4000")
            // A log that grew under load (`CheckpointSchedule`) is cut back when it starts over.
            try connection.execute("PRAGMA journal_size_limit = \(checkpoints.limit * 4096)")
            // Savepoint sub-journals in memory, not in temp files (3 pwrites per request otherwise).
            try connection.execute("PRAGMA temp_store = MEMORY")
            // A transaction spans many groups (`UncommittedBound.rows`): room for
            // its pages (~3,000 for 8,192 messages to 1,000 users), so that they are written at
            // its commit, not spilled before.
            try connection.execute("PRAGMA cache_size = -16384")
            // The log was written against the schema of its day: run it before migrating further.
            let logPath = path + "-log"
            let early = try connection.userVersion >= Migrations.journaled
            let opened = early ? try StatementJournal(path: logPath, connection: connection, logLimit: logLimit) : nil
            try Migrations.apply(to: connection)
            if let opened {
                journal = opened
            } else {
                journal = try StatementJournal(path: logPath, connection: connection, logLimit: logLimit)
            }
        } catch {
            throw .unavailable(error)
        }
        let writer = StoreWriter(connection: connection, journal: journal, onBatch: onBatch)
        let checkpointer: WALCheckpointer
        do {
            checkpointer = try WALCheckpointer(
                path: path, schedule: checkpoints, requestCommit: { [weak writer] in writer?.requestCommit() }
            ) { onFailure("checkpoint", .unavailable($0)) }
        } catch {
            throw .unavailable(error)
        }
        connection.onCommit { checkpointer.committed(logPages: $0) }
        let epochs = LockedValue(InboxEpochs(key: ""))
        self.init(
            writer: writer,
            checkpointer: checkpointer,
            readers: ReaderPool { () throws(DatabaseError) in
                let reader = try SQLiteConnection(path: path, readOnly: true)
                try reader.execute("PRAGMA cache_size = -1024")  // 1 MiB per reader
                return reader
            }, cluster: nil, epochFor: { epochs.withLock { $0 }.epoch(for: $0) }, onFailure: onFailure,
            replayedFromLog: journal.replayed)
        try loadEpochKey(into: epochs)
    }

    /// Reads the database's epoch key (the first node to open it makes it). Nothing is accepted
    /// before it is in place: the stores' initializers end here.
    private func loadEpochKey(into epochs: LockedValue<InboxEpochs>) throws(StoreError) {
        let key = try secret(named: "epoch_key") { InboxEpochs.newKey() }
        epochs.withLock { $0 = InboxEpochs(key: key) }
    }

    private init(
        writer: StoreWriter, checkpointer: WALCheckpointer? = nil, readers: ReaderPool, cluster: PostgresCluster?,
        epochFor: @escaping @Sendable (String) -> String,
        onFailure: @escaping @Sendable (_ write: String, _ error: StoreError) -> Void, replayedFromLog: Int = 0
    ) {
        self.replayedFromLog = replayedFromLog
        self.writer = writer
        self.checkpointer = checkpointer
        self.readers = readers
        self.cluster = cluster
        self.epochFor = epochFor
        self.onFailure = onFailure
        writer.start()
        checkpointer?.start()
        cluster?.start()
    }

    /// An optimistic pass's locked inbox, with one of its user's active devices (NULL for none).
    enum PrefetchColumn: Int32, SQLColumns {
        case userId, headSeq, deviceId

        var expression: String { self == .deviceId ? "d.device_id" : "l.\(column)" }

        /// Spelled once: it is on every optimistic batch's path.
        static let selected = list
    }

    /// Locks the inbox rows of `users` (sorted) for the transaction, creating the missing ones
    /// (empty) first, in that order: see `StoreWriter.lockKeys`. One upsert does both — its
    /// no-op update locks a row that exists, its insert makes one that does not —, row after
    /// row in the order given, so two transactions creating the same new inboxes cannot wait on
    /// each other in a circle either. In an optimistic pass the same round trip brings back the
    /// head seqs and the active devices of those users (`BatchPrefetch`). (User ids are
    /// `[A-Za-z0-9._:@+=-]` and epochs hex: nothing in them needs escaping in an array literal.)
    static func lockInboxes(_ users: [String], _ db: SQLWrite, epochFor: (String) -> String) throws(DatabaseError) {
        func array(_ items: [String]) -> String { "{" + items.map { "\"" + $0 + "\"" }.joined(separator: ",") + "}" }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let lock = """
            INSERT INTO inboxes(user_id, epoch, head_seq, created_at)
            SELECT user_id, epoch, 0, ? FROM unnest(?::text[], ?::text[]) AS new(user_id, epoch) ORDER BY user_id
            ON CONFLICT(user_id) DO UPDATE SET head_seq = inboxes.head_seq
            """
        let bindings: [SQLValue] = [
            .int(Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec / 1_000_000)), .text(array(users)),
            .text(array(users.map(epochFor))),
        ]
        guard db.isOptimistic else { return try db.run(lock, bindings) }
        var prefetched = BatchPrefetch()
        try db.query(
            """
            WITH locked AS (\(lock) RETURNING user_id, head_seq)
            SELECT \(PrefetchColumn.selected) FROM locked l
            LEFT JOIN devices d ON d.user_id = l.user_id AND d.active = 1
            """, bindings
        ) { raw in
            let row = raw.named(PrefetchColumn.self)
            let userId = row.text(.userId)
            prefetched.heads[userId] = row.int64(.headSeq)
            var devices = prefetched.devices[userId] ?? []  // (a user without devices: one row, NULL)
            if let deviceId = row.optionalText(.deviceId) { devices.append(deviceId) }
            prefetched.devices[userId] = devices
        }
        db.prefetched = prefetched
    }

    /// Whether this node delivers pushes and events and prunes: always on SQLite; on PostgreSQL
    /// the node holding the delivery lease (`PostgresCluster`).
    package var delivers: Bool { cluster?.isLeader ?? true }

    /// The completion of a write nobody waits for: failures go to `onFailure`.
    func logFailure<T>(_ write: String) -> @Sendable (Result<T, StoreError>) -> Void {
        let onFailure = self.onFailure
        return { result in
            if case .failure(let error) = result { onFailure(write, error) }
        }
    }

    package func close() {
        cluster?.stop()
        writer.stop()
        checkpointer?.stop()
        readers.closeAll()
    }

    // MARK: Helpers

    func read<T>(_ body: (any SQLConnection) throws(DatabaseError) -> T) throws(StoreError) -> T {
        try writer.awaitCommitted()
        do {
            return try readers.read(body)
        } catch {
            throw .unavailable(error)
        }
    }

    /// Blocks until a callback-style write completes; for start-up only, never on a request path.
    func waitFor<T: Sendable>(
        _ start: (@escaping @Sendable (Result<T, StoreError>) -> Void) -> Void
    ) -> Result<T, StoreError> {
        let box = LockedValue<Result<T, StoreError>?>(nil)
        start { result in
            box.withLock { $0 = result }
            box.signal()
        }
        return box.withLock(when: { $0 != nil }) { $0 } ?? .failure(.closed)
    }
}
