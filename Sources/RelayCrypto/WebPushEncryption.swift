/// Web Push message encryption (RFC 8291) in the "aes128gcm" content coding (RFC 8188), as
/// one record: the body of the POST to a subscription's endpoint.
package enum WebPushEncryption {
    /// The encrypted body: salt(16) ‖ rs(4, big-endian) ‖ idlen(1) = 65 ‖ sender public key(65)
    /// ‖ AES-128-GCM(plaintext ‖ 0x02). `receiverPublicKey` and `authSecret` are the
    /// subscription's `p256dh` and `auth`. `senderKey` and `salt` exist for test vectors: by
    /// default both are fresh per message, as RFC 8291 §3.1 requires.
    package static func encrypt(
        plaintext: [UInt8], receiverPublicKey: [UInt8], authSecret: [UInt8], senderKey: P256Key? = nil,
        salt: [UInt8]? = nil, recordSize: UInt32 = 4096
    ) throws(CryptoError) -> [UInt8] {
        guard authSecret.count == 16 else { throw CryptoError(.invalidArgument, "auth secret is 16 bytes") }
        let salt = salt ?? Crypto.randomBytes(16)
        guard salt.count == 16 else { throw CryptoError(.invalidArgument, "salt is 16 bytes") }
        // RFC 8188 §2: a record holds at least the delimiter and the tag.
        guard recordSize >= 18 else { throw CryptoError(.invalidArgument, "record size is at least 18") }
        // One record carries the plaintext, the 0x02 last-record delimiter and the 16-byte tag.
        guard plaintext.count <= Int(recordSize) - 17 else {
            throw CryptoError(.payloadTooLarge, "payload does not fit one \(recordSize)-byte record")
        }
        // Not `??`: its autoclosure would widen the typed throw to `any Error`.
        let sender = if let senderKey { senderKey } else { try P256Key.generate() }
        // Validates the receiver's point (length, 0x04, on the curve) before anything is derived.
        let ecdhSecret = try sender.sharedSecret(peerPublicKey: receiverPublicKey)
        let keyInfo = Array("WebPush: info\0".utf8) + receiverPublicKey + sender.publicKey
        let ikm = try HKDF.sha256(salt: authSecret, ikm: ecdhSecret, info: keyInfo, length: 32)
        let contentKey = try HKDF.sha256(
            salt: salt, ikm: ikm, info: Array("Content-Encoding: aes128gcm\0".utf8), length: 16)
        let nonce = try HKDF.sha256(salt: salt, ikm: ikm, info: Array("Content-Encoding: nonce\0".utf8), length: 12)
        let record = try AES128GCM.seal(plaintext + [0x02], key: contentKey, nonce: nonce)

        var body = salt
        body.reserveCapacity(16 + 4 + 1 + 65 + record.count)
        body += [UInt8(truncatingIfNeeded: recordSize >> 24), UInt8(truncatingIfNeeded: recordSize >> 16)]
        body += [UInt8(truncatingIfNeeded: recordSize >> 8), UInt8(truncatingIfNeeded: recordSize)]
        body.append(UInt8(sender.publicKey.count))
        body += sender.publicKey
        body += record
        return body
    }
}
