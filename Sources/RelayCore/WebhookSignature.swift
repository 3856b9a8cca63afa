/// Standard Webhooks signing (standardwebhooks.com): `webhook-id`, `webhook-timestamp` and
/// `webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`. The HMAC and
/// the base64 encoder are injected to keep this pure.
package struct WebhookSignature: Sendable {
    package typealias HMAC = @Sendable (_ message: [UInt8]) -> [UInt8]
    private let hmac: HMAC
    private let base64: @Sendable ([UInt8]) -> String

    package init(hmac: @escaping HMAC, base64: @escaping @Sendable ([UInt8]) -> String) {
        self.hmac = hmac
        self.base64 = base64
    }

    /// The three headers for one attempt of delivery `id` (stable across retries).
    package func headers(id: String, timestampSeconds: Int64, body: [UInt8]) -> [(String, String)] {
        let signed = Array("\(id).\(timestampSeconds).".utf8) + body
        return [
            ("webhook-id", id), ("webhook-timestamp", String(timestampSeconds)),
            ("webhook-signature", "v1," + base64(hmac(signed))),
        ]
    }
}
