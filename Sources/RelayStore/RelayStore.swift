package import RelayCore

/// The relay's storage seam (docs/ARCHITECTURE.md §7): SQLite for one node, PostgreSQL for a
/// cluster; the rest of the server does not know which one it has. The push outbox the
/// scheduler works on is its narrower part, `PushOutbox`.
///
/// Writes complete through a callback once durable (they may be grouped with others into one
/// transaction); reads are synchronous and see every committed write.
package protocol RelayStore: PushOutbox {
    /// One message. `durable` hears its outcome on the thread that saw it become durable, at once
    /// and in commit order, before `completion` (live delivery: no hand-off on the way to the
    /// sockets); it must not wait for anything.
    func accept(
        _ message: NewMessage, durable: @escaping @Sendable (AcceptOutcome) -> Void,
        completion: @escaping @Sendable (Result<AcceptOutcome, StoreError>) -> Void)
    /// Several messages, in transactions of bounded size with other writes in between: every
    /// item's outcome, in order (a replay or conflict for an item does not stop the others), once
    /// all are stored; a failure if any item was not (the others may be: ids make a retry safe).
    /// `committed` hears of each item as `accept`'s `durable` does.
    func acceptBatch(
        _ messages: [NewMessage], committed: @escaping @Sendable (_ index: Int, AcceptOutcome) -> Void,
        completion: @escaping @Sendable (Result<[AcceptOutcome], StoreError>) -> Void)
    func catchUp(
        userId: String, after: Int64, epoch: String?, limit: Int, maxBytes: Int
    ) throws(StoreError) -> CatchUpPage
    /// The same page handed to `sink` as the database reads it.
    func catchUp<Sink: CatchUpSink>(
        userId: String, after: Int64, epoch: String?, limit: Int, maxBytes: Int, into sink: inout Sink
    ) throws(StoreError)
    /// Records that a client fetched up to `seq` (delivery state `fetched`); fire and forget.
    func markFetched(userId: String, seq: Int64)
    func ack(
        userId: String, seq: Int64, epoch: String?, now: Timestamp,
        completion: @escaping @Sendable (Result<AckOutcome, StoreError>) -> Void)
    func inboxHead(userId: String) throws(StoreError) -> InboxHead
    func message(id: String, now: Timestamp) throws(StoreError) -> StoredMessage?

    /// Registers or replaces a device; `keeping` lists the fields that stay as stored (a client
    /// token's PUT changes only what it names).
    func putDevice(
        _ device: Device, keeping: DeviceFields,
        completion: @escaping @Sendable (Result<(device: Device, created: Bool), StoreError>) -> Void)
    /// Re-enables the devices disabled since `since` whose reason starts with `reason` (an
    /// operator undoing what a configuration mistake did); the count.
    func reenableDevices(
        reason: String, since: Timestamp, now: Timestamp,
        completion: @escaping @Sendable (Result<Int, StoreError>) -> Void)
    /// Deletes a device and revokes the client tokens issued for it up to `time` (whether or not
    /// it was registered: a token may name a device that only ever used the WebSocket).
    func deleteDevice(
        userId: String, deviceId: String, at time: Timestamp,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void)
    /// Every device whose tokens were revoked, and up to when.
    func tokenRevocations() throws(StoreError) -> [TokenRevocation]
    func devices(userId: String) throws(StoreError) -> [Device]
    /// What became of message `messageId` for one recipient (its seq `seq`): the delivery trace.
    func trace(messageId: String, userId: String, seq: Int64) throws(StoreError) -> DeliveryTrace
    /// The device carrying this Matrix pusher, active or disabled.
    func device(matrixAppId: String, pushkey: String) throws(StoreError) -> Device?
    /// A badge-only push for one device (a Matrix notify without an event): a `clear` push
    /// carrying `badge` as its unread count; it replaces one still pending.
    func queueBadge(
        userId: String, deviceId: String, badge: Int64, now: Timestamp,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void)

    /// Persists when a device was last seen online (it survives restarts).
    func recordLastOnline(
        userId: String, deviceId: String, at time: Timestamp,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void)
    /// Each device's last-seen-online time.
    func lastOnline(userId: String) throws(StoreError) -> [String: Timestamp]

    // MARK: Push outbox (the operator's views; the scheduler's part is `PushOutbox`)

    /// Push jobs in `state`, newest first (the dead-letter view).
    func deliveries(state: JobState, userId: String?, limit: Int) throws(StoreError) -> [DeliveryRecord]
    /// Re-queues a dead job with a fresh attempt budget.
    func retryDelivery(
        id: Int64, now: Timestamp, expiresAt: Timestamp,
        completion: @escaping @Sendable (Result<RetryOutcome, StoreError>) -> Void)
    /// Every push job of one message, oldest first (its delivery timeline).
    func deliveries(messageId: String) throws(StoreError) -> [DeliveryRecord]
    /// Pending push jobs.
    func pendingPushCount() throws(StoreError) -> Int
    /// Push jobs by state (the operator's overview).
    func pushJobCounts() throws(StoreError) -> [JobState: Int]

    /// Queues an event for `eventsUrl` (durable), due at once.
    func queueEvent(type: String, body: [UInt8], now: Timestamp, expiresAt: Timestamp)

    /// A named secret, created with `generate` and stored on first use.
    func secret(named name: String, generate: @Sendable () -> String) throws(StoreError) -> String
    /// Deletes what retention and TTL allow; returns the number of inbox entries removed and
    /// when the next pass has work.
    func prune(
        now: Timestamp, retentionSeconds: Int64,
        completion: @escaping @Sendable (Result<PruneResult, StoreError>) -> Void)
    /// Whether a trivial write goes through now (readiness).
    func checkWritable(completion: @escaping @Sendable (Bool) -> Void)
    // MARK: Cluster (PostgreSQL; on SQLite there is one node and these do nothing)

    /// Tells `observer` what the other nodes of a cluster commit.
    func observeCluster(_ observer: ClusterObserver)
    /// A device went online or offline on this node; the other nodes count it while this node's
    /// lease lasts.
    func announcePresence(userId: String, deviceId: String, online: Bool)
    /// This node's devices count as online until `until` (renewed while it holds any).
    func renewLease(until: Timestamp)
    /// The devices other nodes hold online, with the end of their lease.
    func clusterPresence() throws(StoreError) -> [RemotePresence]
    /// Forgets a node whose lease ended: its devices are offline everywhere.
    func forgetNode(_ nodeId: String)
    /// Finishes queued writes and closes the database.
    func close()
}
