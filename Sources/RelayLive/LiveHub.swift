package import RelayCore
package import RelayDelivery
package import RelayLocks
package import RelayStore
package import RelayTelemetry
import RelayWebSocket
import WebSocketCodec

/// Who is connected, and which sessions a message for a user goes to: the presence tracker and
/// the fan-out of live messages.
///
/// A device is online while at least one of its sockets is open and not backgrounded; a user is
/// online when one of their devices is. Going offline records `lastOnline` in the store, so it
/// survives restarts.
package final class LiveHub: Sendable {
    private struct DeviceEntry {
        /// Open sessions of this device, by connection id, with their background flag.
        var sessions: [UInt64: Bool] = [:]
        var online: Bool { sessions.values.contains(false) }
    }

    private struct State {
        /// This node's sessions by user and device.
        var devices: [String: [String: DeviceEntry]] = [:]
        var sessions: [UInt64: LiveSession] = [:]
        /// The devices other nodes hold online (a cluster on PostgreSQL; always empty on SQLite).
        var cluster: ClusterPresence
        var debouncer: PresenceDebouncer
        /// Until when the other nodes count this node's devices (renewed while it holds any).
        var leaseUntil = Timestamp(milliseconds: 0)
        /// `lastOnline` of devices that went offline here, until the store has it: presence read
        /// meanwhile says the new time, not the stored older one.
        var unrecorded: [String: [String: Timestamp]] = [:]

        func deviceOnline(_ userId: String, _ deviceId: String) -> Bool {
            devices[userId]?[deviceId]?.online ?? false
        }

        func userOnline(_ userId: String) -> Bool {
            devices[userId]?.values.contains { $0.online } ?? false || !cluster.devices(of: userId).isEmpty
        }

        var holdsOnlineDevices: Bool { devices.values.contains { $0.values.contains { $0.online } } }

        /// Moves the lease on when a third of it is left and this node holds online devices;
        /// returns its new end (for the store), nil when it was not due. The cheap comparison
        /// comes first: the device scan runs once a lease period, not on every tick.
        mutating func renewLeaseIfDue(at time: Timestamp, leaseMs: Int64) -> Timestamp? {
            guard leaseUntil.milliseconds - time.milliseconds < leaseMs * 2 / 3, holdsOnlineDevices else { return nil }
            leaseUntil = Timestamp(milliseconds: time.milliseconds + leaseMs)
            return leaseUntil
        }
    }

    private let state: LockedValue<State>
    let store: any RelayStore
    let logger: Logger
    package let now: @Sendable () -> Timestamp
    private let events: any RelayEventSink
    /// Presence reports and token expiries are checked on this timer, armed while sockets are
    /// open or reports are pending (the app starts it; an idle relay does not wake for it).
    package let ticks = DemandTimer()
    package static let tickIntervalMs: Int64 = 250
    /// Ends the devices of a node whose lease ran out; armed while other nodes hold devices.
    package let leases = DemandTimer()
    /// How long the other nodes count this node's devices without news (`nodeLeaseMs`).
    let leaseMs: Int64

    /// Presence changes are reported the push delay after they happen, and not at all when they
    /// flip back sooner.
    package init(
        store: any RelayStore, logger: Logger, events: any RelayEventSink, delivery: DeliveryPolicy, leaseMs: Int64,
        now: @escaping @Sendable () -> Timestamp
    ) {
        self.store = store
        self.logger = logger
        self.events = events
        self.now = now
        self.leaseMs = leaseMs
        state = LockedValue(
            State(
                cluster: ClusterPresence(leaseMilliseconds: leaseMs),
                debouncer: PresenceDebouncer(delayMilliseconds: delivery.pushDelayMs)))
    }

    /// Reports the presence changes whose debounce delay has passed, and renews this node's
    /// lease when due; called by a timer. On a cluster, the delivering node reports for all
    /// (every node sees every change; one reports it).
    package func reportDuePresence() {
        let time = now()
        let (changes, lease) = state.withLock { state in
            (state.debouncer.due(at: time), state.renewLeaseIfDue(at: time, leaseMs: leaseMs))
        }
        if let lease { store.renewLease(until: lease) }
        guard store.delivers else { return }
        for change in changes { events.emit(.presenceChanged(change)) }
    }

    /// Whether the next tick has work: open sockets (token expiries) or unreported presence.
    package var needsTicks: Bool { state.withLock { !$0.sessions.isEmpty || $0.debouncer.hasPending } }

    /// Runs `body` on the state of one device's sessions, feeds the user's resulting online state
    /// to the debouncer, and tells the store (the other nodes) and `lastOnline` when the device
    /// went online or offline here.
    private func updating(_ userId: String, _ deviceId: String, _ body: (inout State) -> Void) {
        let time = now()
        defer { ticks.arm(afterMilliseconds: Self.tickIntervalMs) }
        let (was, isOnline, lease) = state.withLock { state -> (Bool, Bool, Timestamp?) in
            let was = state.deviceOnline(userId, deviceId)
            body(&state)
            let isOnline = state.deviceOnline(userId, deviceId)
            state.debouncer.observe(userId: userId, online: state.userOnline(userId), at: time)
            // Offline and its time are seen together, before the store has the time.
            if was && !isOnline { state.unrecorded[userId, default: [:]][deviceId] = time }
            // A first device online: the lease goes out with it.
            return (was, isOnline, state.renewLeaseIfDue(at: time, leaseMs: leaseMs))
        }
        if let lease { store.renewLease(until: lease) }
        guard was != isOnline else { return }
        store.announcePresence(userId: userId, deviceId: deviceId, online: isOnline)
        if was { recordOffline(userId, deviceId, at: time) }
    }

    // MARK: Sessions

    /// A socket opened `background` does not bring its device online (nor, when it never comes
    /// to the foreground, record the device's `lastOnline`).
    func register(_ session: LiveSession, background: Bool) {
        updating(session.userId, session.deviceId) { state in
            state.sessions[session.handle.id] = session
            state.devices[session.userId, default: [:]][session.deviceId, default: DeviceEntry()].sessions[
                session.handle.id] =
                background
        }
    }

    func session(_ id: UInt64) -> LiveSession? { state.withLock { $0.sessions[id] } }

    /// The socket closed: forget the session; the device goes offline when it was its last one.
    func unregister(_ id: UInt64) {
        guard let session = state.withLock({ $0.sessions[id] }) else { return }
        updating(session.userId, session.deviceId) { state in
            guard state.sessions.removeValue(forKey: id) != nil else { return }
            state.devices[session.userId]?[session.deviceId]?.sessions[id] = nil
            if state.devices[session.userId]?[session.deviceId]?.sessions.isEmpty == true {
                state.devices[session.userId]?[session.deviceId] = nil
            }
            if state.devices[session.userId]?.isEmpty == true { state.devices[session.userId] = nil }
        }
    }

    /// A `background` / `foreground` frame (or REST call) for one connection.
    func setBackground(_ id: UInt64, _ background: Bool) {
        guard let session = state.withLock({ $0.sessions[id] }) else { return }
        updating(session.userId, session.deviceId) { state in
            guard state.sessions[id] != nil else { return }
            state.devices[session.userId]?[session.deviceId]?.sessions[id] = background
        }
    }

    /// The REST presence report: applies to every open socket of that device.
    package func setBackground(userId: String, deviceId: String, _ background: Bool) {
        let ids = state.withLock { $0.devices[userId]?[deviceId]?.sessions.keys.map { $0 } ?? [] }
        for id in ids { setBackground(id, background) }
    }

    private func recordOffline(_ userId: String, _ deviceId: String, at time: Timestamp) {
        let logger = self.logger
        store.recordLastOnline(userId: userId, deviceId: deviceId, at: time) { [state] result in
            state.withLock { state in
                guard state.unrecorded[userId]?[deviceId] == time else { return }
                state.unrecorded[userId]?[deviceId] = nil
                if state.unrecorded[userId]?.isEmpty == true { state.unrecorded[userId] = nil }
            }
            if case .failure(let error) = result {
                logger.warning("could not record lastOnline", ("user.id", userId), ("error", "\(error)"))
            }
        }
    }

    /// Each device's `lastOnline`: the store's, or a newer one this node is still writing.
    package func lastOnline(_ userId: String) throws(StoreError) -> [String: Timestamp] {
        // The unwritten times first: one whose write completes meanwhile is in the store's read.
        let pending = state.withLock { $0.unrecorded[userId] ?? [:] }
        let stored = try store.lastOnline(userId: userId)
        return stored.merging(pending) { max($0, $1) }
    }

    /// The ack cursor of `userId` moved: tell the chat server (`message.acked`).
    package func acknowledged(userId: String, seq: Int64) {
        events.emit(.messageAcked(userId: userId, seq: seq, at: now()))
    }

    // MARK: Presence

    /// Online devices of a user, on this node or another.
    package func onlineDevices(_ userId: String) -> Set<String> {
        state.withLock { state in
            Set(state.devices[userId]?.filter { $0.value.online }.keys.map { $0 } ?? [])
                .union(state.cluster.devices(of: userId))
        }
    }

    /// Devices of a user with a socket open here (foreground or not) or online on another node.
    package func devices(of userId: String) -> Set<String> {
        state.withLock { state in
            Set(state.devices[userId]?.keys.map { $0 } ?? []).union(state.cluster.devices(of: userId))
        }
    }

    // MARK: Cluster presence

    /// A device went online or offline on another node.
    package func presenceElsewhere(node: String, userId: String, deviceId: String, online: Bool) {
        let time = now()
        state.withLock { state in
            state.cluster.set(node: node, userId: userId, deviceId: deviceId, online: online, now: time)
            state.debouncer.observe(userId: userId, online: state.userOnline(userId), at: time)
        }
        ticks.arm(afterMilliseconds: Self.tickIntervalMs)
        armLeases()
    }

    /// Another node renewed its lease.
    package func leaseElsewhere(node: String, until: Timestamp) {
        state.withLock { $0.cluster.renew(node: node, until: until) }
    }

    /// Reads the other nodes' devices afresh (at start, and when notifications may have been missed).
    package func loadClusterPresence() {
        guard let entries = try? store.clusterPresence() else { return }
        let time = now()
        state.withLock { state in
            let users = state.cluster.replace(
                with: entries.map { ($0.nodeId, $0.userId, $0.deviceId, $0.leaseUntil) })
            for userId in users {
                state.debouncer.observe(userId: userId, online: state.userOnline(userId), at: time)
            }
        }
        ticks.arm(afterMilliseconds: Self.tickIntervalMs)
        armLeases()
    }

    /// Takes offline the devices of nodes whose lease ended; the delivering node also forgets
    /// those nodes in the store. Called by the `leases` timer.
    package func expireLeases() {
        let time = now()
        let ended = state.withLock { state -> [String] in
            let (nodes, users) = state.cluster.expire(now: time)
            for userId in users {
                state.debouncer.observe(userId: userId, online: state.userOnline(userId), at: time)
            }
            return nodes
        }
        if !ended.isEmpty {
            logger.warning("node lease ended: its devices are offline", ("nodes", ended.joined(separator: ",")))
            ticks.arm(afterMilliseconds: Self.tickIntervalMs)
            if store.delivers { for node in ended { store.forgetNode(node) } }
        }
        armLeases()
    }

    private func armLeases() {
        guard let next = state.withLock({ $0.cluster.nextExpiry }) else { return }
        leases.arm(afterMilliseconds: max(0, next.milliseconds - now().milliseconds) + 1)
    }

    // MARK: Fan-out

    /// Sends a committed message to every open session of its recipient. Called in commit order
    /// (the store's completion queue), so each session sees a user's seqs in order.
    func publish(userId: String, seq: Int64, frame: () -> [UInt8]) {
        let sessions = sessions(of: userId)
        guard !sessions.isEmpty else { return }
        let bytes = frame()
        for session in sessions { session.deliver(seq: seq, frame: bytes) }
    }

    /// Another node committed `seq` for `userId`: the sessions held here read it from the store.
    package func committedElsewhere(userId: String, seq: Int64) {
        for session in sessions(of: userId) { session.committedElsewhere(seq: seq) }
    }

    /// Notifications from other nodes may have been missed: every session reads its inbox again.
    package func resync() {
        for session in state.withLock({ Array($0.sessions.values) }) { session.resync() }
    }

    private func sessions(of userId: String) -> [LiveSession] {
        state.withLock { state in
            state.devices[userId]?.values.flatMap { $0.sessions.keys }.compactMap { state.sessions[$0] } ?? []
        }
    }

    /// Sends a signal to every online (foreground) socket of `userIds`, except the device it came
    /// from; returns how many sockets it was handed to.
    package func signal(
        _ signal: Signal, senderId: String?, to userIds: [String], except sender: (userId: String, deviceId: String)?
    ) -> Int {
        let sessions = state.withLock { state in
            userIds.flatMap { userId in
                (state.devices[userId] ?? [:]).flatMap { deviceId, entry -> [LiveSession] in
                    guard sender?.userId != userId || sender?.deviceId != deviceId else { return [] }
                    return entry.sessions.filter { !$0.value }.compactMap { state.sessions[$0.key] }
                }
            }
        }
        guard !sessions.isEmpty else { return 0 }
        let frame = WebSocketFrame(opcode: .text, payload: signal.frame(senderId: senderId)).encoded()
        for session in sessions { session.sendEphemeral(frame) }
        return sessions.count
    }

    /// Closes every socket of one device with 1008 (its tokens were revoked).
    package func close(userId: String, deviceId: String, reason: String) {
        let sessions = state.withLock { state in
            state.devices[userId]?[deviceId]?.sessions.keys.compactMap { state.sessions[$0] } ?? []
        }
        for session in sessions { session.handle.close(code: CloseCode.policyViolation, reason: reason) }
    }

    /// Closes with 1008 `token expired` every socket whose token has expired by `now` (the
    /// client refreshes its token and reconnects, or sends a `refresh` frame in time).
    package func closeExpiredSessions(now: Timestamp) {
        let expired = state.withLock { state in state.sessions.values.filter { $0.tokenExpired(at: now) } }
        for session in expired { session.handle.close(code: CloseCode.policyViolation, reason: "token expired") }
    }

    /// Reads again for the sessions whose live read failed, when due (`now`: monotonic ms).
    package func retryStalledSessions(now: Int64) {
        let due = state.withLock { state in state.sessions.values.filter { $0.readsAgain(at: now) } }
        for session in due { session.retryIfStalled(now: now) }
    }

    /// Open sockets of one user.
    package func sessionCount(userId: String) -> Int {
        state.withLock { $0.devices[userId]?.values.reduce(0) { $0 + $1.sessions.count } ?? 0 }
    }

    /// How many users are online, and the first `limit` of them by id.
    package func onlineUsers(limit: Int) -> (total: Int, first: [String]) {
        let users = state.withLock { state in
            Set(state.devices.keys.filter { state.userOnline($0) }).union(state.cluster.users)
        }
        return (users.count, Array(users.sorted().prefix(limit)))
    }

    package var onlineUserCount: Int {
        state.withLock { state in
            Set(state.devices.keys.filter { state.userOnline($0) }).union(state.cluster.users).count
        }
    }
}
