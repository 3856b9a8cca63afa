import RelayCore
package import RelayStore

/// The push's JSON as the webhook carries it (docs/ARCHITECTURE.md §5), and as a Web Push
/// message carries it encrypted; content-free devices get ids and counts only.
package enum PushBody {
    package static func json(of batch: PushBatch) -> [UInt8] {
        var writer = JSONWriter(capacity: 256 + (batch.push?.count ?? 0))
        writer.beginObject()
        writer.member("type", batch.kind.rawValue)
        writer.member("userId", batch.userId)
        writer.member("deviceId", batch.deviceId)
        if !batch.contentFree, let messageId = batch.messageId { writer.member("messageId", messageId) }
        writer.key("seq")
        writer.beginObject()
        writer.member("from", batch.seqFrom)
        writer.member("to", batch.seqTo)
        writer.endObject()
        writer.member("unread", batch.unread)
        writer.member("priority", batch.priority.rawValue)
        writer.member("collapseKey", orNull: batch.collapseKey)
        if !batch.contentFree, batch.kind == .message {
            writer.key("push")
            if let push = batch.push { writer.raw(push) } else { writer.null() }
        }
        writer.endObject()
        return writer.bytes
    }
}
