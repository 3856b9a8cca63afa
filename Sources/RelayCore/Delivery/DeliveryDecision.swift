/// What happens to a push job, one transition at a time: the delivery path calls the function
/// of the event it saw and carries out exactly what that event's answer can hold (SQL in the
/// store, sockets in the notifier). No decision is taken anywhere else, so the whole life of a
/// push can be read — and tested — here (docs/ARCHITECTURE.md §8).

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

/// A message was committed for one registered device: its new job, and whether the device's
/// pending jobs with the message's collapse key go first (RFC 8030 "Topic").
package struct CommitDecision: Sendable, Equatable {
    package var cancelsCollapsed: Bool
    package var dueAt: Int64
}

/// The user's ack cursor moved: the user's pending message jobs up to it are cancelled on every
/// device (`acked`), and the devices already pushed something now read get a `clear`.
package struct AckDecision: Sendable, Equatable {
    package var clears: [String]
}

/// A device's batch fell due.
package enum DueDecision: Sendable, Equatable {
    /// Send it now.
    case attempt
    /// Leave it due; a slot freeing up at its host wakes the scheduler.
    case holdDue
    /// Not sent: its jobs' next state (dead past the TTL, postponed while the host is paused).
    case finish(DeliveryPolicy.Verdict)
}

/// A service said a device's token is gone (`Verdict.deviceGone`): what that means for the
/// device as it is now. An answer is only ever about the token it was sent to.
package enum GoneDecision: Sendable, Equatable {
    /// Disable the device and cancel its pending jobs.
    case disable
    /// The device has another token now (the app registered a new one while the push was in
    /// flight): its jobs go again at once, to the new token, without counting an attempt.
    case resend
    /// The device registered this token again after the service's time for it (APNs's 410
    /// `timestamp`): the device stays; the push's jobs are dead with this error.
    case drop(error: String)
}

/// An attempt was answered: its jobs' next state, and what the host did for its breaker.
package struct AnswerDecision: Sendable, Equatable {
    package var verdict: DeliveryPolicy.Verdict
    package var host: DeliveryPolicy.HostHealth
}

extension DeliveryPolicy {
    /// A message committed at `now` for one device, `online` per the snapshot taken before the
    /// write, `openWindowDue` the device's open push window.
    package func committed(online: Bool, openWindowDue: Int64?, collapses: Bool, now: Int64) -> CommitDecision {
        CommitDecision(
            cancelsCollapsed: collapses, dueAt: dueAt(committedAt: now, online: online, openWindowDue: openWindowDue))
    }

    /// A catch-up sent the device messages whose push was due at `currentDue`: when they fall
    /// due now (they wait for the ack).
    package func caughtUp(currentDue: Int64, now: Int64) -> Int64 { dueAfterCatchUp(currentDue: currentDue, now: now) }

    /// An ack moved the cursor; `pushedDevices` had already been pushed something now read. It
    /// depends on no setting (the store applies it without a policy at hand).
    package static func acked(pushedDevices: [String]) -> AckDecision { AckDecision(clears: pushedDevices) }

    /// A device's batch expiring at `expiresAt` is due; `host` says whether its receiver can
    /// take an attempt. The TTL is looked at first: an expired job must not use up a probe.
    /// A paused host's jobs are spread over `probeSpreadMs` past the pause (`random` in 0...1), so
    /// that its probes rotate through them: held at one time, the same job (ordered by due time,
    /// then id) took every probe, and one that always fails kept the host paused for all.
    package func due(expiresAt: Int64, host: HostGate, now: Int64, random: () -> Double = { 0 }) -> DueDecision {
        if let dead = expired(now: now, expiresAt: expiresAt) { return .finish(dead) }
        switch host {
        case .open: return .attempt
        case .full: return .holdDue
        case .paused(let until):
            let spread = Int64(Double(Self.probeSpreadMs) * min(max(random(), 0), 1))
            return .finish(.postponed(until: until + spread))
        }
    }

    /// How far past a pause its held jobs are spread (`due`).
    package static let probeSpreadMs: Int64 = 500

    /// The host's breaker refused the attempt after the gate had let it through (another batch
    /// took the probe meanwhile): the probe's answer comes first.
    package static func probeTaken(now: Int64) -> Verdict { .postponed(until: now + probeTakenPostponeMs) }

    /// An attempt (`attempts` made before it) was answered with `outcome`.
    /// - Parameter random: draws the retry jitter in 0...1 (only called for a retry).
    /// `resends`: how many times in a row the push was requeued just before (`immediateResends`);
    /// `rejection`: what `RejectedTokens` made of a `tokenRejected` answer.
    package func answered(
        _ outcome: DeliveryOutcome, attempts: Int, expiresAt: Int64, now: Int64, resends: Int = 0,
        rejection: RejectedTokens.Judgement = .deviceGone, random: () -> Double = { 0.5 }
    ) -> AnswerDecision {
        let judged = judge(
            outcome, attempts: attempts, expiresAt: expiresAt, now: now, resends: resends, rejection: rejection,
            random: random())
        return AnswerDecision(verdict: judged.verdict, host: judged.host)
    }

    /// An event for the chat server was answered: events have no breaker, and a receiver that
    /// answers 404/410 is not a device that went away — the event is dead.
    package func eventAnswered(
        _ outcome: DeliveryOutcome, attempts: Int, expiresAt: Int64, now: Int64, random: () -> Double = { 0.5 }
    ) -> Verdict {
        let verdict = judge(outcome, attempts: attempts, expiresAt: expiresAt, now: now, random: random()).verdict
        if case .deviceGone = verdict { return .dead(error: "events receiver answered 404/410") }
        return verdict
    }

    /// A push to the stored transport `sentTo` was answered "gone" (`since`: the service's time
    /// the token stopped being valid, if it gave one); `device`: the device's transport and
    /// last registration now, nil when it is deleted or disabled.
    package static func gone(
        sentTo: String, since: Int64?, device: (target: String, registeredAt: Int64)?
    ) -> GoneDecision {
        guard let device, device.target == sentTo else { return .resend }
        if let since, device.registeredAt > since {
            return .drop(error: "the service said the token was gone before the device registered it again")
        }
        return .disable
    }

    /// How long a batch waits when its host's breaker refused the attempt after the gate had
    /// let it through (`probeTaken`).
    package static let probeTakenPostponeMs: Int64 = 1000

    /// How long a `clear` may be retried: a badge still too high a day later is better left to
    /// the next message's push than sent.
    package static let clearLifetimeMs: Int64 = 86_400_000
}
