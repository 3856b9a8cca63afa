import RelayCore

/// An event for the chat server (DESIGN §5): `presence.changed`, later `message.acked`,
/// `push.delivered`, `push.failed`, `device.disabled`.
struct RelayEvent: Sendable {
    var type: String
    /// The event's JSON object (without envelope), compactly serialized.
    var data: [UInt8]
    var at: Timestamp

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

/// Where events go. The push notifier delivers them to `eventsUrl`; until then they are counted
/// (`pushrelay_events_total`) and logged at debug level.
protocol RelayEventSink: Sendable {
    func emit(_ event: RelayEvent)
}

struct CountingEventSink: RelayEventSink {
    let metrics: Metrics
    let logger: Logger

    func emit(_ event: RelayEvent) {
        metrics.recordEvent(type: event.type)
        logger.debug("event", ("type", event.type), ("data", String(decoding: event.data, as: UTF8.self)))
    }
}
