internal import RelayPrimitives

/// JWS Compact Serialization (RFC 7515 §7.1), the shape of APNs provider tokens, VAPID tokens
/// and Google's OAuth assertions. Callers bring the header and claims as JSON bytes, so this
/// type needs no JSON encoder and signs exactly the bytes it was given.
package enum JWS {
    /// base64url(header) "." base64url(claims) "." base64url(signature), unpadded; `sign` gets
    /// the ASCII of the first two parts (e.g. `key.signES256`, `key.signRS256`).
    package static func compact(
        header: [UInt8], claims: [UInt8], sign: (_ signingInput: [UInt8]) throws(CryptoError) -> [UInt8]
    ) throws(CryptoError) -> String {
        let signingInput = Base64.encode(header, .url) + "." + Base64.encode(claims, .url)
        let signature = try sign(Array(signingInput.utf8))
        return signingInput + "." + Base64.encode(signature, .url)
    }
}
