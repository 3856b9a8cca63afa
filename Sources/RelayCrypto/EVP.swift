internal import CCrypto

/// The libcrypto calls both key types share. Each borrows an `EVP_PKEY` its caller owns.
enum EVP {
    /// The first private key in `pem` (PKCS#8, SEC1 or PKCS#1); the caller frees it. The
    /// password callback refuses encrypted keys: without one, OpenSSL would prompt on the terminal.
    static func readPrivateKey(pem: String) throws(CryptoError) -> OpaquePointer {
        // Decoders that tried and failed leave entries behind even when a later one succeeds.
        defer { ERR_clear_error() }
        let bytes = Array(pem.utf8)
        guard !bytes.isEmpty, let length = Int32(exactly: bytes.count) else {
            throw CryptoError(.invalidKey, "PEM is empty or too large")
        }
        let key = bytes.withUnsafeBytes { buffer -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, length) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
        }
        guard let key else { throw CryptoError.openSSL(.invalidKey, "no readable private key in PEM") }
        return key
    }

    /// The key as PKCS#8 PEM ("BEGIN PRIVATE KEY"), unencrypted.
    static func privateKeyPEM(_ key: OpaquePointer) throws(CryptoError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError.openSSL(.library, "BIO_new") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil) == 1 else {
            throw CryptoError.openSSL(.library, "PEM_write_bio_PrivateKey")
        }
        var out = [UInt8](repeating: 0, count: BIO_ctrl_pending(bio))
        let read = out.withUnsafeMutableBytes { BIO_read(bio, $0.baseAddress, Int32(clamping: $0.count)) }
        guard read == out.count else { throw CryptoError.openSSL(.library, "BIO_read") }
        return String(decoding: out, as: UTF8.self)
    }

    /// A SHA-256 signature in the key's native form: DER for ECDSA, PKCS#1 v1.5 for RSA.
    static func digestSign(_ key: OpaquePointer, _ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.openSSL(.library, "EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1 else {
            throw CryptoError.openSSL(.library, "EVP_DigestSignInit")
        }
        var signature = [UInt8](repeating: 0, count: Int(max(EVP_PKEY_get_size(key), 0)))
        var length = signature.count
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1, length <= signature.count
        else { throw CryptoError.openSSL(.library, "EVP_DigestSign") }
        return Array(signature.prefix(length))
    }

    /// Whether `signature` (native form) is a valid SHA-256 signature of `message` under `key`.
    static func digestVerify(_ key: OpaquePointer, signature: [UInt8], message: [UInt8]) -> Bool {
        // A bad signature queues a reason; it is an answer here, not an error.
        defer { ERR_clear_error() }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
    }
}
