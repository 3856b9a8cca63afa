package import RelayCore
package import RelayCrypto
import RelayLocks
import WebSocketCodec

/// The relay's Web Push identity (RFC 8292): its P-256 key, whose public half browsers got as
/// `applicationServerKey`, and the contact `sub`. One JWT per push-service origin, reused until
/// an hour before it expires (push services cache the signature check per token).
package final class VAPIDSigner: Sendable {
    package let key: P256Key
    package let subject: String
    /// Tokens last 12 h (RFC 8292 allows at most 24 h), renewed with less than 1 h left.
    static let lifetimeSeconds: Int64 = 12 * 3600
    static let renewBeforeSeconds: Int64 = 3600
    private let tokens = LockedValue<[String: (token: String, expiresAt: Int64)]>([:])

    package init(key: P256Key, subject: String) {
        self.key = key
        self.subject = subject
    }

    /// `applicationServerKey` for browsers: the uncompressed public point, base64url.
    package var publicKey: String { Base64.encode(key.publicKey, .url) }

    /// `Authorization: vapid t=<jwt>, k=<public key>` for a push to `endpoint`.
    package func authorization(for endpoint: PushURL, nowSeconds: Int64) throws(CryptoError) -> String {
        let origin = endpoint.origin
        if let cached = tokens.withLock({ $0[origin] }), cached.expiresAt - nowSeconds > Self.renewBeforeSeconds {
            return "vapid t=\(cached.token), k=\(publicKey)"
        }
        let expiresAt = nowSeconds + Self.lifetimeSeconds
        var claims = JSONWriter()
        claims.beginObject()
        claims.member("aud", origin)
        claims.member("exp", expiresAt)
        claims.member("sub", subject)
        claims.endObject()
        let token = try JWS.compact(
            header: Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8), claims: claims.bytes, sign: key.signES256)
        tokens.withLock { tokens in
            // Origins are few (a handful of browser push services); a flood of made-up endpoints
            // only costs a signature each.
            if tokens.count > 1000 { tokens.removeAll() }
            tokens[origin] = (token, expiresAt)
        }
        return "vapid t=\(token), k=\(publicKey)"
    }
}

extension PushURL {
    /// `scheme://host[:port]`, the port only when it is not the scheme's default (RFC 6454).
    package var origin: String { "\(scheme)://\(hostHeader)" }
}
