package import RelayCore

/// The signed webhook (Standard Webhooks): the batch's JSON, POSTed to the device's `pushUrl`.
/// Also carries the chat server's events (`eventsUrl`), which are webhooks too.
package struct WebhookProvider: PushProvider {
    private let sender: HTTPSender
    private let signer: WebhookSignature

    package init(sender: HTTPSender, signer: WebhookSignature) {
        self.sender = sender
        self.signer = signer
    }

    package func route(for transport: PushTransport) -> PushRoute {
        PushRoute(.webhook, host: transport.clientChosenURL.map { "\($0.host):\($0.port)" } ?? "")
    }

    package func send(
        _ batch: PushBatch, to transport: PushTransport, at time: Timestamp,
        done: @escaping @Sendable (DeliveryReceipt) -> Void
    ) {
        guard case .webhook(let url) = transport else {
            return done(DeliveryReceipt(.refused(reason: "not a webhook device")))
        }
        post(url, body: PushNotice(batch: batch).webhookBody, webhookId: batch.webhookId, at: time, done: done)
    }

    /// A signed POST of `body`; `done` gets the classified answer.
    package func post(
        _ url: PushURL, body: [UInt8], webhookId: String, at time: Timestamp,
        done: @escaping @Sendable (DeliveryReceipt) -> Void
    ) {
        let headers =
            [("Content-Type", "application/json"), ("User-Agent", "PushRelay")]
            + signer.headers(id: webhookId, timestampSeconds: time.seconds, body: body)
        sender.post(url, origin: .chosenByClient, headers: headers, body: body) { result in
            switch result {
            case .success(let response):
                done(
                    DeliveryReceipt(
                        .classify(status: response.status, retryAfter: response.retryAfter), status: response.status))
            case .failure(let failure): done(DeliveryReceipt(failure.outcome))
            }
        }
    }
}
