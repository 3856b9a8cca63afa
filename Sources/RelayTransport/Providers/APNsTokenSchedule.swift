/// When to sign a new APNs provider token (the ES256 JWT of `authorization: bearer`). Pure: the
/// shell holds one token per signing key, shared by every connection, and asks before each use.
///
/// APNs refuses a token older than an hour (403 ExpiredProviderToken) and one renewed less than
/// 20 minutes after the previous (429 TooManyProviderTokenUpdates). So a token is renewed when it
/// is `renewAfterMs` old (40 min by default, kept within 20–59 min), and never sooner than 20 min
/// after it was issued — not even when APNs calls it expired: a token that young cannot have
/// expired, so our clock (its `iat`) is wrong or the key is, and renewing would only earn a 429.
package struct APNsTokenSchedule: Sendable, Equatable {
    package static let minimumLifetimeMs: Int64 = 20 * 60_000
    /// APNs's own limit is one hour; a minute of margin for clocks and requests in flight.
    package static let maximumLifetimeMs: Int64 = 59 * 60_000

    package enum Action: Sendable, Equatable {
        /// Send with the current token.
        case use
        /// Sign a new token now (issued at `now`), and send with it.
        case renew
        /// APNs called a token younger than 20 minutes expired: keep it (a renewal would be
        /// refused), and settle the push as this misconfiguration (`DeliveryOutcome.misconfigured`).
        case misconfigured(reason: String)
    }

    package let renewAfterMs: Int64

    package init(renewAfterMs: Int64 = 40 * 60_000) {
        self.renewAfterMs = min(max(renewAfterMs, Self.minimumLifetimeMs), Self.maximumLifetimeMs)
    }

    /// - Parameters:
    ///   - issuedAt: when the current token was signed (ms), nil when there is none yet.
    ///   - expiredAnswerFor: when the token that APNs just called expired (ExpiredProviderToken)
    ///     was signed, nil when no such answer is being handled. A request sent with an older
    ///     token than the current one only needs the current one.
    package func action(now: Int64, issuedAt: Int64?, expiredAnswerFor: Int64? = nil) -> Action {
        guard let issuedAt else { return .renew }
        // A clock that went back shows a negative age: the token is kept (a renewal would put
        // an even earlier `iat` on it), and only an expiry answer says something is wrong.
        let age = now.subtractingReportingOverflow(issuedAt)
        let ageMs = age.overflow ? (now > issuedAt ? Int64.max : Int64.min) : age.partialValue
        guard let rejected = expiredAnswerFor else { return ageMs >= renewAfterMs ? .renew : .use }
        if rejected < issuedAt { return .use }
        if ageMs >= Self.minimumLifetimeMs { return .renew }
        let minutes = max(ageMs, 0) / 60_000
        return .misconfigured(
            reason: "APNs: ExpiredProviderToken for a token signed \(minutes) min ago "
                + "(is the clock right? is the key revoked?)")
    }
}
