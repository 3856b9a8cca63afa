/// Which of the clients' signals go on to the chat server's `eventsUrl`.
///
/// Each forward holds an outbound connection until the receiver answers or the push timeout
/// passes, so a receiver that accepts and never answers would otherwise cost a descriptor per
/// signal (20 sockets of one user at 10 signals/s reached 2,000 descriptors in 10 s). Every user
/// has one rate, shared by all of the user's sockets, and all users share a small budget of
/// forwards in flight. Signals are ephemeral: what does not fit is dropped, never queued.
///
/// Pure: the caller supplies the time and reports the end of each forward it was allowed.
package struct SignalAdmission: Sendable {
    package enum Choice: Sendable, Equatable {
        /// Forward it; call `finished()` once the receiver answered (or did not in time).
        case forward
        /// The user sent more than its rate.
        case rateLimited
        /// `maxInFlight` forwards are waiting for the receiver.
        case busy
    }

    /// Signals a user may send per second (all of the user's sockets together), in bursts of
    /// twice as many.
    package static let defaultRatePerSecond = 10.0

    package let maxInFlight: Int
    package let ratePerSecond: Double
    package let burst: Double
    /// Forwards allowed and not finished yet.
    package private(set) var inFlight = 0

    private struct UserBudget: Sendable {
        var bucket: TokenBucket
        var lastSeen: Timestamp
    }

    private var users: [String: UserBudget] = [:]
    /// When `users` reaches this size, the budgets that have refilled are forgotten (forgetting
    /// a full bucket changes nothing); the threshold then doubles from what is left, so the
    /// sweep costs O(1) per signal however many users send.
    private var sweepAt = Self.minimumSweep
    private static let minimumSweep = 1024

    package init(maxInFlight: Int, ratePerSecond: Double = Self.defaultRatePerSecond) {
        self.maxInFlight = max(1, maxInFlight)
        self.ratePerSecond = ratePerSecond
        burst = ratePerSecond * 2
    }

    /// Users whose budget is remembered (for tests of the memory bound).
    package var trackedUsers: Int { users.count }

    /// Decides one signal of `userId`. A signal dropped because the budget in flight is full
    /// does not use the user's rate (the user did nothing wrong).
    package mutating func admit(userId: String, now: Timestamp) -> Choice {
        guard inFlight < maxInFlight else { return .busy }
        var budget =
            users[userId]
            ?? UserBudget(bucket: TokenBucket(ratePerSecond: ratePerSecond, burst: burst, now: now), lastSeen: now)
        let allowed = budget.bucket.take(now: now) == nil
        budget.lastSeen = now
        users[userId] = budget
        if users.count >= sweepAt { sweep(now: now) }
        guard allowed else { return .rateLimited }
        inFlight += 1
        return .forward
    }

    /// A forward allowed by `admit` ended (answered, failed or timed out).
    package mutating func finished() {
        inFlight = max(0, inFlight - 1)
    }

    private mutating func sweep(now: Timestamp) {
        let refillMs = Int64((burst / max(ratePerSecond, 0.001) * 1000).rounded(.up))
        users = users.filter { now.milliseconds - $0.value.lastSeen.milliseconds < refillMs }
        sweepAt = max(Self.minimumSweep, users.count * 2)
    }
}
