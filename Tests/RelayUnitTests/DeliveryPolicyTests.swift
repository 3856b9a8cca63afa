import RelayCore
import Testing

/// `DeliveryPolicy`'s decisions one by one (the seeded simulation of all of them together is
/// `OutboxDifferentialTests`).
@Suite struct DeliveryPolicyTests {
    let policy = DeliveryPolicy(
        pushDelayMs: 300, ackTimeoutMs: 800, retry: RetryPolicy(baseMilliseconds: 100, capMilliseconds: 2000))

    @Test func dueTimes() {
        // Offline: a window opens a push delay from now, or the message joins the open one.
        #expect(policy.dueAt(committedAt: 1000, online: false, openWindowDue: nil) == 1300)
        #expect(policy.dueAt(committedAt: 1100, online: false, openWindowDue: 1300) == 1300)
        #expect(policy.dueAt(committedAt: 1300, online: false, openWindowDue: 1300) == 1600)  // fired: next window
        // Online: waits for the ack on its own, never joins an older window.
        #expect(policy.dueAt(committedAt: 1100, online: true, openWindowDue: 1300) == 1900)
    }

    /// Only what the host did feeds its breaker: not an expired job, a refused URL, a 4xx.
    @Test func theBreakerHearsOnlyTheHost() {
        func host(_ outcome: DeliveryOutcome, expiresAt: Int64 = 100_000) -> DeliveryPolicy.HostHealth {
            policy.judge(outcome, attempts: 0, expiresAt: expiresAt, now: 1000, random: 0.5).host
        }
        #expect(host(.delivered) == .alive)
        #expect(host(.retry(reason: "HTTP 503", notBeforeMilliseconds: nil)) == .failing)
        #expect(host(.retry(reason: "connect timed out", notBeforeMilliseconds: nil), expiresAt: 1001) == .failing)
        #expect(host(.dead(reason: "HTTP 400")) == .unknown)
        #expect(host(.deviceGone(reason: "APNs: Unregistered")) == .unknown)
        #expect(host(.misconfigured(reason: "APNs: InvalidProviderToken")) == .failing)
        #expect(host(.requeue(reason: "HTTP/2 GOAWAY")) == .unknown)
        #expect(host(.refused(reason: "SSRF guard")) == .unknown)
        #expect(policy.expired(now: 2000, expiresAt: 2000) != nil)
        #expect(policy.expired(now: 1999, expiresAt: 2000) == nil)
        // A retry that would land past the TTL is dead instead, with the last error.
        let late = policy.judge(
            .retry(reason: "HTTP 500", notBeforeMilliseconds: 5000), attempts: 0, expiresAt: 3000, now: 1000, random: 0)
        #expect(late.verdict == .dead(error: "TTL expired; last error: HTTP 500"))
    }

    /// The device-gone reason is the provider's, kept as the device's `disabled_reason`.
    @Test func aGoneDeviceKeepsItsReason() {
        let judged = policy.judge(
            .deviceGone(reason: "APNs: Unregistered"), attempts: 3, expiresAt: 9000, now: 1000, random: 0.5)
        #expect(judged.verdict == .deviceGone(reason: "APNs: Unregistered"))
    }

    /// Our credentials refused: retried with the normal backoff until the TTL, and the breaker hears a failure.
    @Test func aMisconfigurationIsRetriedWithBackoffUntilTheTTL() {
        let reason = "APNs: InvalidProviderToken"
        // attempts 2 → the 3rd failure: ceiling 100 · 2² = 400 ms, half of it with random 0.5.
        let judged = policy.judge(.misconfigured(reason: reason), attempts: 2, expiresAt: 9000, now: 1000, random: 0.5)
        #expect(judged.verdict == .retry(error: reason, at: 1200))
        #expect(judged.host == .failing)
        // The backoff grows with the attempts like any failure's, capped.
        let later = policy.judge(.misconfigured(reason: reason), attempts: 20, expiresAt: 9000, now: 1000, random: 1)
        #expect(later.verdict == .retry(error: reason, at: 3000))
        // Past the TTL it is dead, with the reason.
        let late = policy.judge(.misconfigured(reason: reason), attempts: 20, expiresAt: 2999, now: 1000, random: 1)
        #expect(late.verdict == .dead(error: "TTL expired; last error: \(reason)"))
        #expect(late.host == .failing)
    }

