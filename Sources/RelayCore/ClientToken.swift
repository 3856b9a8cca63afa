import RelayPrimitives

/// The claims of a client token: who may read which inbox, until when.
package struct ClientClaims: Sendable, Equatable {
    /// `sub`: the user whose inbox the token opens.
    package var userId: String
    /// `did`: the device, needed for presence; optional so that tokens minted by a chat server
    /// for REST polling alone still work.
    package var deviceId: String?
    /// `exp`, in seconds since the epoch. Required: a token that never expires is refused.
    package var expiresAt: Int64
    package var notBefore: Int64?
    package var issuedAt: Int64?

    /// The lifetimes, in seconds, the relay mints tokens for (`POST /v1/tokens` and `pushrelay
    /// token` alike): at most 30 days, since a token cannot be revoked short of deleting its device.
    package static let mintedLifetimes: ClosedRange<Int64> = 60...2_592_000
    /// A minted token's lifetime when none is asked for.
    package static let defaultLifetime: Int64 = 3600

    package init(userId: String, deviceId: String?, expiresAt: Int64, notBefore: Int64? = nil, issuedAt: Int64? = nil) {
        self.userId = userId
        self.deviceId = deviceId
        self.expiresAt = expiresAt
        self.notBefore = notBefore
        self.issuedAt = issuedAt
    }
}

/// Why a client token was refused; the HTTP layer answers 401 with the reason as message.
package enum ClientTokenError: Error, Equatable, Sendable {
    case malformed
    case unsupportedAlgorithm(String)
    case badSignature
    case expired
    case notYetValid
    case invalidClaim(String)

    package var message: String {
        switch self {
        case .malformed: return "the token is not a well-formed JWT"
        case .unsupportedAlgorithm(let alg): return "unsupported token algorithm '\(alg)', only HS256 is accepted"
        case .badSignature: return "the token signature does not verify"
        case .expired: return "the token has expired"
        case .notYetValid: return "the token is not valid yet"
        case .invalidClaim(let claim): return "the token claim '\(claim)' is missing or invalid"
        }
    }
}

/// HS256 JWTs for clients (RFC 7519). The HMAC is injected so this stays pure: the server
/// passes libcrypto's, tests may pass their own.
package struct ClientTokenCodec: Sendable {
    package typealias HMAC = @Sendable (_ message: [UInt8]) -> [UInt8]

    private let hmac: HMAC
    /// Clock skew tolerated on `exp` and `nbf`, in seconds.
    package var leeway: Int64

    package init(hmac: @escaping HMAC, leeway: Int64 = 30) {
        self.hmac = hmac
        self.leeway = leeway
    }

    package func encode(_ claims: ClientClaims) -> String {
        var payload = JSONWriter()
        payload.beginObject()
        payload.key("sub")
        payload.string(claims.userId)
        if let deviceId = claims.deviceId {
            payload.key("did")
            payload.string(deviceId)
        }
        if let issuedAt = claims.issuedAt {
            payload.key("iat")
            payload.int(issuedAt)
        }
        if let notBefore = claims.notBefore {
            payload.key("nbf")
            payload.int(notBefore)
        }
        payload.key("exp")
        payload.int(claims.expiresAt)
        payload.endObject()
        let signingInput = Self.header + "." + Base64.encode(payload.bytes, .url)
        return signingInput + "." + Base64.encode(hmac(Array(signingInput.utf8)), .url)
    }

    private static let header = Base64.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8), .url)

    /// Verifies signature, algorithm and time claims; `now` in seconds since the epoch.
    package func verify(_ token: String, now: Int64) throws(ClientTokenError) -> ClientClaims {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, token.utf8.count <= 8192 else { throw .malformed }
        guard let headerBytes = Base64.decode(parts[0], .url), let header = try? JSONParser.parse(headerBytes),
            case .object = header
        else { throw .malformed }
        // Check the algorithm before anything else: `none` and asymmetric algorithms never pass.
        guard let alg = header["alg"]?.stringValue else { throw .malformed }
        guard alg == "HS256" else { throw .unsupportedAlgorithm(alg) }
        guard let signature = Base64.decode(parts[2], .url) else { throw .malformed }
        let signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard ConstantTime.equals(hmac(signingInput), signature) else { throw .badSignature }

        guard let payloadBytes = Base64.decode(parts[1], .url), let payload = try? JSONParser.parse(payloadBytes),
            case .object = payload
        else { throw .malformed }
        guard let userId = payload["sub"]?.stringValue, Identifier.isValidUserOrDeviceId(userId) else {
            throw .invalidClaim("sub")
        }
        var deviceId: String?
        if let did = payload["did"], !did.isNull {
            guard let value = did.stringValue, Identifier.isValidUserOrDeviceId(value) else {
                throw .invalidClaim("did")
            }
            deviceId = value
        }
        guard let exp = Self.numericDate(payload["exp"]) else { throw .invalidClaim("exp") }
        let nbf = try Self.optionalNumericDate(payload["nbf"], name: "nbf")
        let iat = try Self.optionalNumericDate(payload["iat"], name: "iat")
        guard now < exp + leeway else { throw .expired }
        if let nbf, now + leeway < nbf { throw .notYetValid }
        return ClientClaims(userId: userId, deviceId: deviceId, expiresAt: exp, notBefore: nbf, issuedAt: iat)
    }

    /// The latest NumericDate kept as it is (9999-12-31T23:59:59Z). Libraries write `exp` =
    /// 2^63−1 or 1e300 for "never expires": such values are clamped here, so that no later
    /// arithmetic on a claim (leeway, milliseconds, socket deadlines) can overflow.
    package static let latestDate: Int64 = 253_402_300_799

    /// A NumericDate may carry a fraction (RFC 7519 §2); whole seconds are enough here. Any
    /// finite number is accepted and clamped to `±latestDate`.
    private static func numericDate(_ value: JSONValue?) -> Int64? {
        guard case .number(let text) = value else { return nil }
        if let whole = Int64(text) { return min(max(whole, -latestDate), latestDate) }
        guard let double = Double(text), double.isFinite else { return nil }
        let clamped = min(max(double, -Double(latestDate)), Double(latestDate))
        return Int64(clamped.rounded(.down))
    }

    private static func optionalNumericDate(_ value: JSONValue?, name: String) throws(ClientTokenError) -> Int64? {
        guard let value, !value.isNull else { return nil }
        guard let date = numericDate(value) else { throw .invalidClaim(name) }
        return date
    }
}
