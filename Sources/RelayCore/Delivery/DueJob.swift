/// One due push job of a device as the store read it: what `PushBatch.coalescing` needs.
package struct DueJob: Sendable, Equatable {
    package var id: Int64
    package var webhookId: String
    package var kind: PushKind
    package var messageId: String?
    package var seq: Int64
    package var collapseKey: String?
    package var attempts: Int
    package var expiresAt: Timestamp
    /// Its message's priority (a clear has none: normal).
    package var priority: Priority
    /// Its message's `push` object, serialized.
    package var push: [UInt8]?
    /// A homeserver's count for this job (Matrix `counts.unread`), if it gave one.
    package var badge: Int64?

    package init(
        id: Int64, webhookId: String, kind: PushKind, messageId: String?, seq: Int64, collapseKey: String?,
        attempts: Int, expiresAt: Timestamp, priority: Priority, push: [UInt8]?, badge: Int64?
    ) {
        self.id = id
        self.webhookId = webhookId
        self.kind = kind
        self.messageId = messageId
        self.seq = seq
        self.collapseKey = collapseKey
        self.attempts = attempts
        self.expiresAt = expiresAt
        self.priority = priority
        self.push = push
        self.badge = badge
    }
}
