package import RelayCore

/// The part of the store the push scheduler and the live side's catch-up need: due batches,
/// outcomes, effects, the next due time, events. `SQLStore` is one (through `RelayStore`);
/// `MemoryOutboxStore` is the other, on which the notifier is tested alone.
package protocol PushOutbox: Sendable {
    /// Whether this node delivers pushes and events (and reports presence changes): on a cluster,
    /// one node at a time.
    var delivers: Bool { get }
    /// The due jobs of the devices `admission` (pure: by free slots per host) takes while they
    /// are read, oldest due first, coalesced into one batch per device; leaving out the devices
    /// in `skipping` (device keys, with the ids of their jobs in flight); at most `limit`.
    func pushBatches(
        now: Timestamp, limit: Int, skipping: [String: [Int64]], choosing admission: inout HostAdmission
    ) throws(StoreError) -> [PushBatch]
    /// Records how delivery attempts ended (one write for all of them); the completion gets what
    /// each "gone" answer did to its device, by device key (`DeliveryPolicy.gone`: one about a
    /// token the device no longer has disables nothing).
    func finish(
        _ outcomes: [(batch: PushBatch, result: DeliveryPolicy.Verdict)], now: Timestamp,
        completion: @escaping @Sendable (Result<[String: GoneDecision], StoreError>) -> Void)
    /// Keeps push attempts for the delivery trace; fire and forget.
    func trace(_ attempts: [PushAttempt], now: Timestamp)
    /// Carries out a decision taken outside a store transaction (`DeliveryPolicy.caughtUp`: a
    /// catch-up's pushes wait for the ack); fire and forget, in order with the other writes.
    func apply(_ effect: PushEffect, now: Timestamp)
    /// The earliest due time among pending push and event jobs, if any; with `after`, the
    /// earliest later than that (the scheduler sleeps until then).
    func nextDueAt(after: Timestamp?) throws(StoreError) -> Timestamp?
    func dueEvents(now: Timestamp, limit: Int, skipping: Set<Int64>) throws(StoreError) -> [EventJob]
    func finishEvent(
        _ job: EventJob, result: DeliveryPolicy.Verdict, now: Timestamp,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void)
}

extension PushOutbox {
    /// Records how one delivery attempt ended.
    package func finish(
        _ batch: PushBatch, result: DeliveryPolicy.Verdict, now: Timestamp,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        finish([(batch, result)], now: now) { completion($0.map { _ in () }) }
    }

    /// Every due device's batch, up to `limit` devices, no host ever full (the tests' way to
    /// look at what is due).
    package func duePushes(
        now: Timestamp, limit: Int, skipping: [String: [Int64]] = [:]
    ) throws(StoreError) -> [PushBatch] {
        var admission = HostAdmission.takingAll
        return try pushBatches(now: now, limit: limit, skipping: skipping, choosing: &admission)
    }
}
