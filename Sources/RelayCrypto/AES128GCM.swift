internal import CCrypto

/// AES-128-GCM encryption, the cipher of Web Push's "aes128gcm" content coding (RFC 8188).
package enum AES128GCM {
    /// Encrypts `plaintext` with no associated data: ciphertext ‖ 16-byte tag. Each (key, nonce)
    /// pair must be used once; Web Push derives both from a fresh salt per message.
    package static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard key.count == 16, nonce.count == 12 else {
            throw CryptoError(.invalidArgument, "AES-128-GCM takes a 16-byte key and a 12-byte nonce")
        }
        guard let length = Int32(exactly: plaintext.count) else {
            throw CryptoError(.invalidArgument, "plaintext too large")
        }
        guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError.openSSL(.library, "EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        // GCM's default IV length is 12 bytes, so no EVP_CTRL_GCM_SET_IVLEN is needed.
        guard EVP_EncryptInit_ex(context, EVP_aes_128_gcm(), nil, key, nonce) == 1 else {
            throw CryptoError.openSSL(.library, "EVP_EncryptInit_ex")
        }
        var sealed = [UInt8](repeating: 0, count: plaintext.count + 16)
        let ok = sealed.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress else { return false }
            var written: Int32 = 0
            var finished: Int32 = 0
            guard EVP_EncryptUpdate(context, base, &written, plaintext, length) == 1, written == length,
                EVP_EncryptFinal_ex(context, base + Int(written), &finished) == 1, finished == 0
            else { return false }
            return EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, base + plaintext.count) == 1
        }
        guard ok else { throw CryptoError.openSSL(.library, "AES-128-GCM") }
        return sealed
    }
}
