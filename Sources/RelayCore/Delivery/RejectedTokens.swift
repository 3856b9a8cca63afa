/// Tells one dead token from a configuration mistake before anything is disabled. APNs answers
/// BadDeviceToken for every device when development tokens go to production, and
/// DeviceTokenNotForTopic when the topic is another app's; a Web Push service answers 403 to
/// every subscription made with a VAPID key since rotated. Disabling on the first such answer
/// disabled every device for good; so a rejection disables its device only on a route that has
/// delivered since the relay started (the credential and topic work), and a run of rejections
/// with no delivery between them is the configuration: the breaker and one error line, no
/// device touched.
///
/// Pure: the notifier keeps one, feeds it every answer of its route, and asks it what a
/// `DeliveryOutcome.tokenRejected` means.
package struct RejectedTokens: Sendable {
    /// Devices rejected in a row on one route (no delivery between them) that make it the
    /// configuration's fault rather than the devices'. Devices, not answers: one device's
    /// retries must not make a run.
    package static let runThatMeansConfiguration = 10

    /// What a rejection means.
    package enum Judgement: Sendable, Equatable {
        /// The route works: this device's token is dead.
        case deviceGone
        /// Nothing delivered on the route yet: keep the device and try again later (its route's
        /// breaker not told: one device's token says nothing about the service).
        case unconfirmed
        /// A run of rejections: the configuration's.
        case misconfigured
    }

    private var delivering: Set<PushRoute> = []
    /// The devices rejected on each route since its last delivery.
    private var runs: [PushRoute: Set<String>] = [:]

    package init() {}

    /// A push on `route` was delivered: the route works.
    package mutating func delivered(on route: PushRoute) {
        delivering.insert(route)
        runs[route] = nil
    }

    /// A push to `device` (its key) on `route` was answered `tokenRejected`. A Web Push route is
    /// never the configuration's: its subscriptions come from browsers, and any client can
    /// register ones that a service refuses (one subscription's refusal is that one's alone).
    package mutating func rejected(on route: PushRoute, device: String) -> Judgement {
        runs[route, default: []].insert(device)
        if route.credential != nil, runs[route, default: []].count >= Self.runThatMeansConfiguration {
            return .misconfigured
        }
        return delivering.contains(route) ? .deviceGone : .unconfirmed
    }

    /// Feeds the answer of a push to `device` on `route` in; for a rejection, what it means.
    package mutating func answered(_ outcome: DeliveryOutcome, on route: PushRoute, device: String) -> Judgement? {
        switch outcome {
        case .delivered:
            delivered(on: route)
            return nil
        case .tokenRejected: return rejected(on: route, device: device)
        default: return nil
        }
    }
}
