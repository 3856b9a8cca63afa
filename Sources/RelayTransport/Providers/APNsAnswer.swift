import RelayCore

/// What an APNs answer means, from its status and `reason` (Apple's "Handling notification
/// responses from APNs"). The question for every reason: whose fault is it?
///
/// - The device token's — it will never work again: the device is gone (410 Unregistered and
///   ExpiredToken, with the `timestamp` since when: a device that registered after it keeps its
///   token).
/// - The token's, or our configuration's when every device answers it: rejected (400
///   BadDeviceToken: also a sandbox token sent to production, or every token when the relay
///   sends development builds' tokens to production; 400 DeviceTokenNotForTopic: another app's
///   token, or every token when `apnsTopic` is another app's). `RejectedTokens` tells which.
/// - Our credentials' or configuration's — every push fails alike until the operator acts, and
///   no device may be blamed: misconfigured (403 InvalidProviderToken, MissingProviderToken,
///   BadCertificate…, any other 403; 400 BadTopic, MissingTopic, TopicDisallowed; 429
///   TooManyProviderTokenUpdates: our token changes too often, e.g. several processes minting
///   their own for one key — waiting and retrying with the one token is the cure).
/// - A stale token of ours: 403 ExpiredProviderToken → renew and retry once.
/// - This request's — resending it cannot help: dead (413 PayloadTooLarge, 400 BadCollapseId,
///   BadExpirationDate, BadMessageId, BadPriority, InvalidPushType, PayloadEmpty,
///   DuplicateHeaders, MissingDeviceToken, 404 BadPath, 405, any other 4xx or 3xx).
/// - Nobody's for long: retry, honouring `Retry-After` (429 TooManyRequests, 5xx, 400
///   IdleTimeout).
package enum APNsAnswer {
    /// Apple's `reason`, printable.
    package static func reason(_ body: [UInt8]) -> String? {
        ProviderAnswer.object(body)?["reason"]?.stringValue.map(ProviderAnswer.printable)
    }

    package static func judge(
        status: Int, body: [UInt8], headers: [(name: String, value: String)]
    ) -> AnswerOutcome {
        if (200..<300).contains(status) { return .settled(.delivered) }
        let reason = Self.reason(body)
        let text = "APNs: " + (reason ?? "HTTP \(status)")
        switch (status, reason) {
        case (410, _):
            let since = ProviderAnswer.object(body)?["timestamp"]?.int64Value
            return .settled(.deviceGone(reason: text, since: since))
        case (400, "BadDeviceToken"?), (400, "DeviceTokenNotForTopic"?):
            return .settled(.tokenRejected(reason: text))
        case (403, "ExpiredProviderToken"?):
            return .renewTokenAndRetry(reason: text)
        case (403, _), (400, "BadTopic"?), (400, "MissingTopic"?), (400, "TopicDisallowed"?),
            (429, "TooManyProviderTokenUpdates"?):
            return .settled(.misconfigured(reason: text))
        case (429, _), (500..<600, _), (400, "IdleTimeout"?):
            let notBefore = ProviderAnswer.retryAfter(in: headers)
            return .settled(.retry(reason: text, notBeforeMilliseconds: notBefore))
        default:
            return .settled(.dead(reason: text))
        }
    }
}
