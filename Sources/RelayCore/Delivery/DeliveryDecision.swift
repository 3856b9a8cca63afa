/// What happens to a push job, as data: the delivery path hands `DeliveryPolicy.decide` an event
/// and executes the actions it gets back (SQL in the store, sockets in the notifier). No
/// decision is taken anywhere else, so the whole life of a push can be read — and tested — here.
package enum DeliveryEvent: Sendable, Equatable {
    /// A message was committed for one registered device, `online` per the snapshot taken before
    /// the write; `openWindowDue` is the device's open push window; `collapses` when the message
    /// has a collapse key.
    case committed(online: Bool, openWindowDue: Int64?, collapses: Bool)
    /// A catch-up sent the device messages whose push was due at `currentDue`.
    case caughtUp(currentDue: Int64)
    /// The user's ack cursor moved; `pushedDevices` had already been pushed something now read.
    case acked(pushedDevices: [String])
    /// A device's batch is due; `host` says whether its receiver can take an attempt now.
    case due(expiresAt: Int64, host: HostGate)
    /// An attempt ended with `outcome` (`attempts` made before it).
    case answered(DeliveryOutcome, attempts: Int, expiresAt: Int64)
}

/// Whether a receiver host can take another attempt now.
package enum HostGate: Sendable, Equatable {
    case open
    /// All its delivery slots are busy.
    case full
    /// Its circuit breaker pauses it until then (or a probe is in flight).
    case paused(until: Int64)
}

/// Why pending jobs are cancelled (stored as their `last_error`).
package enum CancelReason: String, Sendable, Equatable {
    case acked
    case collapsed
    case superseded
}

package enum DeliveryAction: Sendable, Equatable {
    /// Cancel the device's pending job with the same collapse key (RFC 8030 "Topic").
    case cancel(CancelReason)
    /// Queue the job, due then.
    case schedule(dueAt: Int64)
    /// The device was sent the messages: their jobs wait for the ack until then.
    case waitForAck(until: Int64)
    /// Push `clear` to this device (the badge goes down after a read elsewhere).
    case sendClear(deviceId: String)
    /// Send the batch now.
    case attempt
    /// Leave the batch due; a slot freeing up wakes the scheduler.
    case holdDue
    /// Not an attempt: due again then.
    case postpone(until: Int64)
    /// The job's next state.
    case record(DeliveryPolicy.Verdict)
    /// What the receiver host did, for its circuit breaker.
    case feedBreaker(DeliveryPolicy.HostHealth)
}

extension DeliveryPolicy {
    /// The one decision function of the delivery path (docs/ARCHITECTURE.md §8).
    /// - Parameter random: draws the retry jitter in 0...1 (only called for a retry).
    package func decide(_ event: DeliveryEvent, now: Int64, random: () -> Double = { 0.5 }) -> [DeliveryAction] {
        switch event {
        case .committed(let online, let window, let collapses):
            let schedule = DeliveryAction.schedule(
                dueAt: dueAt(committedAt: now, online: online, openWindowDue: window))
            return collapses ? [.cancel(.collapsed), schedule] : [schedule]
        case .caughtUp(let currentDue):
            return [.waitForAck(until: dueAfterCatchUp(currentDue: currentDue, now: now))]
        case .acked(let pushedDevices):
            return Self.decideAck(pushedDevices: pushedDevices)
        case .due(let expiresAt, let host):
            // A job past its TTL is dead before anything is asked of its host, which is not judged.
            if let dead = expired(now: now, expiresAt: expiresAt) { return [.record(dead)] }
            switch host {
            case .open: return [.attempt]
            case .full: return [.holdDue]
            case .paused(let until): return [.postpone(until: until)]
            }
        case .answered(let outcome, let attempts, let expiresAt):
            let (verdict, health) = judge(
                outcome, attempts: attempts, expiresAt: expiresAt, now: now, random: random())
            return [.feedBreaker(health), .record(verdict)]
        }
    }

    /// How long a batch waits when its host's breaker refused the attempt after the gate had
    /// let it through (another batch took the probe meanwhile): the probe's answer comes first.
    package static let probeTakenPostponeMs: Int64 = 1000

    /// How long a `clear` may be retried: a badge still too high a day later is better left to
    /// the next message's push than sent.
    package static let clearLifetimeMs: Int64 = 86_400_000

    /// An ack's consequences depend on no setting (the store applies them without a policy at
    /// hand): the user's pending message jobs up to the cursor are cancelled on every device, and
    /// devices already pushed something now read get a `clear`.
    package static func decideAck(pushedDevices: [String]) -> [DeliveryAction] {
        [.cancel(.acked)] + pushedDevices.map { .sendClear(deviceId: $0) }
    }
}
