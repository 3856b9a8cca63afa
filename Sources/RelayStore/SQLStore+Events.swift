package import RelayCore

/// One event for the chat server's `eventsUrl`.
package struct EventJob: Sendable {
    package var id: Int64
    package var webhookId: String
    package var type: String
    package var body: [UInt8]
    package var attempts: Int
    package var expiresAt: Timestamp
}

extension SQLStore {
    /// Queues an event (durably: it survives restarts), due at once.
    package func queueEvent(type: String, body: [UInt8], now: Timestamp, expiresAt: Timestamp) {
        writer.submit(
            { db throws(DatabaseError) in
                try db.run(
                    """
                    INSERT INTO event_jobs(webhook_id, type, body, state, due_at, expires_at, created_at, updated_at)
                    VALUES (?, ?, ?, \(JobState.pending.sql), ?, ?, ?, ?)
                    """,
                    [
                        .text(RandomID.make("evt_", bytes: 12)),
                        .text(type), .text(String(decoding: body, as: UTF8.self)), .int(now.milliseconds),
                        .int(expiresAt.milliseconds), .int(now.milliseconds), .int(now.milliseconds),
                    ])
            }, completion: logFailure("queue event"))
    }

    enum EventJobColumn: Int32, SQLColumns {
        case id, webhookId, type, body, attempts, expiresAt
    }

    static let dueEventsSQL = """
        SELECT \(EventJobColumn.list) FROM event_jobs
        WHERE state = \(JobState.pending.sql) AND due_at <= ? ORDER BY due_at, id LIMIT ?
        """

    package func dueEvents(now: Timestamp, limit: Int, skipping: Set<Int64>) throws(StoreError) -> [EventJob] {
        guard delivers else { return [] }
        return try read { db throws(DatabaseError) in
            var jobs: [EventJob] = []
            try db.query(Self.dueEventsSQL, [.int(now.milliseconds), .int(Int64(limit))]) { raw in
                let row = raw.named(EventJobColumn.self)
                let id = row.int64(.id)
                guard !skipping.contains(id) else { return }
                jobs.append(
                    EventJob(
                        id: id, webhookId: row.text(.webhookId), type: row.text(.type), body: row.bytes(.body),
                        attempts: Int(row.int64(.attempts)), expiresAt: row.timestamp(.expiresAt)))
            }
            return jobs
        }
    }

    package func finishEvent(
        _ job: EventJob, result: DeliveryPolicy.Verdict, now: Timestamp,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        writer.submit(
            { db throws(DatabaseError) in
                switch result {
                case .delivered:
                    try db.run(
                        """
                        UPDATE event_jobs SET state = \(JobState.delivered.sql), attempts = attempts + 1, updated_at = ?
                        WHERE id = ?
                        """,
                        [.int(now.milliseconds), .int(job.id)])
                case .retry(let error, let at):
                    try db.run(
                        """
                        UPDATE event_jobs SET attempts = attempts + 1, last_error = ?, due_at = ?, updated_at = ?
                        WHERE id = ?
                        """, [.text(error), .int(at), .int(now.milliseconds), .int(job.id)])
                case .postponed(let until):
                    try db.run(
                        "UPDATE event_jobs SET due_at = ?, updated_at = ? WHERE id = ?",
                        [.int(until), .int(now.milliseconds), .int(job.id)])
                case .requeue(let reason, let at):
                    try db.run(
                        "UPDATE event_jobs SET last_error = ?, due_at = ?, updated_at = ? WHERE id = ?",
                        [.text(reason), .int(at), .int(now.milliseconds), .int(job.id)])
                case .dead(let error), .deviceGone(let error, _):
                    try db.run(
                        """
                        UPDATE event_jobs SET state = \(JobState.dead.sql), attempts = attempts + 1, last_error = ?,
                            updated_at = ?
                        WHERE id = ?
                        """, [.text(error), .int(now.milliseconds), .int(job.id)])
                }
            }, completion: completion)
    }
}
