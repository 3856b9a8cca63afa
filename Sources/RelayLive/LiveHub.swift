package import RelayCore
package import RelayLocks
package import RelayStore
package import RelayTelemetry
import RelayWebSocket
import WebSocketCodec

/// This node's sessions and the fan-out of live messages to them; who is online is decided by
/// the pure `PresenceTracker` it holds, and the hub carries out what that decides: it tells the
/// store (the other nodes), records `lastOnline` when a device goes offline (so it survives
/// restarts), reports presence changes as events, and arms the timers.
package final class LiveHub: Sendable {
    private struct State {
        /// This node's sessions by connection id.
        var sessions: [UInt64: LiveSession] = [:]
        var presence: PresenceTracker

        func sessions(_ ids: [UInt64]) -> [LiveSession] { ids.compactMap { sessions[$0] } }
    }

    private let state: LockedValue<State>
    let store: any RelayStore
    let logger: Logger
    package let clock: RelayClock
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
    /// flip back sooner (`PresenceTracker`).
    package init(
        store: any RelayStore, logger: Logger, events: any RelayEventSink, delivery: DeliveryPolicy, leaseMs: Int64,
        clock: RelayClock
    ) {
        self.store = store
        self.logger = logger
        self.events = events
        self.clock = clock
        self.leaseMs = leaseMs
        state = LockedValue(State(presence: PresenceTracker(delayMs: delivery.pushDelayMs, leaseMs: leaseMs)))
    }

    /// Reports the presence changes whose debounce delay has passed, and renews this node's
    /// lease when due; called by a timer. On a cluster, the delivering node reports for all
    /// (every node sees every change; one reports it).
    package func reportDuePresence() {
        let time = clock.now()
        let (changes, lease) = state.withLock { $0.presence.due(at: time) }
        if let lease { store.renewLease(until: lease) }
        guard store.delivers else { return }
        for change in changes { events.emit(.presenceChanged(change)) }
    }

    /// Whether the next tick has work: open sockets (token expiries) or unreported presence.
    package var needsTicks: Bool { state.withLock { !$0.sessions.isEmpty || $0.presence.hasPendingReports } }

    /// Runs `change` on the state (a socket of one device opened, closed or moved) and tells the
    /// store (the other nodes) and `lastOnline` what the tracker says it did.
    private func updating(
        _ userId: String, _ deviceId: String,
        _ change: (inout State, Timestamp) -> PresenceTracker.Transition
    ) {
        let time = clock.now()
        defer { ticks.arm(afterMilliseconds: Self.tickIntervalMs) }
        let transition = state.withLock { change(&$0, time) }
        if let lease = transition.lease { store.renewLease(until: lease) }
        guard let online = transition.deviceOnline else { return }
        store.announcePresence(userId: userId, deviceId: deviceId, online: online)
        if !online { recordOffline(userId, deviceId, at: time) }
    }

    // MARK: Sessions

    /// A socket opened `background` does not bring its device online (nor, when it never comes
    /// to the foreground, record the device's `lastOnline`).
    func register(_ session: LiveSession, background: Bool) {
        updating(session.userId, session.deviceId) { state, time in
            state.sessions[session.handle.id] = session
            return state.presence.opened(
                session.handle.id, userId: session.userId, deviceId: session.deviceId, background: background,
                at: time)
        }
    }

    func session(_ id: UInt64) -> LiveSession? { state.withLock { $0.sessions[id] } }

    /// The socket closed: forget the session; the device goes offline when it was its last one.
    func unregister(_ id: UInt64) {
        guard let session = state.withLock({ $0.sessions[id] }) else { return }
        updating(session.userId, session.deviceId) { state, time in
            guard state.sessions.removeValue(forKey: id) != nil else { return .none }
            return state.presence.closed(id, userId: session.userId, deviceId: session.deviceId, at: time)
        }
    }

    /// A `background` / `foreground` frame (or REST call) for one connection.
    func setBackground(_ id: UInt64, _ background: Bool) {
        guard let session = state.withLock({ $0.sessions[id] }) else { return }
        updating(session.userId, session.deviceId) { state, time in
            state.presence.setBackground(id, userId: session.userId, deviceId: session.deviceId, background, at: time)
        }
    }

    /// The REST presence report: applies to every open socket of that device.
    package func setBackground(userId: String, deviceId: String, _ background: Bool) {
        let ids = state.withLock { $0.presence.sockets(of: userId, deviceId: deviceId) }
        for id in ids { setBackground(id, background) }
    }

    private func recordOffline(_ userId: String, _ deviceId: String, at time: Timestamp) {
        let logger = self.logger
        store.recordLastOnline(userId: userId, deviceId: deviceId, at: time) { [state] result in
            state.withLock { $0.presence.recorded(userId: userId, deviceId: deviceId, at: time) }
            if case .failure(let error) = result {
                logger.warning("could not record lastOnline", ("user.id", userId), ("error", "\(error)"))
            }
        }
    }

    /// Each device's `lastOnline`: the store's, or a newer one this node is still writing.
    package func lastOnline(_ userId: String) throws(StoreError) -> [String: Timestamp] {
        // The unwritten times first: one whose write completes meanwhile is in the store's read.
        let pending = state.withLock { $0.presence.unrecorded(userId) }
        let stored = try store.lastOnline(userId: userId)
        return stored.merging(pending) { max($0, $1) }
    }

    /// The ack cursor of `userId` moved: tell the chat server (`message.acked`).
    package func acknowledged(userId: String, seq: Int64) {
        events.emit(.messageAcked(userId: userId, seq: seq, at: clock.now()))
    }

    // MARK: Presence

    /// Online devices of a user, on this node or another.
    package func onlineDevices(_ userId: String) -> Set<String> {
        state.withLock { $0.presence.onlineDevices(userId) }
    }

    /// Devices of a user with a socket open here (foreground or not) or online on another node.
    package func devices(of userId: String) -> Set<String> {
        state.withLock { $0.presence.devices(of: userId) }
    }

    // MARK: Cluster presence

    /// A device went online or offline on another node.
    package func presenceElsewhere(node: String, userId: String, deviceId: String, online: Bool) {
        let time = clock.now()
        state.withLock {
            $0.presence.elsewhere(node: node, userId: userId, deviceId: deviceId, online: online, at: time)
        }
        ticks.arm(afterMilliseconds: Self.tickIntervalMs)
        armLeases()
    }

    /// Another node renewed its lease.
    package func leaseElsewhere(node: String, until: Timestamp) {
        state.withLock { $0.presence.leaseElsewhere(node: node, until: until) }
    }

    /// Reads the other nodes' devices afresh (at start, and when notifications may have been missed).
    package func loadClusterPresence() {
        guard let entries = try? store.clusterPresence() else { return }
        let time = clock.now()
        state.withLock {
            $0.presence.replaceElsewhere(
                with: entries.map { ($0.nodeId, $0.userId, $0.deviceId, $0.leaseUntil) }, at: time)
        }
        ticks.arm(afterMilliseconds: Self.tickIntervalMs)
        armLeases()
    }

    /// Takes offline the devices of nodes whose lease ended; the delivering node also forgets
    /// those nodes in the store. Called by the `leases` timer.
    package func expireLeases() {
        let time = clock.now()
        let ended = state.withLock { $0.presence.expireLeases(at: time) }
        if !ended.isEmpty {
            logger.warning("node lease ended: its devices are offline", ("nodes", ended.joined(separator: ",")))
            ticks.arm(afterMilliseconds: Self.tickIntervalMs)
            if store.delivers { for node in ended { store.forgetNode(node) } }
        }
        armLeases()
    }

    private func armLeases() {
        guard let next = state.withLock({ $0.presence.nextLeaseExpiry }) else { return }
        leases.arm(afterMilliseconds: max(0, next.milliseconds - clock.now().milliseconds) + 1)
    }

    // MARK: Fan-out

    /// Sends a committed message to every open session of its recipients. Called in commit
    /// order (by the thread that saw the commit become durable), so each session sees a user's
    /// seqs in order. That thread writes the frames itself when they go to at most
    /// `directFanOut` sockets; more are left to the socket loop, so that the store's writer does
    /// not spend a send per member of a large room while the next group waits.
    func publish(_ recipients: [RecipientSeq], frame: (RecipientSeq) -> [UInt8]) {
        let targets = state.withLock { state in
            recipients.map { state.sessions(state.presence.sockets(of: $0.userId)) }
        }
        let sockets = targets.reduce(0) { $0 + $1.count }
        guard sockets > 0 else { return }
        let writer: WebSocketHandle.Writer = sockets <= Self.directFanOut ? .caller : .loop
        for (recipient, sessions) in zip(recipients, targets) where !sessions.isEmpty {
            let bytes = frame(recipient)
            for session in sessions { session.deliver(seq: recipient.seq, frame: bytes, by: writer) }
        }
    }

    /// The most sockets a message's committing thread writes to itself. A send on loopback costs
    /// the writer ~10–30 µs (with the reader's wake-up): a 1,000-member room written by the
    /// writer raised its posts' p50 from 22–26 ms to 32–36 ms (BENCHMARKS.md, "Live frames from
    /// the thread that saw the fsync").
    static let directFanOut = 8

    /// Another node committed `seq` for `userId`: the sessions held here read it from the store.
    package func committedElsewhere(userId: String, seq: Int64) {
        for session in sessions(of: userId) { session.committedElsewhere(seq: seq) }
    }

    /// Notifications from other nodes may have been missed: every session reads its inbox again.
    package func resync() {
        for session in state.withLock({ Array($0.sessions.values) }) { session.resync() }
    }

    private func sessions(of userId: String) -> [LiveSession] {
        state.withLock { $0.sessions($0.presence.sockets(of: userId)) }
    }

    /// Sends a signal to every online (foreground) socket of `userIds`, except the device it came
    /// from; returns how many sockets it was handed to.
    package func signal(
        _ signal: Signal, senderId: String?, to userIds: [String], except sender: (userId: String, deviceId: String)?
    ) -> Int {
        let sessions = state.withLock { state in
            userIds.flatMap { userId in
                let except = sender?.userId == userId ? sender?.deviceId : nil
                return state.sessions(state.presence.foregroundSockets(of: userId, except: except))
            }
        }
        guard !sessions.isEmpty else { return 0 }
        let frame = WebSocketFrame(opcode: .text, payload: signal.frame(senderId: senderId)).encoded()
        for session in sessions { session.sendEphemeral(frame) }
        return sessions.count
    }

    /// Closes every socket of one device with 1008 (its tokens were revoked).
    package func close(userId: String, deviceId: String, reason: String) {
        let sessions = state.withLock { $0.sessions($0.presence.sockets(of: userId, deviceId: deviceId)) }
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
        state.withLock { $0.presence.sockets(of: userId).count }
    }

    /// How many users are online, and the first `limit` of them by id.
    package func onlineUsers(limit: Int) -> (total: Int, first: [String]) {
        let users = state.withLock { $0.presence.onlineUsers }
        return (users.count, Array(users.sorted().prefix(limit)))
    }

    package var onlineUserCount: Int {
        state.withLock { $0.presence.onlineUsers.count }
    }
}
