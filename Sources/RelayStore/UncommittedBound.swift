/// When the message log's open transaction commits at the latest (`StatementJournal`), whatever
/// else asks for it (a read does): what its dirty pages may hold in memory, and how far the
/// database file may lag behind what the log acknowledged. Pure, time as a parameter.
///
/// Nothing waits for these commits, so they are rare: committed group by group, a relay taking
/// 20 messages a second wrote each one's few B-tree pages twice, 44 KB per message.
package enum UncommittedBound {
    /// Inbox rows, and bytes of records, held uncommitted.
    package static let rows = 8192
    package static let bytes = 8 << 20
    /// How long after the first group held uncommitted, however steadily groups come.
    package static let milliseconds: Int64 = 10_000
    /// How long after the last group, when none follows.
    package static let idleMilliseconds: Int64 = 1000

    /// Whether groups holding `rows` and `bytes`, the first written `age` milliseconds ago,
    /// commit at the end of the group now ending.
    package static func reached(rows: Int, bytes: Int, age: Int64) -> Bool {
        rows >= Self.rows || bytes >= Self.bytes || age >= milliseconds
    }

    /// How long an idle writer waits (0: not at all) before it commits groups whose first and
    /// last were written at `first` and `last` (monotonic milliseconds).
    package static func wait(first: Int64, last: Int64, now: Int64) -> Int64 {
        max(0, min(last + idleMilliseconds, first + milliseconds) - now)
    }
}
