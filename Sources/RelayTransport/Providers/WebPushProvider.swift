package import RelayCore
import RelayCrypto

/// Web Push (RFC 8030, 8291, 8292): `WebPushRequest`'s plaintext — the webhook's JSON, fitted to
/// one record — encrypted for the browser's subscription and POSTed to its push service with a
/// VAPID token; the answer judged by `WebPushAnswer`. The endpoint is a URL the client chose, so
/// it goes through the SSRF guard like a webhook.
package struct WebPushProvider: PushProvider {
    private let sender: HTTPSender
    private let vapid: VAPIDSigner
    private let app: AppID

    package init(sender: HTTPSender, vapid: VAPIDSigner, app: AppID = .default) {
        self.sender = sender
        self.vapid = vapid
        self.app = app
    }

    /// Per push service origin, and per app (each signs with its own VAPID key): a
    /// subscription's refusal is that subscription's, never another transport's on the same host.
    package func route(for transport: PushTransport) -> PushRoute {
        PushRoute(
            .webPush, credential: app == .default ? nil : app.name,
            host: transport.clientChosenURL.map { "\($0.host):\($0.port)" } ?? "")
    }

    package func send(
        _ batch: PushBatch, to transport: PushTransport, at time: Timestamp,
        done: @escaping @Sendable (DeliveryReceipt) -> Void
    ) {
        guard case .webPush(let subscription) = transport else {
            return done(DeliveryReceipt(.refused(reason: "not a Web Push device")))
        }
        let request = WebPushRequest(
            notice: PushNotice(batch: batch), endpoint: subscription.endpoint, now: time.milliseconds,
            hash: Crypto.sha256)
        let body: [UInt8]
        let authorization: String
        do {
            body = try WebPushEncryption.encrypt(
                plaintext: request.plaintext, receiverPublicKey: subscription.p256dh, authSecret: subscription.auth)
            authorization = try vapid.authorization(audience: request.audience, now: time.milliseconds)
        } catch {
            // A subscription key that is not a point on the curve: retrying cannot help.
            return done(DeliveryReceipt(.dead(reason: "Web Push encryption failed: \(error.code.rawValue)")))
        }
        let headers = request.headers.map { ($0.name, $0.value) } + [("authorization", authorization)]
        sender.post(subscription.endpoint, origin: .webPushEndpoint, headers: headers, body: body) { result in
            switch result {
            case .success(let response):
                let headers = response.retryAfter.map { [(name: "retry-after", value: $0)] } ?? []
                // (The push message's `Location` is not kept by the HTTP client: the status is.)
                done(
                    DeliveryReceipt(
                        WebPushAnswer.judge(status: response.status, body: response.body, headers: headers),
                        status: response.status))
            case .failure(let failure):
                done(DeliveryReceipt(failure.outcome))
            }
        }
    }
}
