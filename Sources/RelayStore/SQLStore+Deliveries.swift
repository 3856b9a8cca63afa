package import RelayCore

/// One push job as the dead-letter view shows it (docs/ARCHITECTURE.md §5).
package struct DeliveryRecord: Sendable {
    package var id: Int64
    package var messageId: String?
    package var userId: String
    package var deviceId: String
    package var kind: PushKind
    package var state: JobState
    package var attempts: Int64
    package var lastError: String?
    package var updatedAt: Timestamp
}

/// What retrying a delivery did.
package enum RetryOutcome: Sendable {
    case requeued(DeliveryRecord)
    case notFound
    case notDead(DeliveryRecord)
}

extension SQLStore {
    enum DeliveryColumn: Int32, SQLColumns {
        case id, messageId, userId, deviceId, kind, state, attempts, lastError, updatedAt
    }

    static let deliveryColumns = "\(DeliveryColumn.list) FROM push_jobs"

    static func deliveryRecord(_ raw: any SQLRow) -> DeliveryRecord {
        let row = raw.named(DeliveryColumn.self)
        return DeliveryRecord(
            id: row.int64(.id), messageId: row.optionalText(.messageId), userId: row.text(.userId),
            deviceId: row.text(.deviceId), kind: PushKind(rawValue: row.text(.kind)) ?? .message,
            state: JobState(rawValue: row.text(.state)) ?? .pending, attempts: row.int64(.attempts),
            lastError: row.optionalText(.lastError), updatedAt: row.timestamp(.updatedAt))
    }

    /// Push jobs in `state`, newest first, optionally for one user.
    package func deliveries(state: JobState, userId: String?, limit: Int) throws(StoreError) -> [DeliveryRecord] {
        let (sql, bindings) = Self.deliveriesQuery(state: state, userId: userId, limit: limit)
        return try read { db throws(DatabaseError) in
            var records: [DeliveryRecord] = []
            try db.query(sql, bindings) { records.append(Self.deliveryRecord($0)) }
            return records
        }
    }

    /// The dead-letter list's query: `push_jobs_by_state` or `push_jobs_by_user_state` hands its
    /// rows over in order, so it reads `limit` rows however many jobs are kept.
    package static func deliveriesQuery(
        state: JobState, userId: String?, limit: Int
    ) -> (sql: String, bindings: [SQLValue]) {
        guard let userId else {
            return (
                "SELECT \(deliveryColumns) WHERE state = ? ORDER BY updated_at DESC, id DESC LIMIT ?",
                [.text(state.rawValue), .int(Int64(limit))]
            )
        }
        return (
            "SELECT \(deliveryColumns) WHERE user_id = ? AND state = ? ORDER BY updated_at DESC, id DESC LIMIT ?",
            [.text(userId), .text(state.rawValue), .int(Int64(limit))]
        )
    }

    package func deliveries(messageId: String) throws(StoreError) -> [DeliveryRecord] {
        try read { db throws(DatabaseError) in
            var records: [DeliveryRecord] = []
            try db.query("SELECT \(Self.deliveryColumns) WHERE message_id = ? ORDER BY id", [.text(messageId)]) {
                records.append(Self.deliveryRecord($0))
            }
            return records
        }
    }

    /// Exact, from the counters the triggers keep in each write's transaction (migration 6 on
    /// SQLite, 4 on PostgreSQL): a few rows, however many jobs are kept.
    package func pushJobCounts() throws(StoreError) -> [JobState: Int] {
        try read { db throws(DatabaseError) in
            var counts: [JobState: Int] = [:]
            try db.query(Self.pushJobCountsSQL) { row in
                if let state = JobState(rawValue: row.text(0)) { counts[state] = Int(row.int64(1)) }
            }
            return counts
        }
    }

    package static let pushJobCountsSQL =
        "SELECT state, CAST(sum(n) AS BIGINT) FROM push_job_counts GROUP BY state"

    /// The other connections' counter rows, folded into shard 0 (PostgreSQL; on SQLite there is
    /// only shard 0). Rows a transaction still holds are skipped, so this waits on nobody (the
    /// next pass takes them); a row deleted here reappears at its connection's next change.
    static func foldPushJobCounts(_ db: SQLWrite) throws(DatabaseError) {
        guard db.dialect == .postgres else { return }
        try db.run(
            """
            WITH moved AS (
                DELETE FROM push_job_counts WHERE (state, shard) IN (
                    SELECT state, shard FROM push_job_counts WHERE shard <> 0 FOR UPDATE SKIP LOCKED)
                RETURNING state, n)
            INSERT INTO push_job_counts(state, shard, n) SELECT state, 0, sum(n) FROM moved GROUP BY state
            ON CONFLICT(state, shard) DO UPDATE SET n = push_job_counts.n + excluded.n
            """)
    }

    /// Re-queues a dead job with a fresh attempt budget, due now and valid until `expiresAt`,
    /// even past its message's TTL: the operator's explicit decision.
    package func retryDelivery(
        id: Int64, now: Timestamp, expiresAt: Timestamp,
        completion: @escaping @Sendable (Result<RetryOutcome, StoreError>) -> Void
    ) {
        writer.submit(
            { db throws(DatabaseError) in
                var record: DeliveryRecord?
                try db.query("SELECT \(Self.deliveryColumns) WHERE id = ?", [.int(id)]) {
                    record = Self.deliveryRecord($0)
                }
                guard var found = record else { return RetryOutcome.notFound }
                guard found.state == .dead else { return .notDead(found) }
                try Self.apply(
                    DeliveryPolicy.retried(job: id, now: now.milliseconds, expiresAt: expiresAt.milliseconds), db,
                    now: now.milliseconds)
                found.state = .pending
                found.attempts = 0
                found.lastError = nil
                found.updatedAt = now
                return .requeued(found)
            }, completion: completion)
    }
}

extension SQLStore {
    /// Pending push jobs (for /metrics), from the counters.
    package func pendingPushCount() throws(StoreError) -> Int {
        try read { db throws(DatabaseError) in
            var count = 0
            try db.query("SELECT CAST(sum(n) AS BIGINT) FROM push_job_counts WHERE state = \(JobState.pending.sql)") {
                count = $0.isNull(0) ? 0 : Int($0.int64(0))
            }
            return count
        }
    }
}
