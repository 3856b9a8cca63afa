/// What the push scheduler knows between passes, as one value: the devices with a delivery in
/// flight, each route's slots taken and breaker, the requeue runs, the rejected-token runs and
/// when each route's credentials line was last logged. Pure, time a parameter: `PushNotifier`
/// holds it under one lock and carries out what each call returns (it sends, records and logs),
/// so a slot is counted and a breaker consulted in one place, under one lock.
package struct SchedulerState: Sendable {
    /// What becomes of a batch a pass read (`start`).
    package enum Start: Sendable, Equatable {
        /// Send it now: its device is claimed, its route's slot (and probe) taken.
        case attempt
        /// Its device has a delivery in flight already: leave it.
        case inFlight
        /// Leave it due: its route has no free slot (a delivery there finishing wakes the pass).
        case holdDue
        /// Not sent: record this for its jobs (its device stays claimed until recorded).
        case finish(DeliveryPolicy.Verdict)
    }

    /// What an answer comes to (`answered`).
    package struct Answered: Sendable, Equatable {
        package var decision: AnswerDecision
        /// Log that the route's service refused our credentials (nil: not this time — one line
        /// a minute per route).
        package var credentialsLine: CredentialsLine?
    }

    /// The service's reason, and how many such lines were held back since the last one.
    package struct CredentialsLine: Sendable, Equatable {
        package var reason: String
        package var suppressed: Int

        package init(reason: String, suppressed: Int) {
            self.reason = reason
            self.suppressed = suppressed
        }
    }

    package let policy: DeliveryPolicy
    /// Devices (`PushBatch.deviceKey`) with a delivery in flight, with the ids of its jobs: their
    /// other due jobs wait, so one device never gets two pushes racing each other.
    package private(set) var inFlight: [String: [Int64]] = [:]
    /// Deliveries in flight per route.
    package private(set) var routesInFlight: [PushRoute: Int] = [:]
    private var breakers: [PushRoute: CircuitBreaker] = [:]
    /// Devices whose last push was requeued (never processed), with how many times in a row.
    private var resends: [String: Int] = [:]
    private var rejectedTokens = RejectedTokens()
    /// When each route's last credentials line was logged, and how many were held back since.
    private var credentialLines: [PushRoute: (at: Int64, suppressed: Int)] = [:]
    /// Set by `stop`: outcomes after it (deliveries cut short) are not recorded; their jobs stay
    /// pending and go again after the restart.
    package private(set) var stopping = false

    /// Devices whose refused pushes are counted at most (`resends`): a device deleted between
    /// its refusals would otherwise stay in it.
    package static let maxResendsTracked = 100_000
    /// At most one credentials line per route in this time.
    package static let credentialLineIntervalMs: Int64 = 60_000

    package init(policy: DeliveryPolicy) {
        self.policy = policy
    }

    /// A batch a pass read, for `target`: claims its device, then asks the policy whether it goes
    /// now (the TTL first, then the route's breaker and slots); an attempt takes the route's
    /// go-ahead (the probe, for a route whose pause is over) and a slot. `random` in 0...1.
    package mutating func start(
        _ batch: PushBatch, to target: HostAdmission.Target, now: Timestamp, random: () -> Double
    ) -> Start {
        guard claim(batch) else { return .inFlight }
        let route = target.route
        let gate: HostGate
        if let until = breakers[route]?.pausedUntil(at: now) {
            gate = .paused(until: until)
        } else {
            gate = routesInFlight[route, default: 0] < target.slots ? .open : .full
        }
        switch policy.due(expiresAt: batch.expiresAt.milliseconds, host: gate, now: now.milliseconds, random: random) {
        case .attempt:
            guard breakers[route, default: CircuitBreaker()].allows(at: now) else {
                return .finish(DeliveryPolicy.probeTaken(now: now.milliseconds))
            }
            routesInFlight[route, default: 0] += 1
            return .attempt
        case .holdDue:
            inFlight[batch.deviceKey] = nil
            return .holdDue
        case .finish(let verdict):
            return .finish(verdict)
        }
    }

    /// Claims the batch's device for it, unless it has a delivery in flight already.
    package mutating func claim(_ batch: PushBatch) -> Bool {
        guard inFlight[batch.deviceKey] == nil else { return false }
        inFlight[batch.deviceKey] = batch.jobIds
        return true
    }

    /// A batch that could not be sent after all (its transport is not configured): its route's
    /// slot is free again; record `verdict` for it.
    package mutating func abandoned(on route: PushRoute) { release(route) }

    /// An attempt on `route` was answered with `outcome`: its slot is free, the policy judges
    /// it, and the route's breaker hears what its service did.
    package mutating func answered(
        _ batch: PushBatch, on route: PushRoute, outcome: DeliveryOutcome, now: Timestamp, random: () -> Double
    ) -> Answered {
        release(route)
        let rejection = rejectedTokens.answered(outcome, on: route, device: batch.deviceKey)
        var credentialsLine: CredentialsLine?
        switch (outcome, rejection) {
        case (.misconfigured(let reason), _), (.tokenRejected(let reason), .misconfigured?):
            // No device is at fault and none is touched: the operator must act.
            credentialsLine = credentialsRefused(on: route, at: now.milliseconds).map {
                CredentialsLine(reason: reason, suppressed: $0)
            }
        default:
            break
        }
        let resent = resends[batch.deviceKey, default: 0]
        let decision = policy.answered(
            outcome, attempts: batch.attempts, expiresAt: batch.expiresAt.milliseconds, now: now.milliseconds,
            resends: resent, rejection: rejection ?? .deviceGone, random: random)
        if case .requeue = decision.verdict {
            if resends.count >= Self.maxResendsTracked { resends.removeAll() }
            resends[batch.deviceKey] = resent + 1
        } else {
            resends[batch.deviceKey] = nil
        }
        switch decision.host {
        case .alive: breakers[route, default: CircuitBreaker()].recordSuccess()
        case .failing: breakers[route, default: CircuitBreaker()].recordFailure(at: now)
        case .unknown: breakers[route]?.recordInconclusive(at: now)
        }
        return Answered(decision: decision, credentialsLine: credentialsLine)
    }

    /// The outcomes of these devices' deliveries were recorded (or dropped at a stop): their
    /// other due jobs may go.
    package mutating func recorded(devices: [String]) {
        for device in devices { inFlight[device] = nil }
    }

    /// The scheduler stops: from now on outcomes are dropped, not recorded.
    package mutating func stop() { stopping = true }

    /// An outcome to record, unless the scheduler is stopping: then its device is let go and the
    /// outcome dropped (false).
    package mutating func recording(_ batch: PushBatch) -> Bool {
        guard stopping else { return true }
        inFlight[batch.deviceKey] = nil
        return false
    }

    /// Routes whose breaker is not closed, in a stable order (the operator's overview).
    package var breakerStates: [(route: PushRoute, state: CircuitBreaker.State)] {
        breakers.filter { $0.value.isOpen }.sorted { "\($0.key)" < "\($1.key)" }.map { ($0.key, $0.value.state) }
    }

    private mutating func release(_ route: PushRoute) {
        let left = routesInFlight[route, default: 1] - 1
        routesInFlight[route] = left > 0 ? left : nil
    }

    /// Whether to log a credentials line for `route` now, and how many were held back since.
    private mutating func credentialsRefused(on route: PushRoute, at time: Int64) -> Int? {
        let last = credentialLines[route]
        if let last, time - last.at < Self.credentialLineIntervalMs {
            credentialLines[route] = (last.at, last.suppressed + 1)
            return nil
        }
        credentialLines[route] = (time, 0)
        return last?.suppressed ?? 0
    }
}
