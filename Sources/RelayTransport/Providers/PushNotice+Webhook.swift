import RelayCore

extension PushNotice {
    /// The webhook's JSON body (docs/ARCHITECTURE.md §5), also the plaintext of a Web Push:
    /// content-free devices get ids and counts only; a message's `push` is spliced in exactly as
    /// the chat server wrote it (unknown members kept), `null` when it had none.
    package var webhookBody: [UInt8] {
        var writer = JSONWriter(capacity: 256 + (push?.count ?? 0))
        writer.beginObject()
        writer.member("type", kind.rawValue)
        writer.member("userId", userId)
        writer.member("deviceId", deviceId)
        if !contentFree, let messageId { writer.member("messageId", messageId) }
        writer.key("seq")
        writer.beginObject()
        writer.member("from", seqFrom)
        writer.member("to", seqTo)
        writer.endObject()
        writer.member("unread", unread)
        writer.member("priority", priority.rawValue)
        writer.member("collapseKey", orNull: collapseKey)
        if !contentFree, kind.announcesMessage {
            writer.key("push")
            if let push { writer.raw(push) } else { writer.null() }
        }
        writer.endObject()
        return writer.bytes
    }
}
