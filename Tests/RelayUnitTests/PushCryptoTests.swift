import RelayCore
import RelayCrypto
import RelayPrimitives
import Testing

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
        #expect(try key.verifyES256(signature, message: message))

        var tampered = signature
        tampered[63] ^= 1
        #expect(try !key.verifyES256(tampered, message: message))
        #expect(try !key.verifyES256(signature, message: message + [0x20]))
        #expect(try !P256Key.generate().verifyES256(signature, message: message))
    }

    /// Checks the r ‖ s to DER direction against a signature Python made.
    @Test func es256VerifiesASignatureMadeElsewhere() throws {
        let signature = try bytes(F.es256Signature)
        #expect(try P256Key(pem: F.p256PKCS8).verifyES256(signature, message: Array(F.signedMessage.utf8)))
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
        let outOfRange = [0x04] + [UInt8](repeating: 0xFF, count: 64)  // coordinates ≥ p
        for point in [offCurve, compressed, infinity, outOfRange, []] {
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
        #expect(try key.verifyES256(signature, message: signingInput))
    }

    // MARK: HKDF and AES-GCM

    /// RFC 5869 A.1 and A.3 (no salt, no info), and a four-block output checked with Python.
    @Test func hkdfMatchesKnownAnswers() throws {
        let ikm = [UInt8](repeating: 0x0B, count: 22)
        let first = try HKDF.sha256(salt: Array(0...12), ikm: ikm, info: Array(0xF0...0xF9), length: 42)
        #expect(
            Hex.string(first) == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
        let third = try HKDF.sha256(salt: [], ikm: ikm, info: [], length: 42)
        #expect(
            Hex.string(third) == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
        let long = try HKDF.sha256(
            salt: Array("salt".utf8), ikm: Array("ikm".utf8), info: Array("info".utf8), length: 100)
        #expect(
            Hex.string(long)
                == "fe8f9615d2374c0d17f77d1aeaf408c2e75fe0466073d0def23c733e2f862dfd6814c9254418fa112fe862ed399c4b25"
                + "fdadeaae292fad99bb17d22f96564592abdc5737225fc0502567d4eafdc012bd0f06cc3afac9d4b7f372af9a9e95a6dc"
                + "faf90709")
        for length in [0, 255 * 32 + 1] {
            let error = #expect(throws: CryptoError.self) {
                try HKDF.sha256(salt: [], ikm: ikm, info: [], length: length)
            }
            #expect(error?.code == .invalidArgument)
        }
    }

    /// The GCM specification's test cases 1 and 2 (zero key and nonce).
    @Test func aesGCMMatchesKnownAnswers() throws {
        let zeroKey = [UInt8](repeating: 0, count: 16)
        let zeroNonce = [UInt8](repeating: 0, count: 12)
        let tagOnly = try AES128GCM.seal([], key: zeroKey, nonce: zeroNonce)
        #expect(Hex.string(tagOnly) == "58e2fccefa7e3061367f1d57a4e7455a")
        let sealed = try AES128GCM.seal(zeroKey, key: zeroKey, nonce: zeroNonce)
        #expect(Hex.string(sealed) == "0388dace60b6a392f328c2b971b2fe78ab6e47d42cec13bdf53a67b21257bddf")
        let error = #expect(throws: CryptoError.self) { try AES128GCM.seal([1], key: zeroNonce, nonce: zeroNonce) }
        #expect(error?.code == .invalidArgument)
    }

    // MARK: Web Push

    /// RFC 8291 §5 / Appendix A: fixed sender key and salt give the published body byte for byte.
    @Test func webPushReproducesTheRFC8291Example() throws {
        let body = try WebPushEncryption.encrypt(
            plaintext: Array("When I grow up, I want to be a watermelon".utf8),
            receiverPublicKey: bytes(
                "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"),
            authSecret: bytes("BTBZMqHH6r4Tts7J_aSIgg"),
            senderKey: P256Key(rawPrivateKey: bytes("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw")),
            salt: bytes("DGv6ra1nlYgDCS1FRnbzlw"))
        let expected = """
            DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wE\
            qKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN
            """
        #expect(Base64.encode(body, .url) == expected)
    }

    @Test func webPushUsesAFreshSenderKeyAndSaltPerMessage() throws {
        let receiver = try P256Key.generate()
        let auth = Crypto.randomBytes(16)
        let plaintext = Array(#"{"title":"hi"}"#.utf8)
        let first = try WebPushEncryption.encrypt(
            plaintext: plaintext, receiverPublicKey: receiver.publicKey, authSecret: auth)
        let second = try WebPushEncryption.encrypt(
            plaintext: plaintext, receiverPublicKey: receiver.publicKey, authSecret: auth)
        #expect(first.count == 16 + 4 + 1 + 65 + plaintext.count + 1 + 16)
        #expect(Array(first[16..<21]) == [0, 0, 0x10, 0, 65])
        #expect(first[21] == 0x04)
        #expect(first.prefix(16) != second.prefix(16))
        #expect(first[21..<86] != second[21..<86])
    }

    @Test func webPushRefusesBadSubscriptionsAndOversizedPayloads() throws {
        let receiver = try P256Key.generate().publicKey
        let auth = Crypto.randomBytes(16)
        func code(
            _ plaintextCount: Int = 10, point: [UInt8]? = nil, auth secret: [UInt8]? = nil, salt: [UInt8]? = nil,
            recordSize: UInt32 = 4096
        ) -> CryptoError.Code? {
            do {
                _ = try WebPushEncryption.encrypt(
                    plaintext: [UInt8](repeating: 0x61, count: plaintextCount), receiverPublicKey: point ?? receiver,
                    authSecret: secret ?? auth, salt: salt, recordSize: recordSize)
                return nil
            } catch {
                return error.code
            }
        }
        var offCurve = receiver
        offCurve[64] ^= 1
        #expect(code(4096 - 17) == nil)
        #expect(code(4096 - 16) == .payloadTooLarge)
        #expect(code(0, recordSize: 17) == .invalidArgument)
        #expect(code(point: offCurve) == .invalidPublicKey)
        #expect(code(point: Array(receiver.prefix(33))) == .invalidPublicKey)
        #expect(code(auth: Array(auth.prefix(15))) == .invalidArgument)
        #expect(code(salt: [UInt8](repeating: 0, count: 15)) == .invalidArgument)
    }
}
