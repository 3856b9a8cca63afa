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

/// A message committed for one recipient (`DeliveryPolicy.committed`).
package struct CommittedMessage: Sendable, Equatable {
    package var userId: String
    package var seq: Int64
    package var messageId: String
    package var collapseKey: String?
    package var badge: Int64?
    package var expiresAt: Int64
    /// Marked `push.type: "call"`.
    package var call: Bool

    package init(
        userId: String, seq: Int64, messageId: String, collapseKey: String?, badge: Int64?, expiresAt: Int64,
        call: Bool = false
    ) {
        self.userId = userId
        self.seq = seq
        self.messageId = messageId
        self.collapseKey = collapseKey
        self.badge = badge
        self.expiresAt = expiresAt
        self.call = call
    }
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
    /// write, `openWindowDue` the device's open push window: the device's pending jobs with the
    /// message's collapse key are cancelled (RFC 8030 "Topic"), and its job is due per `dueAt`.
    /// A call stands alone: due at once when the device is offline (an online one has it live,
    /// and gets the ack timeout as any message), never collapsed, and given up after
    /// `callLifetimeMs` (a call that rings minutes later is worse than none).
    package func committed(
        _ message: CommittedMessage, deviceId: String, online: Bool, openWindowDue: Int64?, now: Int64,
        webhookId: String
    ) -> [PushEffect] {
        if message.call {
            return [
                .insert(
                    NewPushJob(
                        webhookId: webhookId, kind: .call, userId: message.userId, deviceId: deviceId,
                        messageId: message.messageId, seq: message.seq, collapseKey: nil,
                        dueAt: online ? now + ackTimeoutMs : now,
                        expiresAt: min(message.expiresAt, now + Self.callLifetimeMs), badge: message.badge,
                        createdAt: now))
            ]
        }
        var effects: [PushEffect] = []
        if let collapseKey = message.collapseKey {
            effects.append(
                .cancel(.collapsing(userId: message.userId, deviceId: deviceId, collapseKey: collapseKey), .collapsed))
        }
        effects.append(
            .insert(
                NewPushJob(
                    webhookId: webhookId, kind: .message, userId: message.userId, deviceId: deviceId,
                    messageId: message.messageId, seq: message.seq, collapseKey: message.collapseKey,
                    dueAt: dueAt(committedAt: now, online: online, openWindowDue: openWindowDue),
                    expiresAt: message.expiresAt, badge: message.badge, createdAt: now)))
        return effects
    }

    /// A stored message addressed again to a device (`PushTargets`): it gets a job only if it has
    /// none for the message yet and the recipient has not acked it.
    package static func addressedAgain(seq: Int64, ackSeq: Int64, queued: Bool) -> Bool { !queued && seq > ackSeq }

    /// A catch-up sent a device its messages up to `seq` at `now`: their pending pushes wait for
    /// the ack (they are not cancelled: the socket may die before it comes).
    package func caughtUp(userId: String, deviceId: String, through seq: Int64, now: Int64) -> PushEffect {
        .hold(.caughtUp(userId: userId, deviceId: deviceId, throughSeq: seq), notBefore: now + ackTimeoutMs)
    }

    /// An ack moved the user's cursor to `seq`: the user's pending message jobs up to it are
    /// cancelled on every device, and each device already pushed something now read
    /// (`pushedDevices`) gets a `clear` (the badge goes down when it was read elsewhere). It
    /// depends on no setting (the store applies it without a policy at hand).
    package static func acked(
        userId: String, through seq: Int64, pushedDevices: [String], now: Int64, webhookId: () -> String
    ) -> [PushEffect] {
        [.cancel(.acked(userId: userId, throughSeq: seq), .acked)]
            + pushedDevices.sorted().flatMap {
                clear(userId: userId, deviceId: $0, seq: seq, badge: nil, now: now, webhookId: webhookId())
            }
    }

    /// A `clear` push for one device, replacing one still pending (`badge`: a homeserver's count,
    /// else the relay's own), due at once and given up after `clearLifetimeMs`.
    package static func clear(
        userId: String, deviceId: String, seq: Int64, badge: Int64?, now: Int64, webhookId: String
    ) -> [PushEffect] {
        [
            .cancel(.clear(userId: userId, deviceId: deviceId), .superseded),
            .insert(
                NewPushJob(
                    webhookId: webhookId, kind: .clear, userId: userId, deviceId: deviceId, messageId: nil, seq: seq,
                    collapseKey: nil, dueAt: now, expiresAt: now + clearLifetimeMs, badge: badge, createdAt: now)),
        ]
    }

    /// A device was deleted: its pending pushes can never go anywhere now (a device registered
    /// again later starts afresh).
    package static func deleted(userId: String, deviceId: String) -> PushEffect {
        .cancel(.device(userId: userId, deviceId: deviceId), .deviceDeleted)
    }

    /// The operator retries a dead job: pending again with a fresh attempt budget, due now and
    /// valid until `expiresAt`, even past its message's TTL.
    package static func retried(job: Int64, now: Int64, expiresAt: Int64) -> PushEffect {
        .revive(job: job, dueAt: now, expiresAt: expiresAt)
    }

    /// How an attempt's (or a pass's) `verdict` is recorded for `batch`. `gone`: for a
    /// `deviceGone` verdict, what `gone(sentTo:since:device:)` made of the device as the write
    /// read it.
    package static func recorded(
        _ verdict: Verdict, of batch: PushBatch, gone: GoneDecision, now: Int64
    ) -> [PushEffect] {
        let jobs = batch.jobIds
        let entries = batch.seqFrom...max(batch.seqFrom, batch.seqTo)
        // An operator's replay of a dead letter that now got through makes its entries pushed.
        let pushed = PushEffect.markEntries(
            userId: batch.userId, seqs: entries, state: .pushed, replacing: [.stored, .live, .dead])
        let dead = PushEffect.markEntries(
            userId: batch.userId, seqs: entries, state: .dead, replacing: [.stored, .live])
        let message = batch.kind.announcesMessage
        switch verdict {
        case .delivered:
            return [.update(jobs: jobs, JobUpdate(state: .delivered, lastError: .clear, countsAttempt: true))]
                + (message ? [pushed] : [])
        case .retry(let error, let at):
            return [
                .update(jobs: jobs, JobUpdate(state: .pending, dueAt: at, lastError: .set(error), countsAttempt: true))
            ]
        case .requeue(let reason, let at):
            return [
                .update(
                    jobs: jobs, JobUpdate(state: .pending, dueAt: at, lastError: .set(reason), countsAttempt: false))
            ]
        case .postponed(let until):
            return [
                .update(jobs: jobs, JobUpdate(state: .pending, dueAt: until, lastError: .keep, countsAttempt: false))
            ]
        case .dead(let error):
            return [.update(jobs: jobs, JobUpdate(state: .dead, lastError: .set(error), countsAttempt: true))]
                + (message ? [dead] : [])
        case .deviceGone(let reason, _):
            switch gone {
            case .disable:
                return [
                    .disableDevice(
                        userId: batch.userId, deviceId: batch.deviceId, target: batch.target, reason: reason),
                    .cancel(.device(userId: batch.userId, deviceId: batch.deviceId), .deviceGone(reason)),
                ]
            case .resend:
                return recorded(.requeue(reason: reason, at: now), of: batch, gone: gone, now: now)
            case .drop(let error):
                return recorded(.dead(error: error), of: batch, gone: gone, now: now)
            }
        }
    }

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

    /// How long a call's push may be retried (its message's TTL, if shorter, wins): a phone that
    /// rings after the caller gave up is worse than one that does not.
    package static let callLifetimeMs: Int64 = 30_000
}
