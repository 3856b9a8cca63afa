internal import CCrypto

/// An RSA private key for RS256: the OAuth assertion of a Google service account (FCM v1).
///
/// `@unchecked Sendable` for the reason given on `P256Key`: the handle is read-only after `init`.
package final class RSAKey: @unchecked Sendable {
    private let key: OpaquePointer

    deinit { EVP_PKEY_free(key) }

    /// A key from PEM: PKCS#8 "BEGIN PRIVATE KEY" (a service account's `private_key`, once the
    /// JSON parser has unescaped its `\n`) or PKCS#1 "BEGIN RSA PRIVATE KEY".
    package init(pem: String) throws(CryptoError) {
        let key = try EVP.readPrivateKey(pem: pem)
        // RSA-PSS keys (a separate type) cannot make PKCS#1 v1.5 signatures.
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA else {
            EVP_PKEY_free(key)
            throw CryptoError(.invalidKey, "not an RSA key")
        }
        self.key = key
    }

    /// RS256 (RFC 7518 §3.3): RSASSA-PKCS1-v1_5 with SHA-256; as long as the modulus.
    package func signRS256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        try EVP.digestSign(key, message)
    }
}
