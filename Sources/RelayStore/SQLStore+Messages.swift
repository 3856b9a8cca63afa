package import RelayCore
import RelayLocks

/// Messages: accepting them (one or a batch; each recipient's seq, inbox entry and push jobs in
/// the same transaction) and reading one back with its recipients' delivery states.
extension SQLStore {
    package func accept(
        _ new: NewMessage, durable: @escaping @Sendable (AcceptOutcome) -> Void,
        completion: @escaping @Sendable (Result<AcceptOutcome, StoreError>) -> Void
    ) {
        let epochFor = self.epochFor
        writer.submit(
            effect: \.effect, leadIfIdle: true, rows: new.message.recipients.count, locking: new.message.recipients,
            { db throws(DatabaseError) in try Self.accept(new, db, epochFor: epochFor) },
            durable: { durable($0.outcome) }, completion: { completion($0.map(\.outcome)) })
    }

    package func acceptBatch(
        _ messages: [NewMessage], committed: @escaping @Sendable (_ index: Int, AcceptOutcome) -> Void,
        completion: @escaping @Sendable (Result<[AcceptOutcome], StoreError>) -> Void
    ) {
        let epochFor = self.epochFor
        // One bulk write per message, each in its own savepoint: the writer spreads them over
        // transactions of at most `StoreWriter.maxRows` rows and lets other writes in between.
        // (One write for the whole batch kept every row of it in one savepoint, whose in-memory
        // sub-journal SQLite walks from its start at the end of each statement: the batch's cost
        // grew with its square and with the database, 2.5 s for the first 100k rows, 30 s for the
        // fifth.) Bulk writes never lead: a batch on an HTTP thread would stall that thread's
        // other connections.
        let tally = LockedValue(BatchTally(count: messages.count))
        for (index, new) in messages.enumerated() {
            writer.submit(
                effect: \.effect, rows: new.message.recipients.count, bulk: true, locking: new.message.recipients,
                { db throws(DatabaseError) in try Self.accept(new, db, epochFor: epochFor) },
                durable: { committed(index, $0.outcome) },
                completion: { result in
                    let done = tally.withLock { $0.record(index, result.map(\.outcome)) }
                    if let done { completion(done) }
                })
        }
    }

    /// What `accept` did, and whether it queued push jobs (`WriteEffect.jobs`: a recipient has a
    /// registered device) or only stored data.
    struct Accepted: Sendable {
        var outcome: AcceptOutcome
        var effect: WriteEffect
    }

