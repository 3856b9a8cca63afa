import RelayCore

/// The columns one query selects, as cases in select order, each named as its column in
/// camel case (`webhookId` is `webhook_id`). The select list is spelled from the cases (`list`),
/// so a decoder reads each column by its name and cannot drift from the statement.
protocol SQLColumns: CaseIterable, RawRepresentable where RawValue == Int32, AllCases == [Self] {
    /// The table alias the columns are read from (`j` for `j.webhook_id`); none by default.
    static var alias: String? { get }
    /// The column's expression in the select list: by default `alias.column_name`.
    var expression: String { get }
}

extension SQLColumns {
    static var alias: String? { nil }

    var expression: String { Self.alias.map { "\($0).\(column)" } ?? column }

    /// The case's name in snake case: the column it stands for.
    var column: String {
        var name = ""
        for character in String(describing: self) {
            if character.isUppercase { name += "_" + character.lowercased() } else { name.append(character) }
        }
        return name
    }

    /// `a, b, c`: the select list, in case order.
    static var list: String { allCases.map(\.expression).joined(separator: ", ") }
}

/// A result row read through its query's named columns.
struct NamedRow<Column: SQLColumns> {
    let row: any SQLRow

    func int64(_ column: Column) -> Int64 { row.int64(column.rawValue) }
    func text(_ column: Column) -> String { row.text(column.rawValue) }
    func bytes(_ column: Column) -> [UInt8] { row.bytes(column.rawValue) }
    func borrowedText(_ column: Column) -> UnsafeBufferPointer<UInt8> { row.borrowedText(column.rawValue) }
    func optionalBorrowedText(_ column: Column) -> UnsafeBufferPointer<UInt8>? {
        isNull(column) ? nil : borrowedText(column)
    }
    func isNull(_ column: Column) -> Bool { row.isNull(column.rawValue) }
    func optionalInt64(_ column: Column) -> Int64? { row.optionalInt64(column.rawValue) }
    func optionalText(_ column: Column) -> String? { row.optionalText(column.rawValue) }
    func optionalBytes(_ column: Column) -> [UInt8]? { isNull(column) ? nil : bytes(column) }
    func bool(_ column: Column) -> Bool { int64(column) != 0 }
    func timestamp(_ column: Column) -> Timestamp { Timestamp(milliseconds: int64(column)) }
}

extension SQLRow {
    /// This row read by `Column`'s names.
    func named<Column: SQLColumns>(_: Column.Type) -> NamedRow<Column> { NamedRow(row: self) }
}
