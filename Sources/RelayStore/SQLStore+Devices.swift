package import RelayCore

/// Devices: registration, re-enabling, deletion (with its tokens' revocation), lookups.
extension SQLStore {
    package func putDevice(
        _ device: Device, keeping: DeviceFields = [],
        completion: @escaping @Sendable (Result<(device: Device, created: Bool), StoreError>) -> Void
    ) {
        writer.submit(
            { db throws(DatabaseError) in
                var existing: Device?
                try db.query(
                    "SELECT \(Self.deviceColumns) WHERE user_id = ? AND device_id = ?",
                    [.text(device.userId), .text(device.deviceId)]
                ) { existing = Self.device($0) }
                var device = device
                if let existing {
                    if keeping.contains(.platform) { device.platform = existing.platform }
                    if keeping.contains(.contentFree) { device.contentFree = existing.contentFree }
                    if keeping.contains(.matrix) { device.matrix = existing.matrix }
                }
                var stored = device
                if let existing { stored.createdAt = existing.createdAt }
                let createdAt = existing?.createdAt
                db.prefetched.devices[device.userId] = nil
                if let matrix = device.matrix {
                    // One device per pushkey: the newest registration takes it over (the app
                    // was reinstalled, or the user signed in on another account).
                    try db.run(
                        """
                        UPDATE devices SET matrix_app_id = NULL, matrix_pushkey = NULL
                        WHERE matrix_app_id = ? AND matrix_pushkey = ? AND NOT (user_id = ? AND device_id = ?)
                        """, [.text(matrix.appId), .text(matrix.pushkey), .text(device.userId), .text(device.deviceId)])
                }
                try db.run(
                    """
                    INSERT INTO devices(user_id, device_id, transport, platform, content_free, active, disabled_reason,
                        created_at, updated_at, matrix_app_id, matrix_pushkey)
                    VALUES (?, ?, ?, ?, ?, 1, NULL, ?, ?, ?, ?)
                    ON CONFLICT(user_id, device_id) DO UPDATE SET transport = excluded.transport,
                        platform = excluded.platform, content_free = excluded.content_free, active = 1,
                        disabled_reason = NULL, updated_at = excluded.updated_at,
                        matrix_app_id = excluded.matrix_app_id, matrix_pushkey = excluded.matrix_pushkey
                    """,
                    [
                        .text(device.userId), .text(device.deviceId), .text(device.target), .optional(device.platform),
                        .int(device.contentFree ? 1 : 0), .int(stored.createdAt.milliseconds),
                        .int(device.updatedAt.milliseconds), .optional(device.matrix?.appId),
                        .optional(device.matrix?.pushkey),
                    ])
                stored.active = true
                stored.disabledReason = nil
                return (device: stored, created: createdAt == nil)
            }, completion: completion)
    }

    package func reenableDevices(
        reason: String, since: Timestamp, now: Timestamp,
        completion: @escaping @Sendable (Result<Int, StoreError>) -> Void
    ) {
        writer.submit(
            { db throws(DatabaseError) in
                // (A device's updated_at is when it was disabled, while it stays disabled.)
                try db.run(
                    """
                    UPDATE devices SET active = 1, disabled_reason = NULL, updated_at = ?
                    WHERE active = 0 AND updated_at >= ? AND substr(disabled_reason, 1, ?) = ?
                    """,
                    [
                        .int(now.milliseconds), .int(since.milliseconds), .int(Int64(reason.unicodeScalars.count)),
                        .text(reason),
                    ])
                let changed = db.changes
                if changed > 0 { db.prefetched.devices.removeAll() }
                return changed
            }, completion: completion)
    }

    package func deleteDevice(
        userId: String, deviceId: String, at time: Timestamp,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        writer.submit(
            { db throws(DatabaseError) in
                try db.run("DELETE FROM devices WHERE user_id = ? AND device_id = ?", [.text(userId), .text(deviceId)])
                db.prefetched.devices[userId] = nil
                let existed = db.changes > 0
                // Nor is it one of the user's devices in presence (nor counted by `maxDevicesPerUser`).
                try db.run(
                    "DELETE FROM presence WHERE user_id = ? AND device_id = ?", [.text(userId), .text(deviceId)])
                // Its pending pushes can never go anywhere now (a device registered again later
                // starts afresh).
                try Self.apply(DeliveryPolicy.deleted(userId: userId, deviceId: deviceId), db, now: time.milliseconds)
                try db.run(
                    """
                    INSERT INTO token_revocations(user_id, device_id, revoked_at) VALUES (?, ?, ?)
                    ON CONFLICT(user_id, device_id) DO UPDATE SET revoked_at = excluded.revoked_at
                    """, [.text(userId), .text(deviceId), .int(time.seconds)])
                db.note(.revoked(userId: userId, deviceId: deviceId, atSeconds: time.seconds))
                return existed
            }, completion: completion)
    }

    enum RevocationColumn: Int32, SQLColumns {
        case userId, deviceId, revokedAt
    }

    package func tokenRevocations() throws(StoreError) -> [TokenRevocation] {
        try read { db throws(DatabaseError) in
            var revocations: [TokenRevocation] = []
            try db.query("SELECT \(RevocationColumn.list) FROM token_revocations") { raw in
                let row = raw.named(RevocationColumn.self)
                revocations.append(
                    TokenRevocation(
                        userId: row.text(.userId), deviceId: row.text(.deviceId),
                        revokedAtSeconds: row.int64(.revokedAt)))
            }
            return revocations
        }
    }

    package func devices(userId: String) throws(StoreError) -> [Device] {
        try read { db throws(DatabaseError) in
            var devices: [Device] = []
            try db.query("SELECT \(Self.deviceColumns) WHERE user_id = ? ORDER BY device_id", [.text(userId)]) {
                devices.append(Self.device($0))
            }
            return devices
        }
    }

    package func device(matrixAppId appId: String, pushkey: String) throws(StoreError) -> Device? {
        try read { db throws(DatabaseError) in
            var found: Device?
            try db.query(
                "SELECT \(Self.deviceColumns) WHERE matrix_app_id = ? AND matrix_pushkey = ?",
                [.text(appId), .text(pushkey)]
            ) { found = Self.device($0) }
            return found
        }
    }

    enum DeviceColumn: Int32, SQLColumns {
        case userId, deviceId, transport, platform, contentFree, active, disabledReason, createdAt, updatedAt
        case matrixAppId, matrixPushkey
    }

    static let deviceColumns = "\(DeviceColumn.list) FROM devices"

    static func device(_ raw: any SQLRow) -> Device {
        let row = raw.named(DeviceColumn.self)
        return Device(
            userId: row.text(.userId), deviceId: row.text(.deviceId), target: row.text(.transport),
            platform: row.optionalText(.platform), contentFree: row.bool(.contentFree), active: row.bool(.active),
            disabledReason: row.optionalText(.disabledReason), createdAt: row.timestamp(.createdAt),
            updatedAt: row.timestamp(.updatedAt),
            matrix: row.optionalText(.matrixAppId).flatMap { appId in
                row.optionalText(.matrixPushkey).map { MatrixPusher(appId: appId, pushkey: $0) }
            })
    }
}
