/// Due push jobs of one device, coalesced into one push (`PushBatch.coalescing`; ARCHITECTURE
/// §2: several pending messages for one device go out as one push carrying the unread count).
package struct PushBatch: Sendable {
    package var userId: String
    package var deviceId: String
    /// The device's push transport, stored form (`PushTransport.target`).
    package var target: String
    package var contentFree: Bool
    package var jobIds: [Int64]
    /// Stable across retries of the same batch, new when the batch's jobs change: the oldest
    /// job's id and the newest job's row id (a message joining a window waiting for a retry
    /// makes another body, so it must not reuse an id a receiver may drop as a replay).
    package var webhookId: String
    package var kind: PushKind
    package var seqFrom: Int64
    package var seqTo: Int64
    /// The newest message covered.
    package var messageId: String?
    package var unread: Int64
    package var priority: Priority
    package var collapseKey: String?
    /// The newest message's `push` object, serialized.
    package var push: [UInt8]?
    package var attempts: Int
    /// The batch may be retried until the newest TTL among its messages passes.
    package var expiresAt: Timestamp

    package init(
        userId: String, deviceId: String, target: String, contentFree: Bool, jobIds: [Int64], webhookId: String,
        kind: PushKind, seqFrom: Int64, seqTo: Int64, messageId: String?, unread: Int64, priority: Priority,
        collapseKey: String?, push: [UInt8]?, attempts: Int, expiresAt: Timestamp
    ) {
        self.userId = userId
        self.deviceId = deviceId
        self.target = target
        self.contentFree = contentFree
        self.jobIds = jobIds
        self.webhookId = webhookId
        self.kind = kind
        self.seqFrom = seqFrom
        self.seqTo = seqTo
        self.messageId = messageId
        self.unread = unread
        self.priority = priority
        self.collapseKey = collapseKey
        self.push = push
        self.attempts = attempts
        self.expiresAt = expiresAt
    }

    package var deviceKey: String { Self.deviceKey(userId, deviceId) }

    /// One device's key in the sets of devices in flight.
    package static func deviceKey(_ userId: String, _ deviceId: String) -> String { userId + "\u{0}" + deviceId }
}

extension PushBatch {
    /// The one push that announces a device's due jobs (nil for none). Message jobs come first,
    /// in seq order, and a `clear` among them only adds its job: the push is the newest
    /// message's (its id, collapse key and `push` object), high priority if any message is, and
    /// carries the newest badge a homeserver gave, else `unread` (the inbox's head − ack). It
    /// may be retried until the latest TTL among them, and counts the most attempts any made.
    /// Its webhook id is the first job's, plus the newest job's id when there are several (a
    /// receiver may drop a repeated id as a replay, and a grown window is another body).
    /// A due call goes first and alone (it rings; it announces nothing else): the others wait
    /// for the next pass.
    package static func coalescing(
        _ jobs: [DueJob], userId: String, deviceId: String, target: String, contentFree: Bool, unread: Int64
    ) -> PushBatch? {
        let rank: (PushKind) -> Int = { kind in kind == .call ? 0 : kind == .message ? 1 : 2 }
        var ordered = jobs.sorted { a, b in (rank(a.kind), a.seq, a.id) < (rank(b.kind), b.seq, b.id) }
        if let call = ordered.first, call.kind == .call { ordered = [call] }
        guard let first = ordered.first else { return nil }
        var batch = PushBatch(
            userId: userId, deviceId: deviceId, target: target, contentFree: contentFree, jobIds: [first.id],
            webhookId: first.webhookId, kind: first.kind, seqFrom: first.seq, seqTo: first.seq,
            messageId: first.messageId, unread: first.badge ?? max(0, unread), priority: first.priority,
            collapseKey: first.collapseKey, push: first.push, attempts: first.attempts, expiresAt: first.expiresAt)
        for job in ordered.dropFirst() {
            batch.jobIds.append(job.id)
            batch.attempts = max(batch.attempts, job.attempts)
            batch.expiresAt = max(batch.expiresAt, job.expiresAt)
            guard job.kind == .message else { continue }
            batch.seqFrom = min(batch.seqFrom, job.seq)
            batch.seqTo = max(batch.seqTo, job.seq)
            batch.messageId = job.messageId
            batch.collapseKey = job.collapseKey
            batch.push = job.push
            if job.priority == .high { batch.priority = .high }
            if let badge = job.badge { batch.unread = badge }
        }
        if batch.jobIds.count > 1, let newest = batch.jobIds.max() { batch.webhookId += "_\(newest)" }
        return batch
    }
}
