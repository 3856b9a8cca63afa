import RelayCore

/// The one place the SQL stores carry out what the delivery decisions return (`PushEffect`): a
/// statement per effect, each `WHERE` only selecting what the effect names. `MemoryOutbox.apply`
/// is the same in memory; the differential test holds the two to each other.
extension SQLStore {
    /// Carries out `effects` in order inside a write; runs of updates with the same change (a
    /// pass's delivered batches) go in one statement.
    static func apply(_ effects: [PushEffect], _ db: SQLWrite, now: Int64) throws(DatabaseError) {
        var index = effects.startIndex
        while index < effects.endIndex {
            guard case .update(var jobs, let change) = effects[index] else {
                try apply(effects[index], db, now: now)
                index += 1
                continue
            }
            index += 1
            while index < effects.endIndex, case .update(let more, change) = effects[index] {
                jobs += more
                index += 1
            }
            try apply(.update(jobs: jobs, change), db, now: now)
        }
    }

    static func apply(_ effect: PushEffect, _ db: SQLWrite, now: Int64) throws(DatabaseError) {
        switch effect {
        case .insert(let job):
            try db.run(
                """
                INSERT INTO push_jobs(webhook_id, kind, user_id, device_id, message_id, seq, collapse_key,
                    state, due_at, expires_at, created_at, updated_at, badge)
                VALUES (?, ?, ?, ?, ?, ?, ?, \(JobState.pending.sql), ?, ?, ?, ?, ?)
                """,
                [
                    .text(job.webhookId), .text(job.kind.rawValue), .text(job.userId), .text(job.deviceId),
                    .optional(job.messageId), .int(job.seq), .optional(job.collapseKey), .int(job.dueAt),
                    .int(job.expiresAt), .int(job.createdAt), .int(job.createdAt), job.badge.map { .int($0) } ?? .null,
                ])
        case .cancel(let scope, let reason):
            let (condition, bindings) = selecting(scope)
            try db.run(
                """
                UPDATE push_jobs SET state = \(JobState.cancelled.sql), last_error = ?, updated_at = ?
                WHERE \(condition) AND state = \(JobState.pending.sql)
                """, [.text(reason.text), .int(now)] + bindings)
        case .hold(let scope, let notBefore):
            let (condition, bindings) = selecting(scope)
            try db.run(
                """
                UPDATE push_jobs SET due_at = \(db.dialect.greatest)(due_at, ?), updated_at = ?
                WHERE \(condition) AND state = \(JobState.pending.sql)
                """, [.int(notBefore), .int(now)] + bindings)
        case .update(let jobs, let change):
            guard !jobs.isEmpty else { return }
            let (sql, bindings) = updateSQL(change, db.dialect)
            try db.run(sql, bindings + [.int(now), db.dialect.idList(jobs)])
        case .revive(let job, let dueAt, let expiresAt):
            try db.run(
                """
                UPDATE push_jobs SET state = \(JobState.pending.sql), attempts = 0, last_error = NULL, due_at = ?,
                    expires_at = ?, updated_at = ? WHERE id = ? AND state = \(JobState.dead.sql)
                """, [.int(dueAt), .int(expiresAt), .int(now), .int(job)])
        case .markEntries(let userId, let seqs, let state, let replacing):
            try db.run(
                """
                UPDATE inbox_entries SET state = \(state.sql)
                WHERE user_id = ? AND seq BETWEEN ? AND ? AND \(DeliveryState.any("state", of: replacing))
                """, [.text(userId), .int(seqs.lowerBound), .int(seqs.upperBound)])
        case .disableDevice(let userId, let deviceId, let target, let reason):
            try db.run(
                """
                UPDATE devices SET active = 0, disabled_reason = ?, updated_at = ?
                WHERE user_id = ? AND device_id = ? AND transport = ?
                """, [.text(reason), .int(now), .text(userId), .text(deviceId), .text(target)])
            db.prefetched.devices[userId] = nil
        }
    }

    /// The condition selecting a scope's jobs (the pending state is added by the statement).
    private static func selecting(_ scope: JobScope) -> (String, [SQLValue]) {
        switch scope {
        case .device(let userId, let deviceId):
            ("user_id = ? AND device_id = ?", [.text(userId), .text(deviceId)])
        case .collapsing(let userId, let deviceId, let collapseKey):
            (
                "user_id = ? AND device_id = ? AND collapse_key = ?",
                [.text(userId), .text(deviceId), .text(collapseKey)]
            )
        case .clear(let userId, let deviceId):
            ("user_id = ? AND device_id = ? AND kind = \(PushKind.clear.sql)", [.text(userId), .text(deviceId)])
        case .acked(let userId, let seq):
            ("user_id = ? AND kind <> \(PushKind.clear.sql) AND seq <= ?", [.text(userId), .int(seq)])
        case .caughtUp(let userId, let deviceId, let seq):
            (
                "user_id = ? AND device_id = ? AND kind <> \(PushKind.clear.sql) AND seq <= ?",
                [.text(userId), .text(deviceId), .int(seq)]
            )
        }
    }

    /// The statement of an `update`: its own bindings first, then the time and the job ids.
    static func updateSQL(_ change: JobUpdate, _ dialect: SQLDialect) -> (String, [SQLValue]) {
        var sets: [String] = []
        var bindings: [SQLValue] = []
        // (A pending job stays pending: no write of its state, which would run the counters' trigger.)
        if change.state != .pending { sets.append("state = \(change.state.sql)") }
        if change.countsAttempt { sets.append("attempts = attempts + 1") }
        if let dueAt = change.dueAt {
            sets.append("due_at = ?")
            bindings.append(.int(dueAt))
        }
        switch change.lastError {
        case .keep: break
        case .clear: sets.append("last_error = NULL")
        case .set(let error):
            sets.append("last_error = ?")
            bindings.append(.text(error))
        }
        sets.append("updated_at = ?")
        let sql = """
            UPDATE push_jobs SET \(sets.joined(separator: ", "))
            WHERE \(dialect.among("id")) AND \(dialect.unindexed("state")) = \(JobState.pending.sql)
            """
        return (sql, bindings)
    }
}
