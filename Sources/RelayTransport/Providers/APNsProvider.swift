package import RelayCore

/// Apple Push Notification service, token-based (provider API over HTTP/2), for one app: the
/// request `APNsRequest` builds, with `authorization: bearer` the app's key's provider token
/// (`APNsProviderToken`, shared by the apps of that key), and the answer judged by `APNsAnswer`.
/// Connections are kept per team: Apple lets one connection carry one team's tokens.
/// ExpiredProviderToken renews the token and sends once more at once; a stream the server
/// refused goes back to the queue (requeue).
package final class APNsProvider: PushProvider {
    private let token: APNsProviderToken
    private let defaultTopic: String?
    private let production: HTTP2Client.Endpoint
    private let sandbox: HTTP2Client.Endpoint
    private let client: HTTP2Client

    package init(
        token: APNsProviderToken, defaultTopic: String?, production: PushURL, sandbox: PushURL, client: HTTP2Client
    ) {
        self.token = token
        self.defaultTopic = defaultTopic
        let team = token.credentials.teamId
        self.production = HTTP2Client.Endpoint(production, partition: team)
        self.sandbox = HTTP2Client.Endpoint(sandbox, partition: team)
        self.client = client
    }

    package func stop() { client.stop() }

    /// Per key, topic and environment: a topic Apple refuses (or a key it does not know) must
    /// not pause another's pushes.
    package func route(for transport: PushTransport) -> PushRoute {
        let url = origin(of: transport).url
        var topic = defaultTopic ?? ""
        if case .apns(let device) = transport, let named = device.topic { topic = named }
        return PushRoute(.apns, credential: "\(token.credentials.keyId)/\(topic)", host: "\(url.host):\(url.port)")
    }

    private func origin(of transport: PushTransport) -> HTTP2Client.Endpoint {
        if case .apns(let device) = transport, device.endpoint == .sandbox { return sandbox }
        return production
    }

    package func send(
        _ batch: PushBatch, to transport: PushTransport, at time: Timestamp,
        done: @escaping @Sendable (DeliveryReceipt) -> Void
    ) {
        guard case .apns(let device) = transport else {
            return done(DeliveryReceipt(.refused(reason: "not an APNs device")))
        }
        guard let topic = device.topic ?? defaultTopic else {
            return done(
                DeliveryReceipt(.misconfigured(reason: "APNs: no topic: set apnsTopic, or the device's apns.topic")))
        }
        // A call rings the PushKit token when the app registered one; else it is an alert.
        let voipToken = batch.kind == .call ? device.voipToken : nil
        let request: APNsRequest
        do {
            request = try APNsRequest(
                notice: PushNotice(batch: batch), deviceToken: voipToken ?? device.token, topic: topic,
                now: time.milliseconds, voip: voipToken != nil)
        } catch {
            return done(DeliveryReceipt(error.outcome))
        }
        // A device that named no environment may hold a development build's token: production
        // answers BadDeviceToken to it, and the sandbox decides before anything is disabled.
        let fallback = device.environment == nil ? sandbox : nil
        let settle: @Sendable (DeliveryReceipt) -> Void
        if voipToken == nil {
            settle = done
        } else {
            settle = { receipt in done(receipt.with(Self.aboutThePushKitToken(receipt.outcome))) }
        }
        attempt(request, to: origin(of: transport), otherwise: fallback, renewed: false, done: settle)
    }

    /// An answer about a PushKit token says nothing of the device's alert token, which is what
    /// the device is disabled by: a gone or refused PushKit token makes the call dead instead
    /// (the app registers a new one with its next `voipToken`).
    package static func aboutThePushKitToken(_ outcome: DeliveryOutcome) -> DeliveryOutcome {
        switch outcome {
        case .deviceGone(let reason, _), .tokenRejected(let reason):
            return .dead(reason: "\(reason) (the PushKit token; the device is kept)")
        default:
            return outcome
        }
    }

    /// - Parameter otherwise: where to send the same request when `origin` answers BadDeviceToken.
    private func attempt(
        _ request: APNsRequest, to origin: HTTP2Client.Endpoint, otherwise: HTTP2Client.Endpoint?, renewed: Bool,
        done: @escaping @Sendable (DeliveryReceipt) -> Void
    ) {
        let issuedAt: Int64
        var headers = request.headers
        switch token.use(expiredAnswerFor: nil) {
        case .token(let signedAt, let authorization):
            issuedAt = signedAt
            headers.append(("authorization", authorization))
        case .settled(let outcome): return done(DeliveryReceipt(outcome))
        }
        let http = HTTP2Client.Request(endpoint: origin, path: request.path, headers: headers, body: request.body)
        client.send(http) { [self] result in
            switch result {
            case .success(let response):
                // APNs echoes the request's apns-id: the notification's id in Apple's tools.
                let id = ProviderAnswer.header("apns-id", in: response.headers)
                let answered = { (outcome: DeliveryOutcome) in
                    DeliveryReceipt(outcome, status: response.status, providerId: id)
                }
                switch APNsAnswer.judge(status: response.status, body: response.body, headers: response.headers) {
                case .settled(let outcome):
                    if let otherwise, case .tokenRejected = outcome,
                        APNsAnswer.reason(response.body) == "BadDeviceToken"
                    {
                        return attempt(request, to: otherwise, otherwise: nil, renewed: renewed, done: done)
                    }
                    done(answered(outcome))
                case .renewTokenAndRetry(let reason):
                    guard !renewed else { return done(answered(.misconfigured(reason: reason))) }
                    switch token.use(expiredAnswerFor: issuedAt) {
                    case .token: attempt(request, to: origin, otherwise: otherwise, renewed: true, done: done)
                    case .settled(let outcome): done(answered(outcome))
                    }
                }
            case .failure(.unprocessed(let reason)):
                done(DeliveryReceipt(.requeue(reason: "APNs: \(reason)")))
            case .failure(.unreachable(let reason)), .failure(.failed(let reason)):
                done(DeliveryReceipt(.retry(reason: "APNs: \(reason)", notBeforeMilliseconds: nil)))
            }
        }
    }
}
