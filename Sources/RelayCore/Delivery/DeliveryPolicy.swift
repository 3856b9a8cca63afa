/// The delivery decisions, as pure functions of events and time (milliseconds), so that they can
/// be tested without I/O and simulated over random interleavings.
///
/// Every committed message gets a push job for every registered device of its recipient, in the
/// same transaction: nothing depends on what a socket does after the commit. The job's due time
/// is the policy's:
///
/// - **committed**, device offline: a push window opens `pushDelayMs` from now, or the message
///   joins the window already open for that device (the earliest due time still in the future),
///   so one push covers everything pending when it fires;
/// - **committed**, device online: it gets the message live, and the push waits `ackTimeoutMs`
///   for the user's ack; if the socket dies first, the job is still there;
/// - **caught up** (a reconnecting device was sent the message): the push waits for the ack;
/// - **went offline**: nothing changes. (Bringing the push forward would overtake an ack that
///   comes within `ackTimeoutMs` from another device or after a reconnect — the simulation in
///   the tests found exactly that.)
/// - **acked** by any device of the user: the job is cancelled (and devices already pushed get a
///   `clear`);
/// - **attempted**: `judge` turns the receiver's answer into the job's next state and the
///   breaker's input.
///
/// Invariant (checked by the simulation in the tests): every committed message, for every
/// registered device, ends acked, covered by a delivered push, dead-lettered with a reason, or
/// with its device disabled or deleted — never nothing.
package struct DeliveryPolicy: Sendable, Equatable {
    package var pushDelayMs: Int64
    package var ackTimeoutMs: Int64
    package var retry: RetryPolicy

    package init(pushDelayMs: Int64 = 3000, ackTimeoutMs: Int64 = 10_000, retry: RetryPolicy = RetryPolicy()) {
        self.pushDelayMs = pushDelayMs
        self.ackTimeoutMs = ackTimeoutMs
        self.retry = retry
    }

    /// When the job of a message committed at `now` for one device falls due. An offline
    /// device's message joins its open push window (and takes its due time exactly, so that a
    /// window's jobs fall due together and go out as one push); an online device's waits for the
    /// ack on its own, so that a prompt ack is never overtaken by an older window's push.
    /// - Parameter openWindowDue: the earliest due time after `now` among the device's pending
    ///   message jobs (its open push window), if any.
    package func dueAt(committedAt now: Int64, online: Bool, openWindowDue: Int64?) -> Int64 {
        if online { return now + ackTimeoutMs }
        guard let window = openWindowDue, window > now else { return now + pushDelayMs }
        return min(now + pushDelayMs, window)
    }
    /// What an attempt means for its jobs.
    package enum Verdict: Sendable, Equatable {
        case delivered
        /// `since`: see `DeliveryOutcome.deviceGone`.
        case deviceGone(reason: String, since: Int64? = nil)
        case retry(error: String, at: Int64)
        /// Due again at `at` without counting an attempt: the request was never processed, so
        /// the backoff must not grow (`attempts` stays as it was).
        case requeue(reason: String, at: Int64)
        /// Due again at `until` without an attempt made: its host is paused by its breaker.
        case postponed(until: Int64)
        case dead(error: String)
    }

    /// What an attempt says about the receiver host, for its circuit breaker. Only what the host
    /// did counts: an expired job, a refused URL or a 4xx dead letter says nothing about it.
    package enum HostHealth: Sendable, Equatable {
        case alive
        case failing
        case unknown
    }

    /// How many times in a row a push the service never processed (`DeliveryOutcome.requeue`) is
    /// sent again at once. A service refusing every stream (REFUSED_STREAM, GOAWAY with last
    /// stream 0) otherwise got the same push back thousands of times a second until its TTL.
    package static let immediateResends = 3

    /// Judges one attempt (`attempts` made before it) of jobs that may be retried until
    /// `expiresAt`; `random` in 0...1 draws the backoff's jitter (only for a retry: drawing costs
    /// a system call). `resends`: how many times in a row the push was requeued just before;
    /// `rejection`: what `RejectedTokens` made of a `tokenRejected` answer.
    package func judge(
        _ outcome: DeliveryOutcome, attempts: Int, expiresAt: Int64, now: Int64, resends: Int = 0,
        rejection: RejectedTokens.Judgement = .deviceGone, random: @autoclosure () -> Double
    ) -> (verdict: Verdict, host: HostHealth) {
        switch outcome {
        case .delivered: return (.delivered, .alive)
        case .deviceGone(let reason, let since): return (.deviceGone(reason: reason, since: since), .unknown)
        case .tokenRejected(let reason):
            switch rejection {
            case .deviceGone: return (.deviceGone(reason: reason), .unknown)
            case .unconfirmed:
                let verdict = backedOff(
                    "\(reason) (device kept: nothing delivered on this route yet)", notBefore: nil, attempts: attempts,
                    expiresAt: expiresAt, now: now, random: random())
                return (verdict, .unknown)
            case .misconfigured:
                let verdict = backedOff(
                    "\(reason) (answered for \(RejectedTokens.runThatMeansConfiguration) devices in a row: the "
                        + "relay's configuration)", notBefore: nil, attempts: attempts, expiresAt: expiresAt, now: now,
                    random: random())
                return (verdict, .failing)
            }
        case .dead(let reason): return (.dead(error: reason), .unknown)
        case .refused(let reason): return (.dead(error: reason), .unknown)
        case .retry(let reason, let notBefore):
            let verdict = backedOff(
                reason, notBefore: notBefore, attempts: attempts, expiresAt: expiresAt, now: now, random: random())
            return (verdict, .failing)
        case .misconfigured(let reason):
            // Our credentials, not the device: the same backoff as any failure, and the breaker
            // opens so that the provider is not hammered with requests it will refuse.
            let verdict = backedOff(
                reason, notBefore: nil, attempts: attempts, expiresAt: expiresAt, now: now, random: random())
            return (verdict, .failing)
        case .requeue(let reason):
            guard resends < Self.immediateResends else {
                // Refused again and again: the service is not taking work, whatever it says.
                let verdict = backedOff(
                    reason, notBefore: nil, attempts: attempts, expiresAt: expiresAt, now: now, random: random())
                return (verdict, .failing)
            }
            // Never processed: nothing was learnt about the host, and the attempt is not counted.
            guard now < expiresAt else { return (.dead(error: "TTL expired; last error: \(reason)"), .unknown) }
            return (.requeue(reason: reason, at: now), .unknown)
        }
    }

    /// A retry after the jittered backoff (or `notBefore`, if later), or dead when that is past the TTL.
    private func backedOff(
        _ reason: String, notBefore: Int64?, attempts: Int, expiresAt: Int64, now: Int64, random: Double
    ) -> Verdict {
        let backoff = retry.delay(afterAttempt: attempts + 1, random: random)
        let at = now + max(backoff, notBefore ?? 0)
        guard at < expiresAt else { return .dead(error: "TTL expired; last error: \(reason)") }
        return .retry(error: reason, at: at)
    }

    /// Jobs whose TTL passed before an attempt: dead, and the host is not judged.
    package func expired(now: Int64, expiresAt: Int64) -> Verdict? {
        now >= expiresAt ? .dead(error: "TTL expired before it could be delivered") : nil
    }
}

/// What a push job announces: a message (or a window of them), a call, or a `clear` after the
/// user read elsewhere (the badge goes down). Stored as its raw value.
package enum PushKind: String, Sendable {
    case message
    case clear
    /// A message marked `push.type: "call"`: it rings at once (no window), alone (never
    /// coalesced or collapsed), through PushKit on iOS, and never causes a `clear`.
    case call

    /// Whether the push announces a message (a `clear` announces none).
    package var announcesMessage: Bool { self != .clear }
}

/// Where a push job (or an event job: never `cancelled`) is in its life. Stored as its raw value.
package enum JobState: String, Sendable, CaseIterable {
    case pending
    case delivered
    case dead
    case cancelled
}
