/// One database connection as the store uses it: the same SQL runs on SQLite and on PostgreSQL.
///
/// Statements are written once, with `?` placeholders (`?1`, `?2` where a value is used twice);
/// the PostgreSQL connection numbers them. What the two engines spell differently is asked of
/// the connection (`greatest`), and so are transactions, which differ in kind: SQLite has one
/// writer and snapshots for free; PostgreSQL has row locks, retried conflicts and notifications.
///
/// Not thread-safe: one thread uses a connection at a time (the writer owns one; the reader
/// pool lends the others out).
package protocol SQLConnection: AnyObject {
    /// Runs `sql` with `bindings`, calling `row` for each result row until it answers false.
    func scan(_ sql: String, _ bindings: [SQLValue], row: (any SQLRow) throws -> Bool) throws
    /// Runs a statement whose rows, if any, are not needed.
    func run(_ sql: String, _ bindings: [SQLValue]) throws
    /// Runs one or more statements without parameters.
    func execute(_ sql: String) throws
    /// Rows changed by the last `run`.
    var changes: Int { get }
    /// The connection was lost (a pool drops it rather than lending it again).
    var isBroken: Bool { get }
    /// The scalar maximum of two values (`max(a, b)` in SQLite, `greatest(a, b)` in PostgreSQL).
    var greatest: String { get }
    /// Put after a table name: makes SQLite read it through `index` (`INDEXED BY`); nothing in
    /// PostgreSQL, whose planner has statistics to choose by.
    func indexedBy(_ index: String) -> String

    /// How the engine would run `sql`, one line per plan step (SQLite's `EXPLAIN QUERY PLAN`,
    /// PostgreSQL's `EXPLAIN`), priced as on a large table: for the checks that an index serves a
    /// query.
    func queryPlan(_ sql: String, _ bindings: [SQLValue]) throws -> [String]

    /// Runs `body` in a read transaction: every statement in it sees the same snapshot.
    func readSnapshot<T>(_ body: () throws -> T) throws -> T

    /// Starts a write transaction (reconnecting first if the connection was lost). With
    /// `pipelined`, a statement whose result is not needed (`run`) may be sent without waiting
    /// for it, its error surfacing at the next statement that waits or at the commit: only for
    /// a transaction that fails whole when any write in it fails.
    func beginWrite(pipelined: Bool) throws
    /// Commits it; unless it was only housekeeping, the other nodes hear of it (with the notes
    /// taken since `beginWrite`, and whether jobs may have changed: `effect`).
    func commitWrite(effect: WriteEffect) throws
    func rollbackWrite()
    /// Whether statements are function calls in this process (SQLite), or round trips to a
    /// server (PostgreSQL). In process, a savepoint per write costs next to nothing and a caller
    /// may run its own lone transaction; over the network a batch first runs without savepoints
    /// (each is a subtransaction and two round trips), and callers never lead (an HTTP thread
    /// would wait on the server, and on other nodes' commits).
    var isInProcess: Bool { get }
    /// Whether this write transaction is a batch's optimistic pass (PostgreSQL: pipelined, no
    /// savepoints; if anything in it fails, the batch runs again with a savepoint per write).
    /// Its writes take what was read up front (`prefetched`) and leave the idempotency check to
    /// the unique key of `messages` instead of waiting for a round trip each.
    var isOptimistic: Bool { get }
    /// What the optimistic pass read up front; empty otherwise.
    var prefetched: BatchPrefetch { get set }
    /// Marks the start of one write inside the transaction.
    func savepoint() throws
    func releaseSavepoint() throws
    /// Undoes the write since `savepoint` (its notes too).
    func rollbackToSavepoint()
    /// Something the other nodes of a cluster hear of once this transaction commits (nothing to
    /// do on SQLite: there is one node).
    func note(_ note: ClusterNote)
}

extension SQLConnection {
    /// Runs `sql` with `bindings`, calling `row` for each result row.
    func query(_ sql: String, _ bindings: [SQLValue] = [], row: (any SQLRow) throws -> Void) throws {
        try scan(sql, bindings) { statement in
            try row(statement)
            return true
        }
    }

    func run(_ sql: String) throws { try run(sql, []) }
}

/// The current row of a query.
package protocol SQLRow {
    func int64(_ column: Int32) -> Int64
    func isNull(_ column: Int32) -> Bool
    func text(_ column: Int32) -> String
    /// The column's bytes (text or blob).
    func bytes(_ column: Int32) -> [UInt8]
}

extension SQLRow {
    func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }
    func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }
}

/// A value to bind to a statement parameter.
package enum SQLValue: Sendable {
    case null
    case int(Int64)
    case text(String)
    case blob([UInt8])

    package static func optional(_ text: String?) -> SQLValue { text.map { .text($0) } ?? .null }
}
