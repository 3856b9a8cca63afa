import RelayCore
import RelayCrypto
import RelayPrimitives
import Testing

@Suite struct ClientTokenTests {
    static let secret = Array("a-secret-that-is-long-enough-for-hs256!!".utf8)
    let codec = ClientTokenCodec(hmac: { Crypto.hmacSHA256(key: ClientTokenTests.secret, message: $0) })
    let now: Int64 = 1_800_000_000

    @Test func roundTrips() throws {
        let claims = ClientClaims(userId: "alice", deviceId: "phone", expiresAt: now + 60, issuedAt: now)
        let token = codec.encode(claims)
        #expect(try codec.verify(token, now: now) == claims)
    }

    /// A token as PyJWT would mint it: `jwt.encode({"sub":"bob","exp":1800000060}, secret, "HS256")`,
    /// with the header members in PyJWT's order; computed independently of `encode`.
    @Test func acceptsTokensMintedElsewhere() throws {
        let header = Base64.encode(Array(#"{"typ":"JWT","alg":"HS256"}"#.utf8), .url)
        let payload = Base64.encode(Array(#"{"sub":"bob","exp":1800000060.5}"#.utf8), .url)
        let signature = Base64.encode(
            Crypto.hmacSHA256(key: Self.secret, message: Array("\(header).\(payload)".utf8)), .url)
        let claims = try codec.verify("\(header).\(payload).\(signature)", now: now)
        #expect(claims.userId == "bob")
        #expect(claims.deviceId == nil)
        #expect(claims.expiresAt == 1_800_000_060)
    }

    @Test func rejectsTamperedPayload() {
        let token = codec.encode(ClientClaims(userId: "alice", deviceId: nil, expiresAt: now + 60))
        let parts = token.split(separator: ".")
        let forged = Base64.encode(Array(#"{"sub":"mallory","exp":1800000060}"#.utf8), .url)
        #expect(throws: ClientTokenError.badSignature) {
            try codec.verify("\(parts[0]).\(forged).\(parts[2])", now: now)
        }
    }

    @Test func rejectsAlgNone() {
        let header = Base64.encode(Array(#"{"alg":"none","typ":"JWT"}"#.utf8), .url)
        let payload = Base64.encode(Array(#"{"sub":"alice","exp":1800000060}"#.utf8), .url)
        #expect(throws: ClientTokenError.unsupportedAlgorithm("none")) {
            try codec.verify("\(header).\(payload).", now: now)
        }
    }

    @Test func rejectsOtherAlgorithms() {
        let header = Base64.encode(Array(#"{"alg":"RS256"}"#.utf8), .url)
        let payload = Base64.encode(Array(#"{"sub":"alice","exp":1800000060}"#.utf8), .url)
        #expect(throws: ClientTokenError.unsupportedAlgorithm("RS256")) {
            try codec.verify("\(header).\(payload).AAAA", now: now)
        }
    }

    @Test func rejectsExpiredAndNotYetValid() {
        let expired = codec.encode(ClientClaims(userId: "alice", deviceId: nil, expiresAt: now - 31))
        #expect(throws: ClientTokenError.expired) { try codec.verify(expired, now: now) }
        let early = codec.encode(
            ClientClaims(userId: "alice", deviceId: nil, expiresAt: now + 600, notBefore: now + 120))
        #expect(throws: ClientTokenError.notYetValid) { try codec.verify(early, now: now) }
        // Within the 30 s leeway both pass.
        let justExpired = codec.encode(ClientClaims(userId: "alice", deviceId: nil, expiresAt: now - 5))
        #expect((try? codec.verify(justExpired, now: now)) != nil)
    }

    @Test func rejectsMissingOrBadClaims() {
        let header = Base64.encode(Array(#"{"alg":"HS256"}"#.utf8), .url)
        func sign(_ payload: String) -> String {
            let body = Base64.encode(Array(payload.utf8), .url)
            let mac = Base64.encode(Crypto.hmacSHA256(key: Self.secret, message: Array("\(header).\(body)".utf8)), .url)
            return "\(header).\(body).\(mac)"
        }
        #expect(throws: ClientTokenError.invalidClaim("exp")) { try codec.verify(sign(#"{"sub":"a"}"#), now: now) }
        #expect(throws: ClientTokenError.invalidClaim("sub")) {
            try codec.verify(sign(#"{"exp":1900000000}"#), now: now)
        }
        #expect(throws: ClientTokenError.invalidClaim("sub")) {
            try codec.verify(sign(#"{"sub":"a/b","exp":1900000000}"#), now: now)
        }
        #expect(throws: ClientTokenError.malformed) { try codec.verify("abc", now: now) }
        #expect(throws: ClientTokenError.malformed) { try codec.verify("a.b.c.d", now: now) }
    }

    @Test func base64URLRoundTripsAndRejectsNonCanonical() {
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(Base64.decode(Base64.encode(bytes, .url), .url) == bytes)
        }
        #expect(Base64.decode("A", .url) == nil)
        #expect(Base64.decode("AA", .url) == [0])
        #expect(Base64.decode("AB", .url) == nil)  // "AA" is the canonical spelling: spare bits must be 0
        #expect(Base64.decode("a+b/", .url) == nil)
    }

    /// Libraries write `exp` = 2^63−1 or 1e300 for "never expires": no claim value may trap; such
    /// values are clamped to 9999-12-31 (and a hugely negative one is simply expired).
    @Test func extremeClaimsAreClampedNotTrapped() throws {
        func signed(_ claims: String) -> String {
            let input =
                Base64.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8), .url) + "."
                + Base64.encode(Array(claims.utf8), .url)
            return input + "." + Base64.encode(Crypto.hmacSHA256(key: Self.secret, message: Array(input.utf8)), .url)
        }
        for exp in ["9223372036854775807", "1e300", "18446744073709551616", "1.7976931348623157e308"] {
            let claims = try codec.verify(signed(#"{"sub":"a","exp":\#(exp)}"#), now: now)
            #expect(claims.expiresAt == ClientTokenCodec.latestDate)
        }
        let wide = try codec.verify(
            signed(#"{"sub":"a","exp":1e300,"nbf":-9223372036854775808,"iat":-1e300}"#), now: now)
        #expect(wide.notBefore == -ClientTokenCodec.latestDate)
        #expect(throws: ClientTokenError.expired) {
            try codec.verify(signed(#"{"sub":"a","exp":-9223372036854775808}"#), now: now)
        }
        #expect(throws: ClientTokenError.notYetValid) {
            try codec.verify(signed(#"{"sub":"a","exp":1e300,"nbf":9223372036854775807}"#), now: now)
        }
    }
}
