package import RelayCore

extension SQLStore {
    /// Attempts kept per device: the trace answers for recent messages; a device failing for a
    /// week must not fill the disk with its retries.
    package static let attemptsKeptPerDevice = 100

    /// Records push attempts for the delivery trace; fire and forget, in order with the writes
    /// that record their outcomes.
    package func trace(_ attempts: [PushAttempt], now: Timestamp) {
        writer.submit(
            { db throws(DatabaseError) in
                var devices: [(String, String)] = []
                var seen = Set<[String]>()  // (a drain's batch holds thousands of devices: no linear search)
                for attempt in attempts {
                    try db.run(
                        """
                        INSERT INTO push_attempts(user_id, device_id, push_id, kind, seq_from, seq_to, transport,
                            app, at, latency_ms, status, provider_id, result, reason)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                        [
                            .text(attempt.userId), .text(attempt.deviceId), .text(attempt.pushId),
                            .text(attempt.kind.rawValue), .int(attempt.seqFrom), .int(attempt.seqTo),
                            .text(attempt.transport.rawValue), .text(attempt.app.name), .int(attempt.at.milliseconds),
                            .int(attempt.latencyMs), attempt.status.map { .int(Int64($0)) } ?? .null,
                            .optional(attempt.providerId), .text(attempt.result.rawValue), .optional(attempt.reason),
                        ])
                    if seen.insert([attempt.userId, attempt.deviceId]).inserted {
                        devices.append((attempt.userId, attempt.deviceId))
                    }
                }
                // The device's index is in id order (SQLite's rowid, PostgreSQL's last column): the
                // bound walks it back 100 entries, no sort.
                for (userId, deviceId) in devices {
                    try db.run(
                        """
                        DELETE FROM push_attempts WHERE user_id = ?1 AND device_id = ?2 AND id <= (
                            SELECT id FROM push_attempts WHERE user_id = ?1 AND device_id = ?2
                            ORDER BY id DESC LIMIT 1 OFFSET \(Self.attemptsKeptPerDevice))
                        """, [.text(userId), .text(deviceId)])
                }
            }, completion: logFailure("record push attempts"))
    }

    enum TraceJobColumn: Int32, SQLColumns {
        case id, deviceId, kind, state, dueAt, attempts, lastError, updatedAt
    }

    enum AttemptColumn: Int32, SQLColumns {
        case userId, deviceId, pushId, kind, seqFrom, seqTo, transport, app, at, latencyMs, status, providerId, result,
            reason
    }

    /// What happened to message `messageId` for `userId` (its inbox seq `seq`): its push jobs,
    /// the attempts that covered the seq, and each device's messages held in one pending window.
    package func trace(messageId: String, userId: String, seq: Int64) throws(StoreError) -> DeliveryTrace {
        try read { db throws(DatabaseError) in
            var trace = DeliveryTrace()
            try db.query(
                "SELECT \(TraceJobColumn.list) FROM push_jobs WHERE message_id = ? AND user_id = ? ORDER BY id",
                [.text(messageId), .text(userId)]
            ) { raw in
                let row = raw.named(TraceJobColumn.self)
                trace.jobs.append(
                    DeliveryTrace.Job(
                        id: row.int64(.id), deviceId: row.text(.deviceId),
                        kind: PushKind(rawValue: row.text(.kind)) ?? .message,
                        state: JobState(rawValue: row.text(.state)) ?? .pending, dueAt: row.timestamp(.dueAt),
                        attempts: Int(row.int64(.attempts)), lastError: row.optionalText(.lastError),
                        updatedAt: row.timestamp(.updatedAt)))
            }
            try db.query(
                """
                SELECT \(AttemptColumn.list) FROM push_attempts
                WHERE user_id = ? AND seq_to >= ? AND seq_from <= ? AND kind <> \(PushKind.clear.sql) ORDER BY id
                LIMIT 1000
                """, [.text(userId), .int(seq), .int(seq)]
            ) { raw in
                let row = raw.named(AttemptColumn.self)
                trace.attempts.append(
                    PushAttempt(
                        userId: row.text(.userId), deviceId: row.text(.deviceId), pushId: row.text(.pushId),
                        kind: PushKind(rawValue: row.text(.kind)) ?? .message, seqFrom: row.int64(.seqFrom),
                        seqTo: row.int64(.seqTo),
                        transport: PushTransport.Kind(rawValue: row.text(.transport)) ?? .webhook,
                        app: AppID(row.text(.app)) ?? .default, at: row.timestamp(.at),
                        latencyMs: row.int64(.latencyMs), status: row.optionalInt64(.status).map { Int($0) },
                        providerId: row.optionalText(.providerId),
                        result: PushAttempt.Result(rawValue: row.text(.result)) ?? .dead,
                        reason: row.optionalText(.reason)))
            }
            for job in trace.jobs where job.state == .pending && job.kind == .message {
                var window: [String] = []
                try db.query(
                    """
                    SELECT message_id FROM push_jobs
                    WHERE user_id = ? AND device_id = ? AND state = \(JobState.pending.sql)
                        AND kind = \(PushKind.message.sql) AND message_id IS NOT NULL
                    ORDER BY seq LIMIT 50
                    """, [.text(userId), .text(job.deviceId)]
                ) { window.append($0.text(0)) }
                trace.windows[job.deviceId] = window
            }
            return trace
        }
    }
}

/// The store's facts about one message for one recipient (`SQLStore.trace(messageId:…)`).
package struct DeliveryTrace: Sendable {
    package struct Job: Sendable, Equatable {
        package var id: Int64
        package var deviceId: String
        package var kind: PushKind
        package var state: JobState
        package var dueAt: Timestamp
        package var attempts: Int
        package var lastError: String?
        package var updatedAt: Timestamp
    }

    package var jobs: [Job] = []
    /// Attempts whose push covered the message's seq, oldest first.
    package var attempts: [PushAttempt] = []
    /// For a device whose job is pending: the messages waiting in its window with it.
    package var windows: [String: [String]] = [:]
}
