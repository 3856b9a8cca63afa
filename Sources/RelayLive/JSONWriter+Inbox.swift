package import RelayCore
package import RelayStore

/// An inbox as clients read it, written the same way by the WebSocket's frames and the REST
/// catch-up page.
extension JSONWriter {
    /// Where an inbox stands, as a catch-up page and a WebSocket's `welcome` both say it (members
    /// of an open object): its epoch, head, whether the range asked for is whole, and the first
    /// seq still kept.
    package mutating func inboxHead(_ page: CatchUpPage) {
        member("epoch", page.head.epoch)
        member("headSeq", page.head.headSeq)
        member("complete", page.window.complete)
        member("firstAvailableSeq", page.head.prunedSeq + 1)
    }

    /// A message as clients read it (catch-up pages and WebSocket frames); `type` is set on frames.
    package mutating func inboxMessage(_ message: InboxMessage, type: String? = nil) {
        beginObject()
        if let type { member("type", type) }
        member("seq", message.seq)
        member("id", message.id)
        member("conversationId", orNull: message.conversationId)
        member("senderId", orNull: message.senderId)
        key("payload")
        raw(message.payload)
        member("createdAt", message.createdAt)
        endObject()
    }
}
