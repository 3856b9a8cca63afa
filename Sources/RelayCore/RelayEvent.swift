/// An event for the chat server (docs/ARCHITECTURE.md §5): `presence.changed`, `message.acked`,
/// `push.delivered`, `push.failed`, `device.disabled` (durable, retried), and `signal.received`
/// (ephemeral: one attempt, never stored). A value of the core: the live side and the delivery
/// side both make them, and the live side need not link the push transports to.
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

    package init(type: Kind, data: [UInt8], at: Timestamp) {
        self.type = type
        self.data = data
        self.at = at
    }

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