    /// One message into the inboxes of its recipients, inside the caller's transaction.
    static func accept(
        _ new: NewMessage, _ db: SQLWrite, epochFor: (String) -> String
    ) throws(DatabaseError) -> Accepted {
        let message = new.message
        var existing: (fingerprint: [UInt8], recipients: String, expiresAt: Int64)?
        // (Optimistically, a replay fails the insert into `messages` instead, and is answered in the rerun.)
        if !db.isOptimistic {
            try db.query("SELECT fingerprint, recipients, expires_at FROM messages WHERE id = ?", [.text(message.id)]) {
                existing = ($0.bytes(0), $0.text(1), $0.int64(2))
            }
        }
        if let targets = new.targets { try Self.makeContentFree(db, targets.contentFree, now: new.now) }
        if let existing {
            let recipients = Self.decodeRecipients(existing.recipients)
            var outcome = AcceptOutcome.conflict
            if existing.fingerprint == new.fingerprint {
                outcome = .replay(recipients)
            } else if let supersedes = new.targets?.supersedes, existing.fingerprint == supersedes {
                try Self.replaceContent(db, message, fingerprint: new.fingerprint)
                outcome = .replay(recipients)
            }
            guard let targets = new.targets, let policy = new.delivery else {
                return Accepted(outcome: outcome, effect: .data)
            }
            let queued = try Self.queueMissingPushJobs(
                db, targets, recipients: recipients, message: message, new: new, policy: policy,
                expiresAt: Timestamp(milliseconds: existing.expiresAt))
            return Accepted(outcome: outcome, effect: queued ? .jobs : .data)
        }
        let now = new.now.milliseconds
        let expiresAt = now + message.ttlSeconds * 1000
        var results: [RecipientSeq] = []
        results.reserveCapacity(message.recipients.count)
        var effect = WriteEffect.data
        for userId in message.recipients {
            // The head row's next seq; a new inbox (and its epoch, worth a hash) only when there is none.
            // Read, then written: the row is locked for the transaction (one writer on SQLite,
            // `lockInboxes` on PostgreSQL). Not `UPDATE … RETURNING`: SQLite gives that a statement
            // journal, truncated at its end by walking the savepoint's sub-journal from its start,
            // a cost that grew with every row the savepoint had written before (`perf`: 74 % of the
            // writer in that walk during a 100k-row batch).
            var head: Int64?
            if db.isOptimistic, let prefetched = db.prefetched.heads[userId] {
                head = prefetched
            } else {
                try db.query("SELECT head_seq FROM inboxes WHERE user_id = ?", [.text(userId)]) { head = $0.int64(0) }
            }
            var seq: Int64 = 0
            if let head {
                seq = head + 1
                if db.isOptimistic { db.prefetched.heads[userId] = seq }
                try db.run("UPDATE inboxes SET head_seq = ? WHERE user_id = ?", [.int(seq), .text(userId)])
            }
            if seq == 0 {
                // (Another node may create it meanwhile: then its row is the one counted on.)
                try db.query(
                    """
                    INSERT INTO inboxes(user_id, epoch, head_seq, created_at) VALUES (?, ?, 1, ?)
                    ON CONFLICT(user_id) DO UPDATE SET head_seq = inboxes.head_seq + 1 RETURNING head_seq
                    """, [.text(userId), .text(epochFor(userId)), .int(now)]
                ) { seq = $0.int64(0) }
            }
            // A job for every registered device, online or not: the policy set its due time.
            let online = new.online[userId] ?? []
            var initial: InitialDelivery = online.isEmpty ? .stored : .live
            if let policy = new.delivery,
                try Self.queuePushJobs(
                    db, userId: userId, seq: seq, message: message, now: new.now, policy: policy,
                    expiresAt: Timestamp(milliseconds: expiresAt), online: online,
                    only: new.targets.map { $0.devices[userId] ?? [] })
            {
                effect = .jobs
                if online.isEmpty { initial = .push }
            }
            try db.run(
                """
                INSERT INTO inbox_entries(user_id, seq, message_id, created_at, expires_at, state)
                VALUES (?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(userId), .int(seq), .text(message.id), .int(now), .int(expiresAt),
                    .text(initial == .live ? DeliveryState.live.rawValue : DeliveryState.stored.rawValue),
                ])
            results.append(RecipientSeq(userId: userId, seq: seq, delivery: initial))
            db.note(.committed(userId: userId, seq: seq))
        }
        try db.run(
            """
            INSERT INTO messages(id, fingerprint, conversation_id, sender_id, payload, push, priority,
                collapse_key, created_at, expires_at, recipients)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(message.id), .blob(new.fingerprint), .optional(message.conversationId),
                .optional(message.senderId), .text(String(decoding: message.payload, as: UTF8.self)),
                .optional(message.push.map { String(decoding: $0, as: UTF8.self) }),
                .text(message.priority.rawValue), .optional(message.collapseKey), .int(now), .int(expiresAt),
                .text(Self.encodeRecipients(results)),
            ])
        return Accepted(outcome: .accepted(results), effect: effect)
    }

    /// Marks devices content-free (`PushTargets.contentFree`).
    static func makeContentFree(
        _ db: any SQLStatements, _ devices: [String: Set<String>], now: Timestamp
    ) throws(DatabaseError) {
        for (userId, deviceIds) in devices {
            for deviceId in deviceIds {
                try db.run(
                    """
                    UPDATE devices SET content_free = 1, updated_at = ?
                    WHERE user_id = ? AND device_id = ? AND content_free = 0
                    """, [.int(now.milliseconds), .text(userId), .text(deviceId)])
            }
        }
    }

    /// Overwrites a stored message's content (`PushTargets.supersedes`); its inbox entries,
    /// times and recipients stay.
    static func replaceContent(
        _ db: any SQLStatements, _ message: IncomingMessage, fingerprint: [UInt8]
    ) throws(DatabaseError) {
        try db.run(
            """
            UPDATE messages SET fingerprint = ?, conversation_id = ?, sender_id = ?, payload = ?, push = ?, priority = ?
            WHERE id = ?
            """,
            [
                .blob(fingerprint), .optional(message.conversationId), .optional(message.senderId),
                .text(String(decoding: message.payload, as: UTF8.self)),
                .optional(message.push.map { String(decoding: $0, as: UTF8.self) }), .text(message.priority.rawValue),
                .text(message.id),
            ])
    }

