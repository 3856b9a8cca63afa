/// Statements as the store runs them, on a connection or inside a write (`SQLWrite`).
///
/// Statements are written once, with `?` placeholders (`?1`, `?2` where a value is used twice);
/// the PostgreSQL connection numbers them. What the two engines spell differently is the
/// connection's `dialect`.
package protocol SQLStatements: AnyObject {
    /// Runs `sql` with `bindings`, calling `row` for each result row until it answers false.
    func scan(
        _ sql: String, _ bindings: [SQLValue], row: (any SQLRow) throws(DatabaseError) -> Bool) throws(DatabaseError)
    /// Runs a statement whose rows, if any, are not needed.
    func run(_ sql: String, _ bindings: [SQLValue]) throws(DatabaseError)
    /// Runs one or more statements without parameters.
    func execute(_ sql: String) throws(DatabaseError)
    /// Rows changed by the last `run`.
    var changes: Int { get }
}

extension SQLStatements {
    /// Runs `sql` with `bindings`, calling `row` for each result row.
    func query(
        _ sql: String, _ bindings: [SQLValue] = [], row: (any SQLRow) throws(DatabaseError) -> Void
    ) throws(DatabaseError) {
        try scan(sql, bindings) { statement throws(DatabaseError) in
            try row(statement)
            return true
        }
    }

    func run(_ sql: String) throws(DatabaseError) { try run(sql, []) }
}

/// One database connection: statements and transactions, the same on SQLite and PostgreSQL.
/// Transactions differ in kind — SQLite has one writer and snapshots for free; PostgreSQL has
/// row locks, retried conflicts and notifications — behind the same calls.
///
/// Not thread-safe: one thread uses a connection at a time (the writer owns one; the reader
/// pool lends the others out).
package protocol SQLConnection: SQLStatements {
    /// The engine's spelling and prices.
    var dialect: SQLDialect { get }
    /// The connection was lost (a pool drops it rather than lending it again).
    var isBroken: Bool { get }

    /// How the engine would run `sql`, one line per plan step (SQLite's `EXPLAIN QUERY PLAN`,
    /// PostgreSQL's `EXPLAIN`), priced as on a large table: for the checks that an index serves a
    /// query.
    func queryPlan(_ sql: String, _ bindings: [SQLValue]) throws(DatabaseError) -> [String]

    /// The tables, indexes and triggers the database holds (`SchemaShape`).
    func schemaShape() throws(DatabaseError) -> SchemaShape

    /// Runs `body` in a read transaction: every statement in it sees the same snapshot.
    func readSnapshot<T>(_ body: () throws(DatabaseError) -> T) throws(DatabaseError) -> T

    /// Starts a write transaction (reconnecting first if the connection was lost). With
    /// `pipelined`, a statement whose result is not needed (`run`) may be sent without waiting
    /// for it, its error surfacing at the next statement that waits or at the commit: only for
    /// a transaction that fails whole when any write in it fails. Returns whether it is
    /// pipelined (an engine may not be).
    func beginWrite(pipelined: Bool) throws(DatabaseError) -> Bool
    /// Commits it; unless it was only housekeeping, the other nodes hear of it (the `notes`, and
    /// whether jobs may have changed: `effect`). One node alone has nobody to tell.
    func commitWrite(effect: WriteEffect, notes: [ClusterNote]) throws(DatabaseError)
    func rollbackWrite()
    /// Marks the start of one write inside the transaction.
    func savepoint() throws(DatabaseError)
    func releaseSavepoint() throws(DatabaseError)
    /// Undoes the write since `savepoint`.
    func rollbackToSavepoint()
}

/// The current row of a query.
package protocol SQLRow {
    func int64(_ column: Int32) -> Int64
    func isNull(_ column: Int32) -> Bool
    func text(_ column: Int32) -> String
    /// The column's bytes (text or blob).
    func bytes(_ column: Int32) -> [UInt8]
    /// A text column's UTF-8 bytes where the database holds them: valid until the row moves on.
    func borrowedText(_ column: Int32) -> UnsafeBufferPointer<UInt8>
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
