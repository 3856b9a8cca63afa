import RelayCore

/// An enum stored as its raw value, spelled into a statement as an SQL string literal, so that
/// no state or kind is written by hand in SQL. A literal rather than a bound parameter: the
/// planner can then match the statement against the partial indexes' condition
/// (`push_jobs_pending`, `event_jobs_pending`); with `state = ?` it may not use them.
protocol SQLSpelled: RawRepresentable where RawValue == String {}

extension SQLSpelled {
    /// The raw value as an SQL string literal (raw values are plain words: nothing to escape).
    var sql: String { "'\(rawValue)'" }

    /// `(column = 'a' OR column = 'b' …)`: what `column IN ('a', 'b', …)` means, without the
    /// temporary table SQLite builds, on every execution, for an IN list of more than two constants.
    static func any(_ column: String, of values: Self...) -> String { any(column, of: values) }

    static func any(_ column: String, of values: [Self]) -> String {
        "(" + values.map { "\(column) = \($0.sql)" }.joined(separator: " OR ") + ")"
    }
}

extension JobState: SQLSpelled {}
extension PushKind: SQLSpelled {}
extension DeliveryState: SQLSpelled {}
