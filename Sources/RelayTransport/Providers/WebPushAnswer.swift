package import RelayCore

/// What a Web Push service's answer means (RFC 8030 §5, RFC 8292 §4).
///
/// - 2xx (201 Created): delivered to the service, which holds it for the device until its TTL.
/// - 404, 410: the subscription expired or was withdrawn: the device is gone.
/// - 401, 403: the service refused our VAPID token for this subscription — made with another
///   application server key (ours was rotated), or our key is wrong for every subscription:
///   rejected, and `RejectedTokens` tells which. Never the route's breaker for one subscription
///   (any client can register one that answers 403).
/// - 413: too large for this service: dead. 400 and other 4xx, 3xx: the request is wrong: dead.
/// - 429, 5xx: retry, honouring `Retry-After`.
package enum WebPushAnswer {
    package static func judge(
        status: Int, body: [UInt8], headers: [(name: String, value: String)]
    ) -> DeliveryOutcome {
        // Services explain in JSON: Mozilla's `message`, Apple's `reason`.
        let object = ProviderAnswer.object(body)
        let words = (object?["reason"] ?? object?["message"])?.stringValue.map(ProviderAnswer.printable)
        let text = "Web Push: HTTP \(status)" + (words.map { " (\($0))" } ?? "")
        switch status {
        case 200..<300: return .delivered
        case 404, 410: return .deviceGone(reason: text)
        case 401, 403: return .tokenRejected(reason: text)
        case 429, 500..<600:
            return .retry(reason: text, notBeforeMilliseconds: ProviderAnswer.retryAfter(in: headers))
        default: return .dead(reason: text)
        }
    }
}
