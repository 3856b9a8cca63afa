/// What a push service said to one attempt: the outcome the policy judges, and for the delivery
/// trace the HTTP status and the service's id for the notification (APNs's `apns-id`, FCM's
/// message name) when it gave them.
package struct DeliveryReceipt: Sendable, Equatable {
    package var outcome: DeliveryOutcome
    package var status: Int?
    package var providerId: String?

    package init(_ outcome: DeliveryOutcome, status: Int? = nil, providerId: String? = nil) {
        self.outcome = outcome
        self.status = status
        self.providerId = providerId
    }

    /// The same answer, its outcome replaced.
    package func with(_ outcome: DeliveryOutcome) -> DeliveryReceipt {
        DeliveryReceipt(outcome, status: status, providerId: providerId)
    }
}
