import RelayCore
import Testing

/// The scheduler's state, event by event: what each batch read and each answer comes to.
@Suite struct SchedulerStateTests {
    let policy = DeliveryPolicy(
        pushDelayMs: 300, ackTimeoutMs: 800, retry: RetryPolicy(baseMilliseconds: 100, capMilliseconds: 2000))
    let route = PushRoute(.fcm, credential: "project", host: "fcm.test:443")

    func batch(_ device: String, jobs: [Int64] = [1]) -> PushBatch {
        PushBatch(
            userId: "u", deviceId: device, target: "t", contentFree: false, jobIds: jobs, webhookId: "w",
            kind: .message, seqFrom: 1, seqTo: 1, messageId: "m", unread: 1, priority: .normal, collapseKey: nil,
            push: nil, attempts: 0, expiresAt: Timestamp(milliseconds: 60_000))
    }

    func target(slots: Int = 2) -> HostAdmission.Target {
        HostAdmission.Target(transport: .fcm(.init(token: "t")), route: route, slots: slots)
    }

    func at(_ milliseconds: Int64) -> Timestamp { Timestamp(milliseconds: milliseconds) }

    /// A device is claimed once; a route's slots are taken and freed in the same value.
    @Test func devicesAndSlotsAreCountedInOnePlace() {
        var state = SchedulerState(policy: policy)
        #expect(state.start(batch("a"), to: target(slots: 1), now: at(0), random: { 0 }) == .attempt)
        #expect(state.start(batch("a"), to: target(slots: 1), now: at(0), random: { 0 }) == .inFlight)
        #expect(state.start(batch("b"), to: target(slots: 1), now: at(0), random: { 0 }) == .holdDue)
        #expect(state.inFlight.keys.sorted() == [batch("a").deviceKey])  // a held batch leaves its device free
        #expect(state.routesInFlight == [route: 1])
        let answered = state.answered(batch("a"), on: route, outcome: .delivered, now: at(10), random: { 0 })
        #expect(answered.decision.verdict == .delivered && answered.credentialsLine == nil)
        #expect(state.routesInFlight.isEmpty)
        #expect(state.start(batch("b"), to: target(slots: 1), now: at(10), random: { 0 }) == .attempt)
        state.recorded(devices: [batch("a").deviceKey])
        #expect(state.inFlight.keys.sorted() == [batch("b").deviceKey])
    }

    /// Five failures open the route's breaker: batches are postponed past the pause; when it is
    /// over, one probe goes and the next batch waits for its answer.
    @Test func aPausedRouteLetsOneProbeThrough() {
        var state = SchedulerState(policy: policy)
        for index in 0..<5 {
            let device = batch("d\(index)")
            #expect(state.start(device, to: target(slots: 10), now: at(0), random: { 0 }) == .attempt)
            let answer = state.answered(
                device, on: route, outcome: .retry(reason: "HTTP 503", notBeforeMilliseconds: nil), now: at(0),
                random: { 0 })
            #expect(answer.decision.host == .failing)
        }
        #expect(state.breakerStates.map(\.route) == [route])
        #expect(
            state.start(batch("x"), to: target(slots: 10), now: at(500), random: { 1 })
                == .finish(.postponed(until: 1500)))
        #expect(state.start(batch("y"), to: target(slots: 10), now: at(1000), random: { 0 }) == .attempt)  // the probe
        #expect(
            state.start(batch("z"), to: target(slots: 10), now: at(1000), random: { 0 })
                == .finish(.postponed(until: 2000)))
        _ = state.answered(batch("y"), on: route, outcome: .delivered, now: at(1100), random: { 0 })
        #expect(state.breakerStates.isEmpty)
    }

    /// A refused push (never processed) goes again at once three times in a row, then backs off;
    /// any other answer ends the run.
    @Test func aRefusedPushIsResentAtOnceThreeTimes() {
        var state = SchedulerState(policy: policy)
        var verdicts: [DeliveryPolicy.Verdict] = []
        for _ in 0..<4 {
            _ = state.start(batch("a"), to: target(), now: at(0), random: { 0 })
            verdicts.append(
                state.answered(
                    batch("a"), on: route, outcome: .requeue(reason: "REFUSED_STREAM"), now: at(0), random: { 0 }
                )
                .decision.verdict)
            state.recorded(devices: [batch("a").deviceKey])
        }
        #expect(verdicts.prefix(3).allSatisfy { $0 == .requeue(reason: "REFUSED_STREAM", at: 0) })
        guard case .retry = verdicts[3] else {
            Issue.record("the fourth refusal in a row must back off: \(verdicts[3])")
            return
        }
    }

    /// A refused credential is the operator's to fix: one line a minute per route, with how many
    /// were held back.
    @Test func theCredentialsLineIsLoggedOnceAMinutePerRoute() {
        var state = SchedulerState(policy: policy)
        let refused = DeliveryOutcome.misconfigured(reason: "FCM: PERMISSION_DENIED")
        func answer(_ time: Int64, on route: PushRoute) -> SchedulerState.CredentialsLine? {
            _ = state.start(batch("a"), to: target(), now: at(time), random: { 0 })
            defer { state.recorded(devices: [batch("a").deviceKey]) }
            return state.answered(batch("a"), on: route, outcome: refused, now: at(time), random: { 0 }).credentialsLine
        }
        #expect(answer(0, on: route) == SchedulerState.CredentialsLine(reason: "FCM: PERMISSION_DENIED", suppressed: 0))
        #expect(answer(1000, on: route) == nil)
        #expect(answer(2000, on: route) == nil)
        let other = PushRoute(.fcm, credential: "other", host: "fcm.test:443")
        #expect(answer(3000, on: other)?.suppressed == 0)
        #expect(answer(60_000, on: route)?.suppressed == 2)
    }

    /// After `stop`, an outcome is dropped and its device let go.
    @Test func afterTheStopOutcomesAreDropped() {
        var state = SchedulerState(policy: policy)
        #expect(state.start(batch("a"), to: target(), now: at(0), random: { 0 }) == .attempt)
        let before = state.recording(batch("a"))
        state.stop()
        let after = state.recording(batch("a"))
        #expect(before && !after)
        #expect(state.inFlight.isEmpty)
    }
}
