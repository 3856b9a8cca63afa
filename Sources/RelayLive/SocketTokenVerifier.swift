package import RelayCore

/// What the live side asks of authentication (the REST layer's `Authenticator` answers): the
/// claims of a token a socket presents in a `refresh` frame, and how long past its `exp` a token
/// still counts.
package protocol SocketTokenVerifier: Sendable {
    /// The token's claims; nil when its signature, times or revocation refuse it.
    func socketClaims(_ token: String) -> ClientClaims?
    /// Seconds a token is still accepted after its expiry (clock skew).
    var leewaySeconds: Int64 { get }
}
