/// When to sign a new VAPID token (RFC 8292) for a push service origin. Pure: the shell holds
/// one token per origin (the JWT's `aud`) and asks before each use.
///
/// A token is signed for 12 hours (RFC 8292 allows up to 24) and renewed when less than an hour
/// is left, so a push service never sees one about to expire, whatever its clock.
package struct VAPIDTokenSchedule: Sendable, Equatable {
    package static let lifetimeMs: Int64 = 12 * 3_600_000
    package static let renewWhenLeftMs: Int64 = 3_600_000

    package enum Action: Sendable, Equatable {
        case use
        /// Sign a new token whose `exp` is `expiresAt` (ms; the claim is in seconds).
        case renew(expiresAt: Int64)
    }

    package init() {}

    /// - Parameter currentExpiresAt: the `exp` of the origin's token (ms), nil when there is none.
    package func action(now: Int64, currentExpiresAt: Int64?) -> Action {
        let end = now.addingReportingOverflow(Self.lifetimeMs)
        let renewal = Action.renew(expiresAt: end.overflow ? .max : end.partialValue)
        guard let expiresAt = currentExpiresAt else { return renewal }
        let left = expiresAt.subtractingReportingOverflow(now)
        guard !left.overflow, left.partialValue >= Self.renewWhenLeftMs else { return renewal }
        // A token expiring further out than a fresh one would: our clock went back; sign anew.
        return left.partialValue > Self.lifetimeMs ? renewal : .use
    }
}
