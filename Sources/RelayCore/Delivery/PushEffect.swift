/// What a delivery decision does to the outbox: a closed set of changes that every store carries
/// out the same way, one statement (SQL) or one loop (`MemoryOutbox`) per case. The decisions
/// (`DeliveryDecision.swift`) return them; a store only selects what they read and applies what
/// they return, so no rule of a push job's life is written in SQL.
package enum PushEffect: Sendable, Equatable {
    /// A new pending job.
    case insert(NewPushJob)
    /// The pending jobs in scope end `cancelled`, the reason their last error.
    case cancel(JobScope, CancelReason)
    /// The pending jobs in scope fall due no sooner than `notBefore` (a later due time stays).
    case hold(JobScope, notBefore: Int64)
    /// These jobs, if still pending, take their next state after an attempt or a pass.
    case update(jobs: [Int64], JobUpdate)
    /// A dead job is pending again with a fresh attempt budget (the operator's retry).
    case revive(job: Int64, dueAt: Int64, expiresAt: Int64)
    /// The user's inbox entries in the range, where in one of `replacing`, take `state`.
    case markEntries(userId: String, seqs: ClosedRange<Int64>, state: DeliveryState, replacing: [DeliveryState])
    /// The device is disabled with `reason` if its transport is still `target`.
    case disableDevice(userId: String, deviceId: String, target: String, reason: String)

    package var isUpdate: Bool {
        if case .update = self { return true }
        return false
    }
}

/// A push job to create (`PushEffect.insert`).
package struct NewPushJob: Sendable, Equatable {
    package var webhookId: String
    package var kind: PushKind
    package var userId: String
    package var deviceId: String
    package var messageId: String?
    package var seq: Int64
    package var collapseKey: String?
    package var dueAt: Int64
    package var expiresAt: Int64
    /// A homeserver's count (Matrix `counts.unread`), if it gave one.
    package var badge: Int64?
    package var createdAt: Int64

    package init(
        webhookId: String, kind: PushKind, userId: String, deviceId: String, messageId: String?, seq: Int64,
        collapseKey: String?, dueAt: Int64, expiresAt: Int64, badge: Int64?, createdAt: Int64
    ) {
        self.webhookId = webhookId
        self.kind = kind
        self.userId = userId
        self.deviceId = deviceId
        self.messageId = messageId
        self.seq = seq
        self.collapseKey = collapseKey
        self.dueAt = dueAt
        self.expiresAt = expiresAt
        self.badge = badge
        self.createdAt = createdAt
    }
}

/// Which pending jobs a `cancel` or `hold` acts on.
package enum JobScope: Sendable, Equatable {
    /// All of a device's (deleted, or gone at its push service).
    case device(userId: String, deviceId: String)
    /// A device's jobs with this collapse key (a newer message replaces them).
    case collapsing(userId: String, deviceId: String, collapseKey: String)
    /// A device's `clear` (a newer one replaces it).
    case clear(userId: String, deviceId: String)
    /// The message jobs of every device of the user up to an ack.
    case acked(userId: String, throughSeq: Int64)
    /// One device's message jobs up to what a catch-up sent it.
    case caughtUp(userId: String, deviceId: String, throughSeq: Int64)

    /// Whether a pending job with these fields is in scope (what the SQL's `WHERE` says).
    package func contains(userId: String, deviceId: String, kind: PushKind, seq: Int64, collapseKey: String?) -> Bool {
        switch self {
        case .device(let user, let device):
            user == userId && device == deviceId
        case .collapsing(let user, let device, let key):
            user == userId && device == deviceId && collapseKey == key
        case .clear(let user, let device):
            user == userId && device == deviceId && kind == .clear
        case .acked(let user, let through):
            user == userId && kind.announcesMessage && seq <= through
        case .caughtUp(let user, let device, let through):
            user == userId && device == deviceId && kind.announcesMessage && seq <= through
        }
    }
}

/// Why pending jobs are cancelled (stored as their `last_error`).
package enum CancelReason: Sendable, Equatable {
    case acked
    case collapsed
    case superseded
    case deviceDeleted
    /// The device's push service said its token is gone (the service's reason).
    case deviceGone(String)

    package var text: String {
        switch self {
        case .acked: "acked"
        case .collapsed: "collapsed"
        case .superseded: "superseded"
        case .deviceDeleted: "device deleted"
        case .deviceGone(let reason): reason
        }
    }
}

/// A pending job's next state (`PushEffect.update`): whether it ends, when it is due again, what
/// its last error says, and whether the attempt counts toward the backoff.
package struct JobUpdate: Sendable, Hashable {
    package enum LastError: Sendable, Hashable {
        case keep
        case clear
        case set(String)
    }

    /// `pending`, `delivered` or `dead`.
    package var state: JobState
    /// nil: unchanged.
    package var dueAt: Int64?
    package var lastError: LastError
    package var countsAttempt: Bool

    package init(state: JobState, dueAt: Int64? = nil, lastError: LastError, countsAttempt: Bool) {
        self.state = state
        self.dueAt = dueAt
        self.lastError = lastError
        self.countsAttempt = countsAttempt
    }
}
