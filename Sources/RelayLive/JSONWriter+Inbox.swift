package import RelayCore
package import RelayStore

/// An inbox as clients read it, written the same way by the WebSocket's frames and the REST
/// catch-up page.
extension JSONWriter {
    /// Where an inbox stands, as a catch-up page and a WebSocket's `welcome` both say it (members
    /// of an open object): its epoch, head, whether the range asked for is whole, and the first
    /// seq still kept.
    package mutating func inboxHead(_ page: CatchUpPage) { inboxHead(page.head, page.window) }

    package mutating func inboxHead(_ head: InboxHead, _ window: CatchUpWindow) {
        member("epoch", head.epoch)
        member("headSeq", head.headSeq)
        member("complete", window.complete)
        member("firstAvailableSeq", head.prunedSeq + 1)
    }

    /// A message as clients read it (catch-up pages and WebSocket frames); `type` is set on frames.
    package mutating func inboxMessage(_ message: InboxMessage, type: String? = nil) {
        message.withRow { inboxMessage($0, type: type) }
    }

    /// The same from the database's row, copied once: into these bytes (in pieces, not member
    /// by member: a catch-up page writes 10,000 of them).
    package mutating func inboxMessage(_ message: InboxRow, type: String? = nil) {
        beginVerbatim()
        if let type {
            verbatim(#"{"type":"#)
            var type = type
            type.withUTF8 { verbatimString(utf8: $0) }
            verbatim(#","seq":"#)
        } else {
            verbatim(#"{"seq":"#)
        }
        verbatimInt(message.seq)
        verbatim(#","id":"#)
        verbatimString(utf8: message.id)
        verbatim(#","conversationId":"#)
        if let conversationId = message.conversationId {
            verbatimString(utf8: conversationId)
        } else {
            verbatim("null")
        }
        verbatim(#","senderId":"#)
        if let senderId = message.senderId { verbatimString(utf8: senderId) } else { verbatim("null") }
        verbatim(#","payload":"#)
        verbatimRaw(message.payload)
        verbatim(#","createdAt":"#)
        verbatimTimestamp(message.createdAt)
        verbatim("}")
    }
}
