package import RelayCore
package import RelayStore
package import RelayTelemetry

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
