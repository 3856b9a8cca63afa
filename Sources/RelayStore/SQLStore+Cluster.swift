package import RelayCore

/// Presence (each device's last time online) and the cluster: other nodes' commits, presence
/// announcements, the delivery lease (PostgreSQL; on SQLite one node and these do little).
extension SQLStore {
    package func recordLastOnline(
        userId: String, deviceId: String, at time: Timestamp,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        writer.submit(
            { db throws(DatabaseError) in
                try db.run(
                    """
                    INSERT INTO presence(user_id, device_id, last_online) VALUES (?, ?, ?)
                    ON CONFLICT(user_id, device_id) DO UPDATE
                        SET last_online = \(db.dialect.greatest)(presence.last_online, excluded.last_online)
                    """, [.text(userId), .text(deviceId), .int(time.milliseconds)])
            }, completion: completion)
    }

    package func lastOnline(userId: String) throws(StoreError) -> [String: Timestamp] {
        try read { db throws(DatabaseError) in
            var devices: [String: Timestamp] = [:]
            try db.query("SELECT device_id, last_online FROM presence WHERE user_id = ?", [.text(userId)]) {
                devices[$0.text(0)] = Timestamp(milliseconds: $0.int64(1))
            }
            return devices
        }
    }
}

// MARK: Cluster

extension SQLStore {
    package func observeCluster(_ observer: ClusterObserver) { cluster?.observe(observer) }

    package func announcePresence(userId: String, deviceId: String, online: Bool) {
        guard let cluster else { return }
        writer.submit(
            { db throws(DatabaseError) in
                if online {
                    try db.run(
                        "INSERT INTO online_devices(node_id, user_id, device_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                        [.text(cluster.nodeId), .text(userId), .text(deviceId)])
                } else {
                    try db.run(
                        "DELETE FROM online_devices WHERE node_id = ? AND user_id = ? AND device_id = ?",
                        [.text(cluster.nodeId), .text(userId), .text(deviceId)])
                }
                db.note(.presence(userId: userId, deviceId: deviceId, online: online))
            }, completion: logFailure("announce presence"))
    }

    package func renewLease(until: Timestamp) {
        guard let cluster else { return }
        writer.submit(
            { db throws(DatabaseError) in
                try db.run(
                    """
                    INSERT INTO nodes(node_id, lease_until) VALUES (?, ?)
                    ON CONFLICT(node_id) DO UPDATE SET lease_until = excluded.lease_until
                    """, [.text(cluster.nodeId), .int(until.milliseconds)])
                db.note(.lease(until: until))
            }, completion: logFailure("renew lease"))
    }

    enum PresenceColumn: Int32, SQLColumns {
        case nodeId, userId, deviceId, leaseUntil

        var expression: String { self == .leaseUntil ? "n.lease_until" : "o.\(column)" }
    }

    package func clusterPresence() throws(StoreError) -> [RemotePresence] {
        guard let cluster else { return [] }
        return try read { db throws(DatabaseError) in
            var found: [RemotePresence] = []
            try db.query(
                """
                SELECT \(PresenceColumn.list) FROM online_devices o
                JOIN nodes n ON n.node_id = o.node_id WHERE o.node_id != ?
                """, [.text(cluster.nodeId)]
            ) { raw in
                let row = raw.named(PresenceColumn.self)
                found.append(
                    RemotePresence(
                        nodeId: row.text(.nodeId), userId: row.text(.userId), deviceId: row.text(.deviceId),
                        leaseUntil: row.timestamp(.leaseUntil)))
            }
            return found
        }
    }

    package func forgetNode(_ nodeId: String) {
        guard cluster != nil else { return }
        writer.submit(
            { db throws(DatabaseError) in
                try db.run("DELETE FROM online_devices WHERE node_id = ?", [.text(nodeId)])
                try db.run("DELETE FROM nodes WHERE node_id = ?", [.text(nodeId)])
            }, completion: logFailure("forget node"))
    }
}
