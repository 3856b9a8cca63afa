/// One attempt at a device's push as the delivery trace keeps it (`GET
/// /v1/messages/{id}/deliveries`): which push (its id and seqs), by which transport and app,
/// when, how long it took, and what the service said and the relay made of it.
package struct PushAttempt: Sendable, Equatable {
    /// What the relay made of the answer.
    package enum Result: String, Sendable, CaseIterable {
        case delivered
        case retried
        case requeued
        case dead
        case deviceGone = "device_gone"

        package init(_ verdict: DeliveryPolicy.Verdict) {
            switch verdict {
            case .delivered: self = .delivered
            case .retry, .postponed: self = .retried
            case .requeue: self = .requeued
            case .dead: self = .dead
            case .deviceGone: self = .deviceGone
            }
        }
    }

    package var userId: String
    package var deviceId: String
    /// The push's id (the batch's webhook id: stable across its retries).
    package var pushId: String
    package var kind: PushKind
    package var seqFrom: Int64
    package var seqTo: Int64
    package var transport: PushTransport.Kind
    package var app: AppID
    package var at: Timestamp
    package var latencyMs: Int64
    package var status: Int?
    package var providerId: String?
    package var result: Result
    /// The service's reason or the relay's error, when it was not a delivery.
    package var reason: String?

    package init(
        userId: String, deviceId: String, pushId: String, kind: PushKind, seqFrom: Int64, seqTo: Int64,
        transport: PushTransport.Kind, app: AppID, at: Timestamp, latencyMs: Int64, status: Int?, providerId: String?,
        result: Result, reason: String?
    ) {
        self.userId = userId
        self.deviceId = deviceId
        self.pushId = pushId
        self.kind = kind
        self.seqFrom = seqFrom
        self.seqTo = seqTo
        self.transport = transport
        self.app = app
        self.at = at
        self.latencyMs = latencyMs
        self.status = status
        self.providerId = providerId
        self.result = result
        self.reason = reason
    }

    /// The attempt that sent `batch` to `transport` at `started`, answered at `answered`.
    package init(
        _ batch: PushBatch, transport: PushTransport, started: Timestamp, answered: Timestamp,
        receipt: DeliveryReceipt, verdict: DeliveryPolicy.Verdict
    ) {
        let reason: String?
        switch verdict {
        case .delivered, .postponed: reason = nil
        case .retry(let error, _), .dead(let error): reason = error
        case .requeue(let text, _), .deviceGone(let text, _): reason = text
        }
        self.init(
            userId: batch.userId, deviceId: batch.deviceId, pushId: batch.webhookId, kind: batch.kind,
            seqFrom: batch.seqFrom, seqTo: batch.seqTo, transport: transport.kind, app: transport.app, at: started,
            latencyMs: max(0, answered.milliseconds - started.milliseconds), status: receipt.status,
            providerId: receipt.providerId, result: Result(verdict), reason: reason)
    }
}
