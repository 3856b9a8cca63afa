package import RelayCore
package import RelayCrypto
import RelayLocks

/// One APNs signing key's provider token (the ES256 JWT of `authorization: bearer`), shared by
/// every app and connection that signs with the key and renewed on `APNsTokenSchedule`'s terms.
/// Decided and signed under one lock, so that concurrent pushes never mint two tokens for the
/// key (APNs answers 429 TooManyProviderTokenUpdates to a key whose token changes too often).
package final class APNsProviderToken: Sendable {
    package struct Credentials: Sendable {
        package var key: P256Key
        package var keyId: String
        package var teamId: String

        package init(key: P256Key, keyId: String, teamId: String) {
            self.key = key
            self.keyId = keyId
            self.teamId = teamId
        }
    }

    package enum Use {
        case token(issuedAt: Int64, authorization: String)
        /// No token to send with: the push settles as this.
        case settled(DeliveryOutcome)
    }

    package let credentials: Credentials
    private let schedule = APNsTokenSchedule()
    /// When the provider token was signed, and the `authorization` value carrying it.
    private let token = LockedValue<(issuedAt: Int64, authorization: String)?>(nil)
    private let wallClock: @Sendable () -> Timestamp

    package init(credentials: Credentials, now: @escaping @Sendable () -> Timestamp) {
        self.credentials = credentials
        wallClock = now
    }

    /// The token to send with, signed anew when the schedule says so.
    /// - Parameter expiredAnswerFor: when the token APNs just called expired was signed.
    func use(expiredAnswerFor: Int64?) -> Use {
        let now = wallClock().milliseconds
        return token.withLock { token in
            switch schedule.action(now: now, issuedAt: token?.issuedAt, expiredAnswerFor: expiredAnswerFor) {
            case .use:
                if let token { return .token(issuedAt: token.issuedAt, authorization: token.authorization) }
            case .misconfigured(let reason):
                return .settled(.misconfigured(reason: reason))
            case .renew:
                break
            }
            var header = JSONWriter()
            header.beginObject()
            header.member("alg", "ES256")
            header.member("kid", credentials.keyId)
            header.endObject()
            var claims = JSONWriter()
            claims.beginObject()
            claims.member("iss", credentials.teamId)
            claims.member("iat", now / 1000)
            claims.endObject()
            do {
                let jwt = try JWS.compact(header: header.bytes, claims: claims.bytes, sign: credentials.key.signES256)
                token = (now, "bearer \(jwt)")
                return .token(issuedAt: now, authorization: "bearer \(jwt)")
            } catch {
                return .settled(.misconfigured(reason: "APNs: cannot sign the provider token (\(error))"))
            }
        }
    }
}
