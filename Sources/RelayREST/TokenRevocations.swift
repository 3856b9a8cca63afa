import RelayCore
import RelayLocks
package import RelayStore

/// Devices whose client tokens were revoked (by deleting the device), kept in memory for the
/// token check and in the store across restarts. Tokens are stateless JWTs: a revocation refuses
/// every token for that device issued at or before it (a token without `iat` counts as old).
package final class TokenRevocations: Sendable {
    private struct Key: Hashable {
        var userId: String
        var deviceId: String
    }

    private let revokedAt: LockedValue<[Key: Int64]>

    package init(_ revocations: [TokenRevocation]) {
        var table: [Key: Int64] = [:]
        for revocation in revocations {
            table[Key(userId: revocation.userId, deviceId: revocation.deviceId)] = revocation.revokedAtSeconds
        }
        revokedAt = LockedValue(table)
    }

    package func revoke(userId: String, deviceId: String, atSeconds: Int64) {
        revokedAt.withLock { table in
            let key = Key(userId: userId, deviceId: deviceId)
            table[key] = max(table[key] ?? atSeconds, atSeconds)
        }
    }

    /// Adds what the store holds (another node's revocations, read after notifications may have
    /// been missed).
    package func merge(_ revocations: [TokenRevocation]) {
        for revocation in revocations {
            revoke(userId: revocation.userId, deviceId: revocation.deviceId, atSeconds: revocation.revokedAtSeconds)
        }
    }

    func isRevoked(_ claims: ClientClaims) -> Bool {
        guard let deviceId = claims.deviceId else { return false }
        guard let revoked = revokedAt.withLock({ $0[Key(userId: claims.userId, deviceId: deviceId)] }) else {
            return false
        }
        return (claims.issuedAt ?? Int64.min) <= revoked
    }
}
