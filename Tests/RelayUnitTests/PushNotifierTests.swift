import Foundation
import RelayCore
import RelayDelivery
import RelayLocks
import RelayStore
import RelayTelemetry
import RelayTransport
import Testing

/// The scheduler alone: `PushNotifier` on the memory outbox, a fake push service, and a clock
/// and timer the test steps — what it sends, when it looks again, what it records.
@Suite struct PushNotifierTests {
    static let policy = DeliveryPolicy(
        pushDelayMs: 300, ackTimeoutMs: 800, retry: RetryPolicy(baseMilliseconds: 100, capMilliseconds: 2000))

    /// A window's messages go in one push when it falls due, not before; the timer was armed for
    /// exactly then.
    @Test func aWindowIsPushedOnceWhenItFallsDue() throws {
        let relay = try Relay(answers: [.delivered])
        defer { relay.stop() }
        relay.commit("m1", at: 0)
        relay.commit("m2", at: 100)
        relay.step(to: 100)
        #expect(relay.service.sent.isEmpty)
        #expect(relay.timer.deadline == 300)
        relay.step(to: 300)
        let sent = try #require(relay.service.sent.first)
        #expect(relay.service.sent.count == 1 && sent.seqFrom == 1 && sent.seqTo == 2 && sent.jobIds.count == 2)
        let jobs = relay.jobs
        #expect(jobs.allSatisfy { $0.state == .delivered && $0.attempts == 1 })
        #expect(relay.entries == [1: .pushed, 2: .pushed])
        #expect(relay.timer.deadline == Int64(300 + 30_000))  // after a pass that took work: the safety net
        relay.step(to: 30_300)
        #expect(relay.timer.deadline == nil)  // nothing pending: no timer at all
    }

    /// A failed push is due again at its backoff, and the timer wakes the scheduler then.
    @Test func aFailedPushIsSentAgainAtItsBackoff() throws {
        let relay = try Relay(answers: [.retry(reason: "HTTP 503", notBeforeMilliseconds: nil), .delivered])
        defer { relay.stop() }
        relay.commit("m1", at: 0)
        relay.step(to: 300)
        let retried = try #require(relay.jobs.first)
        #expect(retried.state == .pending && retried.attempts == 1 && retried.lastError == "HTTP 503")
        #expect(retried.dueAt == 300 + 50)  // full jitter under the first ceiling (100 ms), drawn at 0.5
        #expect(relay.timer.deadline == retried.dueAt)
        relay.step(to: retried.dueAt)
        #expect(relay.service.sent.count == 2)
        #expect(relay.jobs.first?.state == .delivered && relay.jobs.first?.attempts == 2)
    }

    /// A device has one push in flight at a time: a message falling due meanwhile waits for the
    /// answer (the scheduler looks again shortly), then goes in the next push.
    @Test func aDeviceHasOnePushInFlightAtATime() throws {
        let relay = try Relay(answers: [])
        defer { relay.stop() }
        relay.commit("m1", at: 0)
        relay.step(to: 300)
        #expect(relay.service.sent.count == 1)
        relay.commit("m2", at: 400)
        relay.step(to: 700)
        #expect(relay.service.sent.count == 1)
        #expect(relay.timer.deadline == Int64(700 + 250))  // held back: the busy recheck
        relay.service.answer(.delivered)
        relay.settle()
        #expect(relay.service.sent.map(\.seqFrom) == [1, 2])
        relay.service.answer(.delivered)
        relay.settle()
        #expect(relay.jobs.map(\.state) == [.delivered, .delivered])
    }

