internal import CCrypto

/// Why a key could not be loaded or a crypto operation failed. Messages name the operation and
/// OpenSSL's reason, never key material.
package struct CryptoError: Error, Sendable, CustomStringConvertible {
    package enum Code: String, Sendable {
        /// A private key that is malformed, encrypted, of the wrong type or on the wrong curve.
        case invalidKey
        /// A peer's public key that is malformed or not a point on P-256.
        case invalidPublicKey
        /// An argument of the wrong length (auth secret, salt, nonce, AES key).
        case invalidArgument
        /// A Web Push payload that does not fit one record.
        case payloadTooLarge
        /// libcrypto refused an operation on valid input (allocation failure, internal error).
        case library
    }

    package let code: Code
    package let message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { "\(code.rawValue): \(message)" }

    /// An error for a failed libcrypto call, with OpenSSL's first queued reason. Draining the
    /// thread's error queue matters: a stale entry would confuse the next `SSL_get_error` on
    /// this thread (the TLS client shares libcrypto's queue).
    static func openSSL(_ code: Code, _ operation: String) -> CryptoError {
        let first = ERR_get_error()
        ERR_clear_error()
        guard first != 0 else { return CryptoError(code, operation) }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(first, &buffer, buffer.count)
        let reason = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return CryptoError(code, "\(operation): \(reason)")
    }
}
