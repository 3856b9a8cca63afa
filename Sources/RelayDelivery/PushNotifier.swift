import Dispatch
import Foundation
package import RelayCore
package import RelayLocks
package import RelayPoll
package import RelayStore
package import RelayTelemetry
package import RelayTransport

/// Delivers the push outbox: takes due jobs, coalesced per device into one push, hands it to the
/// device's transport (`PushProvider`: the signed webhook, APNs, FCM, Web Push), and records what `DeliveryPolicy.judge` makes of the answer (delivered; device gone →
/// disabled; retry with backoff and full jitter until the TTL; dead). At-least-once: a job stays
/// pending in the store until its outcome is committed, so a crash only means it is sent again.
///
/// No polling: it sleeps until the earliest due time in the store, or until `wake()` (every
/// committed write calls it: new jobs, acks, outcomes); with nothing due it does not wake at
/// all, and while deliveries are in flight a 30 s safety net bounds a missed wake.
package final class PushNotifier: Sendable {
    package struct Settings: Sendable {
        package var policy = DeliveryPolicy()
        /// Deliveries in flight at most.
        package var maxInFlight = 512
        /// The longest sleep without a wake-up (a safety net, not the schedule).
        package var idleRecheckMs = 30_000
        /// How soon to look again when jobs are due but all held back (devices or hosts busy).
        package var busyRecheckMs = 250
        package var requestTimeoutSeconds = 10.0
        package var connectTimeoutSeconds = 5.0
        /// Threads resolving receiver host names (`getaddrinfo` blocks); IP literals skip them.
        package var resolverThreads = 4
        /// Deliveries in flight at most per receiver `host:port` of a URL a client chose (webhook,
        /// Web Push): one slow host never holds more than this share of `maxInFlight` (its other
        /// jobs wait, due, for a later pass).
        package var deliveriesPerHost = 64
        /// The same for a push service host of the operator's settings (APNs, FCM): one host
        /// serves every device of its platform over multiplexed HTTP/2, so 64 would cap a whole
        /// platform (APNs drained 60,000 due pushes at 12–17k/s with 64, 22–28k/s with 256).
        package var deliveriesPerServiceHost = 256

        /// How many deliveries a host of `kind` may have in flight.
        package func slots(for kind: PushTransport.Kind) -> Int {
            switch kind {
            case .webhook, .webPush: deliveriesPerHost
            case .apns, .fcm: deliveriesPerServiceHost
            }
        }

        package init(policy: DeliveryPolicy, requestTimeoutSeconds: Double) {
            self.policy = policy
            self.requestTimeoutSeconds = requestTimeoutSeconds
        }
    }

    private let store: any PushOutbox
    private let settings: Settings
    private let metrics: Metrics
    private let logger: Logger
    private let events: any RelayEventSink
    private let now: @Sendable () -> Timestamp
    /// Draws in 0...1: retry jitter and the spread of a paused route's jobs (a test fixes it).
    private let random: @Sendable () -> Double
    private let queue = DispatchQueue(label: "pushrelay-notifier")
    private let timer: any WakeTimer
    /// Devices and routes in flight, breakers, requeue and rejected-token runs, credentials
    /// lines: one value, one lock (`SchedulerState`).
    private let state: LockedValue<SchedulerState>
    /// The chat server's event webhook, if configured.
    private let eventsURL: PushURL?
    private let sender: HTTPSender
    private let webhooks: WebhookProvider
    /// The push services with credentials, per app; the webhook is always there.
    private let providers: [ProviderKey: any PushProvider]
    private let eventsInFlight = LockedValue<Set<Int64>>([])
    private let pollScheduled = LockedValue(false)
    /// Error and warning lines about pushes: one per failing attempt would be a flood (any
    /// client can make its own pushes fail).
    private let pushLogThrottle: LogThrottle
    /// Used by the scheduler pass only (the lock is never contended).
    private let admission: LockedValue<HostAdmission>

    /// - Parameter services: the push services with credentials, built on the notifier's HTTP
    ///   sender (the webhook is added here).
    package init(
        store: any PushOutbox, settings: Settings, signer: WebhookSignature, allowList: HostAllowList,
        webPushAllowList: HostAllowList = .publicHTTPS, metrics: Metrics,
        logger: Logger, events: any RelayEventSink, eventsURL: PushURL?, tls: TLSContext,
        services: (HTTPSender) -> [ProviderKey: any PushProvider] = { _ in [:] },
        timer: any WakeTimer = DemandTimer(), random: @escaping @Sendable () -> Double = { Double.random(in: 0...1) },
        now: @escaping @Sendable () -> Timestamp
    ) throws(Poller.Failure) {
        self.timer = timer
        self.random = random
        self.eventsURL = eventsURL
        sender = try HTTPSender(
            tls: tls, allowList: allowList, webPushAllowList: webPushAllowList,
            connectTimeoutMs: Int(settings.connectTimeoutSeconds * 1000),
            totalTimeoutMs: Int(settings.requestTimeoutSeconds * 1000), resolverThreads: settings.resolverThreads)
        webhooks = WebhookProvider(sender: sender, signer: signer)
        var providers = services(sender)
        providers[ProviderKey(.webhook)] = webhooks
        self.providers = providers
        admission = LockedValue(
            HostAdmission { [providers] transport in
                (
                    providers[ProviderKey(transport)]?.route(for: transport)
                        ?? PushRoute(transport.kind, credential: transport.app.name, host: ""),
                    settings.slots(for: transport.kind)
                )
            })
        self.store = store
        state = LockedValue(SchedulerState(policy: settings.policy))
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
        self.events = events
        self.now = now
        pushLogThrottle = LogThrottle(linesPerSecond: 1, burst: 10, now: now())
    }

    package func start() {
        timer.start { [weak self] in self?.wake() }
        timer.arm(afterMilliseconds: 0)
    }

    package func stop() {
        state.withLock { $0.stop() }
        timer.stop()
        queue.sync {}
        for provider in providers.values { provider.stop() }
        sender.stop()
    }

    /// Waits until the passes queued so far have run (a test stepping its clock).
    package func drain() { queue.sync {} }

    /// Something changed in the store (a commit): look again soon. Coalesced: many wakes while
    /// one is pending make one poll.
    package func wake() {
        guard
            pollScheduled.withLock({ scheduled in
                defer { scheduled = true }
                return !scheduled
            })
        else { return }
        queue.async { [self] in
            pollScheduled.withLock { $0 = false }
            poll()
        }
    }

    /// Sets the timer after a pass that read the store at `passAt`: for the first job falling due
    /// after that (it must not wait for a wake: outcomes wake the scheduler only once the writer
    /// has recorded them, and a slow delivery or a long transaction may hold them); after a pass
    /// that took work, the safety net at the latest; after one that took nothing while jobs are
    /// due but held back (devices in flight, hosts busy or paused), a look again shortly. With
    /// nothing pending, no timer at all: a commit wakes the scheduler.
    private func sleepUntilNextDue(passAt: Timestamp, tookWork: Bool) {
        let time = now().milliseconds
        let safetyNet = Int64(settings.idleRecheckMs)
        do {
            if let next = try store.nextDueAt(after: passAt)?.milliseconds {
                timer.arm(afterMilliseconds: min(max(0, next - time), safetyNet))
            } else if tookWork {
                timer.arm(afterMilliseconds: safetyNet)
            }
            if !tookWork, let due = try store.nextDueAt(after: nil), due <= passAt {
                timer.arm(afterMilliseconds: Int64(settings.busyRecheckMs))
            }
        } catch {
            logger.warning("cannot read the next due time", ("error", "\(error)"))
            timer.arm(afterMilliseconds: Self.unreadableStoreRecheckMs)
        }
    }

    /// Traps unless the caller runs on the notifier's queue; for `assert`, which evaluates it in
    /// debug builds only.
    private var onQueue: Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        return true
    }

    private func poll() {
        assert(onQueue)  // the pass's reads and claims are the queue's
        let time = now()
        var tookWork = false
        defer { sleepUntilNextDue(passAt: time, tookWork: tookWork) }
        pollEvents()
        let (busy, taken) = state.withLock { ($0.inFlight, $0.routesInFlight) }
        let room = settings.maxInFlight - busy.count
        guard room > 0 else { return }
        let batches: [PushBatch]
        do {
            batches = try admission.withLock { admission in
                admission.begin(inFlight: taken)
                return try store.pushBatches(now: time, limit: room, skipping: busy, choosing: &admission)
            }
        } catch {
            logger.warning("cannot read due pushes", ("error", "\(error)"))
            return
        }
        // Every batch taken ends in `finish`, which wakes the next pass.
        tookWork = !batches.isEmpty
        for batch in batches {
            guard let target = admission.withLock({ $0.placed(batch) }) else {
                if state.withLock({ $0.claim(batch) }) {
                    finish(batch, .dead(error: "the device's push transport is malformed"), started: time)
                }
                continue
            }
            switch state.withLock({ $0.start(batch, to: target, now: time, random: random) }) {
            case .attempt:
                deliver(batch, to: target)
            case .inFlight, .holdDue:
                // Held: the job stays due; a delivery to that route finishing wakes the scheduler.
                continue
            case .finish(let verdict):
                finish(batch, verdict, started: time)
            }
        }
    }

    private func deliver(_ batch: PushBatch, to target: HostAdmission.Target) {
        let started = now()
        let route = target.route
        let settle: @Sendable (DeliveryReceipt) -> Void = { [self] receipt in
            let time = now()
            let answered = state.withLock {
                $0.answered(batch, on: route, outcome: receipt.outcome, now: time, random: random)
            }
            if let line = answered.credentialsLine {
                logger.error(
                    "push service refused the relay's credentials or configuration", ("route", "\(route)"),
                    ("error", line.reason), ("suppressed", String(line.suppressed)))
            }
            let verdict = answered.decision.verdict
            finish(
                batch, verdict, started: started,
                attempt: PushAttempt(
                    batch, transport: target.transport, started: started, answered: time, receipt: receipt,
                    verdict: verdict))
        }
        guard let provider = providers[ProviderKey(target.transport)] else {
            // A device registered while its app had these credentials, and the relay restarted
            // without them: held like any refused credential (one error line, retried until its
            // TTL), never disabled — the operator may put the app back.
            let transport = target.transport
            return settle(
                DeliveryReceipt(
                    .misconfigured(
                        reason: "app '\(transport.app)' has no \(transport.kind.member) credentials on this relay")))
        }
        provider.send(batch, to: target.transport, at: started, done: settle)
    }

    /// How soon to look again when the store could not say when the next job falls due (a
    /// PostgreSQL connection being replaced): soon, but not a busy loop against a failing store.
    static let unreadableStoreRecheckMs: Int64 = 1000

    /// Runs `log` unless push log lines are over their rate; it gets how many were dropped since.
    private func logThrottled(_ log: (String) -> Void) {
        guard let suppressed = pushLogThrottle.admit(now: now()) else { return }
        log(String(suppressed))
    }

    // MARK: Events

    /// Sends an ephemeral event (a client's signal) to `eventsUrl` at once: one attempt, never
    /// stored or retried — a typing indicator that arrives late is worse than none. `done` tells
    /// whether the receiver took it (false too when no `eventsUrl` is configured).
    package func sendNow(_ event: RelayEvent, done: @escaping @Sendable (Bool) -> Void) {
        guard let eventsURL else { return done(false) }
        let id = RandomID.make("evt_", bytes: 12)
        webhooks.post(eventsURL, body: event.envelope, webhookId: id, at: now()) { receipt in
            if case .delivered = receipt.outcome { done(true) } else { done(false) }
        }
    }

    private func pollEvents() {
        guard let eventsURL else { return }
        let busy = eventsInFlight.withLock { $0 }
        let room = settings.maxInFlight - busy.count
        guard room > 0 else { return }
        let jobs: [EventJob]
        do {
            jobs = try store.dueEvents(now: now(), limit: room, skipping: busy)
        } catch {
            logger.warning("cannot read due events", ("error", "\(error)"))
            return
        }
        for job in jobs {
            guard eventsInFlight.withLock({ $0.insert(job.id).inserted }) else { continue }
            webhooks.post(eventsURL, body: job.body, webhookId: job.webhookId, at: now()) { [self] receipt in
                let verdict = settings.policy.eventAnswered(
                    receipt.outcome, attempts: job.attempts, expiresAt: job.expiresAt.milliseconds,
                    now: now().milliseconds,
                    random: random)
                finishEvent(job, verdict)
            }
        }
    }

    private func finishEvent(_ job: EventJob, _ result: DeliveryPolicy.Verdict) {
        let logger = self.logger
        store.finishEvent(job, result: result, now: now()) { [self] stored in
            eventsInFlight.withLock { _ = $0.remove(job.id) }
            wake()
            if case .failure(let error) = stored { logger.error("cannot record event outcome", ("error", "\(error)")) }
            if case .dead(let error) = result {
                logger.warning("event dead-lettered", ("event.type", job.type), ("error", error))
            }
        }
    }

    /// Routes whose breaker is not closed (for the operator's overview).
    package var breakerStates: [(route: PushRoute, state: CircuitBreaker.State)] {
        state.withLock { $0.breakerStates }
    }

    /// Routes whose breaker is open (for /metrics): transport, credential and `host:port`.
    package var openBreakers: [(labels: String, value: Int)] {
        breakerStates.map { route, _ in
            (
                "transport=\"\(route.transport.rawValue)\",credential=\"\(route.credential ?? "")\",host=\"\(route.host)\"",
                1
            )
        }
    }

    /// How one attempt ended, waiting to be recorded.
    private struct Finished {
        let batch: PushBatch
        let result: DeliveryPolicy.Verdict
        let started: Timestamp
        let at: Timestamp
        /// For the delivery trace, when an attempt was made.
        let attempt: PushAttempt?
    }

    /// Outcomes not recorded yet, and whether a write recording others is under way: one such
    /// write at a time, taking every outcome that came meanwhile, so that a busy notifier records
    /// hundreds of pushes in one write (and one statement per outcome kind) instead of a write each.
    private let recording = LockedValue<(waiting: [Finished], writing: Bool)>(([], false))

    private func finish(
        _ batch: PushBatch, _ result: DeliveryPolicy.Verdict, started: Timestamp, attempt: PushAttempt? = nil
    ) {
        // Cut short by the stop ("the relay is stopping"): not an attempt; the jobs stay pending,
        // and the store may be closing.
        guard state.withLock({ $0.recording(batch) }) else { return }
        let finished = Finished(batch: batch, result: result, started: started, at: now(), attempt: attempt)
        let outcomes = recording.withLock { recording -> [Finished]? in
            recording.waiting.append(finished)
            guard !recording.writing else { return nil }
            recording.writing = true
            defer { recording.waiting = [] }
            return recording.waiting
        }
        if let outcomes { record(outcomes) }
    }

    private func record(_ outcomes: [Finished]) {
        let attempts = outcomes.compactMap(\.attempt)
        if !attempts.isEmpty { store.trace(attempts, now: now()) }
        store.finish(outcomes.map { ($0.batch, $0.result) }, now: now()) { [self] stored in
            state.withLock { $0.recorded(devices: outcomes.map(\.batch.deviceKey)) }
            wake()  // the devices (and maybe their hosts) are free again
            for outcome in outcomes { settled(outcome, stored) }
            let next = recording.withLock { recording -> [Finished]? in
                guard !recording.waiting.isEmpty else {
                    recording.writing = false
                    return nil
                }
                defer { recording.waiting = [] }
                return recording.waiting
            }
            if let next { record(next) }
        }
    }

    /// Metrics, events and log lines of an outcome the store recorded (or failed to).
    private func settled(_ outcome: Finished, _ stored: Result<[String: GoneDecision], StoreError>) {
        let batch = outcome.batch
        let app = PushTransport(target: batch.target)?.app ?? .default
        var logger: Logger {
            let logger = self.logger.with("user.id", batch.userId).with("device.id", batch.deviceId)
            return app == .default ? logger : logger.with("app", app.name)
        }
        let gone: [String: GoneDecision]
        switch stored {
        case .success(let decisions): gone = decisions
        case .failure(let error):
            logThrottled { logger.error("cannot record push outcome", ("error", "\(error)"), ("suppressed", $0)) }
            return
        }
        let seconds = Double(outcome.at.milliseconds - outcome.started.milliseconds) / 1000
        switch outcome.result {
        case .postponed:
            metrics.recordPush(.postponed, app: app, seconds: nil)
        case .delivered:
            metrics.recordPush(.delivered, app: app, seconds: seconds)
            events.emit(.push(type: .pushDelivered, batch, error: nil, at: outcome.at))
        case .retry(let error, _):
            metrics.recordPush(.retried, app: app, seconds: seconds)
            logger.info("push will be retried", ("error", error), ("attempt", String(batch.attempts + 1)))
        case .requeue(let reason, _):
            // Not an attempt that failed: the provider never processed it.
            metrics.recordPush(.requeued, app: app, seconds: nil)
            logger.info("push requeued", ("error", reason))
        case .dead(let error):
            metrics.recordPush(.dead, app: app, seconds: seconds)
            logThrottled { logger.warning("push dead-lettered", ("error", error), ("suppressed", $0)) }
            events.emit(.push(type: .pushFailed, batch, error: error, at: outcome.at))
        case .deviceGone(let reason, _):
            switch gone[batch.deviceKey] {
            case .disable?, nil:
                metrics.recordPush(.deviceGone, app: app, seconds: seconds)
                events.emit(.push(type: .deviceDisabled, batch, error: reason, at: outcome.at))
            case .resend?:
                // The device has another token now: its jobs went back to the queue for it.
                metrics.recordPush(.requeued, app: app, seconds: nil)
                logger.info("push answered for a token the device no longer has", ("error", reason))
            case .drop(let error)?:
                metrics.recordPush(.dead, app: app, seconds: seconds)
                logThrottled { logger.warning("push dead-lettered", ("error", error), ("suppressed", $0)) }
                events.emit(.push(type: .pushFailed, batch, error: error, at: outcome.at))
            }
        }
    }
}

extension RelayEvent {
    static func push(type: Kind, _ batch: PushBatch, error: String?, at: Timestamp) -> RelayEvent {
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("userId", batch.userId)
        writer.member("deviceId", batch.deviceId)
        writer.member("messageId", orNull: batch.messageId)
        writer.key("seq")
        writer.beginObject()
        writer.member("from", batch.seqFrom)
        writer.member("to", batch.seqTo)
        writer.endObject()
        writer.member("error", orNull: error)
        writer.endObject()
        return RelayEvent(type: type, data: writer.bytes, at: at)
    }
}
