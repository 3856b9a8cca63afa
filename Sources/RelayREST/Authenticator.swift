package import RelayCore
import RelayCrypto
package import RelayHTTP
import RelayLive

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
    package let revocations: TokenRevocations
    private let now: @Sendable () -> Timestamp
    private let limiter: RateLimiter?
    /// Wrong Matrix secrets per peer address (`wrongMatrixSecrets`); on whatever `limiter` says.
    private let wrongSecrets = RateLimiter(
        server: Authenticator.wrongMatrixSecrets, client: Authenticator.wrongMatrixSecrets)

    package init(
        serverKeys: [String], tokens: ClientTokenCodec, revocations: TokenRevocations = TokenRevocations([]),
        limiter: RateLimiter? = nil, now: @escaping @Sendable () -> Timestamp
    ) {
        serverKeyDigests = serverKeys.map { Crypto.sha256(Array($0.utf8)) }
        self.tokens = tokens
        self.revocations = revocations
        self.limiter = limiter
        self.now = now
    }

    /// Server keys and tokens only (no revocations, no request budget): for tests of the checks.
    package init(serverKeys: [String], tokens: ClientTokenCodec, now: @escaping @Sendable () -> Timestamp) {
        self.init(serverKeys: serverKeys, tokens: tokens, revocations: TokenRevocations([]), limiter: nil, now: now)
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
    /// unset secret is 404, as if the endpoint did not exist — until `caller` (the peer address)
    /// has sent `wrongMatrixSecrets` of them: then 429. The right secret is compared first and
    /// never refused by that budget, so that wrong ones sent through the same proxy as the
    /// homeserver cannot silence it (guessing is bounded by the secret's length, not the budget).
    package func requireMatrixGateway(presented: String, configured: String?, caller: String) throws(APIError) {
        try checkMatrixSecret(presented: presented, configured: configured, caller: caller)
        try limit("matrix", isServer: true)
    }

    /// The secret alone (no request budget spent): for the check of a request's head. A wrong one
    /// spends from `caller`'s budget of wrong secrets.
    package func checkMatrixSecret(presented: String, configured: String?, caller: String) throws(APIError) {
        guard Self.matrixSecretMatches(presented: presented, configured: configured) else {
            if let wait = wrongSecrets.check(caller, isServer: true, now: now()) {
                throw APIError(
                    429, "rate_limited", "too many requests; retry after \(wait) s",
                    headers: [("Retry-After", String(wait))])
            }
            throw .notFound("no such endpoint")
        }
    }

    /// Wrong Matrix secrets one peer address may send: 10 at once, then 1 a second.
    package static let wrongMatrixSecrets = RateLimiter.Limits(ratePerSecond: 1, burst: 10)

    /// Whether the path's secret is the configured one (none configured: never). Both sides are
    /// hashed first, so the comparison's time depends on neither's length; `digest` is SHA-256
    /// (a parameter for the test that both sides go through it).
    package static func matrixSecretMatches(
        presented: String, configured: String?, digest: ([UInt8]) -> [UInt8] = { Crypto.sha256($0) }
    ) -> Bool {
        let expected = digest(Array((configured ?? "").utf8))
        let given = digest(Array(presented.utf8))
        return ConstantTime.equals(given, expected) && configured != nil
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

extension Authenticator: SocketTokenVerifier {
    package func socketClaims(_ token: String) -> ClientClaims? { try? verifyToken(token) }
    package var leewaySeconds: Int64 { tokens.leeway }
}
