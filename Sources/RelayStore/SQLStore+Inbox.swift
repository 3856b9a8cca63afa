package import RelayCore

/// The inbox: heads and cursors, catch-up pages, fetched and acked.
extension SQLStore {
    package func inboxHead(userId: String) throws(StoreError) -> InboxHead {
        try read { db throws(DatabaseError) in try self.head(userId, db) }
    }

    enum HeadColumn: Int32, SQLColumns {
        case epoch, headSeq, ackSeq, prunedSeq
    }

    static let headSQL = "SELECT \(HeadColumn.list) FROM inboxes WHERE user_id = ?"

    private func head(_ userId: String, _ db: any SQLStatements) throws(DatabaseError) -> InboxHead {
        var head = InboxHead(
            userId: userId, epoch: epochFor(userId), headSeq: 0, ackSeq: 0, prunedSeq: 0)
        try db.query(Self.headSQL, [.text(userId)]) { raw in
            let row = raw.named(HeadColumn.self)
            head.epoch = row.text(.epoch)
            head.headSeq = row.int64(.headSeq)
            head.ackSeq = row.int64(.ackSeq)
            head.prunedSeq = row.int64(.prunedSeq)
        }
        return head
    }

    enum InboxMessageColumn: Int32, SQLColumns {
        case seq, id, conversationId, senderId, payload, createdAt

        var expression: String { self == .seq ? "e.seq" : "m.\(column)" }
    }

    static let catchUpSQL = """
        SELECT \(InboxMessageColumn.list)
        FROM inbox_entries e JOIN messages m ON m.id = e.message_id
        WHERE e.user_id = ? AND e.seq > ? ORDER BY e.seq LIMIT ?
        """

    package func catchUp(
        userId: String, after: Int64, epoch: String?, limit: Int, maxBytes: Int
    ) throws(StoreError) -> CatchUpPage {
        var collector = CatchUpPage.Collector()
        try catchUp(userId: userId, after: after, epoch: epoch, limit: limit, maxBytes: maxBytes, into: &collector)
        return collector.page
    }

    package func catchUp<Sink: CatchUpSink>(
        userId: String, after: Int64, epoch: String?, limit: Int, maxBytes: Int, into sink: inout Sink
    ) throws(StoreError) {
        try read { db throws(DatabaseError) in
            // One read transaction: the head and the rows come from the same snapshot.
            try db.readSnapshot { () throws(DatabaseError) in
                let head = try self.head(userId, db)
                let window = CatchUpWindow(
                    after: after, clientEpoch: epoch, epoch: head.epoch, headSeq: head.headSeq,
                    prunedSeq: head.prunedSeq)
                sink.open(head: head, window: window)
                guard let readAfter = window.readAfter else { return sink.close(hasMore: false) }
                var count = 0
                var bytes = 0
                var hasMore = false
                try db.query(Self.catchUpSQL, [.text(userId), .int(readAfter), .int(Int64(limit) + 1)]) { raw in
                    guard count < limit, bytes < maxBytes else {
                        hasMore = true
                        return
                    }
                    let row = raw.named(InboxMessageColumn.self)
                    let message = InboxRow(
                        seq: row.int64(.seq), id: row.borrowedText(.id),
                        conversationId: row.optionalBorrowedText(.conversationId),
                        senderId: row.optionalBorrowedText(.senderId), payload: row.borrowedText(.payload),
                        createdAt: row.timestamp(.createdAt))
                    count += 1
                    bytes += message.payload.count
                    sink.message(message)
                }
                sink.close(hasMore: hasMore)
            }
        }
    }

    package func markFetched(userId: String, seq: Int64) {
        writer.submit(
            locking: [userId],
            { db throws(DatabaseError) in
                try db.run(
                    "UPDATE inboxes SET fetched_seq = ? WHERE user_id = ? AND fetched_seq < ?",
                    [.int(seq), .text(userId), .int(seq)])
            }, completion: logFailure("mark fetched"))
    }

    package func ack(
        userId: String, seq: Int64, epoch: String?, now: Timestamp,
        completion: @escaping @Sendable (Result<AckOutcome, StoreError>) -> Void
    ) {
        writer.submit(
            locking: [userId],
            { db throws(DatabaseError) in
                let head = try self.head(userId, db)
                if let epoch, epoch != head.epoch { return AckOutcome.epochMismatch(current: head.epoch) }
                guard seq <= head.headSeq else { return .beyondHead(headSeq: head.headSeq) }
                guard seq > head.ackSeq else { return .unchanged(ackSeq: head.ackSeq) }
                try db.run("UPDATE inboxes SET ack_seq = ? WHERE user_id = ?", [.int(seq), .text(userId)])
                try Self.applyAckToPushes(
                    db, userId: userId, old: head.ackSeq, new: seq, now: now.milliseconds)
                return .acknowledged(ackSeq: seq)
            }, completion: completion)
    }
}