    /// Five failures open the route's breaker for a second: the pushes falling due meanwhile are
    /// postponed past the pause (not sent, no attempt counted), spread so that probes rotate; one
    /// probe goes, and once it is answered the rest follow.
    @Test func aPausedRouteHoldsItsPushesForTheProbe() throws {
        let failure = DeliveryOutcome.retry(reason: "HTTP 503", notBeforeMilliseconds: nil)
        let relay = try Relay(devices: 6, answers: Array(repeating: failure, count: 5))  // then held
        defer { relay.stop() }
        relay.commit("m1", at: 0)
        relay.step(to: 300)
        #expect(relay.service.sent.count == 5)  // the sixth met the open breaker in the same pass
        #expect(relay.jobs.filter { $0.attempts == 0 }.count == 1)
        relay.step(to: 1299)  // the failed ones fell due again meanwhile: postponed too
        #expect(relay.service.sent.count == 5)
        let held = relay.jobs.map(\.dueAt)
        #expect(held.allSatisfy { (1300...1300 + DeliveryPolicy.probeSpreadMs).contains($0) })
        #expect(relay.jobs.map(\.attempts).sorted() == [0, 1, 1, 1, 1, 1])
        let probe = try #require(held.min())
        relay.step(to: probe)
        #expect(relay.service.sent.count == 6)  // the probe: the others met the half-open breaker
        relay.service.answer(.delivered)
        relay.settle()
        relay.step(to: 5000)
        #expect(relay.service.sent.count == 11)
    }

    /// A delivery cut short by the stop is not recorded: its job stays pending, no attempt counted.
    @Test func anOutcomeAfterTheStopIsNotRecorded() throws {
        let relay = try Relay(answers: [])
        defer { relay.service.dropHeld() }
        relay.commit("m1", at: 0)
        relay.step(to: 300)
        #expect(relay.service.sent.count == 1)
        relay.notifier.stop()
        relay.service.answer(.delivered)
        relay.settle()
        #expect(relay.jobs.first?.state == .pending && relay.jobs.first?.attempts == 0)
    }

    /// Every attempt is kept for the delivery trace with what the service said: the same push
    /// (its id, its seqs) failed with 503 and then went through with the service's message name.
    @Test func eachAttemptIsTracedWithWhatTheServiceSaid() throws {
        let relay = try Relay(answers: [.retry(reason: "HTTP 503", notBeforeMilliseconds: nil), .delivered])
        defer { relay.stop() }
        relay.commit("m1", at: 0)
        relay.step(to: 5000)
        let traced = relay.store.traced
        try #require(traced.count == 2)
        #expect(traced.map(\.result) == [.retried, .delivered])
        #expect(traced.map(\.status) == [503, 200])
        #expect(traced.map(\.providerId) == [nil, "projects/p/messages/1"])
        #expect(traced.map(\.reason) == ["HTTP 503", nil])
        #expect(traced[0].at.milliseconds == 300 && traced[1].at.milliseconds > 300)
        #expect(Set(traced.map(\.pushId)).count == 1 && traced.allSatisfy { $0.seqFrom == 1 && $0.seqTo == 1 })
        #expect(traced.allSatisfy { $0.transport == .fcm && $0.app == .default && $0.deviceId == "d0" })
    }

    // MARK: The harness

    /// A clock the test sets.
    final class Clock: Sendable {
        private let time = LockedValue<Int64>(0)
        var now: Int64 { time.withLock { $0 } }
        func set(_ value: Int64) { time.withLock { $0 = value } }
    }

    /// A timer on the test's clock: it fires when the test steps the clock past its deadline.
    final class SteppedTimer: WakeTimer {
        private let clock: Clock
        private let state = LockedValue<(deadline: Int64?, handler: (@Sendable () -> Void)?)>((nil, nil))

        init(clock: Clock) { self.clock = clock }

        var deadline: Int64? { state.withLock { $0.deadline } }

        func start(_ handler: @escaping @Sendable () -> Void) { state.withLock { $0.handler = handler } }

        func arm(afterMilliseconds milliseconds: Int64) {
            let when = clock.now + max(0, milliseconds)
            state.withLock { state in
                if let armed = state.deadline, armed <= when { return }
                state.deadline = when
            }
        }

        func stop() { state.withLock { $0 = (nil, nil) } }

        /// Fires once if armed by now.
        func fireIfDue() -> Bool {
            let now = clock.now
            let handler = state.withLock { state -> (@Sendable () -> Void)? in
                guard let deadline = state.deadline, deadline <= now else { return nil }
                state.deadline = nil
                return state.handler
            }
            handler?()
            return handler != nil
        }
    }

    /// A push service that records what it is sent and answers from a script, holding the rest
    /// until the test answers.
    final class FakeService: PushProvider {
        private let state = LockedValue<(sent: [PushBatch], script: [DeliveryOutcome], held: [Held])>(([], [], []))

