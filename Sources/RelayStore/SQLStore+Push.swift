package import RelayCore

extension SQLStore {
    /// Queues a push job for every active device of `userId` (inside the accept write), due when
    /// `policy` says. A pending job with the same `collapseKey` on that device is replaced (RFC
    /// 8030 "Topic"). With `only` (`PushTargets`), just those devices, each once per message.
    /// Returns whether any job was queued.
    static func queuePushJobs(
        _ db: SQLWrite, userId: String, seq: Int64, message: IncomingMessage, now: Timestamp,
        policy: DeliveryPolicy, expiresAt: Timestamp, online: Set<String>, only: Set<String>? = nil, ackSeq: Int64 = 0
    ) throws(DatabaseError) -> Bool {
        var devices: [String] = []
        if db.isOptimistic, let prefetched = db.prefetched.devices[userId] {
            devices = prefetched
        } else {
            try db.query("SELECT device_id FROM devices WHERE user_id = ? AND active = 1", [.text(userId)]) {
                devices.append($0.text(0))
            }
        }
        if let only {
            var addressed: [String] = []
            for deviceId in devices where only.contains(deviceId) {
                var queued = false
                try db.query(
                    "SELECT 1 FROM push_jobs WHERE message_id = ? AND user_id = ? AND device_id = ? LIMIT 1",
                    [.text(message.id), .text(userId), .text(deviceId)]
                ) { _ in queued = true }
                if DeliveryPolicy.addressedAgain(seq: seq, ackSeq: ackSeq, queued: queued) {
                    addressed.append(deviceId)
                }
            }
            devices = addressed
        }
        let committed = CommittedMessage(
            userId: userId, seq: seq, messageId: message.id, collapseKey: message.collapseKey, badge: message.badge,
            expiresAt: expiresAt.milliseconds)
        for deviceId in devices {
            // The device's open push window: the earliest due time still ahead (jobs already due
            // are being sent, or about to be, with everything pending at that moment).
            var window: Int64?
            try db.query(
                """
                SELECT min(due_at) FROM push_jobs
                WHERE user_id = ? AND device_id = ? AND state = \(JobState.pending.sql)
                    AND kind = \(PushKind.message.sql) AND due_at > ?
                """, [.text(userId), .text(deviceId), .int(now.milliseconds)]
            ) { row in
                if !row.isNull(0) { window = row.int64(0) }
            }
            try apply(
                policy.committed(
                    committed, deviceId: deviceId, online: online.contains(deviceId), openWindowDue: window,
                    now: now.milliseconds, webhookId: RandomID.make("msg_", bytes: 12)), db, now: now.milliseconds)
        }
        return !devices.isEmpty
    }

    /// The due jobs of the devices `admission` takes while they are read, oldest due first,
    /// coalesced into one batch per device (a window's jobs share their due time,
    /// `DeliveryPolicy.dueAt`, so a push covers its whole window; jobs still waiting for an ack
    /// are not due yet and stay out). At most `limit` devices, leaving out those in `skipping`
    /// (deliveries in flight). One read transaction: the scan and the batches come from the same
    /// snapshot.
    package func pushBatches(
        now: Timestamp, limit: Int, skipping: [String: [Int64]], choosing admission: inout HostAdmission
    ) throws(StoreError) -> [PushBatch] {
        guard delivers else { return [] }
        // (A read retried on a fresh connection considers its devices again: the pass takes fewer.
        // Not a copy of the admission to start over from: its tables would be copied on every pass.)
        return try read { db throws(DatabaseError) in
            try db.readSnapshot { () throws(DatabaseError) in
                let devices = try Self.dueDevices(db, now: now, limit: limit, skipping: skipping, choosing: &admission)
                return try Self.batches(db, of: devices, now: now)
            }
        }
    }

    /// Devices with due jobs, oldest due first, as `admission` takes them. The jobs in flight
    /// (`skipping`'s values) are left out by the query itself, so a pass never pays for rows it
    /// is sending already. The scan stops when `admission` says so or after `(limit +
    /// skipping.count) * 4` due jobs, so a poll costs what it delivers, not what is queued.
    private static func dueDevices(
        _ db: any SQLConnection, now: Timestamp, limit: Int, skipping: [String: [Int64]],
        choosing admission: inout HostAdmission
    ) throws(DatabaseError) -> [DueDevice] {
        var devices: [DueDevice] = []
        var seen = Set<String>()
        var scanned = 0
        let scanLimit = (limit + skipping.count) * 4
        let sending = db.dialect.idList(skipping.values.joined())
        try db.scan(dueDevicesSQL(db.dialect), [.int(now.milliseconds), sending]) { row in
            scanned += 1
            let device = DueDevice(
                userId: row.text(0), deviceId: row.text(1), target: row.text(2), contentFree: row.int64(3) != 0)
            if skipping[device.key] == nil, seen.insert(device.key).inserted {
                switch admission.consider(device) {
                case .take: devices.append(device)
                case .skip: break
                case .stop: return false
                }
            }
            return devices.count < limit && scanned < scanLimit
        }
        return devices
    }

