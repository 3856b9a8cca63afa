package import RelayCore

/// Maintenance: named secrets, retention and TTL pruning, the readiness probe.
extension SQLStore {
    package func secret(named name: String, generate: @Sendable () -> String) throws(StoreError) -> String {
        let candidate = generate()
        let result = waitFor { (completion: @escaping @Sendable (Result<String, StoreError>) -> Void) in
            writer.submit(
                { db throws(DatabaseError) in
                    // The first node to store it wins; every other one reads that.
                    try db.run(
                        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO NOTHING",
                        [.text(name), .text(candidate)])
                    var value = candidate
                    try db.query("SELECT value FROM meta WHERE key = ?", [.text(name)]) { value = $0.text(0) }
                    return value
                }, completion: completion)
        }
        return try result.get()
    }

    package func prune(
        now: Timestamp, retentionSeconds: Int64,
        completion: @escaping @Sendable (Result<PruneResult, StoreError>) -> Void
    ) {
        // On a cluster, the node that delivers also prunes (one pass at a time, no lock fights).
        guard delivers else { return completion(.success(PruneResult(removed: 0, nextDue: nil))) }
        let cutoff = now.milliseconds - retentionSeconds * 1000
        writer.submit(
            effect: { _ in .maintenance },
            { db throws(DatabaseError) in
                try db.execute(
                    "CREATE TEMP TABLE IF NOT EXISTS doomed(user_id TEXT NOT NULL, seq BIGINT NOT NULL, message_id TEXT NOT NULL)"
                )
                try db.run("DELETE FROM doomed")
                // Entries of expired messages, and entries acked and older than the retention
                // window; bounded per pass (the next pass takes the rest).
                try db.run(
                    """
                    INSERT INTO doomed(user_id, seq, message_id)
                    SELECT e.user_id, e.seq, e.message_id FROM messages m JOIN inbox_entries e ON e.message_id = m.id
                    WHERE m.expires_at <= ?1
                    UNION
                    SELECT e.user_id, e.seq, e.message_id FROM inbox_entries e JOIN inboxes i ON i.user_id = e.user_id
                    WHERE e.created_at <= ?2 AND e.seq <= i.ack_seq
                    LIMIT 20000
                    """, [.int(now.milliseconds), .int(cutoff)])
                try db.run(
                    """
                    UPDATE inboxes SET pruned_seq = \(db.dialect.greatest)(pruned_seq,
                        (SELECT max(seq) FROM doomed d WHERE d.user_id = inboxes.user_id))
                    WHERE user_id IN (SELECT user_id FROM doomed)
                    """)
                try db.run("DELETE FROM inbox_entries WHERE (user_id, seq) IN (SELECT user_id, seq FROM doomed)")
                let removed = db.changes
                // Finished push jobs are kept for the retention window (dead letters can be retried).
                try db.run(
                    "DELETE FROM push_jobs WHERE state != \(JobState.pending.sql) AND updated_at <= ?", [.int(cutoff)])
                try Self.foldPushJobCounts(db)
                try db.run(
                    "DELETE FROM event_jobs WHERE state != \(JobState.pending.sql) AND updated_at <= ?", [.int(cutoff)])
                // Attempts are written in time order (give or take an answer's wait): those past the
                // window are the oldest ids, found by walking the primary key up to the first one
                // still kept, with no index on time to keep up at every write.
                try db.run(
                    """
                    DELETE FROM push_attempts WHERE id < coalesce(
                        (SELECT id FROM push_attempts WHERE at > ? ORDER BY id LIMIT 1),
                        (SELECT max(id) + 1 FROM push_attempts))
                    """, [.int(cutoff)])
                // A message goes with its last entry (it also holds the idempotency record).
                try db.run(
                    """
                    DELETE FROM messages WHERE id IN (SELECT DISTINCT message_id FROM doomed)
                    AND NOT EXISTS (SELECT 1 FROM inbox_entries e WHERE e.message_id = messages.id)
                    """)
                // A pass that hit its bound has more to do at once.
                if removed >= 20000 { return PruneResult(removed: removed, nextDue: now) }
                var next: Int64?
                try db.query(
                    """
                    SELECT min(t) FROM (
                        SELECT min(expires_at) AS t FROM messages
                        UNION ALL SELECT min(e.created_at) + ?1 FROM inbox_entries e JOIN inboxes i
                            ON i.user_id = e.user_id WHERE e.seq <= i.ack_seq
                        UNION ALL SELECT min(updated_at) + ?1 FROM push_jobs WHERE state != \(JobState.pending.sql)
                        UNION ALL SELECT min(updated_at) + ?1 FROM event_jobs
                            WHERE state != \(JobState.pending.sql)) AS due
                    """, [.int(retentionSeconds * 1000)]
                ) { next = $0.optionalInt64(0) }
                return PruneResult(removed: removed, nextDue: next.map { Timestamp(milliseconds: $0) })
            }, completion: completion)
    }

    /// Answers from what the writer last did while it is busy (`WriterHealth`): a probe queued
    /// behind large batches would wait for them.
    package func checkWritable(completion: @escaping @Sendable (Bool) -> Void) {
        switch writer.readiness() {
        case .ready: return completion(true)
        case .unready: return completion(false)
        case .probe: break
        }
        writer.submit(
            { db throws(DatabaseError) in
                try db.run(
                    """
                    INSERT INTO meta(key, value) VALUES ('ready_probe', 'ok')
                    ON CONFLICT(key) DO UPDATE SET value = excluded.value
                    """)
            }, completion: { completion((try? $0.get()) != nil) })
    }
}
