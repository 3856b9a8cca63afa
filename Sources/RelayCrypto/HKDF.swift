internal import CCrypto

/// HKDF with SHA-256 (RFC 5869): Web Push derives its key and nonce with it (RFC 8291 §3.4,
/// RFC 8188 §2.2). Built on one-shot HMAC; unlike `Crypto.hmacSHA256`, a failed HMAC throws,
/// since a silent all-zero output here would become a predictable key.
package enum HKDF {
    /// Extract then expand: `length` bytes (at most 255 × 32) of output keying material.
    package static func sha256(
        salt: [UInt8], ikm: [UInt8], info: [UInt8], length: Int
    ) throws(CryptoError) -> [UInt8] {
        guard length > 0, length <= 255 * 32 else { throw CryptoError(.invalidArgument, "HKDF length is 1...8160") }
        let prk = try hmac(key: salt, message: ikm)
        var okm: [UInt8] = []
        okm.reserveCapacity(length + 32)
        var block: [UInt8] = []
        var counter: UInt8 = 0
        while okm.count < length {
            counter &+= 1  // at most 255 blocks, by the guard above
            block = try hmac(key: prk, message: block + info + [counter])
            okm += block
        }
        return Array(okm.prefix(length))
    }

    private static func hmac(key: [UInt8], message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let keyLength = Int32(exactly: key.count) else {
            throw CryptoError(.invalidArgument, "HMAC key too large")
        }
        var out = [UInt8](repeating: 0, count: 32)
        let ok = pr_hmac_sha256(key, keyLength, message, message.count, &out)
        guard ok == 1 else { throw CryptoError.openSSL(.library, "HMAC") }
        return out
    }
}
