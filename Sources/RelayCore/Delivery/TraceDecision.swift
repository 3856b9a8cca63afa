/// Why a device did or did not get a message's push, in one word, from its push job as the store
/// keeps it — the answer to "why didn't my phone get it?" (`GET /v1/messages/{id}/deliveries`).
package enum TraceDecision: String, Sendable, CaseIterable {
    /// No job: the device was not registered (or was disabled) when the message came.
    case none
    /// Pending: in its push window (offline) or waiting for the ack (online: it was sent live).
    case waiting
    /// Pending after failed attempts: retried with the backoff until its TTL.
    case retrying
    /// The push service (or webhook) took the push.
    case pushed
    /// Not pushed: the user read it first (on this device live, or elsewhere).
    case read
    /// Not pushed: a newer message with the same `collapseKey` stands for it.
    case collapsed
    /// Not pushed: the device was deleted, or disabled (its reason).
    case cancelled
    /// Given up: the TTL ran out or the service refused it for good (its reason).
    case dead

    /// The decision for a job in `state` after `attempts` attempts, cancelled with `lastError`.
    package init(state: JobState?, attempts: Int, lastError: String?) {
        switch state {
        case nil: self = .none
        case .pending?: self = attempts > 0 ? .retrying : .waiting
        case .delivered?: self = .pushed
        case .dead?: self = .dead
        case .cancelled?:
            switch lastError {
            case CancelReason.acked.text?: self = .read
            case CancelReason.collapsed.text?: self = .collapsed
            default: self = .cancelled
            }
        }
    }
}
