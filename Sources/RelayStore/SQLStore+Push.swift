package import RelayCore

/// The push outbox: jobs queued with a message, the scheduler's due batches, outcomes recorded,
/// acks and badges applied — each through its decision's effects (`SQLStore+Effects.swift`).
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
            expiresAt: expiresAt.milliseconds, call: message.isCall)
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

    /// A badge-only push for one device (a Matrix notify without an event): a `clear` carrying
    /// `badge` (`DeliveryPolicy.clear`).
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
}