    /// A due job of one device, with what its push is made of (the message, the unread count;
    /// the device's part came with the due scan).
    enum DueJobColumn: Int32, SQLColumns {
        case id, webhookId, kind, messageId, seq, collapseKey, attempts, expiresAt
        case priority, push, unread, badge

        var expression: String {
            switch self {
            case .priority, .push: "m.\(column)"
            case .unread: "i.head_seq - i.ack_seq"
            case .id, .webhookId, .kind, .messageId, .seq, .collapseKey, .attempts, .expiresAt, .badge: "j.\(column)"
            }
        }
    }

    static let dueJobsSQL = """
        SELECT \(DueJobColumn.list)
        FROM push_jobs j
        LEFT JOIN messages m ON m.id = j.message_id
        LEFT JOIN inboxes i ON i.user_id = j.user_id
        WHERE j.user_id = ? AND j.device_id = ? AND j.state = \(JobState.pending.sql) AND j.due_at <= ?
        """

    /// Every due job of each of `devices`, one batch per device. The device is as the scan read
    /// it (a disabled or deleted device's jobs are cancelled with it: none is pending here).
    private static func batches(
        _ db: any SQLConnection, of devices: [DueDevice], now: Timestamp
    ) throws(DatabaseError) -> [PushBatch] {
        var result: [PushBatch] = []
        for due in devices {
            var jobs: [DueJob] = []
            var unread: Int64 = 0
            try db.query(dueJobsSQL, [.text(due.userId), .text(due.deviceId), .int(now.milliseconds)]) { raw in
                let row = raw.named(DueJobColumn.self)
                if jobs.isEmpty { unread = row.int64(.unread) }
                jobs.append(
                    DueJob(
                        id: row.int64(.id), webhookId: row.text(.webhookId),
                        kind: PushKind(rawValue: row.text(.kind)) ?? .message,
                        messageId: row.optionalText(.messageId),
                        seq: row.int64(.seq), collapseKey: row.optionalText(.collapseKey),
                        attempts: Int(row.int64(.attempts)), expiresAt: row.timestamp(.expiresAt),
                        priority: row.optionalText(.priority).flatMap(Priority.init) ?? .normal,
                        push: row.optionalBytes(.push), badge: row.optionalInt64(.badge)))
            }
            guard
                let batch = PushBatch.coalescing(
                    jobs, userId: due.userId, deviceId: due.deviceId, target: due.target, contentFree: due.contentFree,
                    unread: unread)
            else { continue }
            result.append(batch)
        }
        return result
    }

    /// Records how delivery attempts ended, in one write (the delivered jobs of every batch in one
    /// statement: `apply` joins runs of the same update).
    package func finish(
        _ outcomes: [(batch: PushBatch, result: DeliveryPolicy.Verdict)], now: Timestamp,
        completion: @escaping @Sendable (Result<[String: GoneDecision], StoreError>) -> Void
    ) {
        writer.submit(
            { db throws(DatabaseError) in
                let time = now.milliseconds
                var effects: [PushEffect] = []
                var gone: [String: GoneDecision] = [:]
                for (batch, result) in outcomes {
                    var decision = GoneDecision.disable
                    if case .deviceGone(_, let since) = result {
                        decision = DeliveryPolicy.gone(
                            sentTo: batch.target, since: since, device: try Self.current(batch, db))
                        gone[batch.deviceKey] = decision
                    }
                    effects += DeliveryPolicy.recorded(result, of: batch, gone: decision, now: time)
                }
                // Updates first, in the order of their outcomes, so that delivered batches join.
                try Self.apply(effects.filter(\.isUpdate) + effects.filter { !$0.isUpdate }, db, now: time)
                return gone
            }, completion: completion)
    }

    /// The batch's device as it is now, if still active: its transport and last registration.
    private static func current(
        _ batch: PushBatch, _ db: SQLWrite
    ) throws(DatabaseError) -> (target: String, registeredAt: Int64)? {
        var current: (target: String, registeredAt: Int64)?
        try db.query(
            "SELECT transport, updated_at FROM devices WHERE user_id = ? AND device_id = ? AND active = 1",
            [.text(batch.userId), .text(batch.deviceId)]
        ) { current = ($0.text(0), $0.int64(1)) }
        return current
    }

    /// How the database would record delivered jobs (for the test that it looks their ids up).
    package func deliveredQueryPlan() throws(StoreError) -> String {
        try read { db throws(DatabaseError) in
            let (sql, bindings) = Self.updateSQL(
                JobUpdate(state: .delivered, lastError: .clear, countsAttempt: true), db.dialect)
            return try db.queryPlan(sql, bindings + [.int(0), db.dialect.idList([1, 2])]).joined(separator: "\n")
        }
    }