    /// A stored message addressed again: each targeted device of a recipient that has no job for
    /// it yet gets one, unless the recipient already acked it. Returns whether any device was
    /// considered (the notifier must look).
    static func queueMissingPushJobs(
        _ db: SQLWrite, _ targets: PushTargets, recipients: [RecipientSeq], message: IncomingMessage,
        new: NewMessage, policy: DeliveryPolicy, expiresAt: Timestamp
    ) throws(DatabaseError) -> Bool {
        var queued = false
        for recipient in recipients {
            guard let devices = targets.devices[recipient.userId], !devices.isEmpty else { continue }
            var ackSeq: Int64 = 0
            try db.query("SELECT ack_seq FROM inboxes WHERE user_id = ?", [.text(recipient.userId)]) {
                ackSeq = $0.int64(0)
            }
            if try queuePushJobs(
                db, userId: recipient.userId, seq: recipient.seq, message: message, now: new.now, policy: policy,
                expiresAt: expiresAt, online: new.online[recipient.userId] ?? [], only: devices, ackSeq: ackSeq)
            {
                queued = true
            }
        }
        return queued
    }

    /// Recipients as stored: `[["user", seq, "delivery"], …]`.
    static func encodeRecipients(_ recipients: [RecipientSeq]) -> String {
        var writer = JSONWriter(capacity: recipients.count * 32)
        writer.beginArray()
        for recipient in recipients {
            writer.beginArray()
            writer.string(recipient.userId)
            writer.int(recipient.seq)
            writer.string(recipient.delivery.rawValue)
            writer.endArray()
        }
        writer.endArray()
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    static func decodeRecipients(_ text: String) -> [RecipientSeq] {
        guard case .array(let rows)? = try? JSONParser.parse(Array(text.utf8)) else { return [] }
        return rows.compactMap { row in
            guard case .array(let fields) = row, fields.count == 3, let userId = fields[0].stringValue,
                let seq = fields[1].int64Value, let delivery = fields[2].stringValue.flatMap(InitialDelivery.init)
            else { return nil }
            return RecipientSeq(userId: userId, seq: seq, delivery: delivery)
        }
    }

    enum MessageColumn: Int32, SQLColumns {
        case id, conversationId, senderId, payload, push, priority, collapseKey, createdAt, expiresAt, recipients
    }

    package func message(id: String, now: Timestamp) throws(StoreError) -> StoredMessage? {
        try read { db throws(DatabaseError) in
            var found: StoredMessage?
            var recipients: [RecipientSeq] = []
            try db.query("SELECT \(MessageColumn.list) FROM messages WHERE id = ?", [.text(id)]) { raw in
                let row = raw.named(MessageColumn.self)
                found = StoredMessage(
                    id: row.text(.id), conversationId: row.optionalText(.conversationId),
                    senderId: row.optionalText(.senderId), payload: row.bytes(.payload), push: row.optionalBytes(.push),
                    priority: row.text(.priority), collapseKey: row.optionalText(.collapseKey),
                    createdAt: row.timestamp(.createdAt), expiresAt: row.timestamp(.expiresAt), recipients: [])
                recipients = Self.decodeRecipients(row.text(.recipients))
            }
            guard var message = found else { return nil }
            for recipient in recipients {
                var cursors: (ack: Int64, fetched: Int64) = (0, 0)
                try db.query("SELECT ack_seq, fetched_seq FROM inboxes WHERE user_id = ?", [.text(recipient.userId)]) {
                    cursors = ($0.int64(0), $0.int64(1))
                }
                var recorded: DeliveryState?
                var expiresAt = message.expiresAt
                try db.query(
                    "SELECT state, expires_at FROM inbox_entries WHERE user_id = ? AND seq = ?",
                    [.text(recipient.userId), .int(recipient.seq)]
                ) {
                    recorded = DeliveryState(rawValue: $0.text(0))
                    expiresAt = Timestamp(milliseconds: $0.int64(1))
                }
                // An entry already pruned was either acked (and past retention) or expired.
                let state = DeliveryState.derive(
                    recorded: recorded ?? .expired, seq: recipient.seq, ackSeq: cursors.ack,
                    fetchedSeq: cursors.fetched,
                    expiresAt: recorded == nil ? Timestamp(milliseconds: 0) : expiresAt, now: now)
                message.recipients.append((recipient.userId, recipient.seq, state))
            }
            return message
        }
    }
}
