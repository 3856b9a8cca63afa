import RelayPrimitives

/// A Standard Webhooks signing secret, `whsec_<base64 key bytes>`; the HMAC key is the decoded
/// bytes, so that any Standard Webhooks receiver library verifies our signatures unchanged.
package struct WebhookSecret: Sendable {
    package let text: String
    package let key: [UInt8]

    package init?(_ text: String) {
        guard text.hasPrefix("whsec_"), let bytes = Base64.decode(text.dropFirst(6)), bytes.count >= 16 else {
            return nil
        }
        self.text = text
        key = bytes
    }

    package init(key: [UInt8]) {
        self.key = key
        text = "whsec_" + Base64.encode(key)
    }
}
