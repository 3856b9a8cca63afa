/// One write transaction as the store's writes see it: the connection's statements, and what
/// the transaction carries beside them — whether it is a batch's optimistic pass and what that
/// pass read up front, and the notes the other nodes of a cluster hear of once it commits.
///
/// Made by `StoreWriter` for each transaction it runs, and used by one thread at a time.
package final class SQLWrite: SQLStatements {
    let connection: any SQLConnection
    /// A batch's optimistic pass (PostgreSQL: pipelined, no savepoints; if anything in it fails,
    /// the batch runs again with a savepoint per write). Its writes take what was read up front
    /// (`prefetched`) and leave the idempotency check to the unique key of `messages` instead of
    /// waiting for a round trip each.
    let isOptimistic: Bool
    /// What the optimistic pass read up front; empty otherwise.
    var prefetched = BatchPrefetch()
    /// Sent to the other nodes at commit (nothing listens on SQLite: there is one node).
    private(set) var notes: [ClusterNote] = []
    private var notesAtSavepoint = 0
    /// The statements that may have changed something, in order, when the transaction is
    /// journaled (`StatementJournal`); nil otherwise.
    private(set) var recorded: [RecordedStatement]?
    private var recordedAtSavepoint = 0

    init(_ connection: any SQLConnection, optimistic: Bool, recording: Bool = false) {
        self.connection = connection
        self.isOptimistic = optimistic
        self.recorded = recording ? [] : nil
    }

    var dialect: SQLDialect { connection.dialect }

    /// Something the other nodes hear of once this transaction commits.
    func note(_ note: ClusterNote) { notes.append(note) }

    /// Marks the start of one write inside the transaction.
    func savepoint() throws(DatabaseError) {
        notesAtSavepoint = notes.count
        recordedAtSavepoint = recorded?.count ?? 0
        try connection.savepoint()
    }

    func releaseSavepoint() throws(DatabaseError) { try connection.releaseSavepoint() }

    /// Undoes the write since `savepoint`, its notes too.
    func rollbackToSavepoint() {
        notes.removeSubrange(notesAtSavepoint...)
        recorded?.removeSubrange(recordedAtSavepoint...)
        connection.rollbackToSavepoint()
    }

    // MARK: SQLStatements

    package func scan(
        _ sql: String, _ bindings: [SQLValue], row: (any SQLRow) throws(DatabaseError) -> Bool
    ) throws(DatabaseError) {
        try connection.scan(sql, bindings, row: row)
        record(sql, bindings)
    }

    package func run(_ sql: String, _ bindings: [SQLValue]) throws(DatabaseError) {
        try connection.run(sql, bindings)
        record(sql, bindings)
    }

    package func execute(_ sql: String) throws(DatabaseError) {
        try connection.execute(sql)
        record(sql, [])
    }

    /// Keeps a statement that ran for the journal. Only a plain `SELECT` is left out: it changes
    /// nothing (keeping a read by mistake costs bytes; leaving out a write would lose it).
    private func record(_ sql: String, _ bindings: [SQLValue]) {
        guard recorded != nil, !sql.utf8.starts(with: "SELECT".utf8) else { return }
        recorded?.append(RecordedStatement(sql: sql, bindings: bindings))
    }
    package var changes: Int { connection.changes }
}
