package import RelayCore

/// What `accept` did with a message.
package enum AcceptOutcome: Sendable {
    /// Stored now; one entry per recipient in request order.
    case accepted([RecipientSeq])
    /// The same id and body were accepted before: the first answer again.
    case replay([RecipientSeq])
    /// The same id was accepted before with another body.
    case conflict
}

package struct RecipientSeq: Sendable, Equatable {
    package var userId: String
    package var seq: Int64
    package var delivery: InitialDelivery
}

/// A message as `accept` stores it.
package struct NewMessage: Sendable {
    package var message: IncomingMessage
    /// SHA-256 of the canonical request; the idempotency check compares it.
    package var fingerprint: [UInt8]
    package var now: Timestamp
    /// Decides when each registered device's push job falls due; nil queues none.
    package var delivery: DeliveryPolicy?
    /// The recipients' devices with an open foreground socket, seen just before the write: they
    /// get the message live, and their push waits for the ack. A snapshot, not a question asked
    /// from inside the transaction: a device that comes or goes meanwhile is pushed a little
    /// sooner or later, never not at all.
    package var online: [String: Set<String>]
    /// Nil: every registered device of each recipient gets a push job.
    package var targets: PushTargets?

    package init(
        message: IncomingMessage, fingerprint: [UInt8], now: Timestamp, delivery: DeliveryPolicy? = nil,
        online: [String: Set<String>] = [:], targets: PushTargets? = nil
    ) {
        self.message = message
        self.fingerprint = fingerprint
        self.now = now
        self.delivery = delivery
        self.online = online
        self.targets = targets
    }
}

/// The devices a message is pushed to when its sender names them (a Matrix notify addresses
/// its pushers, one notify per pusher): only these get a push job; one that is addressed again
/// for a message already stored (another pusher's notify for the same event, a retry) gets the
/// job it lacks, once. Devices in `contentFree` are made content-free in the same write (their
/// pusher asked for ids only), so that no push to them ever carries the content.
package struct PushTargets: Sendable {
    /// User → device ids.
    package var devices: [String: Set<String>]
    package var contentFree: [String: Set<String>]
    /// The fingerprint of a stored version this message replaces (an ids-only version of the
    /// same event, stored first by another pusher's notify): its content, push and fingerprint
    /// are overwritten, its inbox entries kept.
    package var supersedes: [UInt8]?

    package init(devices: [String: Set<String>], contentFree: [String: Set<String>], supersedes: [UInt8]?) {
        self.devices = devices
        self.contentFree = contentFree
        self.supersedes = supersedes
    }
}

/// The head of one user's inbox.
package struct InboxHead: Sendable, Equatable {
    package var userId: String
    package var epoch: String
    package var headSeq: Int64
    package var ackSeq: Int64
    package var prunedSeq: Int64
}

/// One message as a client reads it.
package struct InboxMessage: Sendable {
    package var seq: Int64
    package var id: String
    package var conversationId: String?
    package var senderId: String?
    /// Serialized JSON, spliced into answers as it is.
    package var payload: [UInt8]
    package var createdAt: Timestamp

    package init(
        seq: Int64, id: String, conversationId: String?, senderId: String?, payload: [UInt8], createdAt: Timestamp
    ) {
        self.seq = seq
        self.id = id
        self.conversationId = conversationId
        self.senderId = senderId
        self.payload = payload
        self.createdAt = createdAt
    }
}

package struct CatchUpPage: Sendable {
    package var head: InboxHead
    package var window: CatchUpWindow
    package var messages: [InboxMessage]
    package var hasMore: Bool
}

/// A message with its per-recipient delivery state (`GET /v1/messages/{id}`).
package struct StoredMessage: Sendable {
    package var id: String
    package var conversationId: String?
    package var senderId: String?
    package var payload: [UInt8]
    package var push: [UInt8]?
    package var priority: String
    package var collapseKey: String?
    package var createdAt: Timestamp
    package var expiresAt: Timestamp
    package var recipients: [(userId: String, seq: Int64, state: DeliveryState)]
}

