import RelayCore
import Testing

/// `DeliveryPolicy`'s decisions, and a seeded simulation of them over random interleavings of
/// commits, sockets, acks, receiver outcomes and time, checking the delivery invariants.
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
        #expect(policy.dueAfterCatchUp(currentDue: 1300, now: 1200) == 2000)
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
        let offline = policy.committed(online: false, openWindowDue: 1300, collapses: true, now: 1100)
        #expect(offline.cancelsCollapsed && offline.dueAt == 1300)
        let online = policy.committed(online: true, openWindowDue: nil, collapses: false, now: 1100)
        #expect(!online.cancelsCollapsed && online.dueAt == 1900)
        #expect(policy.caughtUp(currentDue: 1300, now: 1200) == 2000)
        #expect(DeliveryPolicy.acked(pushedDevices: ["phone"]).clears == ["phone"])
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

    // MARK: Simulation

    /// A small deterministic generator (SplitMix64), so that a failing seed can be replayed.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// One user with a few registered devices; the store's push jobs, the sockets, the ack cursor.
    struct World {
        struct Job {
            var seq: Int64
            var device: Int
            var due: Int64
            var attempts = 0
            var state: State = .pending
            let expiresAt: Int64
            enum State: Equatable { case pending, delivered, dead, cancelled }
        }

        struct Push {
            var device: Int
            var seqs: [Int64]
            var at: Int64
            var ackAtSend: Int64
        }

        let policy: DeliveryPolicy
        var now: Int64 = 0
        var head: Int64 = 0
        var ack: Int64 = 0
        var online: [Bool]
        /// Seq the device last caught up to (what it was sent), for acks only it can give.
        var received: [Int64]
        var jobs: [Job] = []
        var pushes: [Push] = []
        /// Seq → (commit time, devices online at commit), for I3.
        var commits: [Int64: (at: Int64, online: [Bool])] = [:]
        var ackTimes: [Int64: Int64] = [:]
        var trace: [String] = []

        init(policy: DeliveryPolicy, devices: Int) {
            self.policy = policy
            online = Array(repeating: false, count: devices)
            received = Array(repeating: 0, count: devices)
        }

        mutating func commit() {
            head += 1
            commits[head] = (now, online)
            for device in online.indices {
                let window = jobs.filter { $0.device == device && $0.state == .pending && $0.due > now }
                    .map(\.due).min()
                let due = policy.committed(online: online[device], openWindowDue: window, collapses: false, now: now)
                    .dueAt
                jobs.append(Job(seq: head, device: device, due: due, expiresAt: now + 60_000))
                if online[device] { received[device] = head }  // sent live
            }
            trace.append("t=\(now) commit \(head) online=\(online)")
        }

        mutating func connect(_ device: Int) {
            online[device] = true
            received[device] = head  // catch-up
            let until = policy.caughtUp(currentDue: now, now: now)
            for index in jobs.indices where jobs[index].device == device && jobs[index].state == .pending {
                jobs[index].due = max(jobs[index].due, until)
            }
            trace.append("t=\(now) connect \(device)")
        }

        mutating func disconnect(_ device: Int) {
            guard online[device] else { return }
            online[device] = false  // nothing else changes: its pushes still wait for the ack
            trace.append("t=\(now) disconnect \(device)")
        }

        /// An online device acks what it has.
        mutating func acknowledge(_ device: Int) {
            guard online[device], received[device] > ack else { return }
            for seq in (ack + 1)...received[device] { ackTimes[seq] = now }
            ack = received[device]
            for index in jobs.indices where jobs[index].state == .pending && jobs[index].seq <= ack {
                jobs[index].state = .cancelled
            }
            trace.append("t=\(now) ack \(ack) by \(device)")
        }

        /// The notifier: every device with due jobs gets one push covering them, coalesced by
        /// the code the store runs (`PushBatch.coalescing`; a job's id is its index here).
        mutating func fire(_ outcomeFor: (Int) -> DeliveryOutcome, random: Double) {
            for device in online.indices {
                let dueJobs = jobs.indices.filter {
                    jobs[$0].device == device && jobs[$0].state == .pending && jobs[$0].due <= now
                }.map { index in
                    DueJob(
                        id: Int64(index), webhookId: "msg_\(index)", kind: .message, messageId: "m\(jobs[index].seq)",
                        seq: jobs[index].seq, collapseKey: nil, attempts: jobs[index].attempts,
                        expiresAt: Timestamp(milliseconds: jobs[index].expiresAt), priority: .normal, push: nil,
                        badge: nil)
                }
                guard
                    let batch = PushBatch.coalescing(
                        dueJobs, userId: "u", deviceId: "d\(device)", target: "http://receiver/", contentFree: false,
                        unread: head - ack)
                else { continue }
                let due = batch.jobIds.map { Int($0) }
                let outcome = outcomeFor(device)
                let verdict = policy.answered(
                    outcome, attempts: batch.attempts, expiresAt: batch.expiresAt.milliseconds, now: now,
                    random: { random }
                ).verdict
                trace.append("t=\(now) push \(device) seqs \(due.map { jobs[$0].seq }) → \(verdict)")
                for index in due {
                    switch verdict {
                    case .delivered: jobs[index].state = .delivered
                    case .retry(_, let at): jobs[index].due = at
                    case .requeue(_, let at): jobs[index].due = at
                    case .postponed(let until): jobs[index].due = until
                    case .dead, .deviceGone: jobs[index].state = .dead
                    }
                    // As the store does: a requeue is not an attempt.
                    switch verdict {
                    case .requeue, .postponed: break
                    default: jobs[index].attempts += 1
                    }
                }
                if verdict == .delivered {
                    pushes.append(Push(device: device, seqs: due.map { jobs[$0].seq }, at: now, ackAtSend: ack))
                }
            }
        }

        /// I1–I4, once everything has settled.
        func violations() -> [String] {
            var found: [String] = []
            for job in jobs {
                let covered = pushes.contains { $0.device == job.device && $0.seqs.contains(job.seq) }
                if !(job.seq <= ack || covered || job.state == .dead) {
                    found.append("I1: seq \(job.seq) device \(job.device) ended with nothing (\(job.state))")
                }
            }
            for push in pushes where push.seqs.contains(where: { $0 <= push.ackAtSend }) {
                found.append("I2: push to \(push.device) at \(push.at) covers acked seqs \(push.seqs)")
            }
            for push in pushes {
                for seq in push.seqs {
                    guard let commit = commits[seq], commit.online[push.device], let acked = ackTimes[seq],
                        acked - commit.at < policy.ackTimeoutMs
                    else { continue }
                    found.append("I3: device \(push.device) got seq \(seq) live, acked in time, and was pushed")
                }
            }
            for device in online.indices {
                let covers = pushes.filter { $0.device == device }.flatMap(\.seqs)
                if Set(covers).count != covers.count {
                    found.append("I4: device \(device) was pushed one seq twice: \(covers.sorted())")
                }
            }
            return found
        }
    }

    @Test(arguments: 0..<400)
    func randomInterleavingsKeepTheInvariants(seed: UInt64) {
        var random = Generator(state: seed)
        var world = World(policy: policy, devices: 3)
        for _ in 0..<60 {
            world.now += Int64.random(in: 0...250, using: &random)
            let device = Int.random(in: 0..<3, using: &random)
            switch Int.random(in: 0..<10, using: &random) {
            case 0...2: world.commit()
            case 3: world.connect(device)
            case 4: world.disconnect(device)
            case 5: world.acknowledge(device)
            default:
                let roll = Int.random(in: 0..<12, using: &random)
                let outcome: DeliveryOutcome
                switch roll {
                case 0..<6: outcome = .delivered
                case 6..<9: outcome = .retry(reason: "HTTP 503", notBeforeMilliseconds: nil)
                case 9: outcome = .misconfigured(reason: "APNs: InvalidProviderToken")
                case 10: outcome = .requeue(reason: "REFUSED_STREAM")
                default: outcome = .dead(reason: "HTTP 400")
                }
                world.fire({ _ in outcome }, random: Double.random(in: 0...1, using: &random))
            }
        }
        // Settle: sockets close, time passes, the receiver recovers, every due job is sent.
        for device in 0..<3 { world.disconnect(device) }
        for _ in 0..<100 {
            world.now += 500
            world.fire({ _ in .delivered }, random: 0.5)
        }
        let violations = world.violations()
        #expect(violations.isEmpty, "seed \(seed): \(violations)\n\(world.trace.joined(separator: "\n"))")
    }
}
