/// Who is online, decided without I/O: this node's sockets (by connection id, each foreground or
/// background), the devices other nodes hold (`ClusterPresence`), the presence changes still to
/// report (`PresenceDebouncer`), this node's lease, and the `lastOnline` times not stored yet.
///
/// A device is online while one of its sockets is open and not backgrounded; a user is online
/// when one of their devices is, here or on another node. Time is a parameter; what the caller
/// must do (tell the store, the other nodes) comes back as a `Transition`.
package struct PresenceTracker: Sendable {
    /// What one socket's change did to its device.
    package struct Transition: Sendable, Equatable {
        /// The device went online (true) or offline (false) here; nil when it did neither.
        package var deviceOnline: Bool?
        /// This node's lease moved on to this time (the store tells the other nodes).
        package var lease: Timestamp?

        /// Nothing changed.
        package static let none = Transition()
    }

    /// Open sockets of one device here: connection id → backgrounded.
    private struct DeviceEntry: Sendable {
        var sockets: [UInt64: Bool] = [:]
        var online: Bool { sockets.values.contains(false) }
    }

    /// user → device → its sockets here.
    private var devices: [String: [String: DeviceEntry]] = [:]
    private var cluster: ClusterPresence
    private var debouncer: PresenceDebouncer
    /// Until when the other nodes count this node's devices (renewed while it holds any).
    private var leaseUntil = Timestamp(milliseconds: 0)
    private let leaseMs: Int64
    /// `lastOnline` of devices that went offline here, until the store has it: presence read
    /// meanwhile says the new time, not the stored older one.
    private var unrecorded: [String: [String: Timestamp]] = [:]

    /// Changes are reported `delayMs` after they happen, and not at all when they flip back
    /// sooner; this node's devices count `leaseMs` on the other nodes without news.
    package init(delayMs: Int64, leaseMs: Int64) {
        self.leaseMs = leaseMs
        cluster = ClusterPresence(leaseMilliseconds: leaseMs)
        debouncer = PresenceDebouncer(delayMilliseconds: delayMs)
    }

    // MARK: This node's sockets

    /// A socket opened; one opened in the background does not bring its device online.
    package mutating func opened(
        _ id: UInt64, userId: String, deviceId: String, background: Bool, at time: Timestamp
    ) -> Transition {
        changing(userId, deviceId, at: time) { $0.sockets[id] = background }
    }

    /// A socket closed; the device goes offline when it was its last foreground one.
    package mutating func closed(_ id: UInt64, userId: String, deviceId: String, at time: Timestamp) -> Transition {
        let transition = changing(userId, deviceId, at: time) { $0.sockets[id] = nil }
        if devices[userId]?[deviceId]?.sockets.isEmpty == true { devices[userId]?[deviceId] = nil }
        if devices[userId]?.isEmpty == true { devices[userId] = nil }
        return transition
    }

    /// A socket went to the background or came back.
    package mutating func setBackground(
        _ id: UInt64, userId: String, deviceId: String, _ background: Bool, at time: Timestamp
    ) -> Transition {
        guard devices[userId]?[deviceId]?.sockets[id] != nil else { return .none }
        return changing(userId, deviceId, at: time) { $0.sockets[id] = background }
    }

    /// Applies `change` to one device's sockets and works out what that did: the user's state
    /// goes to the debouncer; a device gone offline leaves its time unrecorded until `recorded`.
    private mutating func changing(
        _ userId: String, _ deviceId: String, at time: Timestamp, _ change: (inout DeviceEntry) -> Void
    ) -> Transition {
        let was = deviceOnline(userId, deviceId)
        change(&devices[userId, default: [:]][deviceId, default: DeviceEntry()])
        let isOnline = deviceOnline(userId, deviceId)
        debouncer.observe(userId: userId, online: userOnline(userId), at: time)
        if was && !isOnline { unrecorded[userId, default: [:]][deviceId] = time }
        // A first device online: the lease goes out with it.
        return Transition(deviceOnline: was == isOnline ? nil : isOnline, lease: renewLeaseIfDue(at: time))
    }

    /// The store has the `lastOnline` written at `time` (a newer one stays unrecorded).
    package mutating func recorded(userId: String, deviceId: String, at time: Timestamp) {
        guard unrecorded[userId]?[deviceId] == time else { return }
        unrecorded[userId]?[deviceId] = nil
        if unrecorded[userId]?.isEmpty == true { unrecorded[userId] = nil }
    }

    /// `lastOnline` times of `userId`'s devices that the store does not have yet.
    package func unrecorded(_ userId: String) -> [String: Timestamp] { unrecorded[userId] ?? [:] }

    // MARK: Other nodes

    /// A device went online or offline on another node.
    package mutating func elsewhere(node: String, userId: String, deviceId: String, online: Bool, at time: Timestamp) {
        cluster.set(node: node, userId: userId, deviceId: deviceId, online: online, now: time)
        debouncer.observe(userId: userId, online: userOnline(userId), at: time)
    }

    /// Another node renewed its lease.
    package mutating func leaseElsewhere(node: String, until: Timestamp) { cluster.renew(node: node, until: until) }

    /// Replaces what is known of the other nodes with a fresh read of the store.
    package mutating func replaceElsewhere(
        with entries: [(node: String, userId: String, deviceId: String, leaseUntil: Timestamp)], at time: Timestamp
    ) {
        for userId in cluster.replace(with: entries) {
            debouncer.observe(userId: userId, online: userOnline(userId), at: time)
        }
    }

    /// Takes offline the devices of the nodes whose lease ended by `time`; returns those nodes.
    package mutating func expireLeases(at time: Timestamp) -> [String] {
        let (nodes, users) = cluster.expire(now: time)
        for userId in users { debouncer.observe(userId: userId, online: userOnline(userId), at: time) }
        return nodes
    }

    /// When the next lease of another node holding devices ends, if any does.
    package var nextLeaseExpiry: Timestamp? { cluster.nextExpiry }

    // MARK: Reports

    /// The presence changes due at `time`, and this node's lease when it is due for renewal.
    package mutating func due(at time: Timestamp) -> (changes: [PresenceDebouncer.Change], lease: Timestamp?) {
        (debouncer.due(at: time), renewLeaseIfDue(at: time))
    }

    /// Whether changes wait to be reported.
    package var hasPendingReports: Bool { debouncer.hasPending }

    /// Moves the lease on when a third of it is left and this node holds online devices; returns
    /// its new end, nil when it was not due. The cheap comparison comes first: the device scan
    /// runs once a lease period, not on every tick.
    private mutating func renewLeaseIfDue(at time: Timestamp) -> Timestamp? {
        guard leaseUntil.milliseconds - time.milliseconds < leaseMs * 2 / 3, holdsOnlineDevices else { return nil }
        leaseUntil = Timestamp(milliseconds: time.milliseconds + leaseMs)
        return leaseUntil
    }

    private var holdsOnlineDevices: Bool { devices.values.contains { $0.values.contains { $0.online } } }

    // MARK: Queries

    private func deviceOnline(_ userId: String, _ deviceId: String) -> Bool {
        devices[userId]?[deviceId]?.online ?? false
    }

    private func userOnline(_ userId: String) -> Bool {
        devices[userId]?.values.contains { $0.online } ?? false || !cluster.devices(of: userId).isEmpty
    }

    /// Online devices of a user, here or on another node.
    package func onlineDevices(_ userId: String) -> Set<String> {
        Set(devices[userId]?.filter { $0.value.online }.keys.map { $0 } ?? []).union(cluster.devices(of: userId))
    }

    /// Devices of a user with a socket open here (foreground or not) or online on another node.
    package func devices(of userId: String) -> Set<String> {
        Set(devices[userId]?.keys.map { $0 } ?? []).union(cluster.devices(of: userId))
    }

    /// Users online here or on another node.
    package var onlineUsers: Set<String> {
        Set(devices.keys.filter { userOnline($0) }).union(cluster.users)
    }

    /// The sockets open here for `userId` (one device's when `deviceId` is given).
    package func sockets(of userId: String, deviceId: String? = nil) -> [UInt64] {
        guard let deviceId else { return devices[userId]?.values.flatMap { $0.sockets.keys } ?? [] }
        return devices[userId]?[deviceId]?.sockets.keys.map { $0 } ?? []
    }

    /// The foreground sockets open here for `userId`, except those of device `except`.
    package func foregroundSockets(of userId: String, except: String? = nil) -> [UInt64] {
        (devices[userId] ?? [:]).flatMap { deviceId, entry in
            deviceId == except ? [] : entry.sockets.filter { !$0.value }.map(\.key)
        }
    }
}
