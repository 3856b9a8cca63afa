package import RelayCore

extension SQLStore {
    /// The outbox as the tables hold it, in `MemoryOutbox`'s terms: for the differential test,
    /// which runs the same decisions on both and compares them after every step. Reads every
    /// row: not for a running relay.
    package func outboxSnapshot() throws(StoreError) -> MemoryOutbox.Snapshot {
        try read { db throws(DatabaseError) in
            var jobs: [MemoryOutbox.Job] = []
            try db.query(
                """
                SELECT id, webhook_id, kind, user_id, device_id, message_id, seq, collapse_key, state, due_at,
                    expires_at, attempts, last_error, badge, created_at
                FROM push_jobs ORDER BY id
                """
            ) { row in
                jobs.append(
                    MemoryOutbox.Job(
                        id: row.int64(0), webhookId: row.text(1), kind: PushKind(rawValue: row.text(2)) ?? .message,
                        userId: row.text(3), deviceId: row.text(4), messageId: row.optionalText(5), seq: row.int64(6),
                        collapseKey: row.optionalText(7), state: JobState(rawValue: row.text(8)) ?? .pending,
                        dueAt: row.int64(9), expiresAt: row.int64(10), attempts: Int(row.int64(11)),
                        lastError: row.optionalText(12), badge: row.optionalInt64(13), createdAt: row.int64(14)))
            }
            var entries: [String: [Int64: DeliveryState]] = [:]
            try db.query("SELECT user_id, seq, state FROM inbox_entries") { row in
                entries[row.text(0), default: [:]][row.int64(1)] = DeliveryState(rawValue: row.text(2)) ?? .stored
            }
            var devices: [String: [String: MemoryOutbox.Device]] = [:]
            try db.query(
                "SELECT user_id, device_id, transport, content_free, active, disabled_reason, updated_at FROM devices"
            ) { row in
                devices[row.text(0), default: [:]][row.text(1)] = MemoryOutbox.Device(
                    target: row.text(2), contentFree: row.int64(3) != 0, active: row.int64(4) != 0,
                    disabledReason: row.optionalText(5), registeredAt: row.int64(6))
            }
            return MemoryOutbox.Snapshot(jobs: jobs, entries: entries, devices: devices)
        }
    }

    /// What the migrations made (see `SchemaShape`).
    package func schemaShape() throws(StoreError) -> SchemaShape {
        try read { db throws(DatabaseError) in try db.schemaShape() }
    }

    /// How the database would run `sql` (see `SQLConnection.queryPlan`).
    package func queryPlan(_ sql: String, _ bindings: [SQLValue] = []) throws(StoreError) -> [String] {
        try read { db throws(DatabaseError) in try db.queryPlan(sql, bindings) }
    }
}
