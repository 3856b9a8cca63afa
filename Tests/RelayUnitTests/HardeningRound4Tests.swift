import RelayCore
import RelayCrypto
import RelayPrimitives
import RelayTransport
import Testing

/// The delivery decisions hardening round 4 added: a refused stream resent a bounded number of
/// times, routes never shared between transports, rejected tokens judged before a device is
/// disabled, an answer acting only on the token it was sent to, probes rotating, the resolver's
/// silence retried.
@Suite struct HardeningRound4Tests {
    let policy = DeliveryPolicy(
        pushDelayMs: 300, ackTimeoutMs: 800, retry: RetryPolicy(baseMilliseconds: 100, capMilliseconds: 2000))

    /// REFUSED_STREAM or GOAWAY: resent at once `immediateResends` times, then a failure like any
    /// other (an attempt counted, the backoff, the breaker told).
    @Test func aRefusedPushIsResentAtOnceOnlyAFewTimes() {
        for resends in 0..<DeliveryPolicy.immediateResends {
            let judged = policy.answered(
                .requeue(reason: "REFUSED_STREAM"), attempts: 0, expiresAt: 9000, now: 1000, resends: resends)
            #expect(judged.verdict == .requeue(reason: "REFUSED_STREAM", at: 1000) && judged.host == .unknown)
        }
        let judged = policy.answered(
            .requeue(reason: "REFUSED_STREAM"), attempts: 0, expiresAt: 9000, now: 1000,
            resends: DeliveryPolicy.immediateResends, random: { 1 })
        #expect(judged.verdict == .retry(error: "REFUSED_STREAM", at: 1100))
        #expect(judged.host == .failing)
    }

    /// Chrome's Web Push endpoints live on FCM's own host, Safari's on APNs's: their slots and
    /// breakers are never the push services'.
    @Test func routesAreNeverSharedBetweenTransports() throws {
        let host = "fcm.googleapis.com:443"
        let webPush = PushRoute(.webPush, host: host)
        let fcm = PushRoute(.fcm, credential: "project-a", host: host)
        #expect(webPush != fcm)
        #expect(fcm != PushRoute(.fcm, credential: "project-b", host: host))
        var admission = HostAdmission { transport in
            switch transport {
            case .webPush(let subscription):
                (PushRoute(.webPush, host: "\(subscription.endpoint.host):\(subscription.endpoint.port)"), 1)
            default: (fcm, 1)
            }
        }
        admission.begin(inFlight: [webPush: 1])  // the Web Push route is full…
        let device = DueDevice(
            userId: "u", deviceId: "android", target: PushTransport.fcm(.init(token: "tok")).target, contentFree: false)
        #expect(admission.consider(device) == .take)  // …and FCM's is not
        #expect("\(fcm)" == "fcm project-a fcm.googleapis.com:443")
        #expect("\(webPush)" == "webPush fcm.googleapis.com:443")
    }

    /// A rejected token disables its device only on a route that has delivered; before that it is
    /// kept; a run of rejections is the configuration's, and no device is touched — except on a
    /// Web Push route, whose subscriptions any client can register.
    @Test func aRejectedTokenIsJudgedByItsRoute() {
        let route = PushRoute(.apns, credential: "KEY/com.example.chat", host: "api.push.apple.com:443")
        let other = PushRoute(.apns, credential: "KEY/com.example.beta", host: "api.push.apple.com:443")
        let browsers = PushRoute(.webPush, host: "fcm.googleapis.com:443")
        var tokens = RejectedTokens()
        let rejected = DeliveryOutcome.tokenRejected(reason: "APNs: BadDeviceToken")
        #expect(tokens.answered(rejected, on: route, device: "d0") == .unconfirmed)
        #expect(tokens.answered(.delivered, on: route, device: "d1") == nil)
        #expect(tokens.answered(rejected, on: route, device: "d0") == .deviceGone)
        // Another topic has delivered nothing: its rejections are not yet trusted.
        #expect(tokens.rejected(on: other, device: "d0") == .unconfirmed)
        // One device's retries are not a run.
        for _ in 0..<(2 * RejectedTokens.runThatMeansConfiguration) {
            #expect(tokens.rejected(on: route, device: "d0") == .deviceGone)
        }
        // A run of devices with no delivery between: the configuration's, even on a route that worked.
        for n in 2..<RejectedTokens.runThatMeansConfiguration { _ = tokens.rejected(on: route, device: "d\(n)") }
        #expect(tokens.rejected(on: route, device: "d1") == .misconfigured)
        // A delivery ends the run.
        tokens.delivered(on: route)
        #expect(tokens.rejected(on: route, device: "d1") == .deviceGone)
        // Browsers' subscriptions: never the configuration, however many.
        for n in 0..<(2 * RejectedTokens.runThatMeansConfiguration) {
            #expect(tokens.rejected(on: browsers, device: "b\(n)") == .unconfirmed)
        }
    }

