/// What the database engine reported.
package enum DatabaseError: Error, CustomStringConvertible, Sendable {
    case sqlite(SQLiteError)
    case postgres(PostgresError)
    /// Something else thrown inside a store operation: no engine said it, so none is named.
    case unexpected(String)

    /// Wraps whatever a store operation threw.
    static func from(_ error: any Error) -> DatabaseError {
        switch error {
        case let error as DatabaseError: return error
        case let error as SQLiteError: return .sqlite(error)
        case let error as PostgresError: return .postgres(error)
        default: return .unexpected("\(error)")
        }
    }

    /// The transaction lost a race with another writer's (deadlock, serialization failure):
    /// nothing of it was committed, and it may run again. (Never on SQLite: one writer.)
    var lostRace: Bool {
        if case .postgres(let error) = self { return error.retriesTransaction }
        return false
    }

    /// Another writer committed the same key meanwhile: the write, run again, finds that row.
    var keyTakenMeanwhile: Bool {
        if case .postgres(let error) = self { return error.isUniqueViolation }
        return false
    }

    package var description: String {
        switch self {
        case .sqlite(let error): return error.description
        case .postgres(let error): return error.description
        case .unexpected(let message): return message
        }
    }
}