/// A registered push device.
/// A device's fields that a registration may leave as they are.
package struct DeviceFields: OptionSet, Sendable {
    package let rawValue: Int
    package init(rawValue: Int) { self.rawValue = rawValue }

    package static let platform = DeviceFields(rawValue: 1)
    package static let contentFree = DeviceFields(rawValue: 2)
    package static let matrix = DeviceFields(rawValue: 4)
}

package struct Device: Sendable, Equatable {
    package var userId: String
    package var deviceId: String
    /// The push transport's stored form (`PushTransport.target`).
    package var target: String
    package var platform: String?
    package var contentFree: Bool
    package var active: Bool
    package var disabledReason: String?
    package var createdAt: Timestamp
    package var updatedAt: Timestamp
    /// The Matrix pusher this device stands for, if any.
    package var matrix: MatrixPusher?

    package init(
        userId: String, deviceId: String, target: String, platform: String?, contentFree: Bool, active: Bool = true,
        disabledReason: String? = nil, createdAt: Timestamp, updatedAt: Timestamp, matrix: MatrixPusher? = nil
    ) {
        self.matrix = matrix
        self.userId = userId
        self.deviceId = deviceId
        self.target = target
        self.platform = platform
        self.contentFree = contentFree
        self.active = active
        self.disabledReason = disabledReason
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

extension Device {
    /// How the device is reached (`nil` only for a row no API call could have written).
    package var transport: PushTransport? { PushTransport(target: target) }
}

/// A Matrix pusher's identity (`app_id`, `pushkey`), as the homeserver's notifies name it.
package struct MatrixPusher: Sendable, Equatable {
    package var appId: String
    package var pushkey: String

    package init(appId: String, pushkey: String) {
        self.appId = appId
        self.pushkey = pushkey
    }
}

/// Result of an ack.
package enum AckOutcome: Sendable, Equatable {
    /// The cursor moved to `ackSeq`.
    case acknowledged(ackSeq: Int64)
    /// The ack was not above the cursor, which stays at `ackSeq` (a no-op, still a success).
    case unchanged(ackSeq: Int64)
    case epochMismatch(current: String)
    case beyondHead(headSeq: Int64)
}

/// Client tokens for this device issued at or before `revokedAtSeconds` are refused.
package struct TokenRevocation: Sendable, Equatable {
    package var userId: String
    package var deviceId: String
    package var revokedAtSeconds: Int64

    package init(userId: String, deviceId: String, revokedAtSeconds: Int64) {
        self.userId = userId
        self.deviceId = deviceId
        self.revokedAtSeconds = revokedAtSeconds
    }
}

/// A committed transaction, as its listeners see it.
package struct CommittedBatch: Sendable {
    /// Writes in it.
    package var writes: Int
    /// Whom it concerns: the largest effect of its writes.
    package var effect: WriteEffect
}

/// What committing a write means for those who act on the store's contents (the notifier, the
/// retention pass), in increasing order: each listener is woken from its own level up.
package enum WriteEffect: Int, Sendable, Comparable {
    /// Only housekeeping (retention): it wakes no one (a retention pass woken by its own commit
    /// would run forever).
    case maintenance
    /// Stored data, but no push or event job can have changed: a message whose recipients have
    /// no registered device. Retention hears of it; the notifier need not look (under load it
    /// would look after every commit, and on PostgreSQL each look costs round trips).
    case data
    /// Push or event jobs may have been queued, changed or fallen due.
    case jobs

    package static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// What one retention pass did, and when the next one has work.
package struct PruneResult: Sendable, Equatable {
    /// Inbox entries removed.
    package var removed: Int
    /// The earliest time something left becomes prunable (an expiry, or an acked entry or a
    /// finished job reaching the retention window); nil when nothing left ever will by time
    /// alone (a later write or ack changes that, and schedules a pass of its own).
    package var nextDue: Timestamp?

    package init(removed: Int, nextDue: Timestamp?) {
        self.removed = removed
        self.nextDue = nextDue
    }
}
