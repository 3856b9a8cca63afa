package import RelayCore
package import RelayCrypto
import RelayLocks

/// Apple Push Notification service, token-based (provider API over HTTP/2): the request
/// `APNsRequest` builds, with `authorization: bearer` an ES256 JWT from the team's `.p8` key —
/// one token for the key, shared by every connection and renewed on `APNsTokenSchedule`'s
/// terms — and the answer judged by `APNsAnswer`. ExpiredProviderToken renews the token and
/// sends once more at once; a stream the server refused goes back to the queue (requeue).
package final class APNsProvider: PushProvider {
    package struct Credentials: Sendable {
        package var key: P256Key
        package var keyId: String
        package var teamId: String

        package init(key: P256Key, keyId: String, teamId: String) {
            self.key = key
            self.keyId = keyId
            self.teamId = teamId
        }
    }

    private let credentials: Credentials
    private let defaultTopic: String?
    private let production: HTTP2Client.Endpoint
    private let sandbox: HTTP2Client.Endpoint
    private let client: HTTP2Client
    private let schedule = APNsTokenSchedule()
    /// When the provider token was signed, and the `authorization` value carrying it.
    private let token = LockedValue<(issuedAt: Int64, authorization: String)?>(nil)
    private let wallClock: @Sendable () -> Timestamp

    package init(
        credentials: Credentials, defaultTopic: String?, production: PushURL, sandbox: PushURL, client: HTTP2Client,
        now: @escaping @Sendable () -> Timestamp
    ) {
        self.credentials = credentials
        self.defaultTopic = defaultTopic
        self.production = HTTP2Client.Endpoint(production)
        self.sandbox = HTTP2Client.Endpoint(sandbox)
        self.client = client
        wallClock = now
    }

    package func stop() { client.stop() }

    /// Per key, topic and environment: a topic Apple refuses (or a key it does not know) must
    /// not pause another's pushes.
    package func route(for transport: PushTransport) -> PushRoute {
        let url = origin(of: transport).url
        var topic = defaultTopic ?? ""
        if case .apns(let device) = transport, let named = device.topic { topic = named }
        return PushRoute(.apns, credential: "\(credentials.keyId)/\(topic)", host: "\(url.host):\(url.port)")
    }

    private func origin(of transport: PushTransport) -> HTTP2Client.Endpoint {
        if case .apns(let device) = transport, device.endpoint == .sandbox { return sandbox }
        return production
    }

    package func send(
        _ batch: PushBatch, to transport: PushTransport, at time: Timestamp,
        done: @escaping @Sendable (DeliveryOutcome) -> Void
    ) {
        guard case .apns(let device) = transport else { return done(.refused(reason: "not an APNs device")) }
        guard let topic = device.topic ?? defaultTopic else {
            return done(.misconfigured(reason: "APNs: no topic: set apnsTopic, or the device's apns.topic"))
        }
        let request: APNsRequest
        do {
            request = try APNsRequest(
                notice: PushNotice(batch: batch), deviceToken: device.token, topic: topic, now: time.milliseconds)
        } catch {
            return done(error.outcome)
        }
        // A device that named no environment may hold a development build's token: production
        // answers BadDeviceToken to it, and the sandbox decides before anything is disabled.
        let fallback = device.environment == nil ? sandbox : nil
        attempt(request, to: origin(of: transport), otherwise: fallback, renewed: false, done: done)
    }

    /// - Parameter otherwise: where to send the same request when `origin` answers BadDeviceToken.
    private func attempt(
        _ request: APNsRequest, to origin: HTTP2Client.Endpoint, otherwise: HTTP2Client.Endpoint?, renewed: Bool,
        done: @escaping @Sendable (DeliveryOutcome) -> Void
    ) {
        let issuedAt: Int64
        var headers = request.headers
        switch providerToken(expiredAnswerFor: nil) {
        case .token(let signedAt, let authorization):
            issuedAt = signedAt
            headers.append(("authorization", authorization))
        case .settled(let outcome): return done(outcome)
        }
        let http = HTTP2Client.Request(endpoint: origin, path: request.path, headers: headers, body: request.body)
        client.send(http) { [self] result in
            switch result {
            case .success(let response):
                switch APNsAnswer.judge(status: response.status, body: response.body, headers: response.headers) {
                case .settled(let outcome):
                    if let otherwise, case .tokenRejected = outcome,
                        APNsAnswer.reason(response.body) == "BadDeviceToken"
                    {
                        return attempt(request, to: otherwise, otherwise: nil, renewed: renewed, done: done)
                    }
                    done(outcome)
                case .renewTokenAndRetry(let reason):
                    guard !renewed else { return done(.misconfigured(reason: reason)) }
                    switch providerToken(expiredAnswerFor: issuedAt) {
                    case .token: attempt(request, to: origin, otherwise: otherwise, renewed: true, done: done)
                    case .settled(let outcome): done(outcome)
                    }
                }
            case .failure(.unprocessed(let reason)):
                done(.requeue(reason: "APNs: \(reason)"))
            case .failure(.unreachable(let reason)), .failure(.failed(let reason)):
                done(.retry(reason: "APNs: \(reason)", notBeforeMilliseconds: nil))
            }
        }
    }

    /// The token to send with, signed anew when the schedule says so. Decided and signed under
    /// one lock, so that concurrent pushes never mint two tokens for the key (APNs answers 429
    /// TooManyProviderTokenUpdates to a key whose token changes too often).
    private enum ProviderToken {
        case token(issuedAt: Int64, authorization: String)
        /// No token to send with: the push settles as this.
        case settled(DeliveryOutcome)
    }

    private func providerToken(expiredAnswerFor: Int64?) -> ProviderToken {
        let now = wallClock().milliseconds
        return token.withLock { token in
            switch schedule.action(now: now, issuedAt: token?.issuedAt, expiredAnswerFor: expiredAnswerFor) {
            case .use:
                if let token { return .token(issuedAt: token.issuedAt, authorization: token.authorization) }
            case .misconfigured(let reason):
                return .settled(.misconfigured(reason: reason))
            case .renew:
                break
            }
            var header = JSONWriter()
            header.beginObject()
            header.member("alg", "ES256")
            header.member("kid", credentials.keyId)
            header.endObject()
            var claims = JSONWriter()
            claims.beginObject()
            claims.member("iss", credentials.teamId)
            claims.member("iat", now / 1000)
            claims.endObject()
            do {
                let jwt = try JWS.compact(header: header.bytes, claims: claims.bytes, sign: credentials.key.signES256)
                token = (now, "bearer \(jwt)")
                return .token(issuedAt: now, authorization: "bearer \(jwt)")
            } catch {
                return .settled(.misconfigured(reason: "APNs: cannot sign the provider token (\(error))"))
            }
        }
    }
}
