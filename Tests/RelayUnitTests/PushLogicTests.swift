import Foundation
import RelayCore
import RelayCrypto
import Testing

@Suite struct PushLogicTests {
    /// The example of the Standard Webhooks specification, computed by its reference libraries.
    @Test func signatureMatchesTheStandardWebhooksExample() throws {
        let key = try #require(Data(base64Encoded: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
        let signer = WebhookSignature(
            hmac: { Crypto.hmacSHA256(key: Array(key), message: $0) }, base64: { Data($0).base64EncodedString() })
        let headers = signer.headers(
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestampSeconds: 1_614_265_330,
            body: Array(#"{"test": 2432232314}"#.utf8))
        #expect(headers.first { $0.0 == "webhook-signature" }?.1 == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        #expect(headers.first { $0.0 == "webhook-timestamp" }?.1 == "1614265330")
    }

    @Test func backoffGrowsToTheCapWithFullJitter() {
        let policy = RetryPolicy(baseMilliseconds: 1000, capMilliseconds: 600_000)
        #expect((1...5).map { policy.ceiling(afterAttempt: $0) } == [1000, 2000, 4000, 8000, 16_000])
        #expect(policy.ceiling(afterAttempt: 11) == 600_000)
        #expect(policy.ceiling(afterAttempt: 500) == 600_000)  // no overflow
        #expect(policy.delay(afterAttempt: 3, random: 0) == 0)
        #expect(policy.delay(afterAttempt: 3, random: 0.5) == 2000)
        #expect(policy.delay(afterAttempt: 3, random: 1) == 4000)
    }

    @Test func receiverAnswersAreClassified() {
        #expect(DeliveryOutcome.classify(status: 204, retryAfter: nil) == .delivered)
        let gone = DeliveryOutcome.deviceGone(reason: "push receiver answered 404/410")
        #expect(DeliveryOutcome.classify(status: 410, retryAfter: nil) == gone)
        #expect(DeliveryOutcome.classify(status: 404, retryAfter: nil) == gone)
        #expect(
            DeliveryOutcome.classify(status: 429, retryAfter: "7")
                == .retry(reason: "HTTP 429", notBeforeMilliseconds: 7000))
        #expect(
            DeliveryOutcome.classify(status: 503, retryAfter: "soon")
                == .retry(reason: "HTTP 503", notBeforeMilliseconds: nil))
        #expect(DeliveryOutcome.classify(status: 400, retryAfter: nil) == .dead(reason: "HTTP 400"))
        #expect(DeliveryOutcome.classify(status: 301, retryAfter: nil) == .dead(reason: "HTTP 301"))
    }

    @Test(arguments: [
        "127.0.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254", "100.64.0.1",
        "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fd00::1", "::ffff:127.0.0.1",
        "::ffff:10.0.0.1", "2001:db8::1",
    ])
    func specialAddressesAreRecognized(_ text: String) throws {
        #expect(try #require(IPAddress(text)).isSpecialPurpose)
    }

    @Test(arguments: ["8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
    func publicAddressesAreNot(_ text: String) throws {
        #expect(try #require(IPAddress(text)).isSpecialPurpose == false)
    }
}

@Suite struct CircuitBreakerTests {
    func at(_ ms: Int64) -> Timestamp { Timestamp(milliseconds: ms) }

    @Test func opensAfterTheThresholdAndProbesWithBackoff() {
        var breaker = CircuitBreaker(threshold: 3, retry: RetryPolicy(baseMilliseconds: 1000, capMilliseconds: 4000))
        for _ in 0..<2 { breaker.recordFailure(at: at(0)) }
        let allowed1 = breaker.allows(at: at(0))
        #expect(allowed1)
        breaker.recordFailure(at: at(0))
        #expect(breaker.state == .open(until: at(1000), openings: 1))
        let allowed2 = breaker.allows(at: at(999))
        #expect(!allowed2)
        let allowed3 = breaker.allows(at: at(1000))
        #expect(allowed3)  // the probe
        let allowed4 = breaker.allows(at: at(1001))
        #expect(!allowed4)  // only one probe at a time
        breaker.recordFailure(at: at(1100))
        #expect(breaker.state == .open(until: at(3100), openings: 2))
        let allowed5 = breaker.allows(at: at(3100))
        #expect(allowed5)
        breaker.recordFailure(at: at(3100))
        #expect(breaker.state == .open(until: at(7100), openings: 3))
        let allowed6 = breaker.allows(at: at(7100))
        #expect(allowed6)
        breaker.recordFailure(at: at(7100))
        #expect(breaker.state == .open(until: at(11_100), openings: 4))  // capped at 4 s
        let allowed7 = breaker.allows(at: at(11_100))
        #expect(allowed7)
        breaker.recordSuccess()
        #expect(breaker.state == .closed(failures: 0))
    }

    /// A probe that says nothing about the host (expired job, refused URL, a 4xx) pauses the host
    /// again as long as before instead of leaving it half-open with no probe in flight; outside a
    /// probe it changes nothing (an expiring backlog never closes an open breaker).
    @Test func anInconclusiveProbeReopens() {
        var breaker = CircuitBreaker(threshold: 1, retry: RetryPolicy(baseMilliseconds: 1000, capMilliseconds: 4000))
        breaker.recordFailure(at: at(0))
        breaker.recordInconclusive(at: at(10))
        #expect(breaker.state == .open(until: at(1000), openings: 1))
        let probe = breaker.allows(at: at(1000))
        #expect(probe)
        breaker.recordInconclusive(at: at(1200))
        #expect(breaker.state == .open(until: at(2200), openings: 1))
        var closed = CircuitBreaker(threshold: 3)
        closed.recordFailure(at: at(0))
        closed.recordInconclusive(at: at(0))
        #expect(closed.state == .closed(failures: 1))
    }

    @Test func aSuccessResetsTheCount() {
        var breaker = CircuitBreaker(threshold: 2)
        breaker.recordFailure(at: at(0))
        breaker.recordSuccess()
        breaker.recordFailure(at: at(0))
        #expect(!breaker.isOpen)
    }
}
