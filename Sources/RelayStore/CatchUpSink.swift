package import RelayCore

/// Where a catch-up page goes as the database hands it over: the inbox first, then each message
/// as a borrowed row, then whether more follow. A REST page is written straight into its response
/// this way, with no object and no allocation per message (`CatchUpPage` collects one whole).
package protocol CatchUpSink {
    /// The inbox as the page's snapshot sees it, before any message.
    mutating func open(head: InboxHead, window: CatchUpWindow)
    /// One message, in seq order; its bytes are valid only during the call.
    mutating func message(_ row: InboxRow)
    /// After the last message: whether the page stopped at its limit or byte budget.
    mutating func close(hasMore: Bool)
}

/// One message of a catch-up page, its text borrowed from the database's row.
package struct InboxRow {
    package var seq: Int64
    package var id: UnsafeBufferPointer<UInt8>
    package var conversationId: UnsafeBufferPointer<UInt8>?
    package var senderId: UnsafeBufferPointer<UInt8>?
    /// Serialized JSON, spliced into answers as it is.
    package var payload: UnsafeBufferPointer<UInt8>
    package var createdAt: Timestamp
}

extension InboxMessage {
    /// This message as a row (the one shape the writers of pages and frames take).
    package func withRow<T>(_ body: (InboxRow) -> T) -> T {
        var id = id
        return id.withUTF8 { id in
            Self.withUTF8(conversationId) { conversationId in
                Self.withUTF8(senderId) { senderId in
                    payload.withUnsafeBufferPointer { payload in
                        body(
                            InboxRow(
                                seq: seq, id: id, conversationId: conversationId, senderId: senderId,
                                payload: payload, createdAt: createdAt))
                    }
                }
            }
        }
    }

    private static func withUTF8<T>(_ text: String?, _ body: (UnsafeBufferPointer<UInt8>?) -> T) -> T {
        guard var text else { return body(nil) }
        return text.withUTF8 { body($0) }
    }

    /// A row copied out of the database.
    init(_ row: InboxRow) {
        self.init(
            seq: row.seq, id: String(decoding: row.id, as: UTF8.self),
            conversationId: row.conversationId.map { String(decoding: $0, as: UTF8.self) },
            senderId: row.senderId.map { String(decoding: $0, as: UTF8.self) }, payload: Array(row.payload),
            createdAt: row.createdAt)
    }
}

extension CatchUpPage {
    /// Collects a whole page (the WebSocket's catch-up sends it frame by frame).
    struct Collector: CatchUpSink {
        /// Replaced by `open`, which the store calls before anything else.
        var page = CatchUpPage(
            head: InboxHead(userId: "", epoch: "", headSeq: 0, ackSeq: 0, prunedSeq: 0),
            window: CatchUpWindow(after: 0, clientEpoch: nil, epoch: "", headSeq: 0, prunedSeq: 0), messages: [],
            hasMore: false)

        mutating func open(head: InboxHead, window: CatchUpWindow) {
            page = CatchUpPage(head: head, window: window, messages: [], hasMore: false)
        }

        mutating func message(_ row: InboxRow) { page.messages.append(InboxMessage(row)) }

        mutating func close(hasMore: Bool) { page.hasMore = hasMore }
    }
}
