internal import CCrypto

/// The few libcrypto primitives the relay needs, behind plain Swift signatures.
package enum Crypto {
    /// HMAC-SHA256 of `message` under `key` (32 bytes).
    package static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let ok = key.withUnsafeBytes { keyBuffer in
            message.withUnsafeBufferPointer { messageBuffer in
                out.withUnsafeMutableBufferPointer { outBuffer in
                    pr_hmac_sha256(
                        keyBuffer.baseAddress, Int32(keyBuffer.count), messageBuffer.baseAddress, messageBuffer.count,
                        outBuffer.baseAddress)
                }
            }
        }
        // HMAC fails only on allocation failure inside OpenSSL; an all-zero MAC never verifies.
        return ok == 1 ? out : [UInt8](repeating: 0, count: 32)
    }

    package static func sha256(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        data.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                _ = SHA256(input.baseAddress, input.count, output.baseAddress)
            }
        }
        return out
    }

    /// Cryptographically secure random bytes from the OpenSSL DRBG.
    package static func randomBytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        let ok = out.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32($0.count)) }
        if ok != 1 {
            // RAND_bytes only fails when the DRBG cannot be seeded; fall back to the system generator.
            var generator = SystemRandomNumberGenerator()
            for index in out.indices { out[index] = UInt8.random(in: .min ... .max, using: &generator) }
        }
        return out
    }
}
