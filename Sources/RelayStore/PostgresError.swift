/// An error reported by PostgreSQL (or by libpq about the connection), with the statement that
/// caused it.
package struct PostgresError: Error, CustomStringConvertible, Sendable {
    /// The SQLSTATE (`40P01`, `23505`, …); empty when the connection itself failed.
    package var sqlState: String
    package var message: String
    package var sql: String?

    package init(sqlState: String, message: String, sql: String?) {
        self.sqlState = sqlState
        self.message = message
        self.sql = sql
    }

    /// The transaction lost a race with another one (deadlock, serialization failure): running
    /// it again is safe, nothing of it was committed.
    package var retriesTransaction: Bool { sqlState == "40001" || sqlState == "40P01" }

    /// Another node committed the same key meanwhile (`unique_violation`): the write, run again,
    /// sees that row (an idempotent replay).
    package var isUniqueViolation: Bool { sqlState == "23505" }

    package var description: String {
        let state = sqlState.isEmpty ? "connection" : sqlState
        if let sql { return "PostgreSQL error \(state): \(message) (in \(sql))" }
        return "PostgreSQL error \(state): \(message)"
    }
}
