/// An error reported by SQLite, with the statement that caused it.
package struct SQLiteError: Error, CustomStringConvertible, Sendable {
    /// The primary result code (`SQLITE_FULL`, `SQLITE_BUSY`, …).
    package var code: Int32
    package var message: String
    package var sql: String?

    package var description: String {
        if let sql { return "SQLite error \(code): \(message) (in \(sql))" }
        return "SQLite error \(code): \(message)"
    }
}
