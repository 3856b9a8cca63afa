import Foundation

/// A Standard Webhooks signing secret, `whsec_<base64 key bytes>`; the HMAC key is the decoded
/// bytes, so that any Standard Webhooks receiver library verifies our signatures unchanged.
package struct WebhookSecret: Sendable {
    package let text: String
    package let key: [UInt8]

    package init?(_ text: String) {
        guard text.hasPrefix("whsec_"), let data = Data(base64Encoded: String(text.dropFirst(6))), data.count >= 16
        else { return nil }
        self.text = text
        key = Array(data)
    }

    package init(key: [UInt8]) {
        self.key = key
        text = "whsec_" + Data(key).base64EncodedString()
    }
}
