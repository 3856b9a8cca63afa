/// A node's own view of the delivery lease it holds on a cluster (docs/ARCHITECTURE.md §7).
///
/// The database ends the holder's session once it has heard nothing from it for the lease
/// (`idle_in_transaction_session_timeout`), so a node that stops running — stopped, hung, its
/// VM paused, cut off — loses the lease to a waiting node after at most that long. The holder
/// touches its session every third of the lease, and counts itself the holder only until a
/// lease after it *sent* the last touch the server answered: never longer than the server
/// counts it, so a node resuming after the server ended its session delivers nothing more.
///
/// Pure: events and monotonic time (milliseconds) go in, answers come out.
package struct HeldLease: Sendable, Equatable {
    package let leaseMilliseconds: Int64
    /// When the last answered touch was sent; nil when not held.
    private var confirmed: Int64?
    /// When the last touch was sent, and whether its answer is still awaited.
    private var lastSent: Int64?
    private var awaiting = false

    package init(leaseMilliseconds: Int64) {
        self.leaseMilliseconds = leaseMilliseconds
    }

    /// Whether this node may deliver at `now`.
    package func holds(at now: Int64) -> Bool {
        guard let confirmed else { return false }
        return now &- confirmed < leaseMilliseconds
    }

    /// A touch went to the server at `now` (the first one right after the lock was granted: the
    /// grant itself may answer a request sent long ago).
    package mutating func sent(at now: Int64) {
        lastSent = now
        awaiting = true
    }

    /// The server answered the last touch. Returns true when this makes the node the holder at
    /// `now` and it was not a moment before (whoever delivers must look at once).
    package mutating func answered(now: Int64) -> Bool {
        let was = holds(at: now)
        if awaiting, let lastSent { confirmed = max(confirmed ?? lastSent, lastSent) }
        awaiting = false
        return !was && holds(at: now)
    }

    /// The session ended: not held until granted again.
    package mutating func lost() {
        confirmed = nil
        lastSent = nil
        awaiting = false
    }

    /// When the next touch is due: a third of the lease after the last one was sent; nil while
    /// that one is unanswered (a second would not tell more) or nothing was sent.
    package var nextTouch: Int64? {
        guard !awaiting, let lastSent else { return nil }
        return lastSent &+ max(1, leaseMilliseconds / 3)
    }
}