    package func apply(_ effect: PushEffect, now: Timestamp) {
        writer.submit(
            { db throws(DatabaseError) in try Self.apply(effect, db, now: now.milliseconds) },
            completion: logFailure("apply a delivery decision"))
    }

    /// Due devices in due order, through the pending jobs' partial index: SQLite's planner,
    /// without statistics, would take `push_jobs_by_state` for the pending state and read and
    /// sort every pending job on each pass (12× slower delivery at 20,000 pending).
    static func dueDevicesSQL(_ dialect: SQLDialect) -> String {
        """
        SELECT j.user_id, j.device_id, d.transport, d.content_free FROM push_jobs j \(dialect.indexedBy("push_jobs_pending"))
        JOIN devices d ON d.user_id = j.user_id AND d.device_id = j.device_id AND d.active = 1
        WHERE j.state = \(JobState.pending.sql) AND j.due_at <= ? AND \(dialect.notAmong("j.id"))
        ORDER BY j.due_at, j.id
        """
    }

    /// The earliest pending due time after the time bound (`Int64.min` for any) of each outbox
    /// (one index entry each).
    static func nextDueSQL(_ dialect: SQLDialect) -> [String] {
        [
            """
            SELECT min(due_at) FROM push_jobs \(dialect.indexedBy("push_jobs_pending")) \
            WHERE state = \(JobState.pending.sql) AND due_at > ?
            """,
            """
            SELECT min(due_at) FROM event_jobs \(dialect.indexedBy("event_jobs_pending")) \
            WHERE state = \(JobState.pending.sql) AND due_at > ?
            """,
        ]
    }

    /// The plans of the notifier's reads (for the test that they walk the pending index).
    package func notifierQueryPlans() throws(StoreError) -> [String] {
        try read { db throws(DatabaseError) in
            let due = [SQLValue.int(0), db.dialect.idList([1, 2])]
            let reads = [Self.dueDevicesSQL(db.dialect)] + Self.nextDueSQL(db.dialect)
            return try reads.map { sql throws(DatabaseError) in
                try db.queryPlan(sql, Array(due.prefix(sql.count { $0 == "?" }))).joined(separator: "\n")
            }
        }
    }

    package func nextDueAt(after time: Timestamp?) throws(StoreError) -> Timestamp? {
        guard delivers else { return nil }
        return try read { db throws(DatabaseError) in
            var earliest: Int64?
            for sql in Self.nextDueSQL(db.dialect) {
                try db.query(sql, [.int(time?.milliseconds ?? .min)]) { row in
                    if !row.isNull(0) { earliest = min(earliest ?? .max, row.int64(0)) }
                }
            }
            return earliest.map { Timestamp(milliseconds: $0) }
        }
    }

    /// Inside an ack that moved the cursor from `old` to `new` (`DeliveryPolicy.acked`).
    static func applyAckToPushes(
        _ db: SQLWrite, userId: String, old: Int64, new: Int64, now: Int64
    ) throws(DatabaseError) {
        var pushed: [String] = []
        try db.query(
            """
            SELECT DISTINCT device_id FROM push_jobs
            WHERE user_id = ? AND state = \(JobState.delivered.sql) AND kind = \(PushKind.message.sql)
                AND seq > ? AND seq <= ?
            """, [.text(userId), .int(old), .int(new)]
        ) { pushed.append($0.text(0)) }
        try apply(
            DeliveryPolicy.acked(
                userId: userId, through: new, pushedDevices: pushed, now: now,
                webhookId: { RandomID.make("clr_", bytes: 12) }), db, now: now)
    }
}

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

    package func queueBadge(
        userId: String, deviceId: String, badge: Int64, now: Timestamp,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        writer.submit(
            { db throws(DatabaseError) in
                var ackSeq: Int64 = 0
                try db.query("SELECT ack_seq FROM inboxes WHERE user_id = ?", [.text(userId)]) { ackSeq = $0.int64(0) }
                try Self.apply(
                    DeliveryPolicy.clear(
                        userId: userId, deviceId: deviceId, seq: ackSeq, badge: badge, now: now.milliseconds,
                        webhookId: RandomID.make("clr_", bytes: 12)), db, now: now.milliseconds)
            }, completion: completion)
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

    /// What the migrations made (see `SchemaShape`).
    package func schemaShape() throws(StoreError) -> SchemaShape {
        try read { db throws(DatabaseError) in try db.schemaShape() }
    }

    /// How the database would run `sql` (see `SQLConnection.queryPlan`).
    package func queryPlan(_ sql: String, _ bindings: [SQLValue] = []) throws(StoreError) -> [String] {
        try read { db throws(DatabaseError) in try db.queryPlan(sql, bindings) }
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
