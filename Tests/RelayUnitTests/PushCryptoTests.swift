import RelayCrypto
import Testing
import WebSocketCodec

/// The keys and signatures behind APNs (ES256), FCM (RS256) and Web Push (ECDH).
@Suite struct PushCryptoTests {
    typealias F = PushCryptoFixtures

    func bytes(_ base64url: String) throws -> [UInt8] { try #require(Base64.decode(base64url, .url)) }

    // MARK: P-256

    @Test func p256KeyLoadsFromEveryPEMFormAndFromItsScalar() throws {
        let expected = try bytes(F.p256Public)
        #expect(try P256Key(pem: F.p256PKCS8).publicKey == expected)
        #expect(try P256Key(pem: F.p256SEC1).publicKey == expected)
        #expect(try P256Key(pem: F.p256SEC1Compressed).publicKey == expected)
        #expect(try P256Key(rawPrivateKey: bytes(F.p256Scalar)).publicKey == expected)
    }

    @Test func es256SignatureIsRawAndVerifies() throws {
        let key = try P256Key(pem: F.p256PKCS8)
        let message = Array(F.signedMessage.utf8)
        let signature = try key.signES256(message)
        #expect(signature.count == 64)
        #expect(try P256Key.verifyES256(signature, message: message, publicKey: key.publicKey))

        var tampered = signature
        tampered[63] ^= 1
        #expect(try !P256Key.verifyES256(tampered, message: message, publicKey: key.publicKey))
        #expect(try !P256Key.verifyES256(signature, message: message + [0x20], publicKey: key.publicKey))
        let other = try P256Key.generate()
        #expect(try !P256Key.verifyES256(signature, message: message, publicKey: other.publicKey))
    }

    /// Checks the r ‖ s to DER direction against a signature Python made.
    @Test func es256VerifiesASignatureMadeElsewhere() throws {
        let signature = try bytes(F.es256Signature)
        let publicKey = try bytes(F.p256Public)
        #expect(try P256Key.verifyES256(signature, message: Array(F.signedMessage.utf8), publicKey: publicKey))
    }

    @Test func pemRoundTrips() throws {
        let key = try P256Key.generate()
        let pem = try key.pem
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        #expect(try P256Key(pem: pem).publicKey == key.publicKey)
        #expect(try P256Key(pem: F.p256SEC1).pem == F.p256PKCS8 + "\n")
    }

    @Test func ecdhAgreesBothWays() throws {
        let alice = try P256Key.generate()
        let bob = try P256Key.generate()
        let secret = try alice.sharedSecret(peerPublicKey: bob.publicKey)
        #expect(secret.count == 32)
        #expect(try bob.sharedSecret(peerPublicKey: alice.publicKey) == secret)
        #expect(alice.publicKey.count == 65 && alice.publicKey[0] == 0x04)
    }

    @Test func ecdhRefusesPointsOffTheCurveOrMisencoded() throws {
        let key = try P256Key.generate()
        var offCurve = try bytes(F.p256Public)
        offCurve[64] ^= 1
        var compressed = Array(offCurve.prefix(33))
        compressed[0] = 0x02
        var infinity = [UInt8](repeating: 0, count: 65)
        infinity[0] = 0x04
        for point in [offCurve, compressed, infinity, [], [UInt8](repeating: 0xFF, count: 65)] {
            let error = #expect(throws: CryptoError.self) { try key.sharedSecret(peerPublicKey: point) }
            #expect(error?.code == .invalidPublicKey)
        }
    }

    @Test func badPrivateKeysAreTypedErrors() throws {
        var lines = F.p256PKCS8.split(separator: "\n")
        lines.remove(at: 2)
        let garbled = lines.joined(separator: "\n")
        let truncated = String(F.p256PKCS8.prefix(80))
        for pem in ["", "not a key", garbled, truncated, F.rsaPKCS8, F.p256Encrypted] {
            let error = #expect(throws: CryptoError.self) { try P256Key(pem: pem) }
            #expect(error?.code == .invalidKey)
        }
        let order = try bytes("_____wAAAAD__________7zm-q2nF56E87nKwvxjJVE")
        for scalar in [[UInt8](repeating: 0, count: 32), order, [UInt8](repeating: 1, count: 31)] {
            let error = #expect(throws: CryptoError.self) { try P256Key(rawPrivateKey: scalar) }
            #expect(error?.code == .invalidKey)
        }
        for pem in [F.p256PKCS8, "-----BEGIN PRIVATE KEY-----\n"] {
            let error = #expect(throws: CryptoError.self) { try RSAKey(pem: pem) }
            #expect(error?.code == .invalidKey)
        }
    }

    // MARK: RSA

    /// PKCS#1 v1.5 is deterministic, so both PEM forms must give Python's signature exactly.
    @Test func rs256MatchesASignatureMadeElsewhere() throws {
        let expected = try bytes(F.rs256Signature)
        let message = Array(F.signedMessage.utf8)
        #expect(try RSAKey(pem: F.rsaPKCS8).signRS256(message) == expected)
        #expect(try RSAKey(pem: F.rsaPKCS1).signRS256(message) == expected)
        #expect(expected.count == 256)
    }

    // MARK: JWS

    /// `signedMessage` is base64url(`{"alg":"RS256"}`) "." base64url(`{"iss":"test"}`), so the
    /// whole token is known in advance.
    @Test func jwsCompactMatchesAKnownRS256Token() throws {
        let key = try RSAKey(pem: F.rsaPKCS8)
        let token = try JWS.compact(
            header: Array(#"{"alg":"RS256"}"#.utf8), claims: Array(#"{"iss":"test"}"#.utf8), sign: key.signRS256)
        #expect(token == F.signedMessage + "." + F.rs256Signature)
    }

    @Test func jwsCompactES256VerifiesOverItsFirstTwoParts() throws {
        let key = try P256Key.generate()
        let header = Array(#"{"alg":"ES256","kid":"ABC123DEFG"}"#.utf8)
        let token = try JWS.compact(header: header, claims: Array(#"{"iss":"TEAM","iat":1}"#.utf8), sign: key.signES256)
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        #expect(!token.contains("="))
        #expect(Base64.decode(parts[0], .url) == header)
        let signature = try bytes(String(parts[2]))
        let signingInput = Array("\(parts[0]).\(parts[1])".utf8)
        #expect(try P256Key.verifyES256(signature, message: signingInput, publicKey: key.publicKey))
    }
}
