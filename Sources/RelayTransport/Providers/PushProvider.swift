package import RelayCore

/// The seam between the notifier and the services that carry a push: the notifier decides
/// when and what (one batch per device, retries, breakers), a provider turns that batch into
/// its service's request and the service's answer into a `DeliveryOutcome`. The policy and the
/// notifier never know which service a device uses.
package protocol PushProvider: Sendable {
    /// What this device's pushes share their delivery slots and circuit breaker with.
    func route(for transport: PushTransport) -> PushRoute

    /// Sends one push; `done` gets the outcome once, on any thread, and must not block.
    func send(
        _ batch: PushBatch, to transport: PushTransport, at time: Timestamp,
        done: @escaping @Sendable (DeliveryReceipt) -> Void)

    /// Closes what the provider holds open (connections of its own); deliveries in flight are
    /// dropped without an answer (their jobs stay pending in the store).
    func stop()
}

extension PushProvider {
    package func stop() {}
}

/// Which provider carries a device's pushes: its transport's service, signed with its app's
/// credentials.
package struct ProviderKey: Hashable, Sendable {
    package var kind: PushTransport.Kind
    package var app: AppID

    package init(_ kind: PushTransport.Kind, app: AppID = .default) {
        self.kind = kind
        self.app = app
    }

    package init(_ transport: PushTransport) {
        self.init(transport.kind, app: transport.app)
    }
}
