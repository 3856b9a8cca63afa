/// An error reported by SQLite, with the statement that caused it.
package struct SQLiteError: Error, CustomStringConvertible, Sendable {
    /// The extended result code (`SQLITE_CONSTRAINT_UNIQUE`, `SQLITE_IOERR_FSYNC`, …), so that a
    /// constraint bug and a full disk do not look the same in the log.
    package var extendedCode: Int32
    package var message: String
    package var sql: String?

    package init(code: Int32, message: String, sql: String?) {
        extendedCode = code
        self.message = message
        self.sql = sql
    }

    /// The primary result code (`SQLITE_FULL`, `SQLITE_BUSY`, …).
    package var code: Int32 { extendedCode & 0xFF }

    package var description: String {
        let codes = extendedCode == code ? "\(code)" : "\(code) (extended \(extendedCode))"
        if let sql { return "SQLite error \(codes): \(message) (in \(sql))" }
        return "SQLite error \(codes): \(message)"
    }
}
