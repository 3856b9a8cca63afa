internal import CCrypto

/// A P-256 (prime256v1) private key: ES256 signatures for APNs and VAPID, ECDH for Web Push.
///
/// `@unchecked Sendable`: the handle is never modified after `init`, and openssl-threads(7)
/// allows one `EVP_PKEY` to be used by several threads at once when none modifies it; each
/// operation makes its own context. The APNs key is loaded once and shared by the senders.
package final class P256Key: @unchecked Sendable {
    private let key: OpaquePointer
    /// The public key as an uncompressed X9.62 point: 0x04 ‖ x ‖ y, 65 bytes (the VAPID `k`
    /// and the Web Push `keyid`).
    package let publicKey: [UInt8]

    private init(key: OpaquePointer, publicKey: [UInt8]) {
        self.key = key
        self.publicKey = publicKey
    }

    deinit { EVP_PKEY_free(key) }

    /// A key from PEM: PKCS#8 "BEGIN PRIVATE KEY" (Apple's .p8) or SEC1 "BEGIN EC PRIVATE KEY".
    package convenience init(pem: String) throws(CryptoError) {
        let (key, publicKey) = try Self.adopt(EVP.readPrivateKey(pem: pem))
        self.init(key: key, publicKey: publicKey)
    }

    /// A key from its raw 32-byte big-endian private scalar (test vectors, JWK `d`).
    package convenience init(rawPrivateKey scalar: [UInt8]) throws(CryptoError) {
        guard scalar.count == 32, scalar.contains(where: { $0 != 0 }), scalar.lexicographicallyPrecedes(Self.order)
        else { throw CryptoError(.invalidKey, "a P-256 private scalar is 32 bytes in 1..<n") }
        // SEC1 DER without the public key: OpenSSL's decoder computes the point from the scalar.
        let der = Self.sec1Prefix + scalar + Self.sec1Suffix
        let key = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return d2i_PrivateKey(EVP_PKEY_EC, nil, &cursor, buffer.count)
        }
        guard let key else { throw CryptoError.openSSL(.invalidKey, "d2i_PrivateKey") }
        let (adopted, publicKey) = try Self.adopt(key)
        self.init(key: adopted, publicKey: publicKey)
    }

    /// A fresh random key (the per-message sender key of Web Push, new VAPID keys).
    package static func generate() throws(CryptoError) -> P256Key {
        guard let key = pr_p256_generate() else { throw CryptoError.openSSL(.library, "EVP_EC_gen") }
        let (adopted, publicKey) = try adopt(key)
        return P256Key(key: adopted, publicKey: publicKey)
    }

    /// The private key as PKCS#8 PEM ("BEGIN PRIVATE KEY"), readable by `init(pem:)`.
    package var pem: String {
        get throws(CryptoError) { try EVP.privateKeyPEM(key) }
    }

    // MARK: Operations

    /// ES256 (RFC 7518 §3.4): ECDSA P-256 over SHA-256, as the 64 bytes r ‖ s that JWS wants
    /// (OpenSSL gives DER, which APNs and push services reject).
    package func signES256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        let der = try EVP.digestSign(key, message)
        let signature = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let signature else { throw CryptoError.openSSL(.library, "d2i_ECDSA_SIG") }
        defer { ECDSA_SIG_free(signature) }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(signature, &r, &s)
        var raw = [UInt8](repeating: 0, count: 64)
        let ok = raw.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return false }
            return BN_bn2binpad(r, base, 32) == 32 && BN_bn2binpad(s, base + 32, 32) == 32
        }
        guard ok else { throw CryptoError.openSSL(.library, "BN_bn2binpad") }
        return raw
    }

    /// Whether `signature` (64 bytes r ‖ s) is an ES256 signature of `message` by this key.
    package func verifyES256(_ signature: [UInt8], message: [UInt8]) throws(CryptoError) -> Bool {
        guard signature.count == 64 else { return false }
        guard let sig = ECDSA_SIG_new() else { throw CryptoError.openSSL(.library, "ECDSA_SIG_new") }
        defer { ECDSA_SIG_free(sig) }
        let r = BN_bin2bn(signature, 32, nil)
        let s = signature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress.map { $0 + 32 }, 32, nil) }
        guard ECDSA_SIG_set0(sig, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            throw CryptoError.openSSL(.library, "ECDSA_SIG_set0")
        }
        var der = [UInt8](repeating: 0, count: Int(max(i2d_ECDSA_SIG(sig, nil), 0)))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_ECDSA_SIG(sig, &cursor)
        }
        guard written > 0, Int(written) == der.count else { throw CryptoError.openSSL(.library, "i2d_ECDSA_SIG") }
        return EVP.digestVerify(key, signature: der, message: message)
    }

    /// ECDH with a peer's uncompressed point: the 32-byte x coordinate of the shared point.
    /// A point off the curve is refused, since it could leak bits of our key.
    package func sharedSecret(peerPublicKey: [UInt8]) throws(CryptoError) -> [UInt8] {
        let peer = try peerKey(peerPublicKey)
        defer { EVP_PKEY_free(peer) }
        guard let context = EVP_PKEY_CTX_new(key, nil) else { throw CryptoError.openSSL(.library, "EVP_PKEY_CTX_new") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_derive_init(context) == 1 else { throw CryptoError.openSSL(.library, "EVP_PKEY_derive_init") }
        // No full validation (validate_peer 0): `peerKey` already checked that the point is on the
        // curve with coordinates in range, and P-256's cofactor of 1 leaves no small subgroup to
        // check; the n·Q = O test it would add cost as much as the ECDH itself.
        guard EVP_PKEY_derive_set_peer_ex(context, peer, 0) == 1 else {
            throw CryptoError.openSSL(.invalidPublicKey, "EVP_PKEY_derive_set_peer_ex")
        }
        var secret = [UInt8](repeating: 0, count: 32)
        var length = secret.count
        guard EVP_PKEY_derive(context, &secret, &length) == 1, length == 32 else {
            throw CryptoError.openSSL(.library, "EVP_PKEY_derive")
        }
        return secret
    }

    // MARK: Encodings

    /// The group order n: a private scalar must be below it.
    private static let order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]
    /// ECPrivateKey (RFC 5915) { version 1, privateKey OCTET STRING (32) ... }
    private static let sec1Prefix: [UInt8] = [0x30, 0x31, 0x02, 0x01, 0x01, 0x04, 0x20]
    /// ... parameters [0] namedCurve prime256v1 }
    private static let sec1Suffix: [UInt8] = [
        0xA0, 0x0A, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07,
    ]
    /// A public-only key on our curve from an uncompressed point. Decoding the point checks it
    /// lies on the curve. (`d2i_PUBKEY` would do the same through OpenSSL 3's decoder framework,
    /// measured 20 times slower: 280 µs against 14 µs.)
    private func peerKey(_ point: [UInt8]) throws(CryptoError) -> OpaquePointer {
        guard point.count == 65, point.first == 0x04 else {
            throw CryptoError(.invalidPublicKey, "a P-256 public key is 65 bytes starting 0x04")
        }
        guard let peer = EVP_PKEY_new() else { throw CryptoError.openSSL(.library, "EVP_PKEY_new") }
        guard EVP_PKEY_copy_parameters(peer, key) == 1 else {
            EVP_PKEY_free(peer)
            throw CryptoError.openSSL(.library, "EVP_PKEY_copy_parameters")
        }
        guard EVP_PKEY_set1_encoded_public_key(peer, point, point.count) == 1 else {
            EVP_PKEY_free(peer)
            throw CryptoError.openSSL(.invalidPublicKey, "not a point on P-256")
        }
        return peer
    }

    /// Whether `point` is an uncompressed point on P-256 (a browser's `p256dh`): a push can never
    /// be encrypted to one that is not, so it is refused when the subscription is registered.
    package static func isPublicPoint(_ point: [UInt8]) -> Bool {
        guard let template = parameters, let peer = try? template.peerKey(point) else { return false }
        EVP_PKEY_free(peer)
        return true
    }

    /// A key to copy the curve's parameters from (`isPublicPoint`).
    private static let parameters: P256Key? = try? P256Key.generate()

    /// Takes ownership of `key`: checks it is a P-256 key and reads its public point; frees it
    /// on failure (a throwing class `init` would not run `deinit`).
    private static func adopt(_ key: OpaquePointer) throws(CryptoError) -> (OpaquePointer, [UInt8]) {
        var name = [CChar](repeating: 0, count: 32)
        var nameLength = 0
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC,
            EVP_PKEY_get_group_name(key, &name, name.count, &nameLength) == 1,
            String(decoding: name.prefix(nameLength).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "prime256v1"
        else {
            EVP_PKEY_free(key)
            ERR_clear_error()
            throw CryptoError(.invalidKey, "not a P-256 EC key")
        }
        // A SEC1 file may ask for compressed points; the public key we publish is uncompressed.
        _ = EVP_PKEY_set_utf8_string_param(key, OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT, "uncompressed")
        var point = [UInt8](repeating: 0, count: 65)
        var pointLength = 0
        guard EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_PUB_KEY, &point, point.count, &pointLength) == 1,
            pointLength == 65, point[0] == 0x04
        else {
            EVP_PKEY_free(key)
            throw CryptoError.openSSL(.invalidKey, "no uncompressed public point")
        }
        return (key, point)
    }
}
