import RelayCore
package import RelayCrypto
import RelayLocks
import RelayPrimitives

/// The relay's Web Push identity (RFC 8292): its P-256 key, whose public half browsers got as
/// `applicationServerKey`, and the contact `sub`. One JWT per push-service origin, on
/// `VAPIDTokenSchedule`'s terms (push services cache the signature check per token).
package final class VAPIDSigner: Sendable {
    package let key: P256Key
    package let subject: String
    private let schedule = VAPIDTokenSchedule()
    private let tokens = LockedValue<[String: (token: String, expiresAt: Int64)]>([:])

    package init(key: P256Key, subject: String) {
        self.key = key
        self.subject = subject
    }

    /// `applicationServerKey` for browsers: the uncompressed public point, base64url.
    package var publicKey: String { Base64.encode(key.publicKey, .url) }

    /// `vapid t=<jwt>, k=<public key>` for a push to `audience` (the endpoint's origin).
    package func authorization(audience: String, now: Int64) throws(CryptoError) -> String {
        let current = tokens.withLock { $0[audience] }
        switch schedule.action(now: now, currentExpiresAt: current?.expiresAt) {
        case .use:
            if let current { return "vapid t=\(current.token), k=\(publicKey)" }
            return try sign(audience: audience, expiresAt: now + VAPIDTokenSchedule.lifetimeMs)
        case .renew(let expiresAt):
            return try sign(audience: audience, expiresAt: expiresAt)
        }
    }

    private func sign(audience: String, expiresAt: Int64) throws(CryptoError) -> String {
        var claims = JSONWriter()
        claims.beginObject()
        claims.member("aud", audience)
        claims.member("exp", expiresAt / 1000)
        claims.member("sub", subject)
        claims.endObject()
        let token = try JWS.compact(
            header: Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8), claims: claims.bytes, sign: key.signES256)
        tokens.withLock { tokens in
            // Origins are few (a handful of browser push services); a flood of made-up endpoints
            // only costs a signature each.
            if tokens.count > 1000 { tokens.removeAll() }
            tokens[audience] = (token, expiresAt)
        }
        return "vapid t=\(token), k=\(publicKey)"
    }
}
