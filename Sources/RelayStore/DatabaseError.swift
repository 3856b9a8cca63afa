/// What the database engine reported.
package enum DatabaseError: Error, CustomStringConvertible, Sendable {
    case sqlite(SQLiteError)
    case postgres(PostgresError)

    /// Wraps whatever a store operation threw.
    static func from(_ error: any Error) -> DatabaseError {
        switch error {
        case let error as DatabaseError: return error
        case let error as SQLiteError: return .sqlite(error)
        case let error as PostgresError: return .postgres(error)
        default: return .sqlite(SQLiteError(code: 1, message: "\(error)", sql: nil))
        }
    }

    package var description: String {
        switch self {
        case .sqlite(let error): return error.description
        case .postgres(let error): return error.description
        }
    }
}