    /// Never processed: due again now, whatever the attempts, without drawing a jitter; the host is not judged.
    @Test func aRequeueIsDueAtOnceAndCountsForNothing() {
        var drawn = false
        func draw() -> Double {
            drawn = true
            return 1
        }
        for attempts in [0, 5, 40] {
            let judged = policy.judge(
                .requeue(reason: "REFUSED_STREAM"), attempts: attempts, expiresAt: 9000, now: 1000, random: draw())
            #expect(judged.verdict == .requeue(reason: "REFUSED_STREAM", at: 1000))
            #expect(judged.host == .unknown)
        }
        #expect(!drawn)
        let late = policy.judge(.requeue(reason: "REFUSED_STREAM"), attempts: 0, expiresAt: 1000, now: 1000, random: 0)
        #expect(late.verdict == .dead(error: "TTL expired; last error: REFUSED_STREAM"))
        #expect(late.host == .unknown)
        let goaway = policy.answered(.requeue(reason: "GOAWAY"), attempts: 2, expiresAt: 9000, now: 1000)
        #expect(goaway.verdict == .requeue(reason: "GOAWAY", at: 1000) && goaway.host == .unknown)
    }

    /// Each transition of a push job has its own decision, and the delivery path carries out
    /// exactly what it holds.
    @Test func everyTransitionHasItsDecision() {
        var message = CommittedMessage(
            userId: "u", seq: 4, messageId: "m4", collapseKey: "typing", badge: nil, expiresAt: 9000)
        let job = NewPushJob(
            webhookId: "w", kind: .message, userId: "u", deviceId: "phone", messageId: "m4", seq: 4,
            collapseKey: "typing", dueAt: 1300, expiresAt: 9000, badge: nil, createdAt: 1100)
        #expect(
            policy.committed(message, deviceId: "phone", online: false, openWindowDue: 1300, now: 1100, webhookId: "w")
                == [
                    .cancel(.collapsing(userId: "u", deviceId: "phone", collapseKey: "typing"), .collapsed),
                    .insert(job),
                ])
        message.collapseKey = nil
        var online = job
        online.collapseKey = nil
        online.dueAt = 1900
        #expect(
            policy.committed(message, deviceId: "phone", online: true, openWindowDue: nil, now: 1100, webhookId: "w")
                == [.insert(online)])
        // A catch-up holds the device's message jobs for the ack; it never brings one forward.
        #expect(
            policy.caughtUp(userId: "u", deviceId: "phone", through: 4, now: 1200)
                == .hold(.caughtUp(userId: "u", deviceId: "phone", throughSeq: 4), notBefore: 2000))
        // An ack cancels up to the cursor on every device and replaces the pushed ones' clear.
        let acked = DeliveryPolicy.acked(
            userId: "u", through: 4, pushedDevices: ["phone"], now: 1200, webhookId: { "c" })
        #expect(
            acked == [
                .cancel(.acked(userId: "u", throughSeq: 4), .acked),
                .cancel(.clear(userId: "u", deviceId: "phone"), .superseded),
                .insert(
                    NewPushJob(
                        webhookId: "c", kind: .clear, userId: "u", deviceId: "phone", messageId: nil, seq: 4,
                        collapseKey: nil, dueAt: 1200, expiresAt: 1200 + DeliveryPolicy.clearLifetimeMs, badge: nil,
                        createdAt: 1200)),
            ])
        // A message addressed again is queued once per device, and never once acked.
        #expect(DeliveryPolicy.addressedAgain(seq: 4, ackSeq: 3, queued: false))
        #expect(!DeliveryPolicy.addressedAgain(seq: 4, ackSeq: 4, queued: false))
        #expect(!DeliveryPolicy.addressedAgain(seq: 4, ackSeq: 3, queued: true))
        // Before an attempt: the TTL first (the host is not asked, its probe not used up), then the host.
        #expect(
            policy.due(expiresAt: 1000, host: .paused(until: 5000), now: 1000)
                == .finish(.dead(error: "TTL expired before it could be delivered")))
        #expect(policy.due(expiresAt: 9000, host: .paused(until: 5000), now: 1000) == .finish(.postponed(until: 5000)))
        #expect(policy.due(expiresAt: 9000, host: .full, now: 1000) == .holdDue)
        #expect(policy.due(expiresAt: 9000, host: .open, now: 1000) == .attempt)
        #expect(DeliveryPolicy.probeTaken(now: 1000) == .postponed(until: 1000 + DeliveryPolicy.probeTakenPostponeMs))
        // After: the breaker hears the host, the job gets its verdict.
        let delivered = policy.answered(.delivered, attempts: 0, expiresAt: 9000, now: 1000)
        #expect(delivered.verdict == .delivered && delivered.host == .alive)
        let retried = policy.answered(
            .retry(reason: "HTTP 503", notBeforeMilliseconds: nil), attempts: 0, expiresAt: 9000, now: 1000,
            random: { 1 })
        #expect(retried.verdict == .retry(error: "HTTP 503", at: 1100) && retried.host == .failing)
        // An events receiver answering 404/410 is not a device gone: the event is dead.
        #expect(
            policy.eventAnswered(.deviceGone(reason: "HTTP 410"), attempts: 0, expiresAt: 9000, now: 1000)
                == .dead(error: "events receiver answered 404/410"))
    }

    /// Looking at a breaker changes nothing; taking the go-ahead moves a finished pause to the probe.
    @Test func aBreakerCanBeAskedWithoutSpendingTheProbe() {
        var breaker = CircuitBreaker(threshold: 1)
        #expect(breaker.pausedUntil(at: Timestamp(milliseconds: 0)) == nil)
        breaker.recordFailure(at: Timestamp(milliseconds: 0))
        #expect(breaker.pausedUntil(at: Timestamp(milliseconds: 10)) == 1000)
        #expect(breaker.pausedUntil(at: Timestamp(milliseconds: 1000)) == nil)
        #expect(breaker.pausedUntil(at: Timestamp(milliseconds: 1000)) == nil)  // still not taken
        let allowed = breaker.allows(at: Timestamp(milliseconds: 1000))
        #expect(allowed)
        #expect(breaker.pausedUntil(at: Timestamp(milliseconds: 1000)) == 2000)  // the probe is out
    }

    /// One push per device: the newest message's id, collapse key and `push`, high if any
    /// message is, the newest homeserver badge else head − ack, the latest TTL, the most
    /// attempts; a clear only adds its job; several jobs make a new webhook id.
    @Test func dueJobsCoalesceIntoOnePush() throws {
        func job(
            _ id: Int64, _ seq: Int64, kind: PushKind = .message, priority: Priority = .normal, badge: Int64? = nil,
            attempts: Int = 0, expiresAt: Int64 = 1000
        ) -> DueJob {
            DueJob(
                id: id, webhookId: "msg_\(id)", kind: kind, messageId: kind == .clear ? nil : "m\(seq)", seq: seq,
                collapseKey: "k\(seq)", attempts: attempts, expiresAt: Timestamp(milliseconds: expiresAt),
                priority: priority, push: Array("p\(seq)".utf8), badge: badge)
        }
        func coalesce(_ jobs: [DueJob]) -> PushBatch? {
            PushBatch.coalescing(jobs, userId: "u", deviceId: "d", target: "t", contentFree: false, unread: 7)
        }
        #expect(coalesce([]) == nil)
        let one = try #require(coalesce([job(4, 2)]))
        #expect(one.webhookId == "msg_4" && one.unread == 7 && one.seqFrom == 2 && one.seqTo == 2)
        let jobs = [
            job(9, 0, kind: .clear, badge: 1, expiresAt: 9000), job(6, 3, attempts: 2),
            job(4, 2, priority: .high, badge: 5), job(5, 1, expiresAt: 3000),
        ]
        let batch = try #require(coalesce(jobs))
        #expect(batch.kind == .message && batch.jobIds == [5, 4, 6, 9])
        #expect(batch.seqFrom == 1 && batch.seqTo == 3 && batch.messageId == "m3" && batch.collapseKey == "k3")
        #expect(batch.push == Array("p3".utf8) && batch.priority == .high && batch.unread == 5)
        #expect(batch.attempts == 2 && batch.expiresAt == Timestamp(milliseconds: 9000))
        #expect(batch.webhookId == "msg_5_9")
        let clear = try #require(coalesce([job(9, 0, kind: .clear, badge: 1)]))
        #expect(clear.kind == .clear && clear.unread == 1 && clear.messageId == nil)
    }
}
