package import RelayCore
import WebSocketCodec
import RelayCrypto
package import RelayStore

/// Web Push (RFC 8030, 8291, 8292): the push's JSON — the webhook's — encrypted for the
/// browser's subscription and POSTed to its push service with a VAPID token. The endpoint is a
/// URL the client chose, so it goes through the SSRF guard like a webhook.
package struct WebPushProvider: PushProvider {
    /// The largest plaintext: one 4096-byte record less the 86-byte header, the 16-byte tag and
    /// the delimiter — 3,993 bytes (RFC 8291 §4 says push services must accept this much).
    static let maxPlaintextBytes = 3993

    private let sender: HTTPSender
    private let vapid: VAPIDSigner

    package init(sender: HTTPSender, vapid: VAPIDSigner) {
        self.sender = sender
        self.vapid = vapid
    }

    package func host(for transport: PushTransport) -> String {
        guard let url = transport.clientChosenURL else { return "webpush" }
        return "\(url.host):\(url.port)"
    }

    package func send(
        _ batch: PushBatch, to transport: PushTransport, at time: Timestamp,
        done: @escaping @Sendable (DeliveryOutcome) -> Void
    ) {
        guard case .webPush(let subscription) = transport else { return done(.refused(reason: "not a Web Push device")) }
        let body: [UInt8]
        let authorization: String
        do {
            body = try WebPushEncryption.encrypt(
                plaintext: Self.plaintext(of: batch), receiverPublicKey: subscription.p256dh,
                authSecret: subscription.auth)
            authorization = try vapid.authorization(for: subscription.endpoint, nowSeconds: time.seconds)
        } catch {
            // A subscription key that is not a point on the curve: retrying cannot help.
            return done(.dead(reason: "Web Push encryption failed: \(error.code.rawValue)"))
        }
        sender.post(
            subscription.endpoint, origin: .chosenByClient,
            headers: Self.headers(of: batch, at: time) + [("Authorization", authorization)], body: body
        ) { result in
            switch result {
            case .success(let response): done(.classify(status: response.status, retryAfter: response.retryAfter))
            case .failure(let failure): done(failure.outcome)
            }
        }
    }

    /// The webhook's JSON; one too large for a push message goes without its text (the app
    /// fetches it), never fails for size.
    static func plaintext(of batch: PushBatch) -> [UInt8] {
        var notice = PushNotice(batch: batch)
        let full = notice.webhookBody
        guard full.count > maxPlaintextBytes else { return full }
        notice.contentFree = true
        return notice.webhookBody
    }

    static func headers(of batch: PushBatch, at time: Timestamp) -> [(String, String)] {
        let ttl = max(0, batch.expiresAt.milliseconds - time.milliseconds) / 1000
        var headers = [
            ("Content-Type", "application/octet-stream"), ("Content-Encoding", "aes128gcm"), ("TTL", String(ttl)),
            ("Urgency", batch.priority == .high ? "high" : "normal"), ("User-Agent", "PushRelay"),
        ]
        // RFC 8030 §5.4: a Topic is at most 32 characters of the base64url alphabet; another
        // collapse key is simply not sent as one (the relay still collapses its own queue).
        if let topic = batch.collapseKey, (1...32).contains(topic.utf8.count),
            topic.utf8.allSatisfy({ Base64.isURLCharacter($0) })
        {
            headers.append(("Topic", topic))
        }
        return headers
    }
}
