package import RelayCore
package import RelayStore
package import RelayTelemetry

/// An event for the chat server (docs/ARCHITECTURE.md §5): `presence.changed`, `message.acked`,
/// `push.delivered`, `push.failed`, `device.disabled` (durable, retried), and `signal.received`
/// (ephemeral: one attempt, never stored).
package struct RelayEvent: Sendable {
    package enum Kind: String, Sendable {
        case presenceChanged = "presence.changed"
        case messageAcked = "message.acked"
        case pushDelivered = "push.delivered"
        case pushFailed = "push.failed"
        case deviceDisabled = "device.disabled"
        case signalReceived = "signal.received"
    }

    package var type: Kind
    /// The event's JSON object (without envelope), compactly serialized.
    package var data: [UInt8]
    package var at: Timestamp

    package static func messageAcked(userId: String, seq: Int64, at: Timestamp) -> RelayEvent {
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("userId", userId)
        writer.member("seq", seq)
        writer.member("at", at)
        writer.endObject()
        return RelayEvent(type: .messageAcked, data: writer.bytes, at: at)
    }

    /// The body sent to `eventsUrl`: `{type, timestamp, data}` (Standard Webhooks' envelope).
    package var envelope: [UInt8] {
        var writer = JSONWriter(capacity: data.count + 96)
        writer.beginObject()
        writer.member("type", type.rawValue)
        writer.member("timestamp", at)
        writer.key("data")
        writer.raw(data)
        writer.endObject()
        return writer.bytes
    }

    /// A client sent a signal on its socket; the chat server decides who gets it
    /// (`POST /v1/signals`).
    package static func signalReceived(userId: String, deviceId: String, _ signal: Signal, at: Timestamp) -> RelayEvent
    {
        var writer = JSONWriter(capacity: 160 + (signal.data?.count ?? 0))
        writer.beginObject()
        writer.member("userId", userId)
        writer.member("deviceId", deviceId)
        signal.write(into: &writer)
        writer.member("at", at)
        writer.endObject()
        return RelayEvent(type: .signalReceived, data: writer.bytes, at: at)
    }

    package static func presenceChanged(_ change: PresenceDebouncer.Change) -> RelayEvent {
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("userId", change.userId)
        writer.member("online", change.online)
        writer.member("at", change.at)
        writer.endObject()
        return RelayEvent(type: .presenceChanged, data: writer.bytes, at: change.at)
    }
}

/// Where events go (counted in `pushrelay_events_total`; delivered to `eventsUrl` when set).
package protocol RelayEventSink: Sendable {
    func emit(_ event: RelayEvent)
}

/// Counts every event and, when an `eventsUrl` is configured, queues it durably in the store;
/// the notifier delivers it, signed and retried like a push.
package struct EventOutbox: RelayEventSink {
    let store: any RelayStore
    let metrics: Metrics
    let logger: Logger
    let deliver: Bool
    package init(store: any RelayStore, metrics: Metrics, logger: Logger, deliver: Bool) {
        self.store = store
        self.metrics = metrics
        self.logger = logger
        self.deliver = deliver
    }

    /// How long an undeliverable event is retried before it is dead.
    static let lifetimeMs: Int64 = 86_400_000

    package func emit(_ event: RelayEvent) {
        metrics.recordEvent(type: event.type.rawValue)
        logger.debug("event", ("type", event.type.rawValue))
        guard deliver else { return }
        store.queueEvent(
            type: event.type.rawValue, body: event.envelope, now: event.at,
            expiresAt: Timestamp(milliseconds: event.at.milliseconds + Self.lifetimeMs))
    }
}
