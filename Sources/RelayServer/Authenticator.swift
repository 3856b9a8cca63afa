package import RelayCore
import RelayCrypto
package import RelayHTTP

/// Who is calling.
package enum Principal: Sendable {
    /// The chat server, with a server key (its index in the configured keys): may do everything.
    case server(keyIndex: Int)
    /// A client app, with a token: may touch only its own user.
    case client(ClientClaims)
}

/// Checks `Authorization: Bearer …` against the server keys and the client-token secret.
package struct Authenticator: Sendable {
    /// SHA-256 of each server key: comparing digests keeps the comparison constant-time and
    /// independent of the keys' lengths.
    private let serverKeyDigests: [[UInt8]]
    package let tokens: ClientTokenCodec
    let revocations: TokenRevocations
    private let now: @Sendable () -> Timestamp
    private let limiter: RateLimiter?

    init(
        serverKeys: [String], tokens: ClientTokenCodec, revocations: TokenRevocations = TokenRevocations([]),
        limiter: RateLimiter? = nil, now: @escaping @Sendable () -> Timestamp
    ) {
        serverKeyDigests = serverKeys.map { Crypto.sha256(Array($0.utf8)) }
        self.tokens = tokens
        self.revocations = revocations
        self.limiter = limiter
        self.now = now
    }

    static func bearer(_ request: HTTPRequest) -> String? {
        guard let header = request.header("authorization") else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let credential = parts[1].drop(while: { $0 == " " })
        return credential.isEmpty ? nil : String(credential)
    }

    /// Checks the credential and spends from its rate budget.
    package func authenticate(credential: String?) throws(APIError) -> Principal {
        let principal = try verify(credential: credential)
        switch principal {
        case .server(let keyIndex): try limit("server:\(keyIndex)", isServer: true)
        case .client(let claims): try limit("client:\(claims.userId)", isServer: false)
        }
        return principal
    }

    /// Checks the credential alone (no rate budget spent): for the check of a request's head.
    package func verify(credential: String?) throws(APIError) -> Principal {
        guard let credential else {
            throw .unauthorized("missing credentials: send 'Authorization: Bearer <server key or client token>'")
        }
        let digest = Crypto.sha256(Array(credential.utf8))
        var serverKey: Int?
        for (index, key) in serverKeyDigests.enumerated() where ConstantTime.equals(key, digest) { serverKey = index }
        if let serverKey { return .server(keyIndex: serverKey) }
        // Only something shaped like a JWT is tried as a token; anything else is a wrong key.
        guard credential.utf8.filter({ $0 == UInt8(ascii: ".") }).count == 2 else {
            throw .unauthorized("invalid credentials")
        }
        return .client(try verifyToken(credential))
    }

    /// A client token: signature, time claims, and not revoked by deleting its device.
    func verifyToken(_ token: String) throws(APIError) -> ClientClaims {
        let claims: ClientClaims
        do {
            claims = try tokens.verify(token, now: now().seconds)
        } catch {
            throw .unauthorized(error.message)
        }
        guard !revocations.isRevoked(claims) else {
            throw .unauthorized("the token was revoked: its device was deleted")
        }
        return claims
    }

    /// The Matrix push gateway: a homeserver sends no bearer key, so the `secret` query parameter
    /// is the credential (compared in constant time); rate-limited like a server key. A wrong or
    /// unset secret is 404, as if the endpoint did not exist.
    package func requireMatrixGateway(presented: String, configured: String?) throws(APIError) {
        guard Self.matrixSecretMatches(presented: presented, configured: configured) else {
            throw .notFound("no such endpoint")
        }
        try limit("matrix", isServer: true)
    }

    /// Whether the path's secret is the configured one (none configured: never).
    static func matrixSecretMatches(presented: String, configured: String?) -> Bool {
        guard let configured else { return false }
        return ConstantTime.equals(Array(presented.utf8), Array(configured.utf8))
    }

    /// 429 with `Retry-After` when the caller spent its budget.
    private func limit(_ key: String, isServer: Bool) throws(APIError) {
        guard let limiter, let wait = limiter.check(key, isServer: isServer, now: now()) else { return }
        throw APIError(
            429, "rate_limited", "too many requests; retry after \(wait) s", headers: [("Retry-After", String(wait))])
    }

    package func authenticate(_ request: HTTPRequest) throws(APIError) -> Principal {
        try authenticate(credential: Self.bearer(request))
    }

    /// Server-only endpoints: a valid client token gets 403, no credential 401.
    package func requireServer(_ request: HTTPRequest) throws(APIError) {
        guard case .server = try authenticate(request) else {
            throw .forbidden("this endpoint needs a server key; client tokens may not call it")
        }
    }

    /// Client endpoints: the server, or a client whose token's `sub` is `userId`.
    package func requireUser(_ request: HTTPRequest, userId: String) throws(APIError) -> Principal {
        let principal = try authenticate(request)
        if case .client(let claims) = principal, claims.userId != userId {
            throw .forbidden("a client token may only access its own user")
        }
        return principal
    }
}
