package import RelayCore
import RelayCrypto
import RelayLocks

/// Firebase Cloud Messaging, HTTP v1: the request `FCMRequest` builds, with the bearer an OAuth
/// access token from the service account (an RS256 assertion exchanged at its `token_uri`),
/// and the answer judged by `FCMAnswer`. One token for the account, fetched once for all the
/// pushes that need it meanwhile, renewed on `FCMAccessTokenSchedule`'s terms; a 401 renews it
/// and sends once more at once. Over the HTTP/1.1 keep-alive pool (FCM serves both).
package final class FCMProvider: PushProvider {
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    private struct TokenState {
        var current: FCMAccessToken?
        var fetching = false
        var waiters: [@Sendable (Result<FCMAccessToken, Failure>) -> Void] = []
    }

    /// Why no access token: the outcome to settle the push with.
    private struct Failure: Error {
        let outcome: DeliveryOutcome
    }

    private let account: FCMServiceAccount
    private let service: PushURL
    private let sender: HTTPSender
    private let schedule = FCMAccessTokenSchedule()
    private let state = LockedValue(TokenState())
    private let wallClock: @Sendable () -> Timestamp

    package init(
        account: FCMServiceAccount, service: PushURL, sender: HTTPSender, now: @escaping @Sendable () -> Timestamp
    ) {
        self.account = account
        self.service = service
        self.sender = sender
        wallClock = now
    }

    package func route(for transport: PushTransport) -> PushRoute {
        PushRoute(.fcm, credential: account.projectId, host: "\(service.host):\(service.port)")
    }

    package func send(
        _ batch: PushBatch, to transport: PushTransport, at time: Timestamp,
        done: @escaping @Sendable (DeliveryReceipt) -> Void
    ) {
        guard case .fcm(let device) = transport else {
            return done(DeliveryReceipt(.refused(reason: "not an FCM device")))
        }
        let request: FCMRequest
        do {
            request = try FCMRequest(
                notice: PushNotice(batch: batch), registrationToken: device.token, projectId: account.projectId,
                now: time.milliseconds)
        } catch {
            return done(DeliveryReceipt(error.outcome))
        }
        withToken(refused: nil) { [self] result in
            switch result {
            case .success(let token): attempt(request, token: token, renewed: false, done: done)
            case .failure(let failure): done(DeliveryReceipt(failure.outcome))
            }
        }
    }

    private func attempt(
        _ request: FCMRequest, token: FCMAccessToken, renewed: Bool, done: @escaping @Sendable (DeliveryReceipt) -> Void
    ) {
        guard let url = try? PushURL(service.origin + request.path) else {
            return done(DeliveryReceipt(.misconfigured(reason: "FCM: fcmUrl and the project id make no URL")))
        }
        let headers = request.headers.map { ($0.name, $0.value) } + [("authorization", "Bearer \(token.value)")]
        sender.post(url, origin: .operatorSetting, headers: headers, body: request.body) { [self] result in
            switch result {
            case .failure(let failure):
                done(DeliveryReceipt(failure.outcome))
            case .success(let response):
                let headers = response.retryAfter.map { [(name: "retry-after", value: $0)] } ?? []
                // A sent message's name (`projects/…/messages/…`): its id in Firebase's tools.
                let name = ProviderAnswer.object(response.body)?["name"]?.stringValue.map(ProviderAnswer.printable)
                let answered = { (outcome: DeliveryOutcome) in
                    DeliveryReceipt(outcome, status: response.status, providerId: name)
                }
                switch FCMAnswer.judge(status: response.status, body: response.body, headers: headers) {
                case .settled(let outcome):
                    done(answered(outcome))
                case .renewTokenAndRetry(let reason):
                    guard !renewed else { return done(answered(.misconfigured(reason: reason))) }
                    withToken(refused: token.obtainedAt) { result in
                        switch result {
                        case .success(let fresh): self.attempt(request, token: fresh, renewed: true, done: done)
                        case .failure(let failure): done(DeliveryReceipt(failure.outcome))
                        }
                    }
                }
            }
        }
    }

    /// Calls `then` with a token fit to send with: the one held, or one fetched now (one fetch
    /// for every push that waits meanwhile).
    private func withToken(
        refused: Int64?, then: @escaping @Sendable (Result<FCMAccessToken, Failure>) -> Void
    ) {
        let now = wallClock().milliseconds
        enum Step {
            case use(FCMAccessToken)
            case fail(DeliveryOutcome)
            case wait
            case fetch
        }
        let step = state.withLock { state -> Step in
            switch schedule.action(now: now, current: state.current, refusedObtainedAt: refused) {
            case .use:
                if let current = state.current { return .use(current) }
            case .misconfigured(let reason):
                return .fail(.misconfigured(reason: reason))
            case .renew:
                break
            }
            state.waiters.append(then)
            if state.fetching { return .wait }
            state.fetching = true
            return .fetch
        }
        switch step {
        case .use(let token): then(.success(token))
        case .fail(let outcome): then(.failure(Failure(outcome: outcome)))
        case .wait: break
        case .fetch: fetch(at: now)
        }
    }

    /// The OAuth 2.0 JWT bearer grant (RFC 7523) at the service account's `token_uri`.
    private func fetch(at now: Int64) {
        var header = JSONWriter()
        header.beginObject()
        header.member("alg", "RS256")
        header.member("typ", "JWT")
        if let keyId = account.privateKeyId { header.member("kid", keyId) }
        header.endObject()
        var claims = JSONWriter()
        claims.beginObject()
        claims.member("iss", account.clientEmail)
        claims.member("scope", Self.scope)
        claims.member("aud", account.tokenURI.text)
        claims.member("iat", now / 1000)
        claims.member("exp", now / 1000 + 3600)
        claims.endObject()
        let assertion: String
        do {
            assertion = try JWS.compact(header: header.bytes, claims: claims.bytes, sign: account.key.signRS256)
        } catch {
            return settle(.failure(Failure(outcome: .misconfigured(reason: "FCM: cannot sign the OAuth assertion"))))
        }
        // (The assertion is base64url and dots: nothing in it needs form-encoding.)
        let body = Array("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)".utf8)
        sender.post(
            account.tokenURI, origin: .operatorSetting,
            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("User-Agent", "PushRelay")], body: body
        ) { [self] result in
            switch result {
            case .failure(let failure):
                settle(.failure(Failure(outcome: failure.outcome)))
            case .success(let response) where response.status == 200:
                do {
                    settle(.success(try FCMAccessToken(response: response.body, requestedAt: now)))
                } catch {
                    settle(
                        .failure(
                            Failure(
                                outcome: .retry(
                                    reason: "FCM: the token endpoint's answer: \(error)", notBeforeMilliseconds: nil))))
                }
            case .success(let response) where (400..<500).contains(response.status) && response.status != 429:
                // invalid_grant, invalid_client…: the service account is at fault.
                settle(
                    .failure(
                        Failure(
                            outcome: .misconfigured(
                                reason: "FCM: the token endpoint refused the service account (HTTP \(response.status))")
                        )))
            case .success(let response):
                settle(
                    .failure(
                        Failure(
                            outcome: .retry(
                                reason: "FCM: token endpoint HTTP \(response.status)", notBeforeMilliseconds: nil))))
            }
        }
    }

    private func settle(_ result: Result<FCMAccessToken, Failure>) {
        let waiters = state.withLock { state in
            defer { state.waiters = [] }
            state.fetching = false
            if case .success(let token) = result { state.current = token }
            return state.waiters
        }
        for waiter in waiters { waiter(result) }
    }
}
