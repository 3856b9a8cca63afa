/// How a recipient was first served, as `POST /v1/messages` reports it.
package enum InitialDelivery: String, Sendable {
    /// Sent on an open WebSocket.
    case live
    /// Queued for a push notification.
    case push
    /// Kept in the inbox only (no online device, no push device).
    case stored
}

/// Where one (message, recipient) stands: `stored → live | pushed → fetched → acked`, or it
/// ended as `expired` (TTL) or `dead` (push gave up).
package enum DeliveryState: String, Sendable {
    case stored, live, pushed, fetched, acked, expired, dead

    /// Derives the state from the inbox cursors, so that acks and fetches move every message
    /// below them at once without a write per row.
    package static func derive(
        recorded: DeliveryState, seq: Int64, ackSeq: Int64, fetchedSeq: Int64, expiresAt: Timestamp, now: Timestamp
    ) -> DeliveryState {
        if seq <= ackSeq { return .acked }
        if now >= expiresAt { return .expired }
        if recorded == .dead { return .dead }
        if seq <= fetchedSeq { return .fetched }
        return recorded
    }
}
