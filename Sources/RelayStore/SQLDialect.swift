/// What the two engines spell or price differently in the SQL the store writes once.
package enum SQLDialect: Sendable {
    case sqlite
    case postgres

    /// The scalar maximum of two values (`max(a, b)` in SQLite, `greatest(a, b)` in PostgreSQL).
    var greatest: String {
        switch self {
        case .sqlite: "max"
        case .postgres: "greatest"
        }
    }

    /// Put after a table name: makes SQLite read it through `index` (`INDEXED BY`); nothing in
    /// PostgreSQL, whose planner has statistics to choose by.
    func indexedBy(_ index: String) -> String {
        switch self {
        case .sqlite: "INDEXED BY \(index)"
        case .postgres: ""
        }
    }

    /// Whether statements are function calls in this process (SQLite), or round trips to a
    /// server (PostgreSQL). In process, a savepoint per write costs next to nothing and a caller
    /// may run its own lone transaction; over the network a batch first runs without savepoints
    /// (each is a subtransaction and two round trips), and callers never lead (an HTTP thread
    /// would wait on the server, and on other nodes' commits).
    var isInProcess: Bool { self == .sqlite }
}
