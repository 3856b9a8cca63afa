/// The push outbox in memory: the jobs, the inbox entries' delivery states, the devices and the
/// inbox cursors the delivery decisions read, changed only by `apply` — the same `PushEffect`s
/// the SQL stores carry out. Each operation reads what its SQL counterpart reads, asks the same
/// decision and applies what it returns, so the two can be run side by side and compared
/// (`OutboxDifferentialTests`); it is also where a log-first store's derived state starts.
package struct MemoryOutbox: Sendable {
    /// One push job, as the store keeps it.
    package struct Job: Sendable, Equatable {
        package var id: Int64
        package var webhookId: String
        package var kind: PushKind
        package var userId: String
        package var deviceId: String
        package var messageId: String?
        package var seq: Int64
        package var collapseKey: String?
        package var state: JobState
        package var dueAt: Int64
        package var expiresAt: Int64
        package var attempts: Int
        package var lastError: String?
        package var badge: Int64?
        package var createdAt: Int64

        package init(
            id: Int64, webhookId: String, kind: PushKind, userId: String, deviceId: String, messageId: String?,
            seq: Int64, collapseKey: String?, state: JobState, dueAt: Int64, expiresAt: Int64, attempts: Int,
            lastError: String?, badge: Int64?, createdAt: Int64
        ) {
            self.id = id
            self.webhookId = webhookId
            self.kind = kind
            self.userId = userId
            self.deviceId = deviceId
            self.messageId = messageId
            self.seq = seq
            self.collapseKey = collapseKey
            self.state = state
            self.dueAt = dueAt
            self.expiresAt = expiresAt
            self.attempts = attempts
            self.lastError = lastError
            self.badge = badge
            self.createdAt = createdAt
        }
    }

    /// A registered device: the transport its pushes go to, and whether it is still active.
    package struct Device: Sendable, Equatable {
        package var target: String
        package var contentFree: Bool
        package var active: Bool
        package var disabledReason: String?
        /// Its last registration (`updated_at`).
        package var registeredAt: Int64

        package init(target: String, contentFree: Bool, active: Bool, disabledReason: String?, registeredAt: Int64) {
            self.target = target
            self.contentFree = contentFree
            self.active = active
            self.disabledReason = disabledReason
            self.registeredAt = registeredAt
        }
    }

    /// A stored message's part of a push.
    package struct Message: Sendable, Equatable {
        package var priority: Priority
        package var push: [UInt8]?

        package init(priority: Priority, push: [UInt8]?) {
            self.priority = priority
            self.push = push
        }
    }

    package private(set) var jobs: [Job] = []
    /// By user, then device id.
    package private(set) var devices: [String: [String: Device]] = [:]
    /// Each user's entries' delivery states, by seq.
    package private(set) var entries: [String: [Int64: DeliveryState]] = [:]
    package private(set) var inboxes: [String: (head: Int64, ack: Int64)] = [:]
    private var messages: [String: Message] = [:]

    package init() {}

    // MARK: Writes (each as its SQL counterpart)

    /// Registers a device or replaces its transport (`putDevice`): active again.
    package mutating func register(userId: String, deviceId: String, target: String, contentFree: Bool, now: Int64) {
        devices[userId, default: [:]][deviceId] = Device(
            target: target, contentFree: contentFree, active: true, disabledReason: nil, registeredAt: now)
    }

    /// Deletes a device (`deleteDevice`).
    package mutating func delete(userId: String, deviceId: String, now: Int64) {
        devices[userId]?[deviceId] = nil
        if devices[userId]?.isEmpty == true { devices[userId] = nil }
        apply([DeliveryPolicy.deleted(userId: userId, deviceId: deviceId)], now: now)
    }

    /// Commits a message for `recipients` (`accept`): each gets the next seq, an entry (`live`
    /// when one of its devices is online, else `stored`) and a job for every active device. The
    /// seqs, in order.
    @discardableResult
    package mutating func accept(
        messageId: String, recipients: [String], collapseKey: String?, badge: Int64?, message: Message,
        expiresAt: Int64, online: [String: Set<String>], policy: DeliveryPolicy, now: Int64, call: Bool = false
    ) -> [Int64] {
        messages[messageId] = message
        var seqs: [Int64] = []
        for userId in recipients {
            var inbox = inboxes[userId] ?? (0, 0)
            inbox.head += 1
            inboxes[userId] = inbox
            seqs.append(inbox.head)
            let committed = CommittedMessage(
                userId: userId, seq: inbox.head, messageId: messageId, collapseKey: collapseKey, badge: badge,
                expiresAt: expiresAt, call: call)
            let present = online[userId] ?? []
            for deviceId in activeDevices(of: userId) {
                apply(
                    policy.committed(
                        committed, deviceId: deviceId, online: present.contains(deviceId),
                        openWindowDue: openWindow(userId: userId, deviceId: deviceId, now: now), now: now,
                        webhookId: "msg_\(jobs.count + 1)"), now: now)
            }
            entries[userId, default: [:]][inbox.head] = present.isEmpty ? .stored : .live
        }
        return seqs
    }

    /// The user acked up to `seq` (`ack`): whether the cursor moved.
    @discardableResult
    package mutating func ack(userId: String, seq: Int64, now: Int64) -> Bool {
        guard var inbox = inboxes[userId], seq <= inbox.head, seq > inbox.ack else { return false }
        let old = inbox.ack
        inbox.ack = seq
        inboxes[userId] = inbox
        var pushed: [String] = []
        for job in jobs
        where job.userId == userId && job.state == .delivered && job.kind == .message && job.seq > old
            && job.seq <= seq && !pushed.contains(job.deviceId)
        {
            pushed.append(job.deviceId)
        }
        var clears = 0
        apply(
            DeliveryPolicy.acked(
                userId: userId, through: seq, pushedDevices: pushed, now: now,
                webhookId: {
                    clears += 1
                    return "clr_\(jobs.count + clears)"
                }), now: now)
        return true
    }

    /// A badge-only push for one device (`queueBadge`).
    package mutating func queueBadge(userId: String, deviceId: String, badge: Int64, now: Int64) {
        apply(
            DeliveryPolicy.clear(
                userId: userId, deviceId: deviceId, seq: inboxes[userId]?.ack ?? 0, badge: badge, now: now,
                webhookId: "clr_\(jobs.count + 1)"), now: now)
    }

    /// The operator retries a dead job (`retryDelivery`): whether it was dead.
    @discardableResult
    package mutating func retry(job id: Int64, now: Int64, expiresAt: Int64) -> Bool {
        guard let job = jobs.first(where: { $0.id == id }), job.state == .dead else { return false }
        apply([DeliveryPolicy.retried(job: id, now: now, expiresAt: expiresAt)], now: now)
        return true
    }

    /// Records how attempts ended (`finish`): what each "gone" answer did, by device key.
    @discardableResult
    package mutating func finish(
        _ outcomes: [(batch: PushBatch, result: DeliveryPolicy.Verdict)], now: Int64
    ) -> [String: GoneDecision] {
        var gone: [String: GoneDecision] = [:]
        var effects: [PushEffect] = []
        for (batch, result) in outcomes {
            var decision = GoneDecision.disable
            if case .deviceGone(_, let since) = result {
                let device = devices[batch.userId]?[batch.deviceId].flatMap {
                    $0.active ? ($0.target, $0.registeredAt) : nil
                }
                decision = DeliveryPolicy.gone(sentTo: batch.target, since: since, device: device)
                gone[batch.deviceKey] = decision
            }
            effects += DeliveryPolicy.recorded(result, of: batch, gone: decision, now: now)
        }
        apply(effects.filter(\.isUpdate) + effects.filter { !$0.isUpdate }, now: now)
        return gone
    }

    // MARK: Reads (each as its SQL counterpart)

    /// The due jobs of the devices `admission` takes, oldest due first, one batch per device
    /// (`pushBatches`).
    package func pushBatches(
        now: Int64, limit: Int, skipping: [String: [Int64]], choosing admission: inout HostAdmission
    ) -> [PushBatch] {
        let sending = Set(skipping.values.joined())
        let due = jobs.filter { job in
            job.state == .pending && job.dueAt <= now && !sending.contains(job.id)
                && devices[job.userId]?[job.deviceId]?.active == true
        }.sorted { ($0.dueAt, $0.id) < ($1.dueAt, $1.id) }
        var chosen: [DueDevice] = []
        var seen = Set<String>()
        let scanLimit = (limit + skipping.count) * 4
        scan: for (scanned, job) in due.enumerated() {
            let key = PushBatch.deviceKey(job.userId, job.deviceId)
            if skipping[key] == nil, seen.insert(key).inserted, let device = devices[job.userId]?[job.deviceId] {
                let candidate = DueDevice(
                    userId: job.userId, deviceId: job.deviceId, target: device.target, contentFree: device.contentFree)
                switch admission.consider(candidate) {
                case .take: chosen.append(candidate)
                case .skip: break
                case .stop: break scan
                }
            }
            if chosen.count >= limit || scanned + 1 >= scanLimit { break }
        }
        return chosen.compactMap { device in
            let inbox = inboxes[device.userId] ?? (0, 0)
            let dueJobs = due.filter { $0.userId == device.userId && $0.deviceId == device.deviceId }.map { job in
                let message = job.messageId.flatMap { messages[$0] }
                return DueJob(
                    id: job.id, webhookId: job.webhookId, kind: job.kind, messageId: job.messageId, seq: job.seq,
                    collapseKey: job.collapseKey, attempts: job.attempts,
                    expiresAt: Timestamp(milliseconds: job.expiresAt), priority: message?.priority ?? .normal,
                    push: message?.push, badge: job.badge)
            }
            return PushBatch.coalescing(
                dueJobs, userId: device.userId, deviceId: device.deviceId, target: device.target,
                contentFree: device.contentFree, unread: inbox.head - inbox.ack)
        }
    }

    /// The earliest pending due time (after `time`, if given) (`nextDueAt`, push jobs only).
    package func nextDueAt(after time: Int64?) -> Int64? {
        jobs.lazy.filter { $0.state == .pending && $0.dueAt > (time ?? .min) }.map(\.dueAt).min()
    }

    /// The device's open push window: the earliest due time still ahead among its pending
    /// message jobs (jobs already due are being sent with everything pending at that moment).
    private func openWindow(userId: String, deviceId: String, now: Int64) -> Int64? {
        jobs.lazy.filter {
            $0.userId == userId && $0.deviceId == deviceId && $0.state == .pending && $0.kind == .message
                && $0.dueAt > now
        }.map(\.dueAt).min()
    }

    private func activeDevices(of userId: String) -> [String] {
        (devices[userId] ?? [:]).filter(\.value.active).keys.sorted()
    }

    // MARK: Effects

    /// Carries out `effects` in order: what `SQLStore.apply` does in SQL.
    package mutating func apply(_ effects: [PushEffect], now: Int64) {
        for effect in effects { apply(effect, now: now) }
    }

    package mutating func apply(_ effect: PushEffect, now: Int64) {
        switch effect {
        case .insert(let new):
            jobs.append(
                Job(
                    id: Int64(jobs.count + 1), webhookId: new.webhookId, kind: new.kind, userId: new.userId,
                    deviceId: new.deviceId, messageId: new.messageId, seq: new.seq, collapseKey: new.collapseKey,
                    state: .pending, dueAt: new.dueAt, expiresAt: new.expiresAt, attempts: 0, lastError: nil,
                    badge: new.badge, createdAt: new.createdAt))
        case .cancel(let scope, let reason):
            changePending(in: scope) { job in
                job.state = .cancelled
                job.lastError = reason.text
            }
        case .hold(let scope, let notBefore):
            changePending(in: scope) { $0.dueAt = max($0.dueAt, notBefore) }
        case .update(let ids, let change):
            let chosen = Set(ids)
            for index in jobs.indices where chosen.contains(jobs[index].id) && jobs[index].state == .pending {
                jobs[index].state = change.state
                if change.countsAttempt { jobs[index].attempts += 1 }
                if let dueAt = change.dueAt { jobs[index].dueAt = dueAt }
                switch change.lastError {
                case .keep: break
                case .clear: jobs[index].lastError = nil
                case .set(let error): jobs[index].lastError = error
                }
            }
        case .revive(let id, let dueAt, let expiresAt):
            for index in jobs.indices where jobs[index].id == id && jobs[index].state == .dead {
                jobs[index].state = .pending
                jobs[index].attempts = 0
                jobs[index].lastError = nil
                jobs[index].dueAt = dueAt
                jobs[index].expiresAt = expiresAt
            }
        case .markEntries(let userId, let seqs, let state, let replacing):
            guard var states = entries[userId] else { return }
            for (seq, current) in states where seqs.contains(seq) && replacing.contains(current) {
                states[seq] = state
            }
            entries[userId] = states
        case .disableDevice(let userId, let deviceId, let target, let reason):
            guard var device = devices[userId]?[deviceId], device.target == target else { return }
            device.active = false
            device.disabledReason = reason
            device.registeredAt = now
            devices[userId]?[deviceId] = device
        }
    }

    private mutating func changePending(in scope: JobScope, _ change: (inout Job) -> Void) {
        for index in jobs.indices where jobs[index].state == .pending {
            let job = jobs[index]
            if scope.contains(
                userId: job.userId, deviceId: job.deviceId, kind: job.kind, seq: job.seq, collapseKey: job.collapseKey)
            {
                change(&jobs[index])
            }
        }
    }
}

extension MemoryOutbox {
    /// What a differential test compares: every job in creation order, every entry's state, every
    /// device (`SQLStore.outboxSnapshot` reads the same from the tables).
    package struct Snapshot: Sendable, Equatable {
        package var jobs: [Job]
        package var entries: [String: [Int64: DeliveryState]]
        package var devices: [String: [String: Device]]

        package init(jobs: [Job], entries: [String: [Int64: DeliveryState]], devices: [String: [String: Device]]) {
            self.jobs = jobs
            self.entries = entries
            self.devices = devices
        }
    }

    package var snapshot: Snapshot { Snapshot(jobs: jobs, entries: entries, devices: devices) }
}
