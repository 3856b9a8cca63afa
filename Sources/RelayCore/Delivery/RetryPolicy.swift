import RelayPrimitives

/// When to try a failed delivery again: exponential backoff with full jitter (a uniformly random
/// delay between 0 and `min(cap, base · 2^attempt)`), which spreads retries of many jobs that
/// failed together instead of sending them back in lockstep.
package struct RetryPolicy: Sendable, Equatable {
    package var baseMilliseconds: Int64
    package var capMilliseconds: Int64

    package init(baseMilliseconds: Int64 = 1000, capMilliseconds: Int64 = 600_000) {
        self.baseMilliseconds = baseMilliseconds
        self.capMilliseconds = capMilliseconds
    }

    /// The ceiling of the delay after the `attempt`-th failure (1-based).
    package func ceiling(afterAttempt attempt: Int) -> Int64 {
        let exponent = min(max(attempt - 1, 0), 40)
        let grown = baseMilliseconds.multipliedReportingOverflow(by: Int64(1) << Int64(exponent))
        return grown.overflow ? capMilliseconds : min(capMilliseconds, grown.partialValue)
    }

    /// A delay for the `attempt`-th failure, drawn with `random` (a value in 0...1).
    package func delay(afterAttempt attempt: Int, random: Double) -> Int64 {
        Int64((Double(ceiling(afterAttempt: attempt)) * min(max(random, 0), 1)).rounded(.down))
    }
}

/// What a push receiver's answer means for the job.
package enum DeliveryOutcome: Sendable, Equatable {
    case delivered
    /// The device is gone (webhook 404 / 410, APNs Unregistered, FCM UNREGISTERED): disable it
    /// and drop its jobs; `reason` is kept as the device's `disabled_reason`. Only while the
    /// device still has the transport the push went to, and (`since`: APNs's 410 `timestamp`,
    /// when the token stopped being valid) was not registered again after that.
    case deviceGone(reason: String, since: Int64? = nil)
    /// The service says the device's token is not valid for this credential or topic (APNs
    /// BadDeviceToken, DeviceTokenNotForTopic; a Web Push subscription's 401/403). One device's
    /// fault, or — when every device of the route answers it — the operator's configuration
    /// (a wrong topic, development tokens sent to production, a rotated VAPID key): the notifier
    /// tells which (`RejectedTokens`) before anything is disabled.
    case tokenRejected(reason: String)
    /// 429, 5xx, timeout, connection error: try again, not before `notBefore` milliseconds from now
    /// when the receiver said so (`Retry-After`).
    case retry(reason: String, notBeforeMilliseconds: Int64?)
    /// Any other 4xx: retrying will not help.
    case dead(reason: String)
    /// Never sent: the relay itself refused the target (SSRF guard, malformed URL).
    case refused(reason: String)
    /// The provider refused *our* credentials or configuration (APNs InvalidProviderToken, FCM
    /// 403): no device is at fault, so none is touched. The job is retried with the normal
    /// backoff until its TTL (an operator may fix the key meanwhile), and the host is failing so
    /// that its breaker stops every other push from hitting the same wall.
    case misconfigured(reason: String)
    /// The request was never processed (HTTP/2 GOAWAY above its stream id, REFUSED_STREAM): due
    /// again at once, and the attempt counts for nothing — neither the backoff nor the breaker —
    /// `DeliveryPolicy.immediateResends` times in a row; then it is a failure like any other.
    case requeue(reason: String)

    /// Classifies an HTTP status; `retryAfter` is the raw `Retry-After` header, if any.
    package static func classify(status: Int, retryAfter: String?) -> DeliveryOutcome {
        switch status {
        case 200..<300: return .delivered
        case 404, 410: return .deviceGone(reason: "push receiver answered 404/410")
        case 429: return .retry(reason: "HTTP 429", notBeforeMilliseconds: parseRetryAfter(retryAfter))
        case 500..<600: return .retry(reason: "HTTP \(status)", notBeforeMilliseconds: parseRetryAfter(retryAfter))
        default: return .dead(reason: "HTTP \(status)")
        }
    }

    /// `Retry-After` in delta-seconds (an HTTP date is not honoured: the backoff applies instead).
    /// Public for the providers' answers, which honour it the same way.
    package static func parseRetryAfter(_ value: String?) -> Int64? {
        guard let value, let seconds = Int64(value.trimmingASCIISpaces()), seconds >= 0, seconds <= 86_400 else {
            return nil
        }
        return seconds * 1000
    }
}