        struct Held: Sendable { let done: @Sendable (DeliveryReceipt) -> Void }

        /// What a service answers: a status and, for a delivery, its id for the notification.
        static func receipt(_ outcome: DeliveryOutcome) -> DeliveryReceipt {
            outcome == .delivered
                ? DeliveryReceipt(outcome, status: 200, providerId: "projects/p/messages/1")
                : DeliveryReceipt(outcome, status: 503)
        }

        init(answers: [DeliveryOutcome]) { state.withLock { $0.script = answers } }

        var sent: [PushBatch] { state.withLock { $0.sent } }

        func route(for transport: PushTransport) -> PushRoute {
            PushRoute(.fcm, credential: "project", host: "fcm.test:443")
        }

        func send(
            _ batch: PushBatch, to transport: PushTransport, at time: Timestamp,
            done: @escaping @Sendable (DeliveryReceipt) -> Void
        ) {
            let answer = state.withLock { state -> DeliveryOutcome? in
                state.sent.append(batch)
                guard !state.script.isEmpty else {
                    state.held.append(Held(done: done))
                    return nil
                }
                return state.script.removeFirst()
            }
            if let answer { done(Self.receipt(answer)) }
        }

        /// Answers the oldest push still held.
        func answer(_ outcome: DeliveryOutcome) {
            let held = state.withLock { $0.held.isEmpty ? nil : $0.held.removeFirst() }
            held?.done(Self.receipt(outcome))
        }

        /// Forgets the pushes still held (their completions hold the notifier).
        func dropHeld() { state.withLock { $0.held.removeAll() } }
    }

    final class Sink: RelayEventSink {
        func emit(_ event: RelayEvent) {}
    }

    /// One user with `devices` FCM devices, the notifier on the memory outbox.
    struct Relay {
        let clock = Clock()
        let timer: SteppedTimer
        let service: FakeService
        let store = MemoryOutboxStore()
        let notifier: PushNotifier
        let devices: Int

        init(devices: Int = 1, answers: [DeliveryOutcome]) throws {
            timer = SteppedTimer(clock: clock)
            service = FakeService(answers: answers)
            self.devices = devices
            let clock = clock
            let service = service
            notifier = try PushNotifier(
                store: store,
                settings: PushNotifier.Settings(policy: PushNotifierTests.policy, requestTimeoutSeconds: 5),
                signer: WebhookSignature(hmac: { _ in [] }, base64: { _ in "" }), allowList: .none,
                metrics: Metrics(), logger: Logger(level: .error), events: Sink(), eventsURL: nil,
                tls: try TLSContext(caFile: nil), services: { _ in [ProviderKey(.fcm): service] }, timer: timer,
                random: { 0.5 },
                now: { Timestamp(milliseconds: clock.now) })
            store.withOutbox { outbox in
                for device in 0..<devices {
                    outbox.register(
                        userId: "u", deviceId: "d\(device)",
                        target: PushTransport.fcm(.init(token: "token\(device)")).target,
                        contentFree: false, now: 0)
                }
            }
            notifier.start()
        }

        func commit(_ id: String, at time: Int64) {
            clock.set(time)
            store.withOutbox {
                $0.accept(
                    messageId: id, recipients: ["u"], collapseKey: nil, badge: nil,
                    message: MemoryOutbox.Message(priority: .normal, push: nil), expiresAt: time + 60_000,
                    online: [:], policy: PushNotifierTests.policy, now: time)
            }
            notifier.wake()  // as the store's commit signal does
            settle()
        }

        /// Steps the clock to `time`, firing the timer as often as it falls due on the way.
        func step(to time: Int64) {
            settle()
            while let deadline = timer.deadline, deadline <= time {
                clock.set(max(clock.now, deadline))
                _ = timer.fireIfDue()
                settle()
            }
            clock.set(time)
            settle()
        }

        /// Waits until the passes queued so far (and those they queue) have run.
        func settle() {
            for _ in 0..<8 { notifier.drain() }
        }

        var jobs: [MemoryOutbox.Job] { store.withOutbox { $0.jobs } }
        var entries: [Int64: DeliveryState] { store.withOutbox { $0.entries["u"] ?? [:] } }

        func stop() {
            notifier.stop()
            service.dropHeld()
        }
    }
}
