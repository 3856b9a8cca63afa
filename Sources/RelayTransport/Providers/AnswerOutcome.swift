package import RelayCore

/// What an APNs or FCM answer comes to. Either it settles the attempt (a `DeliveryOutcome` for the
/// policy), or the provider refused a credential that a fresh one may fix: the shell renews it
/// and sends the same request again at once — once. A second refusal, or a renewal the token
/// schedule will not allow, makes it `outcomeWithoutRenewal`.
package enum AnswerOutcome: Sendable, Equatable {
    case settled(DeliveryOutcome)
    /// APNs ExpiredProviderToken, FCM 401 UNAUTHENTICATED.
    case renewTokenAndRetry(reason: String)

    /// The outcome when the shell does not renew (already renewed for this push, or the token
    /// schedule refuses): a fresh credential refused is ours to fix.
    package var outcomeWithoutRenewal: DeliveryOutcome {
        switch self {
        case .settled(let outcome): return outcome
        case .renewTokenAndRetry(let reason): return .misconfigured(reason: reason)
        }
    }
}