    /// What the policy does with each judgement: only a run (the configuration) feeds the breaker.
    @Test func aRejectionIsRetriedUntilItsRouteIsTrusted() {
        let rejected = DeliveryOutcome.tokenRejected(reason: "Web Push: HTTP 403")
        let gone = policy.answered(rejected, attempts: 0, expiresAt: 9000, now: 1000, rejection: .deviceGone)
        #expect(gone.verdict == .deviceGone(reason: "Web Push: HTTP 403") && gone.host == .unknown)
        let kept = policy.answered(
            rejected, attempts: 0, expiresAt: 9000, now: 1000, rejection: .unconfirmed, random: { 1 })
        guard case .retry(_, let at) = kept.verdict else {
            Issue.record("an unconfirmed rejection must keep the device and retry")
            return
        }
        #expect(at == 1100 && kept.host == .unknown)
        let configuration = policy.answered(
            rejected, attempts: 0, expiresAt: 9000, now: 1000, rejection: .misconfigured, random: { 1 })
        #expect(configuration.host == .failing)
    }

    /// An answer acts only on the token it was sent to, and not on one registered again after
    /// the service's time for it.
    @Test func aGoneTokenDisablesOnlyItself() {
        let old = PushTransport.fcm(.init(token: "old-token"))
        let new = PushTransport.fcm(.init(token: "new-token"))
        #expect(DeliveryPolicy.gone(sentTo: old.target, since: nil, device: (old.target, 5000)) == .disable)
        #expect(DeliveryPolicy.gone(sentTo: old.target, since: 6000, device: (old.target, 5000)) == .disable)
        #expect(DeliveryPolicy.gone(sentTo: old.target, since: nil, device: (new.target, 5000)) == .resend)
        #expect(DeliveryPolicy.gone(sentTo: old.target, since: nil, device: nil) == .resend)
        guard case .drop = DeliveryPolicy.gone(sentTo: old.target, since: 4000, device: (old.target, 5000)) else {
            Issue.record("a token registered again after Apple's timestamp must stay")
            return
        }
    }

    /// A paused route's jobs are spread past the pause, so that its probes rotate through them.
    @Test func heldJobsAreSpreadSoProbesRotate() {
        #expect(policy.due(expiresAt: 9000, host: .paused(until: 5000), now: 1000) == .finish(.postponed(until: 5000)))
        #expect(
            policy.due(expiresAt: 9000, host: .paused(until: 5000), now: 1000, random: { 1 })
                == .finish(.postponed(until: 5000 + DeliveryPolicy.probeSpreadMs)))
    }

    /// A resolver that did not answer is not the URL's fault: the delivery is retried.
    @Test func anUnresolvedHostIsRetried() throws {
        let guardian = SSRFGuard(allowList: .publicHTTPS, setting: "webPushAllowedHosts")
        #expect(!SSRFGuard.Refusal.unresolved.isFinal)
        #expect(SSRFGuard.Refusal.nonPublic.isFinal)
        guard case .failure(let refusal) = guardian.addresses(for: try PushURL("https://no-such-host.invalid/p"))
        else {
            Issue.record("a name that does not resolve must not be allowed")
            return
        }
        #expect(refusal == .unresolved)
        #expect(HTTPSender.Failure.unreachable(refusal.description).outcome.isRetry)
    }

    /// Web Push endpoints have their own allow-list: any public host on 443 by default, never
    /// loopback or the server's own `pushAllowedHosts`.
    @Test func webPushEndpointsHaveTheirOwnAllowList() throws {
        let list = HostAllowList.publicHTTPS
        #expect(list.allows(host: "fcm.googleapis.com", port: 443))
        #expect(!list.allows(host: "fcm.googleapis.com", port: 8443))
        #expect(!list.allows(host: "127.0.0.1", port: 443))
        let guardian = SSRFGuard(allowList: list, setting: "webPushAllowedHosts")
        #expect(
            (try? guardian.addresses(for: PushURL("https://localhost/p")).get()) == nil,
            "a name resolving to loopback is refused")
        let parsed = try HostAllowList.parse(["*:443"]).get()
        #expect(parsed.allows(host: "updates.push.services.mozilla.com", port: 443))
    }

    /// A device body's typo is refused, naming the member, not ignored.
    @Test func unknownMembersOfATransportAreRefused() throws {
        let token = String(repeating: "a", count: 64)
        for (json, field) in [
            (#"{"apns":{"token":"\#(token)","enviroment":"sandbox"}}"#, "apns.enviroment"),
            (#"{"fcm":{"token":"abc","priority":"high"}}"#, "fcm.priority"),
        ] {
            do {
                _ = try PushTransport(device: FieldReader(JSONParser.parse(Array(json.utf8))))
                Issue.record("\(json) was accepted")
            } catch let error as ValidationError {
                #expect(error.field == field && error.code == "invalid_field", "\(error)")
            }
        }
        // A browser's subscription keeps what browsers add.
        let subscription = #"""
            {"webPush":{"endpoint":"https://push.example/x","expirationTime":null,
            "keys":{"p256dh":"BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
            "auth":"AAAAAAAAAAAAAAAAAAAAAA"}}}
            """#
        _ = try PushTransport(device: FieldReader(JSONParser.parse(Array(subscription.utf8))))
    }

    /// A `p256dh` that is not a point on the curve can never be encrypted to.
    @Test func aSubscriptionKeyMustBeOnTheCurve() throws {
        let valid = try #require(
            Base64.decode(
                "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", .url))
        #expect(P256Key.isPublicPoint(valid))
        #expect(!P256Key.isPublicPoint([4] + [UInt8](repeating: 0, count: 64)))
        var offCurve = valid
        offCurve[64] ^= 1
        #expect(!P256Key.isPublicPoint(offCurve))
    }
}

extension DeliveryOutcome {
    fileprivate var isRetry: Bool {
        if case .retry = self { return true }
        return false
    }
}
