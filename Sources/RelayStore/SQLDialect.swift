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

    /// `column`, kept from choosing the plan: SQLite's planner, without statistics, would rather
    /// walk an index of `column` (every pending job by `push_jobs_by_state`) than look up the
    /// ids an `among` condition names (unary `+` in SQLite; PostgreSQL prices it right).
    func unindexed(_ column: String) -> String {
        switch self {
        case .sqlite: "+\(column)"
        case .postgres: column
        }
    }

    /// A condition that `column` is one of the integers bound (as `idList`) to its one
    /// placeholder: one statement, prepared once, for any number of them.
    func among(_ column: String) -> String {
        switch self {
        case .sqlite: "\(column) IN (SELECT value FROM json_each(?))"
        case .postgres: "\(column) = ANY(CAST(? AS BIGINT[]))"
        }
    }

    /// A condition that `column` is none of the integers bound (as `idList`).
    func notAmong(_ column: String) -> String {
        switch self {
        case .sqlite: "\(column) NOT IN (SELECT value FROM json_each(?))"
        case .postgres: "\(column) <> ALL(CAST(? AS BIGINT[]))"
        }
    }

    /// `ids` as the binding of `among` or `notAmong`: a JSON array for SQLite, an array literal for
    /// PostgreSQL.
    func idList(_ ids: some Sequence<Int64>) -> SQLValue {
        var text = self == .sqlite ? "[" : "{"
        text.reserveCapacity(ids.underestimatedCount * 8 + 2)
        var first = true
        for id in ids {
            if !first { text += "," }
            first = false
            text += String(id)
        }
        text += self == .sqlite ? "]" : "}"
        return .text(text)
    }

    /// Whether statements are function calls in this process (SQLite), or round trips to a
    /// server (PostgreSQL). In process, a savepoint per write costs next to nothing and a caller
    /// may run its own lone transaction; over the network a batch first runs without savepoints
    /// (each is a subtransaction and two round trips), and callers never lead (an HTTP thread
    /// would wait on the server, and on other nodes' commits).
    var isInProcess: Bool { self == .sqlite }
}
