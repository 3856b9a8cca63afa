import RelayCore
import RelayStore

/// An event for the chat server (docs/ARCHITECTURE.md §5): `presence.changed`, `message.acked`,
/// `push.delivered`, `push.failed`, `device.disabled`.
struct RelayEvent: Sendable {
    var type: String
    /// The event's JSON object (without envelope), compactly serialized.
    var data: [UInt8]
    var at: Timestamp

    static func messageAcked(userId: String, seq: Int64, at: Timestamp) -> RelayEvent {
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("userId", userId)
        writer.member("seq", seq)
        writer.member("at", at)
        writer.endObject()
        return RelayEvent(type: "message.acked", data: writer.bytes, at: at)
    }

    /// The body sent to `eventsUrl`: `{type, timestamp, data}` (Standard Webhooks' envelope).
    var envelope: [UInt8] {
        var writer = JSONWriter(capacity: data.count + 96)
        writer.beginObject()
        writer.member("type", type)
        writer.member("timestamp", at)
        writer.key("data")
        writer.raw(data)
        writer.endObject()
        return writer.bytes
    }

    static func presenceChanged(_ change: PresenceDebouncer.Change) -> RelayEvent {
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("userId", change.userId)
        writer.member("online", change.online)
        writer.member("at", change.at)
        writer.endObject()
        return RelayEvent(type: "presence.changed", data: writer.bytes, at: change.at)
    }
}

/// Where events go (counted in `pushrelay_events_total`; delivered to `eventsUrl` when set).
protocol RelayEventSink: Sendable {
    func emit(_ event: RelayEvent)
}

/// Counts every event and, when an `eventsUrl` is configured, queues it durably in the store;
/// the notifier delivers it, signed and retried like a push.
struct EventOutbox: RelayEventSink {
    let store: any RelayStore
    let metrics: Metrics
    let logger: Logger
    let deliver: Bool
    /// How long an undeliverable event is retried before it is dead.
    static let lifetimeMs: Int64 = 86_400_000

    func emit(_ event: RelayEvent) {
        metrics.recordEvent(type: event.type)
        logger.debug("event", ("type", event.type))
        guard deliver else { return }
        store.queueEvent(
            type: event.type, body: event.envelope, now: event.at,
            expiresAt: Timestamp(milliseconds: event.at.milliseconds + Self.lifetimeMs))
    }
}
