internal import CSQLite

/// A prepared statement. Owned by its connection's cache; finalized in `deinit`.
package final class SQLiteStatement: SQLRow {
    private let handle: OpaquePointer
    private unowned let connection: SQLiteConnection
    let sql: String

    init(connection: SQLiteConnection, sql: String) throws(DatabaseError) {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(connection.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            throw .sqlite(SQLiteError(code: rc, message: connection.lastErrorMessage, sql: sql))
        }
        handle = statement
        self.connection = connection
        self.sql = sql
    }

    deinit { sqlite3_finalize(handle) }

    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    func bind(_ values: [SQLValue]) throws(DatabaseError) {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .null: rc = sqlite3_bind_null(handle, index)
            case .int(let number): rc = sqlite3_bind_int64(handle, index, number)
            case .text(let text):
                rc =
                    text.utf8.withContiguousStorageIfAvailable { buffer in
                        buffer.withMemoryRebound(to: CChar.self) {
                            pr_sqlite3_bind_text_transient(handle, index, $0.baseAddress, Int32($0.count))
                        }
                    } ?? pr_sqlite3_bind_text_transient(handle, index, text, -1)
            case .blob(let bytes):
                rc = bytes.withUnsafeBytes {
                    pr_sqlite3_bind_blob_transient(handle, index, $0.baseAddress, Int32($0.count))
                }
            }
            guard rc == SQLITE_OK else {
                throw .sqlite(SQLiteError(code: rc, message: connection.lastErrorMessage, sql: sql))
            }
        }
    }

    /// Advances to the next row; false when the statement is done.
    func step() throws(DatabaseError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw .sqlite(SQLiteError(code: rc, message: connection.lastErrorMessage, sql: sql))
        }
    }

    // MARK: Columns

    package func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    package func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    package func text(_ column: Int32) -> String { String(decoding: borrowedText(column), as: UTF8.self) }

    /// The column's bytes (text or blob) without copying them into a `String`.
    package func withBytes<T>(
        _ column: Int32, _ body: (UnsafeBufferPointer<UInt8>) throws(DatabaseError) -> T
    ) rethrows -> T {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard let pointer = sqlite3_column_blob(handle, column), count > 0 else {
            return try body(UnsafeBufferPointer(start: nil, count: 0))
        }
        return try body(UnsafeBufferPointer(start: pointer.assumingMemoryBound(to: UInt8.self), count: count))
    }

    package func bytes(_ column: Int32) -> [UInt8] { withBytes(column) { Array($0) } }

    package func borrowedText(_ column: Int32) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(
            start: sqlite3_column_text(handle, column), count: Int(sqlite3_column_bytes(handle, column)))
    }
}
