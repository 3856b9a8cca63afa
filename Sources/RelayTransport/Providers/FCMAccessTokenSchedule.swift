/// When to ask Google for a new FCM access token. Pure: the shell holds one token per service
/// account, shared by every connection, and asks before each use and after each 401.
///
/// A token is renewed 5 minutes before it expires (or halfway through a lifetime shorter than
/// 10 minutes), so no request goes out with one about to lapse. A 401 renews it — unless it is
/// younger than 10 seconds: then the fresh token itself was refused, the service account is at
/// fault, and asking again for every push would only hammer the token endpoint.
package struct FCMAccessTokenSchedule: Sendable, Equatable {
    package static let renewBeforeExpiryMs: Int64 = 5 * 60_000
    package static let minimumAgeToRenewOnRefusalMs: Int64 = 10_000

    package enum Action: Sendable, Equatable {
        case use
        /// Ask for a new token now, and send with it.
        case renew
        /// FCM refused a token obtained less than 10 s ago: keep it, and settle the push as
        /// this misconfiguration (`DeliveryOutcome.misconfigured`).
        case misconfigured(reason: String)
    }

    package init() {}

    /// - Parameters:
    ///   - current: the token held, nil when there is none yet.
    ///   - refusedObtainedAt: when the token that FCM just refused (401) was obtained, nil when no
    ///     such answer is being handled. A request sent with an older token than the current one
    ///     only needs the current one.
    package func action(now: Int64, current: FCMAccessToken?, refusedObtainedAt: Int64? = nil) -> Action {
        guard let current else { return .renew }
        if let refused = refusedObtainedAt {
            if refused < current.obtainedAt { return .use }
            let age = now.subtractingReportingOverflow(current.obtainedAt)
            if age.overflow || age.partialValue >= Self.minimumAgeToRenewOnRefusalMs { return .renew }
            return .misconfigured(
                reason: "FCM: a fresh access token was refused (401): check the service account and its roles")
        }
        let lifetime = current.expiresAt.subtractingReportingOverflow(current.obtainedAt)
        let margin =
            lifetime.overflow ? Self.renewBeforeExpiryMs : min(Self.renewBeforeExpiryMs, lifetime.partialValue / 2)
        let renewAt = current.expiresAt.subtractingReportingOverflow(margin)
        return renewAt.overflow || now >= renewAt.partialValue ? .renew : .use
    }
}
