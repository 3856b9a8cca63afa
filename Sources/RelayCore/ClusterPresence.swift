/// The devices other nodes of a cluster hold online, as this node hears of them (docs/ARCHITECTURE.md
/// §7): each node announces its devices going online and offline, and renews a lease while it
/// holds any; a node whose lease ends (it died, or lost the database) has all its devices taken
/// offline at once.
///
/// Pure: notes and time go in, answers come out; no clock, no timers inside.
package struct ClusterPresence: Sendable {
    /// How long a node that was heard of counts before a lease of its own arrives.
    package let leaseMilliseconds: Int64
    private var leases: [String: Timestamp] = [:]
    /// user → device → the nodes holding it online.
    private var online: [String: [String: Set<String>]] = [:]

    package init(leaseMilliseconds: Int64) {
        self.leaseMilliseconds = leaseMilliseconds
    }

    /// A device went online or offline on `node`.
    package mutating func set(node: String, userId: String, deviceId: String, online isOnline: Bool, now: Timestamp) {
        if isOnline {
            online[userId, default: [:]][deviceId, default: []].insert(node)
            if leases[node] == nil { leases[node] = Timestamp(milliseconds: now.milliseconds + leaseMilliseconds) }
        } else {
            online[userId]?[deviceId]?.remove(node)
            if online[userId]?[deviceId]?.isEmpty == true { online[userId]?[deviceId] = nil }
            if online[userId]?.isEmpty == true { online[userId] = nil }
        }
    }

    /// `node`'s devices count until `until`.
    package mutating func renew(node: String, until: Timestamp) {
        leases[node] = max(leases[node] ?? until, until)
    }

    /// Replaces everything with a fresh read of the store: `(node, user, device, lease end)`.
    /// Returns the users whose online state may have changed.
    package mutating func replace(
        with entries: [(node: String, userId: String, deviceId: String, leaseUntil: Timestamp)]
    ) -> Set<String> {
        var users = Set(online.keys)
        online = [:]
        leases = [:]
        for entry in entries {
            online[entry.userId, default: [:]][entry.deviceId, default: []].insert(entry.node)
            renew(node: entry.node, until: entry.leaseUntil)
            users.insert(entry.userId)
        }
        return users
    }

    /// Removes the nodes whose lease ended by `now`, with their devices; returns them and the
    /// users who had a device on them.
    package mutating func expire(now: Timestamp) -> (nodes: [String], users: Set<String>) {
        let ended = Set(leases.filter { $0.value <= now }.keys)
        guard !ended.isEmpty else { return ([], []) }
        for node in ended { leases[node] = nil }
        var users = Set<String>()
        for (userId, devices) in online {
            for (deviceId, nodes) in devices where !nodes.isDisjoint(with: ended) {
                users.insert(userId)
                let left = nodes.subtracting(ended)
                online[userId]?[deviceId] = left.isEmpty ? nil : left
            }
            if online[userId]?.isEmpty == true { online[userId] = nil }
        }
        return (ended.sorted(), users)
    }

    /// When the next lease of a node holding devices ends, if any does.
    package var nextExpiry: Timestamp? {
        let holding = Set(online.values.flatMap { $0.values.flatMap { $0 } })
        return leases.filter { holding.contains($0.key) }.values.min()
    }

    /// The devices of `userId` online on other nodes.
    package func devices(of userId: String) -> Set<String> { Set(online[userId]?.keys.map { $0 } ?? []) }

    /// Users with a device online on another node.
    package var users: Set<String> { Set(online.keys) }
}
