import RelayCore
import RelayLive
import RelayStore

/// A catch-up page written into its JSON answer as the store reads it: each message copied once,
/// from the database's row into these bytes.
struct CatchUpJSON: CatchUpSink {
    private(set) var writer: JSONWriter
    private let userId: String
    /// The newest seq written (what a client's page marks fetched).
    private(set) var lastSeq: Int64?

    init(userId: String, capacity: Int) {
        self.userId = userId
        writer = JSONWriter(capacity: capacity)
    }

    mutating func open(head: InboxHead, window: CatchUpWindow) {
        writer.beginObject()
        writer.member("userId", userId)
        writer.inboxHead(head, window)
        writer.key("messages")
        writer.beginArray()
    }

    mutating func message(_ row: InboxRow) {
        writer.inboxMessage(row)
        lastSeq = row.seq
    }

    mutating func close(hasMore: Bool) {
        writer.endArray()
        writer.member("hasMore", hasMore)
        writer.endObject()
    }
}
