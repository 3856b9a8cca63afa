/// What the database engine reported.
package enum DatabaseError: Error, CustomStringConvertible, Sendable {
    case sqlite(SQLiteError)
    case postgres(PostgresError)
    /// The message log in front of SQLite (`StatementJournal`).
    case journal(JournalError)

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
        case .journal(let error): return error.description
        }
    }
}
